//! ListOffsets v1-v11: earliest (-2) is the log start offset, latest (-1) the log end offset,
//! any other timestamp the first record whose timestamp is at or after it (-1/-1 when there
//! is none): the storage engine finds the batch through the time index and walks its
//! records, decompressing a compressed batch with `codec` (bounded), as Kafka does. A
//! partition listed twice is INVALID_REQUEST in every entry, as in Kafka. v4+ answers the
//! leader epoch the offset was appended in and checks the `current_leader_epoch` the client
//! knows (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320).
//!
//! v6+ are flexible. The sentinels of the later versions are answered at any version, as
//! Kafka does: -3 (v7, KIP-734) the record with the largest timestamp, the first of equals,
//! with that timestamp; -4 (v8, KIP-405's earliest local offset) the log start offset, as
//! Kafka answers without tiered storage; -5 (v9, KIP-1005's latest tiered offset) -1 with
//! epoch -1, as Kafka answers without tiered storage, and so is -6 (v11, KIP-1023's earliest
//! offset pending upload to remote storage: Kafka's `fetchEarliestPendingUploadOffset` without
//! remote storage). v10's timeout bounds only remote storage reads: there are none. Under read_committed an answer at or past the last stable
//! offset is none (-1/-1), as Kafka filters every lookup but earliest and latest.
//! A replicated partition answers latest with its high watermark (and finds by time only
//! below it); a new leader whose high watermark is still below the start of its epoch
//! answers OFFSET_NOT_AVAILABLE to all but earliest (KIP-207), and the client retries.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use sluice_storage::Offset;

use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::codec;
use crate::topics::TopicRegistry;

/// Kafka's "earliest" sentinel timestamp.
const EARLIEST_TIMESTAMP: i64 = -2;
/// Kafka's "latest" sentinel timestamp.
const LATEST_TIMESTAMP: i64 = -1;
/// KIP-734's "largest timestamp" sentinel (v7+).
const MAX_TIMESTAMP: i64 = -3;
/// KIP-405's "earliest local" sentinel (v8+): the log start offset without tiered storage.
const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
/// KIP-1005's "latest tiered" sentinel (v9+): none without tiered storage.
const LATEST_TIERED_TIMESTAMP: i64 = -5;
/// KIP-1023's "earliest pending upload" sentinel (v11+): none without tiered storage.
const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;

/// Answers ListOffsets.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    // Without DESCRIBE on a topic (on a view: the VIEW resource, and its owner's READ on the
    // source, `authz::read_through`): TOPIC_AUTHORIZATION_FAILED for its partitions.
    let denied: std::collections::HashSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|name| {
            !ctx.auth
                .read_through(ctx.topics, AclOperation::Describe, name)
        })
        .collect();
    let registry = Arc::clone(ctx.topics);
    let read_committed = request.isolation_level == 1;
    let topics = tokio::task::spawn_blocking(move || {
        let duplicates = super::duplicates(request.topics.iter().flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.as_str(), p.partition_index))
        }));
        request
            .topics
            .iter()
            .map(|topic| {
                let name = topic.name.0.as_str();
                let mut out = ListOffsetsTopicResponse::default();
                out.partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        if denied.contains(name) {
                            return refused(
                                p.partition_index,
                                ResponseError::TopicAuthorizationFailed,
                            );
                        }
                        if duplicates.contains(&(name, p.partition_index)) {
                            return refused(p.partition_index, ResponseError::InvalidRequest);
                        }
                        let mut found = lookup(&registry, name, p, read_committed);
                        if version < 4 {
                            found.leader_epoch = -1; // no such field before v4
                        }
                        found
                    })
                    .collect();
                out.name = topic.name.clone();
                out
            })
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "list offsets task failed");
        Vec::new()
    });
    let mut response = ListOffsetsResponse::default();
    response.topics = topics;
    response
}

/// A partition answered with `error` and nothing looked up: INVALID_REQUEST for one the
/// request lists more than once (as Kafka answers it), TOPIC_AUTHORIZATION_FAILED.
fn refused(index: i32, error: ResponseError) -> ListOffsetsPartitionResponse {
    let mut out = ListOffsetsPartitionResponse::default();
    out.partition_index = index;
    out.timestamp = -1;
    out.offset = -1;
    out.leader_epoch = -1;
    out.error_code = error.code();
    out
}

/// The offset `asked.timestamp` names, with the leader epoch it was appended in (v4+).
fn lookup(
    topics: &TopicRegistry,
    topic: &str,
    asked: &ListOffsetsPartition,
    read_committed: bool,
) -> ListOffsetsPartitionResponse {
    let index = asked.partition_index;
    let mut out = ListOffsetsPartitionResponse::default();
    out.partition_index = index;
    out.timestamp = -1;
    out.offset = -1;
    out.leader_epoch = -1;
    let Some((partition, _)) = topics.read_partition(topic, index) else {
        out.error_code = ResponseError::UnknownTopicOrPartition.code();
        return out;
    };
    if let Err(error) = partition.check_leader() {
        out.error_code = error.code.code();
        return out;
    }
    if let Err(error) = partition.check_leader_epoch(asked.current_leader_epoch) {
        out.error_code = error.code();
        return out;
    }
    if matches!(
        asked.timestamp,
        LATEST_TIERED_TIMESTAMP | EARLIEST_PENDING_UPLOAD_TIMESTAMP
    ) {
        return out;
    }
    let hw = partition.high_watermark();
    // KIP-207: a new leader whose high watermark has not reached its epoch's start does not
    // know yet where the committed log ends.
    if let (Some(hw), Some(start)) = (hw, partition.leader_epoch_start())
        && hw < start
        && !matches!(
            asked.timestamp,
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP
        )
    {
        out.error_code = ResponseError::OffsetNotAvailable.code();
        return out;
    }
    let found = partition.with_log(|log| find(log, asked.timestamp, read_committed, hw));
    match found {
        Ok(Ok(Some((offset, ts, epoch)))) => {
            out.offset = offset;
            out.timestamp = ts;
            out.leader_epoch = epoch;
        }
        Ok(Ok(None)) => {}
        Ok(Err(e)) => {
            tracing::error!(topic, partition = index, error = %e, "time index lookup failed");
            out.error_code = ResponseError::KafkaStorageError.code();
        }
        Err(e) => out.error_code = e.code.code(),
    }
    out
}

/// The offset and timestamp `timestamp` names in `log`, with the leader epoch of the offset.
/// A replicated partition's `hw` bounds what a consumer may be told (Kafka: latest is the
/// high watermark, and an offset found by time must be below it).
fn find(
    log: &sluice_storage::Log,
    timestamp: i64,
    read_committed: bool,
    hw: Option<i64>,
) -> Result<Option<(i64, i64, i32)>, sluice_storage::StorageError> {
    let decompress = Some(&codec::decompress_for_timestamp_lookup as _);
    let end = log.log_end_offset();
    let high_watermark = hw.map_or(end, |hw| Offset(hw.min(end.value())));
    let stable = log.last_stable_offset().min(high_watermark);
    let found = match timestamp {
        EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => Some((log.log_start_offset(), -1)),
        // read_committed (isolation_level 1, v2+): the last stable offset.
        LATEST_TIMESTAMP if read_committed => Some((stable, -1)),
        LATEST_TIMESTAMP => Some((high_watermark, -1)),
        MAX_TIMESTAMP => log.max_timestamp_with(decompress)?,
        ts => log.offset_for_timestamp_with(ts, decompress)?,
    };
    // Kafka's `allowed`: only earliest and latest may name an offset past what the
    // isolation level lets a consumer read.
    let readable = |offset: Offset| {
        matches!(timestamp, EARLIEST_TIMESTAMP | LATEST_TIMESTAMP)
            || match (read_committed, hw) {
                (true, _) => offset < stable,
                (false, Some(_)) => offset < high_watermark,
                (false, None) => true,
            }
    };
    Ok(found
        .filter(|(offset, _)| readable(*offset))
        .map(|(offset, ts)| (offset.value(), ts, log.leader_epoch_at(offset))))
}
