//! A follower's Fetch (Kafka's `ReplicaId`, v4-v14, or `ReplicaState`, v15+, naming a
//! broker): the leader's side of replication. Needs CLUSTER_ACTION on the cluster (a
//! broker's principal; without it every partition is TOPIC_AUTHORIZATION_FAILED, as Kafka
//! answers). Each partition goes to its replica (`crate::kraft::replicas`), which records
//! the follower's fetch offset (the ISR and the high watermark follow) and answers the high
//! watermark or, when the follower's `LastFetchedEpoch` ends elsewhere in this log, the
//! `DivergingEpoch` (KIP-320; no records then). Records are read from the fetch offset to
//! the log end (not the high watermark: followers copy what consumers cannot read yet), at
//! most `partition_max_bytes` per partition and `max_bytes` (capped by
//! `FETCH_RESPONSE_MAX_BYTES`) in all, whole batches, at least one. When nothing is new the
//! request waits up to its `max_wait_ms` for an append (the follower then asks again at
//! once). A partition this broker does not lead, or that does not replicate, is
//! NOT_LEADER_OR_FOLLOWER; a single node answers every partition so.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_storage::Offset;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Ctx;
use crate::handler::topic_ids::TopicIds;
use crate::limits;
use crate::topics::Partition;

/// The first Fetch version that names the follower in `ReplicaState` (KIP-903).
const REPLICA_STATE_SINCE: i16 = 15;
/// The first Fetch version that names topics by id.
const TOPIC_IDS_SINCE: i16 = 13;

/// The broker a Fetch comes from (its node id and broker epoch), or `None`: a consumer's.
pub fn follower_of(request: &FetchRequest, version: i16) -> Option<(i32, i64)> {
    let (id, epoch) = if version >= REPLICA_STATE_SINCE {
        (
            request.replica_state.replica_id.0,
            request.replica_state.replica_epoch,
        )
    } else {
        (request.replica_id.0, -1)
    };
    (id >= 0).then_some((id, epoch))
}

/// One partition asked for, with what its replica answered.
struct Asked {
    topic: usize,
    index: i32,
    fetch_offset: i64,
    max_bytes: u32,
    partition: Option<Arc<Partition>>,
    answer: Result<(i64, Option<(i32, i64)>), ResponseError>,
}

/// Answers a follower's Fetch (module docs).
pub async fn handle(
    ctx: &Ctx<'_>,
    request: FetchRequest,
    version: i16,
    (replica_id, replica_epoch): (i32, i64),
) -> FetchResponse {
    let (names, asked, by_id) = ask(ctx, &request, version, (replica_id, replica_epoch)).await;
    let max_bytes = u32::try_from(request.max_bytes)
        .ok()
        .filter(|&b| b > 0)
        .map_or(limits::FETCH_RESPONSE_MAX_BYTES, |b| {
            b.min(limits::FETCH_RESPONSE_MAX_BYTES)
        });
    let wait_ms = u64::try_from(request.max_wait_ms)
        .unwrap_or(0)
        .min(limits::FETCH_MAX_WAIT_MS_MAX);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let mut wakers: Vec<watch::Receiver<i64>> = asked
        .iter()
        .filter(|a| a.answer.as_ref().is_ok_and(|(_, d)| d.is_none()))
        .filter_map(|a| a.partition.as_ref().map(|p| p.subscribe()))
        .collect();
    let asked = Arc::new(asked);
    let mut shutdown = ctx.client.shutdown.clone();
    loop {
        let reading = Arc::clone(&asked);
        let read = tokio::task::spawn_blocking(move || read_all(&reading, max_bytes))
            .await
            .unwrap_or_default();
        let bytes: usize = read.iter().map(|r| r.as_ref().map_or(0, |b| b.len())).sum();
        let decided = asked
            .iter()
            .any(|a| a.answer.as_ref().map_or(true, |(_, d)| d.is_some()));
        if bytes > 0 || decided || Instant::now() >= deadline || *shutdown.borrow() {
            return respond(&names, &asked, read, by_id);
        }
        tokio::select! {
            () = any_changed(&mut wakers) => {}
            () = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Each asked partition with its replica's answer (in request order), the topics' names and
/// ids, and whether they are named by id (v13+). The replicas answer on the blocking pool,
/// all partitions in one hand-off.
async fn ask(
    ctx: &Ctx<'_>,
    request: &FetchRequest,
    version: i16,
    (replica_id, replica_epoch): (i32, i64),
) -> (Vec<(String, uuid::Uuid)>, Vec<Asked>, bool) {
    let allowed = ctx.auth.cluster(AclOperation::ClusterAction);
    let ids = (version >= TOPIC_IDS_SINCE).then(|| TopicIds::of(ctx.topics));
    let mut names = Vec::with_capacity(request.topics.len());
    let mut asked = Vec::new();
    let mut followers = Vec::new();
    for (t, topic) in request.topics.iter().enumerate() {
        let name = match &ids {
            Some(ids) => ids.name(&topic.topic_id).unwrap_or_default(),
            None => topic.topic.0.to_string(),
        };
        for p in &topic.partitions {
            let partition = ctx.topics.partition(&name, p.partition);
            let answer = if !allowed {
                Err(ResponseError::TopicAuthorizationFailed)
            } else if partition.is_none() {
                Err(if name.is_empty() && ids.is_some() {
                    ResponseError::UnknownTopicId
                } else {
                    ResponseError::UnknownTopicOrPartition
                })
            } else {
                followers.push((
                    asked.len(),
                    name.clone(),
                    p.partition,
                    sluice_replica::FetchRequest {
                        replica_id,
                        replica_epoch,
                        leader_epoch: p.current_leader_epoch,
                        fetch_offset: p.fetch_offset,
                        last_fetched_epoch: (p.last_fetched_epoch >= 0)
                            .then_some(p.last_fetched_epoch),
                        correlation_id: 0,
                    },
                ));
                Err(ResponseError::NotLeaderOrFollower)
            };
            asked.push(Asked {
                topic: t,
                index: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: u32::try_from(p.partition_max_bytes).unwrap_or(0),
                partition,
                answer,
            });
        }
        names.push((name, topic.topic_id));
    }
    if let Some(replicas) = ctx.kraft.map(|k| Arc::clone(k.replicas())) {
        let answers = tokio::task::spawn_blocking(move || {
            followers
                .into_iter()
                .map(|(slot, name, index, follower)| {
                    (slot, serve(&replicas, &name, index, follower))
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for (slot, answer) in answers {
            asked[slot].answer = answer;
        }
    }
    (names, asked, ids.is_some())
}

/// The replica's answer for one partition: its high watermark and diverging epoch.
fn serve(
    replicas: &Arc<crate::kraft::replicas::ReplicaManager>,
    topic: &str,
    index: i32,
    follower: sluice_replica::FetchRequest,
) -> Result<(i64, Option<(i32, i64)>), ResponseError> {
    match replicas.serve_fetch(topic, index, follower) {
        Ok(data) => Ok((
            data.high_watermark,
            data.diverging_epoch.map(|d| (d.epoch, d.end_offset)),
        )),
        Err(code) => {
            Err(ResponseError::try_from_code(code.code())
                .unwrap_or(ResponseError::UnknownServerError))
        }
    }
}

/// Each partition's records from its fetch offset (`None`: none read), within the budgets.
fn read_all(asked: &[Asked], max_bytes: u32) -> Vec<Option<Bytes>> {
    let mut remaining = max_bytes;
    asked
        .iter()
        .map(|a| {
            let (Ok((_, None)), Some(partition)) = (&a.answer, &a.partition) else {
                return None;
            };
            let first = remaining == max_bytes;
            let budget = a.max_bytes.min(remaining).max(u32::from(first));
            if budget == 0 {
                return None;
            }
            let read = partition.with_log(|log| {
                if a.fetch_offset >= log.log_end_offset().value() {
                    return Ok(None);
                }
                let slice = log.read(Offset(a.fetch_offset), budget)?;
                Ok::<_, sluice_storage::ReadError>(Some(slice.read_to_vec()?))
            });
            match read {
                Ok(Ok(Some(bytes))) if !bytes.is_empty() => {
                    remaining = remaining.saturating_sub(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
                    Some(Bytes::from(bytes))
                }
                Ok(Ok(_)) => None,
                Ok(Err(e)) => {
                    tracing::warn!(topic = %partition.topic, partition = partition.index, error = %e, "reading for a follower failed");
                    None
                }
                Err(_) => None,
            }
        })
        .collect()
}

/// The response, in request order.
fn respond(
    names: &[(String, uuid::Uuid)],
    asked: &[Asked],
    read: Vec<Option<Bytes>>,
    by_id: bool,
) -> FetchResponse {
    let mut topics: Vec<FetchableTopicResponse> = names
        .iter()
        .map(|(name, id)| {
            let mut t = FetchableTopicResponse::default();
            if by_id {
                t.topic_id = *id;
            } else {
                t.topic = TopicName(StrBytes::from_string(name.clone()));
            }
            t
        })
        .collect();
    for (a, records) in asked.iter().zip(read) {
        let mut p = PartitionData::default();
        p.partition_index = a.index;
        match a.answer {
            Err(error) => {
                p.error_code = error.code();
                p.high_watermark = -1;
                p.last_stable_offset = -1;
                p.log_start_offset = -1;
            }
            Ok((hw, diverging)) => {
                let (start, stable) = a.partition.as_ref().map_or((-1, -1), |partition| {
                    partition
                        .with_log(|log| {
                            let hw = Offset(hw.min(log.log_end_offset().value()));
                            (
                                log.log_start_offset().value(),
                                log.last_stable_offset().min(hw).value(),
                            )
                        })
                        .unwrap_or((-1, -1))
                });
                // The current high watermark (it may have moved during the wait).
                p.high_watermark = a
                    .partition
                    .as_ref()
                    .and_then(|p| p.high_watermark())
                    .unwrap_or(hw);
                p.last_stable_offset = stable;
                p.log_start_offset = start;
                if let Some((epoch, end_offset)) = diverging {
                    let mut d = EpochEndOffset::default();
                    d.epoch = epoch;
                    d.end_offset = end_offset;
                    p.diverging_epoch = d;
                }
                p.records = Some(records.unwrap_or_default());
            }
        }
        topics[a.topic].partitions.push(p);
    }
    let mut response = FetchResponse::default();
    response.responses = topics;
    response
}

/// Resolves when any receiver sees a new value.
async fn any_changed(receivers: &mut [watch::Receiver<i64>]) {
    if receivers.is_empty() {
        return std::future::pending().await;
    }
    let changes = receivers.iter_mut().map(|r| Box::pin(r.changed()));
    let _ = futures_util::future::select_all(changes).await;
}
