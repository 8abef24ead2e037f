//! Followers' fetches (Kafka's `ReplicaFetcherThread`): one fetcher task per leader broker,
//! whatever the partition count. Each replica that follows a partition led by broker `n`
//! hands its next fetch to `n`'s fetcher; the fetcher sends all the fetches waiting for it
//! as one Kafka Fetch (v12: `ReplicaId` this node, each partition's `CurrentLeaderEpoch`,
//! `FetchOffset` and `LastFetchedEpoch`; `replica.fetch.max.bytes` per partition, at most
//! [`REPLICA_FETCH_RESPONSE_BYTES_MAX`] in all; the leader holds it up to
//! `replica.fetch.wait.max.ms` when nothing is new) to `n`'s inter-broker listener
//! (`peers.rs`), and gives each replica its partition's answer with the records' bytes.
//! A failed request answers every partition in it REQUEST_TIMED_OUT (each replica backs
//! off `replica.fetch.backoff.ms`).
//!
//! Up to [`REPLICA_FETCHES_IN_FLIGHT_MAX`] fetches are in flight to one leader: a partition
//! that becomes ready while a fetch of idle partitions is held by the leader goes out at
//! once instead of waiting behind it. Sessionless (session id 0, epoch -1: a full fetch each
//! time); KIP-227's incremental sessions would shrink the requests of brokers with many
//! partitions.
//!
//! Bounds: one waiting fetch per replica (a replica sends its next only after its last was
//! answered or timed out), so a fetcher's queue holds at most the partitions this broker
//! replicates, which `sluice.partitions.max` bounds; one fetcher per live broker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest as KafkaFetch, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_kafka::ErrorCode;
use sluice_replica::{Batch, EpochEndOffset, FetchData, FetchRequest, FetchResponse};
use tokio::sync::Notify;

use super::replicas::{ReplicaManager, Slot};

/// Largest Fetch answer a follower asks a leader for (`max_bytes`), below the inter-broker
/// client's frame bound (`peers::PEER_RESPONSE_BYTES_MAX`).
pub const REPLICA_FETCH_RESPONSE_BYTES_MAX: i32 = 10 * 1024 * 1024;
const _: () =
    assert!((REPLICA_FETCH_RESPONSE_BYTES_MAX as usize) < super::peers::PEER_RESPONSE_BYTES_MAX);

/// The Fetch version followers send (the first with `LastFetchedEpoch` and
/// `DivergingEpoch`, topics named by name).
pub const REPLICA_FETCH_VERSION: i16 = 12;

/// One partition's answer: the state machine's view, and the records' bytes.
type PartitionAnswer = (Result<FetchData, ErrorCode>, Option<Bytes>);

/// A fetch waiting for its fetcher: the replica and its request.
type Waiting = HashMap<(String, i32), (Arc<Slot>, FetchRequest)>;

/// One leader broker's fetcher.
#[derive(Default)]
struct Fetcher {
    waiting: Mutex<Waiting>,
    wake: Notify,
}

/// Every leader's fetcher, started on first use.
#[derive(Default)]
pub struct Fetchers {
    by_leader: Mutex<HashMap<i32, Arc<Fetcher>>>,
}

impl Fetchers {
    /// Hands `request` of the replica `key` to the fetcher of broker `leader`.
    pub(super) fn send(
        &self,
        manager: &Arc<ReplicaManager>,
        leader: i32,
        key: &(String, i32),
        request: FetchRequest,
    ) {
        let Some(slot) = manager.slot(&key.0, key.1) else {
            return;
        };
        let fetcher = {
            let mut by_leader = lock(&self.by_leader);
            match by_leader.get(&leader) {
                Some(f) => Arc::clone(f),
                None => {
                    let f = Arc::new(Fetcher::default());
                    by_leader.insert(leader, Arc::clone(&f));
                    tokio::spawn(run(Arc::downgrade(manager), leader, Arc::clone(&f)));
                    f
                }
            }
        };
        lock(&fetcher.waiting).insert(key.clone(), (slot, request));
        fetcher.wake.notify_one();
    }
}

/// Fetches one fetcher may have in flight to its leader at once. A fetch the leader holds
/// (nothing new for its partitions, up to `replica.fetch.wait.max.ms`) must not hold back a
/// partition that became ready meanwhile (its fsync done, or a new leadership): that
/// partition goes out at once in a fetch of its own. Each partition has one fetch in flight
/// at most, so the fetches in flight carry different partitions.
pub const REPLICA_FETCHES_IN_FLIGHT_MAX: usize = 4;
const _: () = assert!(REPLICA_FETCHES_IN_FLIGHT_MAX <= super::peers::PEER_IDLE_PER_BROKER_MAX);

/// A fetch in flight: its partitions and the leader's answer.
type Flight = (
    Waiting,
    Result<kafka_protocol::messages::FetchResponse, String>,
);

/// The fetcher of broker `leader`: until the manager is gone.
async fn run(manager: std::sync::Weak<ReplicaManager>, leader: i32, fetcher: Arc<Fetcher>) {
    let mut in_flight: tokio::task::JoinSet<Flight> = tokio::task::JoinSet::new();
    loop {
        if in_flight.len() < REPLICA_FETCHES_IN_FLIGHT_MAX {
            let batch: Waiting = std::mem::take(&mut *lock(&fetcher.waiting));
            if !batch.is_empty() {
                let Some(manager) = manager.upgrade() else {
                    return;
                };
                let Some(kraft) = manager.kraft() else { return };
                let settings = *manager.settings();
                let request = kafka_request(settings.node_id, &settings, &batch);
                in_flight.spawn(async move {
                    let answer = kraft
                        .call_broker(leader, &request, REPLICA_FETCH_VERSION)
                        .await;
                    (batch, answer)
                });
                continue;
            }
        }
        tokio::select! {
            () = fetcher.wake.notified() => {}
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => {
                let Ok((batch, answer)) = done else { continue };
                let Some(manager) = manager.upgrade() else { return };
                let _ = tokio::task::spawn_blocking(move || {
                    deliver(&manager, leader, batch, answer);
                })
                .await;
            }
        }
    }
}

/// The Kafka Fetch for the waiting fetches.
fn kafka_request(
    node_id: i32,
    settings: &super::replicas::ReplicaSettings,
    batch: &Waiting,
) -> KafkaFetch {
    let mut by_topic: HashMap<&str, Vec<FetchPartition>> = HashMap::new();
    for ((topic, index), (_, r)) in batch {
        let mut p = FetchPartition::default();
        p.partition = *index;
        p.current_leader_epoch = r.leader_epoch;
        p.fetch_offset = r.fetch_offset;
        p.last_fetched_epoch = r.last_fetched_epoch.unwrap_or(-1);
        p.log_start_offset = -1;
        p.partition_max_bytes = i32::try_from(settings.fetch_max_bytes).unwrap_or(i32::MAX);
        by_topic.entry(topic).or_default().push(p);
    }
    let mut request = KafkaFetch::default();
    request.replica_id = BrokerId(node_id);
    request.max_wait_ms = i32::try_from(settings.fetch_wait_max_ms).unwrap_or(i32::MAX);
    request.min_bytes = 1;
    request.max_bytes = REPLICA_FETCH_RESPONSE_BYTES_MAX;
    request.isolation_level = 0;
    request.session_id = 0;
    request.session_epoch = -1;
    request.topics = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = FetchTopic::default();
            t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
            t.partitions = partitions;
            t
        })
        .collect();
    request
}

/// Gives each replica of `batch` its answer.
fn deliver(
    manager: &Arc<ReplicaManager>,
    leader: i32,
    batch: Waiting,
    answer: Result<kafka_protocol::messages::FetchResponse, String>,
) {
    let mut found: HashMap<(String, i32), PartitionAnswer> = HashMap::new();
    let failed = match answer {
        Err(e) => {
            tracing::info!(leader, error = %e, "a replica fetch failed");
            Some(ErrorCode::RequestTimedOut)
        }
        Ok(r) if r.error_code != 0 => {
            Some(ErrorCode::from_code(r.error_code).unwrap_or(ErrorCode::UnknownServerError))
        }
        Ok(r) => {
            for topic in r.responses {
                let name = topic.topic.0.to_string();
                for p in topic.partitions {
                    found.insert((name.clone(), p.partition_index), partition_result(p));
                }
            }
            None
        }
    };
    for (key, (slot, request)) in batch {
        let (result, bytes) = match failed {
            Some(code) => (Err(code), None),
            None => found
                .remove(&key)
                .unwrap_or((Err(ErrorCode::UnknownTopicOrPartition), None)),
        };
        let response = FetchResponse {
            leader_id: leader,
            leader_epoch: request.leader_epoch,
            correlation_id: request.correlation_id,
            result,
        };
        slot.fetched(manager, response, bytes);
    }
}

/// One partition's answer: the state machine's view (batch headers) and the bytes.
fn partition_result(p: kafka_protocol::messages::fetch_response::PartitionData) -> PartitionAnswer {
    if p.error_code != 0 {
        let code = ErrorCode::from_code(p.error_code).unwrap_or(ErrorCode::UnknownServerError);
        tracing::info!(
            partition = p.partition_index,
            error = code.name(),
            "the leader refused a replica fetch"
        );
        return (Err(code), None);
    }
    let diverging = (p.diverging_epoch.epoch >= 0).then_some(EpochEndOffset {
        epoch: p.diverging_epoch.epoch,
        end_offset: p.diverging_epoch.end_offset,
    });
    let bytes = p.records.unwrap_or_default();
    let batches = sluice_storage::batch::iter_batches(&bytes)
        .map_while(Result::ok)
        .map(|(h, _)| Batch {
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            leader_epoch: h.partition_leader_epoch,
            producer_id: h.producer_id,
            base_sequence: h.base_sequence,
            payload: u64::from(h.crc),
        })
        .collect();
    let data = FetchData {
        high_watermark: p.high_watermark,
        diverging_epoch: diverging,
        batches,
    };
    (Ok(data), Some(bytes))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
