//! Appending one client batch set to one partition: the step both produce paths end in
//! (`handler/produce_fetch/produce.rs` for a topic's own partitions, `reroute/` for the partitions a
//! partitioner plugin chose), with the partition's metrics and fetch wake-up, and the
//! Kafka error an append failure answers with. A fenced partition refuses every append
//! until its fence lifts; that is logged once per interval with the count suppressed
//! (`repeated.rs`), not once per retry.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use sluice_storage::{AppendError, Durability, TxnAppend};

use super::{Partition, TopicRegistry};
use crate::error::KafkaError;

/// What an append gave back, for the response.
pub(crate) struct Appended {
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// The partition and its log end after the append (what acks=all waits for).
    pub partition: Arc<Partition>,
    pub end_offset: i64,
}

/// Appends a client's batches (`Log::append_produced`): transactional batches only under
/// `txn`, the transaction `crate::txn::verify` confirmed with the coordinator.
pub(crate) fn append_one(
    topics: &TopicRegistry,
    topic: &str,
    index: i32,
    records: Option<Bytes>,
    txn: Option<&TxnAppend<'_>>,
) -> Result<Appended, KafkaError> {
    let partition = topics.partition(topic, index).ok_or_else(|| {
        if topics.view(topic).is_some() {
            return super::read_only(topic);
        }
        KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown partition {topic}-{index}"),
        )
    })?;
    partition.check_leader()?;
    let records = records
        .filter(|r| !r.is_empty())
        .ok_or_else(|| KafkaError::new(ResponseError::CorruptMessage, "no records"))?;
    // The storage engine rewrites base offsets in place, so it needs the bytes to itself:
    // free when the frame's buffer is no longer shared (a request's last partition, see
    // the produce path in `handler/produce_fetch/mod.rs`), a copy otherwise.
    let mut batches = records
        .try_into_mut()
        .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
    let (outcome, end_offset) = partition.with_log(|log| {
        let outcome = log.append_produced(&mut batches, Durability::OsCache, topics.now_ms(), txn);
        (outcome, log.log_end_offset().value())
    })?;
    let outcome = outcome.map_err(|e| {
        partition.metrics.produce_errors.fetch_add(1, Relaxed);
        append_error(&partition, e, topics.now_ms())
    })?;
    if outcome.duplicate {
        // An idempotent producer's retry: the original offsets, and acks=all waits for the
        // original's durability.
        tracing::debug!(
            topic,
            partition = index,
            base_offset = outcome.base_offset.value(),
            "duplicate batch acknowledged with its original offsets"
        );
        partition.metrics.produce_duplicates.fetch_add(1, Relaxed);
        return Ok(Appended {
            base_offset: outcome.base_offset.value(),
            log_append_time_ms: outcome.log_append_time_ms,
            log_start_offset: outcome.log_start_offset.value(),
            end_offset: outcome.last_offset.value() + 1,
            partition,
        });
    }
    partition
        .metrics
        .appended(outcome.record_count, outcome.bytes);
    partition.notify_appended(end_offset);
    Ok(Appended {
        base_offset: outcome.base_offset.value(),
        log_append_time_ms: outcome.log_append_time_ms,
        log_start_offset: outcome.log_start_offset.value(),
        end_offset: outcome.last_offset.value() + 1,
        partition,
    })
}

/// The Kafka error an append failure answers with (a fenced partition's refusals logged
/// once per interval, `broker/repeated.rs`).
pub(crate) fn append_error(partition: &Partition, error: AppendError, now_ms: i64) -> KafkaError {
    let (topic, index) = (partition.topic.as_str(), partition.index);
    let context = format!("{topic}-{index}");
    let error = match &error {
        AppendError::InvalidBatch(e) => KafkaError::from_batch(&context, e),
        AppendError::Fenced | AppendError::Io(_) => {
            match partition.append_failures.note(now_ms) {
                Some(suppressed) => {
                    tracing::error!(topic, partition = index, error = %error, suppressed_since_last = suppressed, "append failed; partition fenced");
                }
                None => {
                    tracing::debug!(topic, partition = index, error = %error, "append failed; partition fenced");
                }
            }
            KafkaError::from_code(error.error_code(), format!("{context}: {error}"))
        }
        _ => KafkaError::from_code(error.error_code(), format!("{context}: {error}")),
    };
    if error.code != ResponseError::KafkaStorageError {
        tracing::debug!(topic, partition = index, error = %error.message, "append refused");
    }
    error
}
