//! Fetch v4-v11: whole stored batches from each requested offset, as file ranges (sent with
//! sendfile by the connection writer). Long poll: when fewer than `min_bytes` are ready the
//! request waits, woken by appends to its partitions (watch channels), until `max_wait_ms`.
//! A replicated partition is read below its high watermark. A partition refused
//! NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its current leader (v12+) and v16+
//! responses carry those leaders' endpoints (KIP-951, `leader_hint.rs`). A follower's fetch
//! is `replica_fetch.rs`.
//! Sessionless (session_id 0); no preferred read replica. A partition listed twice gets
//! INVALID_REQUEST in every entry and is not read (the copies would each do the work).
//!
//! A view (`crate::views`) reads its source partition the same way (under read_committed:
//! below the source's last stable offset, with the source's aborted transactions), then runs
//! the bytes through its plugins on the blocking pool, dropping aborted transactions' batches
//! before the plugins, and sends the re-encoded batches from memory. Reading a view needs
//! READ on the view and its owner's current READ on the source and on each stage's plugin
//! (`authz::read_through`): without them its partitions are TOPIC_AUTHORIZATION_FAILED, also
//! for a fetch that was waiting in a long poll when a right went (asked again at each wake).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_storage::{AbortedTxn, Offset, ReadError};
use tokio::sync::watch;
use tokio::time::Instant;

use sluice_protocol::fetch_response;

/// The fetch response, its record sets as chunks (file ranges, or a view's bytes).
type FetchOutput = fetch_response::FetchOutput<Chunk>;
type TopicOutput = fetch_response::TopicOutput<Chunk>;
type PartitionOutput = fetch_response::PartitionOutput<Chunk>;
use super::kip110;

use super::Ctx;
use crate::handler::topic_ids::TopicIds;
use crate::limits;
use crate::topics::Partition;
use crate::topics::ViewTopic;
use crate::wire::Chunk;

/// One requested partition.
#[derive(Clone)]
struct Target {
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: u32,
    partition: Option<Arc<Partition>>,
    /// Set when the name is a view: `partition` is its source's.
    view: Option<Arc<ViewTopic>>,
    /// For binding a view's plugins (a view loaded while its plugin was missing).
    registry: Arc<sluice_plugin_host::Registry>,
    /// Answered with this error and nothing read: INVALID_REQUEST when the request lists
    /// the partition more than once, TOPIC_AUTHORIZATION_FAILED without READ on the topic
    /// (on the view, for a view).
    refused: Option<ResponseError>,
    /// KIP-951: the current leader and epoch, named when refused for not leading (or a
    /// fenced epoch).
    leader_hint: Option<(i32, i32)>,
}

/// Answers Fetch.
pub async fn handle(ctx: &Ctx<'_>, mut request: FetchRequest, version: i16) -> FetchOutput {
    let wait_ms = u64::try_from(request.max_wait_ms)
        .unwrap_or(0)
        .min(limits::FETCH_MAX_WAIT_MS_MAX);
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    let min_bytes = u64::try_from(request.min_bytes).unwrap_or(0);
    let max_bytes = u32::try_from(request.max_bytes)
        .ok()
        .filter(|&b| b > 0)
        .map_or(limits::FETCH_RESPONSE_MAX_BYTES, |b| {
            b.min(limits::FETCH_RESPONSE_MAX_BYTES)
        });
    let read_committed = request.isolation_level == 1;
    // v13+ name topics by id: named here, and the ids put back on the way out.
    let ids = (version >= FIRST_TOPIC_ID).then(|| name_by_id(ctx, &mut request.topics));
    let mut targets = resolve(ctx, std::mem::take(&mut request.topics));
    // Nothing of the frame stays through the long poll (targets own their names).
    drop(request);
    // Subscribe before the first read, so an append between the read and the wait still wakes us.
    let mut wakers: Vec<watch::Receiver<i64>> = targets
        .iter()
        .flat_map(|(_, ps)| {
            ps.iter()
                .filter_map(|t| t.partition.as_ref().map(|p| p.subscribe()))
        })
        .collect();
    let mut shutdown = ctx.client.shutdown.clone();
    loop {
        // Reads take the partition lock, which an fsyncing append may hold: off the runtime.
        let reading = targets.clone();
        let Ok((output, bytes, errors)) = tokio::task::spawn_blocking(move || {
            read_all(&reading, max_bytes, version, read_committed)
        })
        .await
        else {
            return FetchOutput {
                error_code: ResponseError::UnknownServerError.code(),
                ..FetchOutput::default()
            };
        };
        if bytes >= min_bytes || errors || Instant::now() >= deadline || *shutdown.borrow() {
            let output = with_endpoints(ctx, output, version);
            return with_ids(output, ids.as_deref());
        }
        drop(output);
        let parked = ctx.metrics.park_fetch();
        tokio::select! {
            () = any_changed(&mut wakers) => {}
            () = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {}
        }
        drop(parked);
        targets = recheck_views(ctx, targets);
    }
}

/// The first Fetch version whose response carries the hinted leaders' endpoints (KIP-951).
const NODE_ENDPOINTS_SINCE: i16 = 16;

/// v16+: the endpoints of the leaders the refused partitions name (`leader_hint.rs`).
fn with_endpoints(ctx: &Ctx<'_>, mut output: FetchOutput, version: i16) -> FetchOutput {
    if version < NODE_ENDPOINTS_SINCE {
        return output;
    }
    let leaders: std::collections::BTreeSet<i32> = output
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().filter_map(|p| p.current_leader))
        .map(|(leader, _)| leader)
        .collect();
    output.node_endpoints = super::leader_hint::endpoints(ctx, &leaders)
        .into_iter()
        .map(|e| fetch_response::NodeEndpoint {
            node_id: e.node_id,
            host: e.host,
            port: e.port,
            rack: e.rack,
        })
        .collect();
    output
}

/// The first Fetch version that names topics by id instead of by name.
const FIRST_TOPIC_ID: i16 = 13;

/// Names each of `topics` by its topic id (a topic's, or a view's, derived from its name),
/// and returns the ids in request order, `None` for an id no topic or view has (its
/// partitions are answered UNKNOWN_TOPIC_ID by [`with_ids`]).
fn name_by_id(ctx: &Ctx<'_>, topics: &mut [FetchTopic]) -> Vec<(uuid::Uuid, bool)> {
    let known = TopicIds::of(ctx.topics);
    topics
        .iter_mut()
        .map(|topic| {
            let name = known.name(&topic.topic_id);
            let found = name.is_some();
            topic.topic = TopicName(StrBytes::from_string(name.unwrap_or_default()));
            (topic.topic_id, found)
        })
        .collect()
}

/// `output` with each topic's id as the request gave it (v13+), and UNKNOWN_TOPIC_ID for
/// the partitions of an id no topic has.
fn with_ids(mut output: FetchOutput, ids: Option<&[(uuid::Uuid, bool)]>) -> FetchOutput {
    let Some(ids) = ids else {
        return output;
    };
    for (topic, &(id, found)) in output.topics.iter_mut().zip(ids) {
        topic.topic_id = id.into_bytes();
        if !found {
            for partition in &mut topic.partitions {
                *partition = PartitionOutput {
                    error_code: ResponseError::UnknownTopicId.code(),
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    aborted_transactions: None,
                    records: None,
                    current_leader: None,
                    index: partition.index,
                };
            }
        }
    }
    output
}

/// `targets` with the partitions of every view that may no longer be read refused: a view
/// reads with its owner's rights as they are at each read, so a fetch that waited through
/// an ACL deletion returns TOPIC_AUTHORIZATION_FAILED instead of the records appended since.
fn recheck_views(
    ctx: &Ctx<'_>,
    targets: Arc<[(String, Vec<Target>)]>,
) -> Arc<[(String, Vec<Target>)]> {
    let reads_a_view = |ps: &[Target]| ps.iter().any(|t| t.view.is_some() && t.refused.is_none());
    let revoked: Vec<&str> = targets
        .iter()
        .filter(|(name, ps)| {
            reads_a_view(ps) && !ctx.auth.read_through(ctx.topics, AclOperation::Read, name)
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if revoked.is_empty() {
        return targets;
    }
    let refuse = |t: &Target| Target {
        partition: None,
        view: None,
        refused: Some(ResponseError::TopicAuthorizationFailed),
        leader_hint: None,
        ..t.clone()
    };
    targets
        .iter()
        .map(|(name, ps)| {
            let now_refused = revoked.contains(&name.as_str());
            let ps = ps
                .iter()
                .map(|t| match now_refused && t.view.is_some() {
                    true => refuse(t),
                    false => t.clone(),
                })
                .collect();
            (name.clone(), ps)
        })
        .collect()
}

/// Looks up every requested partition once; unknown ones stay `None`.
fn resolve(ctx: &Ctx<'_>, topics: Vec<FetchTopic>) -> Arc<[(String, Vec<Target>)]> {
    let duplicates = super::duplicates(topics.iter().flat_map(|t| {
        t.partitions
            .iter()
            .map(|p| (t.topic.0.as_str(), p.partition))
    }));
    let duplicates: std::collections::HashSet<(String, i32)> = duplicates
        .into_iter()
        .map(|(name, index)| (name.to_owned(), index))
        .collect();
    topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let readable = ctx.auth.read_through(ctx.topics, AclOperation::Read, &name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let refused = if !readable {
                        Some(ResponseError::TopicAuthorizationFailed)
                    } else if duplicates.contains(&(name.clone(), p.partition)) {
                        Some(ResponseError::InvalidRequest)
                    } else {
                        None
                    };
                    let (partition, view) = if refused.is_some() {
                        (None, None)
                    } else {
                        ctx.topics
                            .read_partition(&name, p.partition)
                            .map_or((None, None), |(p, v)| (Some(p), v))
                    };
                    let refused = refused.or_else(|| {
                        let found = partition.as_ref()?;
                        (found.check_leader().err().map(|e| e.code))
                            .or_else(|| found.check_leader_epoch(p.current_leader_epoch).err())
                    });
                    let leader_hint = match refused {
                        Some(
                            ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch,
                        ) => partition.as_deref().and_then(super::leader_hint::leader_of),
                        _ => None,
                    };
                    if let Some(view) = &view {
                        // An ephemeral view stays while fetched, even at the end of the log.
                        view.touch(ctx.clock.now_ms());
                    }
                    Target {
                        index: p.partition,
                        fetch_offset: p.fetch_offset,
                        partition_max_bytes: u32::try_from(p.partition_max_bytes).unwrap_or(0),
                        partition,
                        view,
                        registry: Arc::clone(ctx.plugins),
                        refused,
                        leader_hint,
                    }
                })
                .collect();
            (name, partitions)
        })
        .collect()
}

/// Resolves when any receiver sees a new value.
async fn any_changed(receivers: &mut [watch::Receiver<i64>]) {
    if receivers.is_empty() {
        return std::future::pending().await;
    }
    let mut changes: Vec<Pin<Box<_>>> = receivers
        .iter_mut()
        .map(|r| Box::pin(r.changed()))
        .collect();
    poll_fn(|cx| {
        if changes.iter_mut().any(|c| c.as_mut().poll(cx).is_ready()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// Reads every target once; returns the response, its record bytes, and whether any
/// partition had an error (which answers the fetch at once).
fn read_all(
    targets: &[(String, Vec<Target>)],
    max_bytes: u32,
    version: i16,
    read_committed: bool,
) -> (FetchOutput, u64, bool) {
    let mut remaining = max_bytes;
    let mut total: u64 = 0;
    let mut errors = false;
    let topics = targets
        .iter()
        .map(|(name, partitions)| TopicOutput {
            name: name.clone(),
            topic_id: [0; 16],
            partitions: partitions
                .iter()
                .map(|t| {
                    let out = read_one(t, remaining, total == 0, version, read_committed);
                    let len = out.records.as_ref().map_or(0, chunk_len);
                    remaining = remaining.saturating_sub(len);
                    total += u64::from(len);
                    errors |= out.error_code != 0;
                    out
                })
                .collect(),
        })
        .collect();
    (
        FetchOutput {
            topics,
            ..FetchOutput::default()
        },
        total,
        errors,
    )
}

/// The bytes of `slice` (whole batches of the view's source partition) through the view,
/// the records of `aborted` transactions dropped before the plugins (read_committed).
fn read_view(
    target: &Target,
    view: &ViewTopic,
    slice: &sluice_storage::ReadSlice,
    aborted: &[AbortedTxn],
) -> Result<Vec<u8>, crate::error::KafkaError> {
    let chain = view
        .view(&target.registry)
        .map_err(|e| crate::error::KafkaError::new(ResponseError::UnknownServerError, e.message))?;
    crate::views::apply_slice(&chain, view.name(), slice, aborted)
}

fn chunk_len(chunk: &Chunk) -> u32 {
    match chunk {
        Chunk::Bytes(b) => b.len() as u32,
        Chunk::File(s) => s.len,
    }
}

/// Reads one partition within `remaining` bytes. The first non-empty partition of a response
/// may exceed the limits by one batch (KIP-74), so a consumer never gets stuck on a big batch.
/// The slice (if there is a budget), high watermark, log start, last stable offset and,
/// for read_committed, the aborted transactions.
type LogRead = (
    Option<Result<sluice_storage::ReadSlice, ReadError>>,
    i64,
    i64,
    i64,
    Option<Vec<AbortedTxn>>,
);

/// A replicated partition's `hw` bounds the read (consumers read below the high
/// watermark; the last stable offset is at most it).
fn read_log(
    log: &sluice_storage::Log,
    fetch_offset: i64,
    budget: u32,
    read_committed: bool,
    hw: Option<i64>,
) -> LogRead {
    let from = Offset(fetch_offset);
    let end = log.log_end_offset();
    let high_watermark = hw.map_or(end, |hw| Offset(hw.min(end.value())));
    let lso = log.last_stable_offset().min(high_watermark);
    let slice = match (budget, read_committed) {
        (0, _) => None,
        (_, false) if hw.is_none() => Some(log.read(from, budget)),
        (_, false) => Some(log.read_below(from, budget, high_watermark)),
        (_, true) => Some(log.read_below(from, budget, lso)),
    };
    let aborted = read_committed.then(|| log.aborted_transactions(from, lso));
    (
        slice,
        high_watermark.value(),
        log.log_start_offset().value(),
        lso.value(),
        aborted,
    )
}

/// read_committed reads stop at the last stable offset and carry the aborted transactions
/// they overlap (consumers drop those records; a view drops them before its plugins).
fn read_one(
    target: &Target,
    remaining: u32,
    first: bool,
    version: i16,
    read_committed: bool,
) -> PartitionOutput {
    let mut out = PartitionOutput {
        index: target.index,
        error_code: 0,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted_transactions: None,
        records: None,
        current_leader: None,
    };
    if let Some(error) = target.refused {
        out.error_code = error.code();
        out.current_leader = target.leader_hint;
        return out;
    }
    let Some(partition) = &target.partition else {
        out.error_code = ResponseError::UnknownTopicOrPartition.code();
        return out;
    };
    let budget = target.partition_max_bytes.min(remaining);
    let hw = partition.high_watermark();
    let read =
        partition.with_log(|log| read_log(log, target.fetch_offset, budget, read_committed, hw));
    let (slice, end, start, lso, aborted) = match read {
        Ok(r) => r,
        Err(e) => {
            out.error_code = e.code.code();
            return out;
        }
    };
    out.high_watermark = end;
    out.last_stable_offset = lso;
    out.log_start_offset = start;
    out.aborted_transactions = aborted.as_ref().map(|list| {
        list.iter()
            .map(|t| (t.producer_id, t.first_offset))
            .collect()
    });
    match slice {
        None => {}
        Some(Ok(slice)) if slice.is_empty() => {}
        Some(Ok(slice)) if slice.len > budget && !first => {}
        Some(Ok(slice)) => match kip110::fetch_refuses(&slice, version) {
            Ok(false) => match &target.view {
                None => {
                    partition.metrics.fetched(&slice);
                    out.records = Some(Chunk::File(slice));
                }
                Some(view) => {
                    match read_view(target, view, &slice, aborted.as_deref().unwrap_or(&[])) {
                        Ok(bytes) => out.records = Some(Chunk::Bytes(bytes.into())),
                        Err(e) => out.error_code = e.code.code(),
                    }
                }
            },
            Ok(true) => out.error_code = ResponseError::UnsupportedCompressionType.code(),
            Err(e) => {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "read failed");
                out.error_code = ResponseError::KafkaStorageError.code();
            }
        },
        Some(Err(ReadError::OffsetOutOfRange { .. })) => {
            out.error_code = ResponseError::OffsetOutOfRange.code()
        }
        Some(Err(e)) => {
            tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "read failed");
            out.error_code = ResponseError::KafkaStorageError.code();
        }
    }
    out
}
