//! The transaction APIs over real TCP, at the protocol level: a whole transaction by hand
//! (InitProducerId, AddPartitionsToTxn, a transactional produce, EndTxn) with its COMMIT
//! marker in the log; AddPartitionsToTxn v4's batched and verify-only forms; the checks
//! before the coordinator (unknown partitions, OPERATION_NOT_ATTEMPTED); fencing by a second
//! InitProducerId; the coordinator's state across a restart; a PrepareCommit left by a crash
//! finished at the next start; TxnOffsetCommit v3's group check (KIP-447) and v4's
//! TRANSACTION_ABORTABLE (KIP-890); EndTxn v3-v4 and AddPartitionsToTxn v5; InitProducerId v3-v5's epoch bump for the current
//! producer (KIP-360), its fencing of stale pairs and its state across a restart;
//! FindCoordinator for
//! transactions; the reserved `__transaction_state` name; and every served version of every
//! transaction API.

mod common;

use common::{Client, TestBroker, at_every_version, create_topic, produce_request, s};
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use sluice_storage::testing::producer_batch;

const TOPIC: &str = "orders";

async fn init(client: &mut Client, id: &str) -> (i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = Some(TransactionalId(s(id)));
    request.transaction_timeout_ms = 60_000;
    let response: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 1, &request).await;
    assert_eq!(response.error_code, 0, "{response:?}");
    (response.producer_id.0, response.producer_epoch)
}

fn add_request(
    id: &str,
    (pid, epoch): (i64, i16),
    partitions: &[i32],
) -> AddPartitionsToTxnRequest {
    let mut topic = AddPartitionsToTxnTopic::default();
    topic.name = TopicName(s(TOPIC));
    topic.partitions = partitions.to_vec();
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = TransactionalId(s(id));
    request.v3_and_below_producer_id = ProducerId(pid);
    request.v3_and_below_producer_epoch = epoch;
    request.v3_and_below_topics = vec![topic];
    request
}

async fn add(client: &mut Client, id: &str, producer: (i64, i16), partitions: &[i32]) -> Vec<i16> {
    let response: AddPartitionsToTxnResponse = client
        .call(
            ApiKey::AddPartitionsToTxn,
            2,
            &add_request(id, producer, partitions),
        )
        .await;
    response.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|p| p.partition_error_code)
        .collect()
}

async fn end(client: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    end_at(client, id, producer, commit, 2).await
}

/// EndTxn at `version`: its error code.
async fn end_at(
    client: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> i16 {
    let mut request = EndTxnRequest::default();
    request.transactional_id = TransactionalId(s(id));
    request.producer_id = ProducerId(pid);
    request.producer_epoch = epoch;
    request.committed = commit;
    let response: EndTxnResponse = client.call(ApiKey::EndTxn, version, &request).await;
    response.error_code
}

/// Produces `records` to one partition as the transactional producer `id` (Produce v8).
async fn produce_txn(
    client: &mut Client,
    id: Option<&str>,
    partitions: &[(i32, Vec<u8>)],
) -> Vec<i16> {
    let mut request = produce_request(TOPIC, 0, -1, bytes::Bytes::new());
    request.transactional_id = id.map(|id| TransactionalId(s(id)));
    let template = request.topic_data[0].partition_data[0].clone();
    request.topic_data[0].partition_data = partitions
        .iter()
        .map(|(index, batch)| {
            let mut p = template.clone();
            p.index = *index;
            p.records = Some(batch.clone().into());
            p
        })
        .collect();
    let response: ProduceResponse = client.call(ApiKey::Produce, 8, &request).await;
    response.responses[0]
        .partition_responses
        .iter()
        .map(|p| p.error_code)
        .collect()
}

fn describe_state(broker: &TestBroker, partition: i32) -> (i64, i64) {
    let p = broker.broker.topics.partition(TOPIC, partition).unwrap();
    p.with_log(|log| {
        (
            log.log_end_offset().value(),
            log.last_stable_offset().value(),
        )
    })
    .unwrap()
}

#[tokio::test]
async fn a_transaction_by_hand_commits_with_a_marker_and_survives_a_restart() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let producer = init(&mut client, "t1").await;
    assert_eq!(add(&mut client, "t1", producer, &[0]).await, vec![0]);

    let batch = producer_batch(producer.0, producer.1, 0, 2, true);
    assert_eq!(
        produce_txn(&mut client, Some("t1"), &[(0, batch)]).await,
        [0]
    );
    assert_eq!(
        describe_state(&broker, 0),
        (2, 0),
        "the open transaction holds the LSO"
    );

    assert_eq!(end(&mut client, "t1", producer, true).await, 0);
    // Answered after the marker: the COMMIT control batch is offset 2, the LSO past it.
    assert_eq!(describe_state(&broker, 0), (3, 3));
    // A retried EndTxn of the same outcome is answered success, and writes nothing.
    assert_eq!(end(&mut client, "t1", producer, true).await, 0);
    assert_eq!(describe_state(&broker, 0), (3, 3));
    // The other outcome is not legal now.
    assert_eq!(
        end(&mut client, "t1", producer, false).await,
        48,
        "INVALID_TXN_STATE"
    );

    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &[]).await;
    let mut client = broker.client().await;
    let mut request = DescribeTransactionsRequest::default();
    request.transactional_ids = vec![TransactionalId(s("t1"))];
    let described: DescribeTransactionsResponse =
        client.call(ApiKey::DescribeTransactions, 0, &request).await;
    let state = &described.transaction_states[0];
    assert_eq!(state.error_code, 0);
    assert_eq!(state.transaction_state.as_str(), "CompleteCommit");
    assert_eq!((state.producer_id.0, state.producer_epoch), producer);
    // The id keeps its producer id and gets the next epoch; the old epoch is fenced.
    let again = init(&mut client, "t1").await;
    assert_eq!(again, (producer.0, producer.1 + 1));
    // PRODUCER_FENCED from v2 on (KIP-588), INVALID_PRODUCER_EPOCH before.
    assert_eq!(add(&mut client, "t1", producer, &[1]).await, vec![90]);
    let old: AddPartitionsToTxnResponse = client
        .call(
            ApiKey::AddPartitionsToTxn,
            1,
            &add_request("t1", producer, &[1]),
        )
        .await;
    assert_eq!(
        old.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        47
    );
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn a_second_init_aborts_the_open_transaction_and_fences_the_first_producer() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let first = init(&mut client, "t2").await;
    assert_eq!(add(&mut client, "t2", first, &[0]).await, vec![0]);
    let batch = producer_batch(first.0, first.1, 0, 1, true);
    assert_eq!(
        produce_txn(&mut client, Some("t2"), &[(0, batch)]).await,
        [0]
    );

    let second = init(&mut client, "t2").await;
    assert_eq!(second.0, first.0);
    assert!(second.1 > first.1, "{second:?} after {first:?}");
    // The open transaction was aborted (ABORT marker at 1) before the answer.
    assert_eq!(describe_state(&broker, 0), (2, 2));
    let aborted = broker
        .broker
        .topics
        .partition(TOPIC, 0)
        .unwrap()
        .with_log(|log| {
            log.aborted_transactions(sluice_storage::Offset(0), sluice_storage::Offset(2))
        })
        .unwrap();
    assert_eq!(aborted.len(), 1, "{aborted:?}");
    assert_eq!(aborted[0].producer_id, first.0);
    // The zombie can neither write nor end the transaction.
    let late = producer_batch(first.0, first.1, 1, 1, true);
    assert_eq!(
        produce_txn(&mut client, Some("t2"), &[(0, late)]).await,
        [47]
    );
    assert_eq!(
        end(&mut client, "t2", first, true).await,
        90,
        "PRODUCER_FENCED"
    );
    drop(client);
    broker.stop().await;
}

/// Produce checks transactional batches as Kafka does: a transactional id is required,
/// and the coordinator verifies the producer id, epoch and partitions (KIP-890) with the
/// error codes Kafka gives Produce v3-v10.
#[tokio::test]
async fn produce_verifies_transactional_batches_with_the_coordinator() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let victim = init(&mut client, "victim").await;
    let other = init(&mut client, "other").await;
    assert_eq!(add(&mut client, "victim", victim, &[0]).await, vec![0]);
    let batch = |(pid, epoch): (i64, i16), seq| producer_batch(pid, epoch, seq, 1, true);
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional batch without an id.
    assert_eq!(
        produce_txn(&mut client, None, &[(0, batch(victim, 0))]).await,
        [53]
    );
    // Another transactional id than the producer's: INVALID_PRODUCER_ID_MAPPING.
    assert_eq!(
        produce_txn(&mut client, Some("other"), &[(0, batch(victim, 0))]).await,
        [49]
    );
    assert_eq!(
        produce_txn(&mut client, Some("nobody"), &[(0, batch(victim, 0))]).await,
        [49]
    );
    // The next epoch, before any InitProducerId gave it: PRODUCER_FENCED, answered as
    // INVALID_PRODUCER_EPOCH.
    let next = (victim.0, victim.1 + 1);
    assert_eq!(
        produce_txn(&mut client, Some("victim"), &[(0, batch(next, 0))]).await,
        [47]
    );
    // A partition not added to the transaction: INVALID_TXN_STATE.
    assert_eq!(
        produce_txn(&mut client, Some("victim"), &[(1, batch(victim, 0))]).await,
        [48]
    );
    // Two producers' transactional batches in one request fail it whole.
    let two = [(0, batch(victim, 0)), (1, batch(other, 0))];
    assert_eq!(
        produce_txn(&mut client, Some("victim"), &two).await,
        [49, 49]
    );
    assert_eq!(describe_state(&broker, 0), (0, 0), "nothing was appended");
    assert_eq!(describe_state(&broker, 1), (0, 0));
    // The producer itself is unaffected; then its open transaction is bound to its id, and
    // another id naming it is still refused.
    assert_eq!(
        produce_txn(&mut client, Some("victim"), &[(0, batch(victim, 0))]).await,
        [0]
    );
    assert_eq!(
        produce_txn(&mut client, Some("other"), &[(0, batch(victim, 1))]).await,
        [49]
    );
    assert_eq!(
        produce_txn(&mut client, Some("victim"), &[(0, batch(victim, 1))]).await,
        [0]
    );
    // Batches without the transactional bit need no transactional id (Kafka's rule).
    let plain = producer_batch(-1, -1, -1, 1, false);
    assert_eq!(
        produce_txn(&mut client, Some("nobody"), &[(1, plain)]).await,
        [0]
    );
    assert_eq!(end(&mut client, "victim", victim, true).await, 0);
    assert_eq!(describe_state(&broker, 0), (3, 3));
    drop(client);
    broker.stop().await;
}

/// A hanging transaction: an open transactional batch no coordinator knows (written
/// straight into the log, as a partition's own batches survive what its coordinator lost).
/// WriteTxnMarkers (what `kafka-transactions.sh abort` sends) ends it: the LSO moves past
/// it and the aborted list names it; an older epoch, an unknown partition are refused.
#[tokio::test]
async fn write_txn_markers_ends_a_hanging_transaction() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let partition = broker.broker.topics.partition(TOPIC, 0).unwrap();
    partition
        .with_log(|log| {
            let mut hanging = producer_batch(77, 3, 0, 2, true);
            log.append(&mut hanging, sluice_storage::Durability::OsCache, 0)
                .unwrap();
            let mut plain = producer_batch(-1, -1, -1, 1, false);
            log.append(&mut plain, sluice_storage::Durability::OsCache, 0)
                .unwrap();
        })
        .unwrap();
    assert_eq!(
        describe_state(&broker, 0),
        (3, 0),
        "the hanging transaction holds the LSO"
    );
    let marker = |epoch: i16, partition: i32| {
        let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partition_indexes = vec![partition];
        let mut marker = write_txn_markers_request::WritableTxnMarker::default();
        marker.producer_id = ProducerId(77);
        marker.producer_epoch = epoch;
        marker.transaction_result = false;
        marker.topics = vec![topic];
        let mut request = WriteTxnMarkersRequest::default();
        request.markers = vec![marker];
        request
    };
    let codes = |r: &WriteTxnMarkersResponse| -> Vec<(i64, i16)> {
        r.markers
            .iter()
            .flat_map(|m| {
                m.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| (m.producer_id.0, p.error_code))
            })
            .collect()
    };
    let stale: WriteTxnMarkersResponse =
        client.call(ApiKey::WriteTxnMarkers, 1, &marker(2, 0)).await;
    assert_eq!(codes(&stale), [(77, 47)], "INVALID_PRODUCER_EPOCH");
    let unknown: WriteTxnMarkersResponse =
        client.call(ApiKey::WriteTxnMarkers, 1, &marker(3, 5)).await;
    assert_eq!(codes(&unknown), [(77, 3)], "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(describe_state(&broker, 0), (3, 0), "nothing written yet");
    let aborted: WriteTxnMarkersResponse =
        client.call(ApiKey::WriteTxnMarkers, 1, &marker(3, 0)).await;
    assert_eq!(codes(&aborted), [(77, 0)]);
    assert_eq!(
        describe_state(&broker, 0),
        (4, 4),
        "the ABORT marker ended it"
    );
    let listed = partition
        .with_log(|log| {
            log.aborted_transactions(sluice_storage::Offset(0), sluice_storage::Offset(4))
        })
        .unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|t| (t.producer_id, t.first_offset, t.last_offset))
            .collect::<Vec<_>>(),
        [(77, 0, 3)]
    );
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn refused_partitions_leave_the_rest_not_attempted() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let producer = init(&mut client, "t3").await;
    assert_eq!(add(&mut client, "t3", producer, &[0, 9]).await, vec![55, 3]);

    let mut offsets = TxnOffsetCommitRequest::default();
    offsets.transactional_id = TransactionalId(s("t3"));
    offsets.group_id = GroupId(s("g"));
    offsets.producer_id = ProducerId(producer.0);
    offsets.producer_epoch = producer.1;
    let mut topic = TxnOffsetCommitRequestTopic::default();
    topic.name = TopicName(s(TOPIC));
    for index in [0, 9] {
        let mut p = TxnOffsetCommitRequestPartition::default();
        p.partition_index = index;
        p.committed_offset = 1;
        topic.partitions.push(p);
    }
    offsets.topics = vec![topic];
    let response: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 2, &offsets).await;
    let codes: Vec<i16> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![55, 3]);
    // Without AddOffsetsToTxn for the group, the offsets are not legal in the transaction.
    offsets.topics[0].partitions.pop();
    let response: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, 2, &offsets).await;
    assert_ne!(response.topics[0].partitions[0].error_code, 0);
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn add_partitions_v4_batches_transactions_and_verifies() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let a = init(&mut client, "ta").await;
    let b = init(&mut client, "tb").await;
    let txn = |id: &str, (pid, epoch): (i64, i16), verify_only: bool| {
        let mut topic = AddPartitionsToTxnTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partitions = vec![0, 1];
        let mut t = AddPartitionsToTxnTransaction::default();
        t.transactional_id = TransactionalId(s(id));
        t.producer_id = ProducerId(pid);
        t.producer_epoch = epoch;
        t.verify_only = verify_only;
        t.topics = vec![topic];
        t
    };
    let codes = |response: &AddPartitionsToTxnResponse| -> Vec<Vec<i16>> {
        response
            .results_by_transaction
            .iter()
            .map(|t| {
                t.topic_results[0]
                    .results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
                    .collect()
            })
            .collect()
    };
    let mut verify = AddPartitionsToTxnRequest::default();
    verify.transactions = vec![txn("ta", a, true), txn("tb", b, true)];
    let before: AddPartitionsToTxnResponse =
        client.call(ApiKey::AddPartitionsToTxn, 4, &verify).await;
    assert_eq!(
        codes(&before),
        vec![vec![120, 120], vec![120, 120]],
        "nothing added yet: TRANSACTION_ABORTABLE, as Kafka's coordinator answers"
    );

    let mut batched = AddPartitionsToTxnRequest::default();
    batched.transactions = vec![txn("ta", a, false), txn("tb", b, false)];
    let added: AddPartitionsToTxnResponse =
        client.call(ApiKey::AddPartitionsToTxn, 4, &batched).await;
    assert_eq!(added.error_code, 0);
    assert_eq!(codes(&added), vec![vec![0, 0], vec![0, 0]]);
    let after: AddPartitionsToTxnResponse =
        client.call(ApiKey::AddPartitionsToTxn, 4, &verify).await;
    assert_eq!(codes(&after), vec![vec![0, 0], vec![0, 0]]);
    // v5 is v4 for a broker that takes TRANSACTION_ABORTABLE: the same answers.
    let after: AddPartitionsToTxnResponse =
        client.call(ApiKey::AddPartitionsToTxn, 5, &verify).await;
    assert_eq!(codes(&after), vec![vec![0, 0], vec![0, 0]]);
    let c = init(&mut client, "tc").await;
    verify.transactions = vec![txn("tc", c, true)];
    let none: AddPartitionsToTxnResponse =
        client.call(ApiKey::AddPartitionsToTxn, 5, &verify).await;
    assert_eq!(codes(&none), vec![vec![120, 120]]);
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn find_coordinator_for_transactions_and_the_reserved_name() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut find = FindCoordinatorRequest::default();
    find.key = s("t-find");
    find.key_type = 1;
    let found: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 2, &find).await;
    assert_eq!(found.error_code, 0);
    assert_eq!(found.node_id.0, 0);
    assert!(found.port > 0);
    find.key_type = 7;
    let unknown: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 2, &find).await;
    assert_eq!(unknown.error_code, 42, "INVALID_REQUEST");

    let mut t = CreatableTopic::default();
    t.name = TopicName(s("__transaction_state"));
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![t];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(response.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    drop(client);
    broker.stop().await;
}

/// TxnOffsetCommit of offset 1 of partition 0 for group `g`, from `member` (generation,
/// member id) at `version`; the partition's error code.
async fn txn_offset_commit(
    client: &mut Client,
    id: &str,
    producer: (i64, i16),
    (generation, member): (i32, &str),
    version: i16,
) -> i16 {
    let mut offsets = TxnOffsetCommitRequest::default();
    offsets.transactional_id = TransactionalId(s(id));
    offsets.group_id = GroupId(s("g"));
    offsets.producer_id = ProducerId(producer.0);
    offsets.producer_epoch = producer.1;
    offsets.generation_id_or_member_epoch = generation;
    offsets.member_id = s(member);
    let mut topic = TxnOffsetCommitRequestTopic::default();
    topic.name = TopicName(s(TOPIC));
    let mut p = TxnOffsetCommitRequestPartition::default();
    p.committed_offset = 1;
    topic.partitions.push(p);
    offsets.topics = vec![topic];
    let response: TxnOffsetCommitResponse = client
        .call(ApiKey::TxnOffsetCommit, version, &offsets)
        .await;
    response.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn txn_offset_commit_v3_checks_the_group_and_v4_is_abortable() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let producer = init(&mut client, "t5").await;
    assert_eq!(add(&mut client, "t5", producer, &[0]).await, vec![0]);
    let code = txn_offset_commit(&mut client, "t5", producer, (1, "m"), 3).await;
    assert_eq!(
        code, 22,
        "ILLEGAL_GENERATION: a generation of a group that does not exist"
    );
    let none = (-1, "");
    let code = txn_offset_commit(&mut client, "t5", producer, none, 3).await;
    assert_eq!(
        code, 48,
        "INVALID_TXN_STATE: the group is not in the transaction"
    );
    let code = txn_offset_commit(&mut client, "t5", producer, none, 4).await;
    assert_eq!(code, 120, "TRANSACTION_ABORTABLE from v4 (KIP-890)");
    let mut add_offsets = AddOffsetsToTxnRequest::default();
    add_offsets.transactional_id = TransactionalId(s("t5"));
    add_offsets.producer_id = ProducerId(producer.0);
    add_offsets.producer_epoch = producer.1;
    add_offsets.group_id = GroupId(s("g"));
    let added: AddOffsetsToTxnResponse =
        client.call(ApiKey::AddOffsetsToTxn, 2, &add_offsets).await;
    assert_eq!(added.error_code, 0);
    for version in [2, 3, 4] {
        let code = txn_offset_commit(&mut client, "t5", producer, none, version).await;
        assert_eq!(code, 0, "v{version}");
    }
    drop(client);
    broker.stop().await;
}

/// InitProducerId of transactional id `id` at `version` with the producer's current
/// (id, epoch), (-1, -1) for a new producer: (error, producer id, epoch).
async fn reinit(
    client: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    version: i16,
) -> (i16, i64, i16) {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = Some(TransactionalId(s(id)));
    request.transaction_timeout_ms = 60_000;
    request.producer_id = ProducerId(pid);
    request.producer_epoch = epoch;
    let response: InitProducerIdResponse =
        client.call(ApiKey::InitProducerId, version, &request).await;
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

#[tokio::test]
async fn init_producer_id_v3_bumps_the_current_producer_and_fences_stale_ones() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let (e, pid, epoch) = reinit(&mut client, "t6", (-1, -1), 5).await;
    assert_eq!((e, epoch), (0, 0), "a new producer");
    // An aborted transaction, then KIP-360's recovery: the same id, the epoch bumped.
    assert_eq!(add(&mut client, "t6", (pid, epoch), &[0]).await, vec![0]);
    assert_eq!(
        end_at(&mut client, "t6", (pid, epoch), false, 4).await,
        0,
        "EndTxn v4"
    );
    assert_eq!(reinit(&mut client, "t6", (pid, 0), 5).await, (0, pid, 1));
    let stale = (pid, 0);
    assert_eq!(
        end_at(&mut client, "t6", stale, true, 4).await,
        90,
        "EndTxn v4: PRODUCER_FENCED"
    );
    assert_eq!(
        end_at(&mut client, "t6", stale, true, 1).await,
        47,
        "v1: INVALID_PRODUCER_EPOCH"
    );
    assert_eq!(
        reinit(&mut client, "t6", (pid, 0), 5).await,
        (0, pid, 1),
        "a lost answer's retry"
    );
    assert_eq!(
        reinit(&mut client, "t6", (pid, 7), 4).await.0,
        90,
        "PRODUCER_FENCED"
    );
    assert_eq!(
        reinit(&mut client, "t6", (pid, 7), 3).await.0,
        47,
        "INVALID_PRODUCER_EPOCH before v4"
    );
    assert_eq!(
        reinit(&mut client, "t6", (pid + 1, 1), 5).await.0,
        90,
        "another producer id"
    );
    assert_eq!(
        reinit(&mut client, "t6", (-1, 1), 5).await.0,
        42,
        "INVALID_REQUEST: only the epoch"
    );
    // The last epoch is in the transaction log: after a restart the pair still bumps.
    drop(client);
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(reinit(&mut client, "t6", (pid, 1), 5).await, (0, pid, 2));
    assert_eq!(
        reinit(&mut client, "t6", (pid, 1), 5).await,
        (0, pid, 2),
        "the retry, after a restart"
    );
    assert_eq!(reinit(&mut client, "t6", (pid, 0), 5).await.0, 90);
    // A new producer instance (no pair) bumps too, and fences the old one's pair.
    assert_eq!(reinit(&mut client, "t6", (-1, -1), 5).await, (0, pid, 3));
    assert_eq!(reinit(&mut client, "t6", (pid, 2), 5).await.0, 90);
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn every_served_version_of_every_transaction_api_answers() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let unknown = (4_000_000, 0);

    let mut init_idempotent = InitProducerIdRequest::default();
    init_idempotent.transactional_id = None;
    init_idempotent.transaction_timeout_ms = 60_000;
    let codes = at_every_version(
        &mut client,
        ApiKey::InitProducerId,
        &init_idempotent,
        |r: &InitProducerIdResponse| r.error_code,
    )
    .await;
    assert!(
        codes.len() == 6 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );

    let codes = at_every_version(
        &mut client,
        ApiKey::AddPartitionsToTxn,
        &add_request("nobody", unknown, &[0]),
        |r: &AddPartitionsToTxnResponse| {
            r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        },
    )
    .await;
    // v0-v3 (v4 carries no v3 fields): an unknown transactional id.
    assert!(
        codes.len() == 4 && codes.iter().all(|&(_, c)| c == 49),
        "{codes:?}"
    );

    let mut offsets = AddOffsetsToTxnRequest::default();
    offsets.transactional_id = TransactionalId(s("nobody"));
    offsets.producer_id = ProducerId(unknown.0);
    offsets.group_id = GroupId(s("g"));
    let codes = at_every_version(
        &mut client,
        ApiKey::AddOffsetsToTxn,
        &offsets,
        |r: &AddOffsetsToTxnResponse| r.error_code,
    )
    .await;
    assert!(
        codes.len() == 5 && codes.iter().all(|&(_, c)| c == 49),
        "{codes:?}"
    );

    let mut end = EndTxnRequest::default();
    end.transactional_id = TransactionalId(s("nobody"));
    end.producer_id = ProducerId(unknown.0);
    let codes = at_every_version(&mut client, ApiKey::EndTxn, &end, |r: &EndTxnResponse| {
        r.error_code
    })
    .await;
    // v0-v5; v5 (the transaction protocol v2) also answers producer id and epoch -1.
    assert!(
        codes.len() == 6 && codes.iter().all(|&(_, c)| c == 49),
        "{codes:?}"
    );

    let mut list = ListTransactionsRequest::default();
    list.state_filters = vec![s("Ongoing"), s("NoSuchState")];
    let listed: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 0, &list).await;
    assert_eq!(listed.error_code, 0);
    assert_eq!(listed.unknown_state_filters, vec![s("NoSuchState")]);
    assert!(listed.transaction_states.is_empty());

    let mut describe = DescribeTransactionsRequest::default();
    describe.transactional_ids = vec![TransactionalId(s("nobody"))];
    let described: DescribeTransactionsResponse = client
        .call(ApiKey::DescribeTransactions, 0, &describe)
        .await;
    assert_eq!(
        described.transaction_states[0].error_code, 105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    drop(client);
    broker.stop().await;
}

/// A crash between EndTxn's decision and its markers: the log holds PrepareCommit, the
/// partition an open transaction. At the next start the coordinator writes the COMMIT
/// marker before it serves anyone, and completes the transaction.
#[tokio::test]
async fn a_prepared_commit_left_by_a_crash_gets_its_markers_at_start() {
    use sluice_server::txn::TxnLog;
    use sluice_txn::{TxnRecord, TxnState};

    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let producer = init(&mut client, "t-crash").await;
    assert_eq!(add(&mut client, "t-crash", producer, &[0]).await, vec![0]);
    let batch = producer_batch(producer.0, producer.1, 0, 3, true);
    assert_eq!(
        produce_txn(&mut client, Some("t-crash"), &[(0, batch)]).await,
        [0]
    );
    drop(client);
    let dir = broker.stop().await;

    // What EndTxn(commit) persists before it writes markers, as if the process died then.
    let (log, records) = TxnLog::open(dir.path(), true).unwrap();
    let Some(TxnRecord::Metadata(mut ongoing)) = records
        .into_iter()
        .rev()
        .find(|r| r.transactional_id() == Some("t-crash"))
    else {
        panic!("the transaction's metadata is in the log");
    };
    assert_eq!(ongoing.state, TxnState::Ongoing);
    ongoing.state = TxnState::PrepareCommit;
    let mut log = log;
    log.append(&[&TxnRecord::Metadata(ongoing)]).unwrap();
    log.close().unwrap();

    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    let mut request = DescribeTransactionsRequest::default();
    request.transactional_ids = vec![TransactionalId(s("t-crash"))];
    // The describe is served after recovery: the marker is written by then.
    let described: DescribeTransactionsResponse =
        client.call(ApiKey::DescribeTransactions, 0, &request).await;
    assert_eq!(
        described.transaction_states[0].transaction_state.as_str(),
        "CompleteCommit"
    );
    assert_eq!(
        describe_state(&broker, 0),
        (4, 4),
        "the COMMIT marker at offset 3"
    );
    drop(client);
    broker.stop().await;
}

/// ListTransactions v1's duration filter (KIP-994: transactions running longer than it, by
/// the broker's clock) and v2's transactional id pattern (KIP-1152: whole-id regex matches;
/// a bad regex is INVALID_REGULAR_EXPRESSION).
#[tokio::test]
async fn list_transactions_filters_by_duration_and_id_pattern() {
    let clock = sluice_server::ManualClock::new(sluice_server::clock::now_ms());
    let seams = sluice_server::Seams {
        clock: clock.clone(),
        ..sluice_server::Seams::default()
    };
    let broker = TestBroker::start_seams(tempfile::tempdir().unwrap(), &[], seams).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let old = init(&mut client, "app-old").await;
    assert_eq!(add(&mut client, "app-old", old, &[0]).await, [0]);
    clock.advance(60_000);
    let new = init(&mut client, "app-new").await;
    assert_eq!(add(&mut client, "app-new", new, &[1]).await, [0]);
    let other = init(&mut client, "other").await;
    assert_eq!(add(&mut client, "other", other, &[1]).await, [0]);
    clock.advance(1_000);

    let mut list = ListTransactionsRequest::default();
    let listed = async |client: &mut Client, version, list: &ListTransactionsRequest| {
        let response: ListTransactionsResponse =
            client.call(ApiKey::ListTransactions, version, list).await;
        let mut ids: Vec<String> = response
            .transaction_states
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect();
        ids.sort();
        (response.error_code, ids)
    };
    assert_eq!(
        listed(&mut client, 0, &list).await.1,
        ["app-new", "app-old", "other"]
    );
    list.duration_filter = 30_000;
    assert_eq!(
        listed(&mut client, 1, &list).await,
        (0, vec!["app-old".into()])
    );
    list.duration_filter = -1;
    list.transactional_id_pattern = Some(s("app-.*"));
    assert_eq!(
        listed(&mut client, 2, &list).await,
        (0, vec!["app-new".into(), "app-old".into()])
    );
    list.transactional_id_pattern = Some(s("app"));
    assert_eq!(
        listed(&mut client, 2, &list).await,
        (0, vec![]),
        "whole ids only"
    );
    list.transactional_id_pattern = Some(s("(app"));
    assert_eq!(listed(&mut client, 2, &list).await.0, 128);
}
