//! The Kafka APIs over a real socket, with requests encoded by kafka-protocol: ApiVersions
//! negotiation, Metadata and auto-creation, produce -> fetch -> list offsets round trips
//! (by time, and by the largest timestamp, KIP-734, inside a compressed batch and after a
//! restart),
//! acks=0, pipelining order, long-poll wake-ups, and the topic admin APIs.

mod common;

use std::time::Instant;

use common::{TestBroker, batch, produce_request, values};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = topic_name(topic);
    t.partitions = vec![p];
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = min_bytes;
    r.max_bytes = 50 << 20;
    r.session_epoch = -1;
    r.topics = vec![t];
    r
}

fn metadata_request(topics: &[&str], allow_auto_create: bool) -> MetadataRequest {
    let mut r = MetadataRequest::default();
    r.topics = Some(
        topics
            .iter()
            .map(|t| {
                let mut mt = MetadataRequestTopic::default();
                mt.name = Some(topic_name(t));
                mt
            })
            .collect(),
    );
    r.allow_auto_topic_creation = allow_auto_create;
    r
}

/// An acks=all produce of `vals` to partition 0.
async fn produce(
    client: &mut common::Client,
    topic: &str,
    vals: &[&str],
) -> produce_response::PartitionProduceResponse {
    common::produce(client, topic, 0, -1, batch(vals)).await
}

#[tokio::test]
async fn api_versions_v3_v0_and_unknown_version() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    for version in [0, 3, 4] {
        let request = if version >= 3 {
            common::api_versions_request()
        } else {
            ApiVersionsRequest::default()
        };
        let response: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, version, &request).await;
        assert_eq!(response.error_code, 0);
        let produce = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Produce as i16)
            .unwrap();
        // Advertised from v0 (librdkafka's KAFKA-18659), served up to Kafka 4.4's newest.
        assert_eq!((produce.min_version, produce.max_version), (0, 13));
        let metadata = response
            .api_keys
            .iter()
            .find(|k| k.api_key == ApiKey::Metadata as i16)
            .unwrap();
        assert!(
            metadata.min_version <= 4 && 4 <= metadata.max_version,
            "kafka-python needs Metadata v4"
        );
    }
    // A version from the future: answered in v0 with UNSUPPORTED_VERSION and the table.
    let id = client
        .send(ApiKey::ApiVersions, 3, &common::api_versions_request())
        .await;
    let mut frame = common::encode_request(
        ApiKey::ApiVersions,
        3,
        id + 100,
        &common::api_versions_request(),
    )
    .to_vec();
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    let _: (i32, ApiVersionsResponse) = client.recv(ApiKey::ApiVersions, 3).await;
    client.send_raw(&frame).await;
    let (cid, response): (i32, ApiVersionsResponse) = client.recv(ApiKey::ApiVersions, 0).await;
    assert_eq!(cid, id + 100);
    assert_eq!(
        response.error_code,
        ResponseError::UnsupportedVersion.code()
    );
    assert!(!response.api_keys.is_empty());
}

/// KIP-511: ApiVersions v3+ names the client software; a name or version outside Kafka's
/// pattern is INVALID_REQUEST (no table), and a valid pair is what the connection counts as
/// in the client software gauge until it closes (`unknown` before).
#[tokio::test]
async fn api_versions_checks_and_counts_the_client_software() {
    let broker = TestBroker::start(&[]).await;
    let software = &broker.broker.metrics.client_software;
    let mut client = broker.client().await;
    let count = |name: &str, version: &str| {
        software
            .snapshot()
            .iter()
            .find(|(n, v, _)| (&**n, &**v) == (name, version))
            .map_or(0, |e| e.2)
    };
    for version in [3, 4] {
        for (name, software_version) in [("", "1.0"), ("kafka java", "4.4.0"), ("java", "4.4.0-")] {
            let mut request = common::api_versions_request();
            request.client_software_name = StrBytes::from_static_str(name);
            request.client_software_version = StrBytes::from_static_str(software_version);
            let response: ApiVersionsResponse =
                client.call(ApiKey::ApiVersions, version, &request).await;
            assert_eq!(response.error_code, 42, "{name:?} {software_version:?}");
            assert!(response.api_keys.is_empty());
        }
    }
    assert_eq!(count("unknown", "unknown"), 1, "{:?}", software.snapshot());
    let response: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 4, &common::api_versions_request())
        .await;
    assert_eq!(response.error_code, 0);
    assert_eq!(count("sluice-tests", "1.0"), 1);
    assert_eq!(count("unknown", "unknown"), 0);
    let mut second = broker.client().await;
    let _: ApiVersionsResponse = second
        .call(ApiKey::ApiVersions, 3, &common::api_versions_request())
        .await;
    assert_eq!(count("sluice-tests", "1.0"), 2);
    drop(second);
    let deadline = std::time::Instant::now() + common::DEADLINE;
    while count("sluice-tests", "1.0") != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            software.snapshot()
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn api_versions_v3_carries_the_features_and_nothing_else_tagged() {
    // The tagged section after throttle_time_ms holds the features (tags 0-2: supported,
    // finalized epoch, finalized) and no default-valued field (ZkMigrationReady, tag 3).
    // Debian's kcat 1.7.1 (librdkafka 2.0.2) parses it (tests/e2e/test_kcat.py).
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    client
        .send(ApiKey::ApiVersions, 3, &common::api_versions_request())
        .await;
    let mut bytes = client.recv_frame().await.unwrap();
    let _correlation_id = bytes::Buf::get_i32(&mut bytes);
    let response =
        <ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut bytes, 3)
            .unwrap();
    assert!(bytes.is_empty(), "trailing bytes");
    assert!(!response.zk_migration_ready);
    assert_eq!(response.finalized_features_epoch, 0);
    let finalized: Vec<(String, i16)> = response
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    assert_eq!(
        finalized,
        [
            ("group.version".to_owned(), 1),
            ("transaction.version".to_owned(), 2)
        ]
    );
    // v3 leaves out supported features whose minimum is 0 (KAFKA-17011), as Kafka does.
    assert!(response.supported_features.is_empty());
}

#[tokio::test]
async fn metadata_advertises_the_bound_port_and_auto_creates() {
    let broker = TestBroker::start(&[("num.partitions", "3")]).await;
    let mut client = broker.client().await;
    let response: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["fresh"], true))
        .await;
    assert_eq!(response.brokers[0].port, i32::from(broker.addr.port()));
    assert_eq!(response.brokers[0].host.as_str(), "127.0.0.1");
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), 3);
    assert_eq!(
        topic.partitions[0].leader_epoch, 0,
        "a new partition's first leadership"
    );
    let response: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["other"], false))
        .await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let mut all = MetadataRequest::default();
    all.topics = None;
    let response: MetadataResponse = client.call(ApiKey::Metadata, 1, &all).await;
    assert_eq!(response.topics.len(), 1);
}

#[tokio::test]
async fn auto_create_off_gives_unknown_topic() {
    let broker = TestBroker::start(&[("auto.create.topics.enable", "false")]).await;
    let mut client = broker.client().await;
    let response: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["nope"], true))
        .await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let p = produce(&mut client, "nope", &["x"]).await;
    assert_eq!(p.error_code, ResponseError::UnknownTopicOrPartition.code());
}

#[tokio::test]
async fn produce_fetch_and_list_offsets_round_trip() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let _: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["t"], true))
        .await;
    let first = produce(&mut client, "t", &["a", "b", "c"]).await;
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let second = produce(&mut client, "t", &["d"]).await;
    assert_eq!(second.base_offset, 3);

    for version in [4, 7, 11] {
        let response: FetchResponse = client
            .call(ApiKey::Fetch, version, &fetch_request("t", 0, 0, 0, 0))
            .await;
        let p = &response.responses[0].partitions[0];
        assert_eq!((p.error_code, p.high_watermark), (0, 4), "v{version}");
        assert_eq!(
            values(p.records.clone().unwrap()),
            ["a", "b", "c", "d"],
            "v{version}"
        );
    }
    let response: FetchResponse = client
        .call(ApiKey::Fetch, 11, &fetch_request("t", 0, 3, 0, 0))
        .await;
    assert_eq!(
        values(response.responses[0].partitions[0].records.clone().unwrap()),
        ["d"]
    );
    let response: FetchResponse = client
        .call(ApiKey::Fetch, 11, &fetch_request("t", 0, 99, 0, 0))
        .await;
    assert_eq!(
        response.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );

    let offsets = |timestamp| {
        let mut p = ListOffsetsPartition::default();
        p.timestamp = timestamp;
        let mut t = ListOffsetsTopic::default();
        t.name = topic_name("t");
        t.partitions = vec![p];
        let mut r = ListOffsetsRequest::default();
        r.replica_id = BrokerId(-1);
        r.topics = vec![t];
        r
    };
    for (timestamp, expected) in [(-2, 0), (-1, 4), (1_700_000_000_000, 0), (i64::MAX, -1)] {
        let response: ListOffsetsResponse = client
            .call(ApiKey::ListOffsets, 5, &offsets(timestamp))
            .await;
        let p = &response.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.offset),
            (0, expected),
            "timestamp {timestamp}"
        );
    }
}

#[tokio::test]
async fn acks_zero_gets_no_response_and_order_is_kept() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let _: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["t"], true))
        .await;
    client
        .send(
            ApiKey::Produce,
            8,
            &produce_request("t", 0, 0, batch(&["fire-and-forget"])),
        )
        .await;
    // Pipeline many requests at once; responses must come back in order.
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            client
                .send(
                    ApiKey::Produce,
                    8,
                    &produce_request("t", 0, 1, batch(&[&i.to_string()])),
                )
                .await,
        );
    }
    for (i, id) in ids.into_iter().enumerate() {
        let (got, response): (i32, ProduceResponse) = client.recv(ApiKey::Produce, 8).await;
        assert_eq!(got, id);
        assert_eq!(
            response.responses[0].partition_responses[0].base_offset,
            i as i64 + 1
        );
    }
}

#[tokio::test]
async fn long_poll_is_woken_by_an_append() {
    let broker = TestBroker::start(&[]).await;
    let mut consumer = broker.client().await;
    let mut producer = broker.client().await;
    let _: MetadataResponse = consumer
        .call(ApiKey::Metadata, 8, &metadata_request(&["t"], true))
        .await;
    let started = Instant::now();
    let id = consumer
        .send(ApiKey::Fetch, 11, &fetch_request("t", 0, 0, 8000, 1))
        .await;
    let _ = produce(&mut producer, "t", &["wake"]).await;
    let (got, response): (i32, FetchResponse) = consumer.recv(ApiKey::Fetch, 11).await;
    assert_eq!(got, id);
    assert!(
        started.elapsed().as_millis() < 5000,
        "woken by the append, not the timeout"
    );
    assert_eq!(
        values(response.responses[0].partitions[0].records.clone().unwrap()),
        ["wake"]
    );
}

#[tokio::test]
async fn long_poll_times_out_with_an_empty_answer() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let _: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&["t"], true))
        .await;
    let started = Instant::now();
    let response: FetchResponse = client
        .call(ApiKey::Fetch, 11, &fetch_request("t", 0, 0, 300, 1))
        .await;
    assert!(started.elapsed().as_millis() >= 250);
    let p = &response.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 0));
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
}

#[tokio::test]
async fn create_describe_and_delete_topics() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![
        creatable("a", 2, &[("retention.ms", "60000")]),
        creatable("b", 1, &[("cleanup.policy", "compacted")]),
        creatable("c", 0, &[]),
        creatable("bad/name", 1, &[]),
        creatable("d", 1, &[("cleanup.policy", "compact,delete")]),
    ];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        [
            0,
            ResponseError::InvalidConfig.code(),
            ResponseError::InvalidPartitions.code(),
            ResponseError::InvalidTopicException.code(),
            0
        ]
    );
    assert!(
        response.topics[1]
            .error_message
            .as_ref()
            .unwrap()
            .contains("cleanup.policy")
    );
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::TopicAlreadyExists.code()
    );
    request.topics = vec![creatable("v", 1, &[])];
    request.validate_only = true;
    let _: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert!(broker_has_no_topic(&mut client, "v").await);

    assert_retention_described(&mut client, "a", "60000").await;

    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![topic_name("a"), topic_name("zzz")];
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 3, &delete).await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        response.responses[1].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(broker_has_no_topic(&mut client, "a").await);
}

/// CreateTopics v5+ answers the new topic's partitions, replication factor and configs
/// (KIP-525), v7 its id; DeleteTopics v6 deletes by id (KIP-516) and refuses what Kafka's
/// controller refuses.
#[tokio::test]
async fn create_topics_v7_describes_and_delete_topics_v6_deletes_by_id() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable("k", 3, &[("retention.ms", "60000")])];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request).await;
    let created = &response.topics[0];
    assert_eq!(created.error_code, 0);
    assert_eq!((created.num_partitions, created.replication_factor), (3, 1));
    assert_eq!(created.topic_config_error_code, 0);
    let id = created.topic_id;
    assert!(!id.is_nil());
    let configs = created.configs.as_ref().unwrap();
    let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    assert!(names.is_sorted(), "{names:?}");
    let retention = configs.iter().find(|c| c.name.as_str() == "retention.ms");
    let retention = retention.unwrap();
    assert_eq!(retention.value.as_deref(), Some("60000"));
    assert_eq!(retention.config_source, 1, "DYNAMIC_TOPIC_CONFIG");
    let segment = configs.iter().find(|c| c.name.as_str() == "segment.bytes");
    assert_eq!(segment.unwrap().config_source, 5, "DEFAULT_CONFIG");
    // v5 (no id), and validate_only answers the configs of the topic it would create.
    request.topics = vec![creatable("k2", 2, &[])];
    request.validate_only = true;
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 5, &request).await;
    assert_eq!(response.topics[0].num_partitions, 2);
    assert!(!response.topics[0].configs.as_ref().unwrap().is_empty());
    // An error answers no configs and -1 counts.
    let response: CreateTopicsResponse = client
        .call(ApiKey::CreateTopics, 7, &{
            let mut again = CreateTopicsRequest::default();
            again.topics = vec![creatable("k", 1, &[])];
            again
        })
        .await;
    let exists = &response.topics[0];
    assert_eq!(exists.error_code, ResponseError::TopicAlreadyExists.code());
    assert_eq!((exists.num_partitions, exists.replication_factor), (-1, -1));
    delete_by_id(&mut client, id).await;
}

/// DeleteTopics v6 of topic `k` (id `id`), by id, among entries Kafka's controller refuses.
async fn delete_by_id(client: &mut common::Client, id: uuid::Uuid) {
    let state = |name: Option<&'static str>, id| {
        let mut t = delete_topics_request::DeleteTopicState::default();
        t.name = name.map(topic_name);
        t.topic_id = id;
        t
    };
    let unknown = uuid::Uuid::from_u128(7);
    let mut delete = DeleteTopicsRequest::default();
    delete.topics = vec![
        state(None, unknown),
        state(None, uuid::Uuid::nil()),
        state(Some("k"), id),
        state(None, id),
    ];
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &delete).await;
    let answers: Vec<(Option<&str>, uuid::Uuid, i16)> = response
        .responses
        .iter()
        .map(|r| {
            (
                r.name.as_ref().map(|n| n.0.as_str()),
                r.topic_id,
                r.error_code,
            )
        })
        .collect();
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(
        answers,
        [
            (None, unknown, ResponseError::UnknownTopicId.code()),
            (None, uuid::Uuid::nil(), invalid),
            (Some("k"), id, invalid),
            (Some("k"), id, 0),
        ]
    );
    assert!(broker_has_no_topic(client, "k").await);
    // A name listed twice is INVALID_REQUEST, in every version.
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable("t2", 1, &[])];
    let _: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request).await;
    delete.topics = vec![
        state(Some("t2"), uuid::Uuid::nil()),
        state(Some("t2"), uuid::Uuid::nil()),
    ];
    let response: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &delete).await;
    assert!(response.responses.iter().all(|r| r.error_code == invalid));
    assert!(!broker_has_no_topic(client, "t2").await);
}

fn creatable(
    name: &str,
    partitions: i32,
    configs: &[(&'static str, &'static str)],
) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = StrBytes::from_static_str(k);
            c.value = Some(StrBytes::from_static_str(v));
            c
        })
        .collect();
    t
}

/// DescribeConfigs with synonyms: the topic's override first, then the broker default.
async fn assert_retention_described(client: &mut common::Client, topic: &'static str, value: &str) {
    let mut describe = DescribeConfigsRequest::default();
    let mut resource = describe_configs_request::DescribeConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = StrBytes::from_static_str(topic);
    describe.resources = vec![resource];
    describe.include_synonyms = true;
    let response: DescribeConfigsResponse =
        client.call(ApiKey::DescribeConfigs, 3, &describe).await;
    let retention = response.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(retention.value.as_ref().unwrap().as_str(), value);
    assert_eq!(retention.config_source, 1);
    let synonyms: Vec<(&str, i8)> = retention
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(synonyms, [("retention.ms", 1), ("log.retention.ms", 5)]);
}

async fn broker_has_no_topic(client: &mut common::Client, name: &str) -> bool {
    let response: MetadataResponse = client
        .call(ApiKey::Metadata, 8, &metadata_request(&[name], false))
        .await;
    response.topics[0].error_code == ResponseError::UnknownTopicOrPartition.code()
}

#[tokio::test]
async fn find_coordinator_names_this_broker_for_groups_and_transactions() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut request = FindCoordinatorRequest::default();
    request.key = StrBytes::from_static_str("my-group");
    for version in 0..=2 {
        let response: FindCoordinatorResponse = client
            .call(ApiKey::FindCoordinator, version, &request)
            .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(
            (response.node_id.0, response.port),
            (0, i32::from(broker.addr.port()))
        );
    }
    request.key_type = 1; // transaction
    for version in 2..=3 {
        let response: FindCoordinatorResponse = client
            .call(ApiKey::FindCoordinator, version, &request)
            .await;
        assert_eq!(response.error_code, 0);
        assert_eq!(
            (response.node_id.0, response.port),
            (0, i32::from(broker.addr.port()))
        );
    }
    // v4+ batch the keys (KIP-699), each answered on its own.
    let mut batched = FindCoordinatorRequest::default();
    batched.coordinator_keys = vec![
        StrBytes::from_static_str("a"),
        StrBytes::from_static_str("b"),
    ];
    for (key_type, version) in [(0, 4), (1, 5), (0, 6)] {
        batched.key_type = key_type;
        let response: FindCoordinatorResponse = client
            .call(ApiKey::FindCoordinator, version, &batched)
            .await;
        let answers: Vec<_> = response
            .coordinators
            .iter()
            .map(|c| (c.key.as_str(), c.error_code, c.node_id.0, c.port))
            .collect();
        let port = i32::from(broker.addr.port());
        assert_eq!(
            answers,
            [("a", 0, 0, port), ("b", 0, 0, port)],
            "v{version}"
        );
    }
    // Share groups (key type 2) are not served: INVALID_REQUEST, as Kafka answers with
    // share groups disabled (and below v6), and an unknown key type too.
    for (key_type, version) in [(2, 6), (2, 5), (3, 6)] {
        batched.key_type = key_type;
        let response: FindCoordinatorResponse = client
            .call(ApiKey::FindCoordinator, version, &batched)
            .await;
        for c in &response.coordinators {
            assert_eq!((c.error_code, c.node_id.0, c.port), (42, -1, -1));
        }
    }
}

/// One RecordBatch v2 of `(value, timestamp)` records, compressed with `compression`.
fn batch_of(
    records: &[(&str, i64)],
    compression: kafka_protocol::records::Compression,
) -> bytes::Bytes {
    use kafka_protocol::records::{Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (value, timestamp))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: *timestamp,
            key: None,
            value: Some(bytes::Bytes::from(value.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// ListOffsets of `timestamp` on partition 0 of `topic` at `version`: (error, offset,
/// timestamp, leader epoch).
async fn list_offset(
    client: &mut common::Client,
    topic: &str,
    timestamp: i64,
    version: i16,
) -> (i16, i64, i64, i32) {
    let mut p = ListOffsetsPartition::default();
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics = vec![t];
    if version >= 10 {
        r.timeout_ms = 30_000;
    }
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, version, &r).await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.offset, p.timestamp, p.leader_epoch)
}

#[tokio::test]
async fn list_offsets_by_the_largest_timestamp_and_the_tiered_sentinels() {
    use kafka_protocol::records::Compression;
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let _: MetadataResponse = client
        .call(
            ApiKey::Metadata,
            8,
            &metadata_request(&["m", "empty"], true),
        )
        .await;
    assert_eq!(
        list_offset(&mut client, "empty", -3, 7).await,
        (0, -1, -1, -1)
    );
    let batches = [
        batch_of(
            &[("a", 1_000), ("b", 5_000), ("c", 2_000)],
            Compression::None,
        ),
        // The largest timestamp twice, inside a compressed batch: the first one counts.
        batch_of(
            &[("d", 3_000), ("e", 7_000), ("f", 7_000), ("g", 100)],
            Compression::Gzip,
        ),
        batch_of(&[("h", 6_000)], Compression::None),
    ];
    for records in batches {
        let p = common::produce(&mut client, "m", 0, -1, records).await;
        assert_eq!(p.error_code, 0);
    }
    let epoch = list_offset(&mut client, "m", -1, 10).await.3;
    for version in [7, 8, 9, 10] {
        assert_eq!(
            list_offset(&mut client, "m", -3, version).await,
            (0, 4, 7_000, epoch),
            "v{version}: the first record at the largest timestamp"
        );
    }
    assert_eq!(
        list_offset(&mut client, "m", -4, 8).await.1,
        0,
        "earliest local: the log start"
    );
    assert_eq!(
        list_offset(&mut client, "m", -5, 9).await,
        (0, -1, -1, -1),
        "latest tiered: none without tiered storage"
    );
    assert_eq!(
        list_offset(&mut client, "m", 6_500, 6).await.1,
        4,
        "by time, flexible v6"
    );
    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    let (error, offset, timestamp, _) = list_offset(&mut client, "m", -3, 10).await;
    assert_eq!((error, offset, timestamp), (0, 4, 7_000), "after a restart");
}

/// Produce v13 names topics by id (KIP-516): a known id appends and is answered by id, an
/// unknown one is UNKNOWN_TOPIC_ID, and both travel in one request.
#[tokio::test]
async fn produce_v13_names_topics_by_id() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable("by-id", 1, &[])];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request).await;
    let id = response.topics[0].topic_id;
    let unknown = uuid::Uuid::from_u128(42);
    let mut produce = produce_request("", 0, -1, batch(&["a", "b"]));
    let mut other = produce.topic_data[0].clone();
    produce.topic_data[0].topic_id = id;
    other.topic_id = unknown;
    produce.topic_data.push(other);
    let response: ProduceResponse = client.call(ApiKey::Produce, 13, &produce).await;
    let answers: Vec<(uuid::Uuid, i16, i64)> = response
        .responses
        .iter()
        .map(|t| {
            let p = &t.partition_responses[0];
            (t.topic_id, p.error_code, p.base_offset)
        })
        .collect();
    let unknown_id = ResponseError::UnknownTopicId.code();
    assert_eq!(answers[0], (id, 0, 0));
    assert_eq!((answers[1].0, answers[1].1), (unknown, unknown_id));
    let response: FetchResponse = client
        .call(ApiKey::Fetch, 11, &fetch_request("by-id", 0, 0, 0, 0))
        .await;
    let p = &response.responses[0].partitions[0];
    assert_eq!(values(p.records.clone().unwrap()), ["a", "b"]);
}
