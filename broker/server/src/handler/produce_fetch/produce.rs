//! Produce v3-v13: append each partition's record batches as sent (compressed batches stay
//! compressed), after `records::validate` has checked what the storage engine cannot
//! (client control batches, the records inside compressed batches); the storage engine
//! checks headers, CRCs and uncompressed records at append. A refused batch fails its
//! partition (CORRUPT_MESSAGE or INVALID_RECORD, with `record_errors` from v8), never the
//! request.
//! acks=0 gets no response; acks=-1 waits for the partitions' group commit (one fsync per
//! partition answers every append made before it began, see `group_commit.rs`) when
//! `sluice.acks.all.fsync` is on. Produce v0-v2 are advertised (for old librdkafka's
//! compression, KAFKA-18659) and answered with UNSUPPORTED_VERSION.
//! A topic's validator plugin (`crate::validator`) checks every batch after those checks
//! and before the append (a refused record fails its partition with INVALID_RECORD and
//! `record_errors`, nothing of it appended); then a partitioner plugin re-routes it
//! (`crate::reroute`).
//! Authorization (`crate::authz`), in Kafka's order: a request holding a transactional batch
//! needs a transactional id the principal may WRITE (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition: a null id included), then
//! WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions, the others
//! still appended).
//! Transactional batches are then verified with the transaction coordinator (KIP-890,
//! `crate::txn::verify`): their producer id and epoch must be the transactional id's, and
//! each partition in its ongoing transaction, else the partition is refused
//! (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE "Partition was not
//! added to the transaction", NOT_ENOUGH_REPLICAS while the coordinator cannot answer);
//! transactional batches of two producers in one request fail it whole
//! (INVALID_PRODUCER_ID_MAPPING), as Kafka's `handleProduceAppend` does. The storage engine
//! appends a transactional batch only under the verification's guard
//! (`Log::append_produced`). v9 is flexible; v10 (KIP-951): a partition refused
//! NOT_LEADER_OR_FOLLOWER names its current leader and epoch, and the response carries that
//! leader's endpoint (`leader_hint.rs`; a cluster only); v11 answers
//! TRANSACTION_ABORTABLE (KIP-890); v12 is the transaction protocol v2 (KIP-890 part 2):
//! the partitions of a transactional batch are added to the producer's transaction rather
//! than verified (`crate::txn::verify::Answers::AddPartition`); v13 names topics by id
//! (KIP-516), an unknown one answered UNKNOWN_TOPIC_ID.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::compat;
use sluice_security::acl::{AclOperation, ResourceType};

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use sluice_storage::TxnAppend;
use sluice_storage::batch::iter_batches;

use sluice_plugin_host::Registry;

use super::Ctx;
use crate::error::KafkaError;
use crate::handler::topic_ids::TopicIds;
use crate::topics::TopicRegistry;
use crate::topics::append::{Appended, append_one};
use crate::topics::group_commit;
use crate::topics::{Partition, Topic};
use crate::txn::TxnProducer;
use crate::txn::verify::{self, Verdict};
use crate::wire::{FrameError, Response};

use super::kip110;

/// A produce whose batches are appended, before its acks=all partitions are durable. The
/// connection appends requests in order and lets the durable waits overlap, so one group
/// fsync can answer several pipelined requests of one producer.
pub struct Staged {
    acks: i16,
    /// A client quota's throttle, answered in `throttle_time_ms`.
    throttle_ms: u32,
    responses: Vec<TopicProduceResponse>,
    waits: Vec<DurableWait>,
    /// acks=all appends to replicated partitions, waiting for the high watermark.
    replicated: Vec<ReplicaWait>,
    /// v10+ (KIP-951): the endpoints of the leaders named in refused partitions.
    node_endpoints: Vec<kafka_protocol::messages::produce_response::NodeEndpoint>,
}

/// An acks=all append to a replicated partition: where its response is, and the answer of
/// its replica (`crate::kraft::replicas`) once the high watermark passes it.
struct ReplicaWait {
    topic: usize,
    slot: usize,
    answer:
        tokio::sync::oneshot::Receiver<Result<sluice_replica::ProduceAck, sluice_kafka::ErrorCode>>,
}

/// Records re-routed to a partition another broker leads, and where the answer for the
/// partition entry they came from is (topic slot, partition slot).
struct Forwarded {
    topic: usize,
    slot: usize,
    forward: crate::reroute::Forward,
}

/// Appends the request's batches (in order with the connection's other requests).
pub async fn append(
    ctx: &Ctx<'_>,
    request: ProduceRequest,
    version: i16,
    throttle_ms: u32,
) -> Staged {
    let acks = request.acks;
    let (topics, plugins) = (Arc::clone(ctx.topics), Arc::clone(ctx.plugins));
    let timeout_ms = i64::from(request.timeout_ms);
    let refuse_all = |request: &ProduceRequest, code, message: &str| Staged {
        acks,
        throttle_ms,
        responses: error_for_all(request, code, message),
        waits: Vec::new(),
        replicated: Vec::new(),
        node_endpoints: Vec::new(),
    };
    let transactional_id = request.transactional_id.as_ref().map(|t| t.0.to_string());
    let transactional = has_transactional_batch(&request);
    let denied = match authorize(ctx, &request, transactional, transactional_id.as_deref()) {
        Ok(denied) => denied,
        Err((code, message)) => return refuse_all(&request, code, message),
    };
    if !(-1..=1).contains(&acks) {
        return refuse_all(
            &request,
            ResponseError::InvalidRequiredAcks,
            "acks must be 0, 1 or -1",
        );
    }
    let verified = match transactional {
        true => {
            let answers = verify::Answers::for_produce(version);
            verify_transactional(ctx, &request, transactional_id, &denied, answers).await
        }
        false => Ok(None),
    };
    let verified = match verified {
        Ok(verified) => verified,
        Err(e) => return refuse_all(&request, e.code, &e.message),
    };
    let durable = acks == -1 && ctx.config.acks_all_fsync;
    let replication = ctx.kraft.map(|k| Replication {
        replicas: Arc::clone(k.replicas()),
        acks,
        timeout_ms,
        waits: Vec::new(),
    });
    let (mut responses, waits, forwards, replicated) = tokio::task::spawn_blocking(move || {
        let how = (acks, durable, replication);
        append_all(
            (&topics, &plugins),
            request,
            version,
            how,
            &denied,
            verified,
        )
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "produce task failed");
        (Vec::new(), Vec::new(), Vec::new(), Vec::new())
    });
    if !forwards.is_empty() {
        send_forwards(ctx, &mut responses, forwards, durable).await;
    }
    let node_endpoints = leader_hints(ctx, &mut responses, version);
    Staged {
        acks,
        throttle_ms,
        responses,
        waits,
        replicated,
        node_endpoints,
    }
}

/// The first Produce version with KIP-951's leader hints.
const LEADER_HINTS_SINCE: i16 = 10;

/// KIP-951 (`leader_hint.rs`): each partition refused NOT_LEADER_OR_FOLLOWER names its
/// current leader; returns those leaders' endpoints.
fn leader_hints(
    ctx: &Ctx<'_>,
    responses: &mut [TopicProduceResponse],
    version: i16,
) -> Vec<kafka_protocol::messages::produce_response::NodeEndpoint> {
    use kafka_protocol::messages::BrokerId;
    use kafka_protocol::messages::produce_response::{LeaderIdAndEpoch, NodeEndpoint};
    if version < LEADER_HINTS_SINCE || ctx.kraft.is_none() {
        return Vec::new();
    }
    let mut leaders = BTreeSet::new();
    for topic in responses.iter_mut() {
        for p in &mut topic.partition_responses {
            if p.error_code != ResponseError::NotLeaderOrFollower.code() {
                continue;
            }
            let partition = ctx.topics.partition(topic.name.0.as_str(), p.index);
            if let Some((leader, epoch)) =
                partition.as_deref().and_then(super::leader_hint::leader_of)
            {
                let mut hint = LeaderIdAndEpoch::default();
                hint.leader_id = BrokerId(leader);
                hint.leader_epoch = epoch;
                p.current_leader = hint;
                leaders.insert(leader);
            }
        }
    }
    super::leader_hint::endpoints(ctx, &leaders)
        .into_iter()
        .map(|e| {
            let mut n = NodeEndpoint::default();
            n.node_id = BrokerId(e.node_id);
            n.host = StrBytes::from_string(e.host);
            n.port = e.port;
            n.rack = e.rack.map(StrBytes::from_string);
            n
        })
        .collect()
}

/// A cluster's replicated partitions, for one produce: checked before each append
/// (NOT_ENOUGH_REPLICAS) and, for acks=all, waited on after it.
struct Replication {
    replicas: Arc<crate::kraft::replicas::ReplicaManager>,
    acks: i16,
    timeout_ms: i64,
    waits: Vec<ReplicaWait>,
}

/// Kafka's checks: a transactional id the principal may WRITE for transactional batches
/// (`hasTransactionalRecords`; else the whole request is refused), then WRITE on each topic
/// (the topics it may not write).
fn authorize(
    ctx: &Ctx<'_>,
    request: &ProduceRequest,
    transactional: bool,
    transactional_id: Option<&str>,
) -> Result<HashSet<String>, (ResponseError, &'static str)> {
    let allowed_id = transactional_id.is_some_and(|id| {
        ctx.auth
            .allowed(AclOperation::Write, ResourceType::TransactionalId, id)
    });
    if transactional && !allowed_id {
        return Err((
            ResponseError::TransactionalIdAuthorizationFailed,
            "Transactional Id authorization failed.",
        ));
    }
    Ok(request
        .topic_data
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|name| !ctx.auth.topic(AclOperation::Write, name))
        .map(str::to_owned)
        .collect())
}

/// The first Produce version that names topics by id (KIP-516).
const TOPIC_IDS_SINCE: i16 = 13;

/// Produce v13+: each topic's name from its id, as the rest of the produce path works with
/// names. Returns the ids by topic slot and whether each is known (an unknown one keeps an
/// empty name, and [`ids_in_response`] answers it UNKNOWN_TOPIC_ID); `None` below v13.
pub fn names_from_ids(
    ctx: &Ctx<'_>,
    request: &mut ProduceRequest,
    version: i16,
) -> Option<Vec<(uuid::Uuid, bool)>> {
    if version < TOPIC_IDS_SINCE {
        return None;
    }
    let ids = TopicIds::of(ctx.topics);
    let slots = request
        .topic_data
        .iter_mut()
        .map(|topic| {
            let name = ids.name(&topic.topic_id);
            let known = name.is_some();
            topic.name = TopicName(StrBytes::from_string(name.unwrap_or_default()));
            (topic.topic_id, known)
        })
        .collect();
    Some(slots)
}

/// Produce v13+: each topic answered by its id; one whose id is unknown is
/// UNKNOWN_TOPIC_ID for every partition (Kafka's check comes before authorization).
pub fn ids_in_response(response: &mut ProduceResponse, by_id: Option<Vec<(uuid::Uuid, bool)>>) {
    let Some(by_id) = by_id else {
        return;
    };
    for (topic, (id, known)) in response.responses.iter_mut().zip(by_id) {
        topic.topic_id = id;
        topic.name = TopicName::default();
        if !known {
            for p in &mut topic.partition_responses {
                p.error_code = ResponseError::UnknownTopicId.code();
                p.error_message = None;
                p.record_errors.clear();
            }
        }
    }
}

/// Kafka's `hasTransactionalRecords`: some batch has the transactional bit.
fn has_transactional_batch(request: &ProduceRequest) -> bool {
    partitions(request).any(|(_, _, _, p)| batch_headers(p).any(|h| h.is_transactional()))
}

/// Every partition entry: (topic slot, partition slot, topic name, entry).
fn partitions(
    request: &ProduceRequest,
) -> impl Iterator<Item = (usize, usize, &str, &PartitionProduceData)> {
    request
        .topic_data
        .iter()
        .enumerate()
        .flat_map(|(t, topic)| {
            let name = topic.name.0.as_str();
            topic
                .partition_data
                .iter()
                .enumerate()
                .map(move |(slot, p)| (t, slot, name, p))
        })
}

/// The headers of an entry's batches (up to the first malformed one, which the append
/// refuses).
fn batch_headers(p: &PartitionProduceData) -> impl Iterator<Item = sluice_storage::BatchHeader> {
    p.records
        .as_deref()
        .into_iter()
        .flat_map(|r| iter_batches(r).map_while(Result::ok).map(|(h, _)| h))
}

/// A request's transactional producer and each partition's verification (by topic slot
/// and partition slot).
struct Verified {
    producer: TxnProducer,
    verdicts: HashMap<(usize, usize), Verdict>,
}

/// KIP-890: the partitions (of topics the principal may write) that take transactional
/// batches with a producer id, verified with the coordinator. `Err` when those batches name
/// more than one producer (Kafka fails the whole request). Partitions that do not exist,
/// and topics whose partitioner plugin refuses transactional batches, are not verified:
/// their append answers for them.
async fn verify_transactional(
    ctx: &Ctx<'_>,
    request: &ProduceRequest,
    transactional_id: Option<String>,
    denied: &HashSet<String>,
    answers: verify::Answers,
) -> Result<Option<Verified>, KafkaError> {
    let mut producers = BTreeSet::new();
    let mut targets = Vec::new();
    for (t, slot, name, p) in partitions(request).filter(|(_, _, n, _)| !denied.contains(*n)) {
        let mut found = false;
        for h in batch_headers(p).filter(|h| h.is_transactional() && h.producer_id >= 0) {
            producers.insert((h.producer_id, h.producer_epoch));
            found = true;
        }
        let routed = ctx
            .topics
            .topic(name)
            .is_some_and(|topic| topic.plugins.partitioner.is_some());
        if let (true, false, Some(partition)) = (found, routed, ctx.topics.partition(name, p.index))
        {
            let tp = sluice_txn::TopicPartition {
                topic: name.to_owned(),
                partition: p.index,
            };
            targets.push(((t, slot), tp, partition));
        }
    }
    if producers.len() > 1 {
        return Err(KafkaError::new(
            ResponseError::InvalidProducerIdMapping,
            "Transactional records contained more than one producer ID",
        ));
    }
    let (Some(&(producer_id, producer_epoch)), Some(transactional_id)) =
        (producers.first(), transactional_id)
    else {
        return Ok(None);
    };
    let producer = TxnProducer {
        transactional_id,
        producer_id,
        producer_epoch,
    };
    let (slots, partitions): (Vec<_>, Vec<_>) = targets
        .into_iter()
        .map(|(slot, tp, p)| (slot, (tp, p)))
        .unzip();
    // In a cluster the transaction's coordinator may be another broker: asked there.
    let coordinator = ctx.kraft.and_then(|kraft| {
        let node = kraft.coordinator_node(
            crate::kraft::CoordinatorKind::Transaction,
            &producer.transactional_id,
        );
        match node {
            Some(node) if node == kraft.node_id() => None,
            Some(node) => Some((kraft.as_ref(), node)),
            // No live coordinator: its partition has no leader (the producer retries).
            None => Some((kraft.as_ref(), -1)),
        }
    });
    let verdicts = verify::verify(ctx.txns, &producer, partitions, answers, coordinator).await;
    Ok(Some(Verified {
        producer,
        verdicts: slots.into_iter().zip(verdicts).collect(),
    }))
}

/// Sends every forward to its partition's leader (side by side) and waits for their
/// answers; a failed one turns the answer of the entry it came from into its error.
async fn send_forwards(
    ctx: &Ctx<'_>,
    responses: &mut [TopicProduceResponse],
    forwards: Vec<Forwarded>,
    durable: bool,
) {
    let sends = forwards.into_iter().map(|f| async move {
        let outcome = forward_one(ctx, &f.forward, durable).await;
        (f, outcome)
    });
    for (f, outcome) in futures_util::future::join_all(sends).await {
        if let Err(e) = outcome {
            let response = &mut responses[f.topic].partition_responses[f.slot];
            *response = partition_response(response.index, Err(e));
        }
    }
}

/// One forward, as a `BrokerMessage::AppendRouted` to the target's leader.
async fn forward_one(
    ctx: &Ctx<'_>,
    f: &crate::reroute::Forward,
    durable: bool,
) -> Result<(), KafkaError> {
    let target = format!("{}-{} (led by broker {})", f.topic, f.partition, f.leader);
    let Some(kraft) = ctx.kraft else {
        return Err(KafkaError::new(
            ResponseError::NotLeaderOrFollower,
            format!("re-routed records for {target}: not in a cluster"),
        ));
    };
    let message = crate::cluster::BrokerMessage::AppendRouted {
        topic: f.topic.clone(),
        topic_id: *f.topic_id.as_bytes(),
        partition: f.partition,
        leader_epoch: f.leader_epoch,
        records: f.records.to_vec(),
        durable,
    };
    let failed = |code: ResponseError, why: String| {
        KafkaError::new(
            code,
            format!(
                "the partitioner plugin routed records to {target}, which did not take them: {why}"
            ),
        )
    };
    match kraft.message(f.leader, &message).await {
        Ok(0) => Ok(()),
        Ok(code) => {
            let error =
                ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError);
            Err(failed(error, format!("{error:?}")))
        }
        Err(e) => Err(failed(ResponseError::NetworkException, e)),
    }
}

impl Staged {
    /// Whether the answer waits for a group commit or for replication.
    pub fn waits_for_sync(&self) -> bool {
        !self.waits.is_empty() || !self.replicated.is_empty()
    }

    /// Waits for the acks=all partitions to be durable (and replicated) and answers; `None`
    /// for acks=0.
    pub async fn finish(mut self) -> Result<Option<ProduceResponse>, FrameError> {
        wait_durable(&mut self.responses, self.waits).await;
        wait_replicated(&mut self.responses, self.replicated).await;
        let throttle = i32::try_from(self.throttle_ms).unwrap_or(i32::MAX);
        let endpoints = self.node_endpoints;
        answer(self.acks, self.responses).map(|r| {
            r.map(|mut r| {
                r.throttle_time_ms = throttle;
                r.node_endpoints = endpoints;
                r
            })
        })
    }
}

/// The response, or `None` for acks=0. A failed acks=0 produce closes the connection, as
/// Kafka does: there is no response to carry the error, and the client notices a close.
fn answer(
    acks: i16,
    responses: Vec<TopicProduceResponse>,
) -> Result<Option<ProduceResponse>, FrameError> {
    let mut response = ProduceResponse::default();
    response.responses = responses;
    if acks != 0 {
        return Ok(Some(response));
    }
    let failed = response
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
        .find(|p| p.error_code != 0);
    match failed {
        None => Ok(None),
        Some(p) => Err(FrameError::AcksZeroFailed(format!(
            "partition {} error {}: {}",
            p.index,
            p.error_code,
            p.error_message.as_deref().unwrap_or("")
        ))),
    }
}

/// An acks=all partition append waiting for the group commit: where its response is, and
/// the offset the partition's durable offset must reach.
struct DurableWait {
    topic: usize,
    slot: usize,
    partition: Arc<Partition>,
    end_offset: i64,
}

/// Appends every partition's batches (no fsync); with `durable`, also returns what the
/// group commit must cover before the response goes out.
#[allow(clippy::type_complexity)]
fn append_all(
    (topics, plugins): (&TopicRegistry, &Registry),
    mut request: ProduceRequest,
    version: i16,
    (acks, durable, mut replication): (i16, bool, Option<Replication>),
    denied: &HashSet<String>,
    mut verified: Option<Verified>,
) -> (
    Vec<TopicProduceResponse>,
    Vec<DurableWait>,
    Vec<Forwarded>,
    Vec<ReplicaWait>,
) {
    let mut waits = Vec::new();
    let mut forwards = Vec::new();
    let topic_data = std::mem::take(&mut request.topic_data);
    drop(request); // its transactional id shares the frame's buffer
    let responses = topic_data
        .into_iter()
        .enumerate()
        .map(|(topic_slot, topic)| {
            let name = topic.name.0.to_string();
            drop(topic.name); // shares the frame's buffer with the records
            let known = topics.topic(&name);
            let compacted = known.as_deref().is_some_and(|t| {
                crate::topic_config::cleanup_policy(topics.config(), &t.overrides).compacts()
            });
            let mut out = TopicProduceResponse::default();
            out.partition_responses = topic
                .partition_data
                .into_iter()
                .enumerate()
                .map(|(slot, p)| {
                    if denied.contains(&name) {
                        return partition_response(
                            p.index,
                            Err(KafkaError::new(
                                ResponseError::TopicAuthorizationFailed,
                                "Topic authorization failed.",
                            )),
                        );
                    }
                    let index = p.index;
                    let txn = match txn_of(verified.as_mut(), (topic_slot, slot)) {
                        Ok(txn) => txn,
                        Err(e) => return partition_response(index, Err(e)),
                    };
                    let target = Target {
                        name: &name,
                        topic: known.as_deref(),
                        compacted,
                    };
                    if let Some(e) = refused_by_replication(
                        (replication.as_ref(), topics.config()),
                        acks,
                        &target,
                        index,
                    ) {
                        return partition_response(index, Err(e));
                    }
                    let result =
                        append_partition((topics, plugins), &target, version, p, txn.as_ref());
                    let result = result.map(|rerouted| {
                        let at = (topic_slot, slot);
                        for (partition, end_offset) in rerouted.appends {
                            let wait = (partition, end_offset);
                            wait_after(replication.as_mut(), durable, wait, at, &mut waits);
                        }
                        forwards.extend(rerouted.forwards.into_iter().map(|forward| Forwarded {
                            topic: topic_slot,
                            slot,
                            forward,
                        }));
                        rerouted.response
                    });
                    partition_response(index, result)
                })
                .collect();
            out.name = TopicName(StrBytes::from_string(name));
            out
        })
        .collect();
    let replicated = replication.map(|r| r.waits).unwrap_or_default();
    (responses, waits, forwards, replicated)
}

/// Before an append: its replica's refusal (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS),
/// or, for acks=all to a partition with one replica, NOT_ENOUGH_REPLICAS when the topic's
/// `min.insync.replicas` is above 1 (as Kafka answers).
fn refused_by_replication(
    (replication, broker): (Option<&Replication>, &crate::config::BrokerConfig),
    acks: i16,
    target: &Target<'_>,
    index: i32,
) -> Option<KafkaError> {
    let name = target.name;
    if let Some(r) = replication {
        if let Err(e) = r.replicas.check_produce(name, index, r.acks) {
            return Some(e);
        }
        if r.replicas.slot(name, index).is_some() {
            return None;
        }
    }
    let min = crate::topic_config::min_insync_replicas(broker, &target.topic?.overrides);
    (acks == -1 && min > 1).then(|| {
        KafkaError::new(
            ResponseError::NotEnoughReplicas,
            format!("{name}-{index} has one replica and min.insync.replicas = {min}"),
        )
    })
}

/// After an append (the partition and its log end after it): acks=all waits for the
/// replica's answer (a replicated partition) or for the group commit (`durable`).
fn wait_after(
    replication: Option<&mut Replication>,
    durable: bool,
    (partition, end_offset): (Arc<Partition>, i64),
    (topic, slot): (usize, usize),
    waits: &mut Vec<DurableWait>,
) {
    let waited = replication.and_then(|r| {
        let last = end_offset - 1;
        let answer = r.replicas.appended(
            &partition.topic,
            partition.index,
            r.acks,
            (last, last),
            false,
            r.timeout_ms,
        )?;
        (r.acks == -1).then(|| {
            r.waits.push(ReplicaWait {
                topic,
                slot,
                answer,
            })
        })
    });
    if durable && waited.is_none() {
        waits.push(DurableWait {
            topic,
            slot,
            partition,
            end_offset,
        });
    }
}

/// The verified transaction a partition entry appends under, or its verification's error.
fn txn_of(
    verified: Option<&mut Verified>,
    slot: (usize, usize),
) -> Result<Option<TxnAppend<'_>>, KafkaError> {
    let Some(verified) = verified else {
        return Ok(None);
    };
    let Some(verdict) = verified.verdicts.remove(&slot) else {
        return Ok(None);
    };
    let producer = &verified.producer;
    Ok(Some(TxnAppend {
        transactional_id: &producer.transactional_id,
        producer_id: producer.producer_id,
        producer_epoch: producer.producer_epoch,
        guard: verdict?,
    }))
}

/// The topic a partition entry appends to.
struct Target<'a> {
    name: &'a str,
    topic: Option<&'a Topic>,
    compacted: bool,
}

/// One partition entry of a Produce request: the checks Kafka makes (KIP-110, the records
/// inside the batches), the topic's validator plugin, then the append (transactional
/// batches under `txn`), through the topic's partitioner plugin when it has one. Returns
/// the partition's answer and every append made.
fn append_partition(
    (topics, plugins): (&TopicRegistry, &Registry),
    target: &Target<'_>,
    version: i16,
    p: PartitionProduceData,
    txn: Option<&TxnAppend<'_>>,
) -> Result<crate::reroute::Rerouted, KafkaError> {
    let (name, topic) = (target.name, target.topic);
    if let Some(r) = &p.records {
        kip110::check_produce(r, version)?;
        crate::records::validate::produced(r, target.compacted)?;
        if let Some((t, v)) = topic.and_then(|t| Some((t, t.plugins.validator.as_deref()?))) {
            crate::validator::check(plugins, t, v, p.index, r)?;
        }
    }
    match topic.and_then(|t| Some((t, t.plugins.partitioner.as_deref()?))) {
        Some((t, tp)) => crate::reroute::append((topics, plugins), t, tp, p.index, p.records),
        None => {
            append_one(topics, name, p.index, p.records, txn).map(crate::reroute::Rerouted::one)
        }
    }
}

/// Waits for the group commit of every acks=all append (all partitions' syncs are requested
/// first, so they run side by side); a failed one turns its response into the error.
async fn wait_durable(responses: &mut [TopicProduceResponse], waits: Vec<DurableWait>) {
    for wait in &waits {
        group_commit::request_sync(&wait.partition);
    }
    for wait in waits {
        if let Err(e) = group_commit::wait_durable(&wait.partition, wait.end_offset).await {
            let response = &mut responses[wait.topic].partition_responses[wait.slot];
            *response = partition_response(response.index, Err(e));
        }
    }
}

/// Waits for the replicas' answers of every acks=all append to a replicated partition; a
/// refused one (NOT_LEADER_OR_FOLLOWER after a lost leadership, REQUEST_TIMED_OUT) turns its
/// response into the error.
async fn wait_replicated(responses: &mut [TopicProduceResponse], waits: Vec<ReplicaWait>) {
    for wait in waits {
        let code = match wait.answer.await {
            Ok(Ok(_)) => continue,
            Ok(Err(code)) => code,
            Err(_) => sluice_kafka::ErrorCode::NotLeaderOrFollower,
        };
        let response = &mut responses[wait.topic].partition_responses[wait.slot];
        let error =
            ResponseError::try_from_code(code.code()).unwrap_or(ResponseError::UnknownServerError);
        let message = format!(
            "partition {}: not replicated to the in-sync replicas ({})",
            response.index,
            code.name()
        );
        *response = partition_response(response.index, Err(KafkaError::new(error, message)));
    }
}

fn partition_response(
    index: i32,
    result: Result<Appended, KafkaError>,
) -> PartitionProduceResponse {
    let mut out = PartitionProduceResponse::default();
    out.index = index;
    match result {
        Ok(a) => {
            out.base_offset = a.base_offset;
            out.log_append_time_ms = a.log_append_time_ms;
            out.log_start_offset = a.log_start_offset;
        }
        Err(e) => {
            out.error_code = e.code.code();
            out.base_offset = -1;
            out.log_append_time_ms = -1;
            out.log_start_offset = -1;
            out.error_message = Some(StrBytes::from_string(e.message));
            out.record_errors = e
                .record_errors
                .into_iter()
                .map(|(index, reason)| {
                    let mut record = BatchIndexAndErrorMessage::default();
                    record.batch_index = index;
                    record.batch_index_error_message = Some(StrBytes::from_string(reason));
                    record
                })
                .collect();
        }
    }
    out
}

fn error_for_all(
    request: &ProduceRequest,
    code: ResponseError,
    message: &str,
) -> Vec<TopicProduceResponse> {
    request
        .topic_data
        .iter()
        .map(|topic| {
            let mut out = TopicProduceResponse::default();
            out.name = topic.name.clone();
            out.partition_responses = topic
                .partition_data
                .iter()
                .map(|p| partition_response(p.index, Err(KafkaError::new(code, message))))
                .collect();
            out
        })
        .collect()
}

/// Answers Produce v0-v2 with UNSUPPORTED_VERSION for every partition (read as v3 and
/// answered in the old layout by `sluice_protocol::compat`).
pub fn unsupported_old_version(
    frame: Bytes,
    version: i16,
    correlation_id: i32,
) -> Result<Response, FrameError> {
    let request = compat::produce_v0_to_v2(frame, version)?;
    if request.acks == 0 {
        return Ok(Response::default());
    }
    let mut response = ProduceResponse::default();
    response.responses = error_for_all(&request, ResponseError::UnsupportedVersion, "");
    for topic in &mut response.responses {
        for p in &mut topic.partition_responses {
            p.error_message = None;
        }
    }
    let message = compat::produce_response_v0_to_v2(&response, version)?;
    crate::handler::encode_raw(correlation_id, 0, message)
}
