//! `LogConfig`: the per-topic settings the log obeys, named as Kafka names them.

use crate::error::StorageError;
use crate::limits;

/// `message.timestamp.type`: whose clock stamps a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// The producer's timestamps are kept as sent.
    #[default]
    CreateTime,
    /// The broker overwrites each batch's max timestamp with its append time.
    LogAppendTime,
}

/// How durable an append must be before `append` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Leave the bytes in the OS page cache (Kafka's default; `flush.*` still apply).
    #[default]
    OsCache,
    /// fsync the segment (and the directory, if the append created a segment) before
    /// returning: acks=all on a single node.
    Fsync,
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Per-partition log settings. `Default` gives Kafka's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would grow past this.
    pub segment_bytes: u32,
    /// `segment.ms`: roll the active segment once its first append is this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: preallocated size of each index file; a full index rolls.
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: bytes of batches between two offset-index entries.
    pub index_interval_bytes: u32,
    /// `retention.ms`: delete sealed segments whose newest timestamp is older; -1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest sealed segments while the log is larger; -1 = no cap.
    pub retention_bytes: i64,
    /// `flush.messages`: fsync after this many unflushed records; `u64::MAX` = never.
    pub flush_messages: u64,
    /// `flush.ms`: fsync when the oldest unflushed append is this old; `u64::MAX` = never.
    pub flush_ms: u64,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.max.bytes`: largest batch accepted, in bytes.
    pub max_message_bytes: u32,
    /// `producer.id.expiration.ms`: forget a producer (its sequence numbers) this long
    /// after its newest batch, if it has no open transaction.
    pub producer_id_expiration_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * DAY_MS,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            flush_messages: u64::MAX,
            flush_ms: u64::MAX,
            message_timestamp_type: TimestampType::CreateTime,
            max_message_bytes: 1_048_588,
            producer_id_expiration_ms: DAY_MS,
        }
    }
}

impl LogConfig {
    /// Checks every key against its limit; nothing is silently clamped.
    pub fn validate(&self) -> Result<(), StorageError> {
        check(
            "segment.bytes",
            i64::from(self.segment_bytes),
            i64::from(limits::SEGMENT_BYTES_MIN),
            i64::from(limits::SEGMENT_BYTES_MAX),
        )?;
        check(
            "segment.index.bytes",
            i64::from(self.segment_index_bytes),
            i64::from(limits::SEGMENT_INDEX_BYTES_MIN),
            i64::from(limits::SEGMENT_INDEX_BYTES_MAX),
        )?;
        check(
            "message.max.bytes",
            i64::from(self.max_message_bytes),
            i64::from(limits::BATCH_HEADER_BYTES),
            i64::from(limits::BATCH_BYTES_MAX),
        )?;
        check("segment.ms", self.segment_ms, 1, i64::MAX)?;
        check("retention.ms", self.retention_ms, -1, i64::MAX)?;
        check("retention.bytes", self.retention_bytes, -1, i64::MAX)?;
        check(
            "producer.id.expiration.ms",
            self.producer_id_expiration_ms,
            1,
            i64::MAX,
        )?;
        Ok(())
    }

    /// The largest batch `append` accepts: `message.max.bytes`, capped by `segment.bytes`.
    #[must_use]
    pub fn batch_bytes_limit(&self) -> u32 {
        self.max_message_bytes.min(self.segment_bytes)
    }
}

fn check(key: &'static str, value: i64, min: i64, max: i64) -> Result<(), StorageError> {
    if value < min || value > max {
        return Err(StorageError::InvalidConfig {
            key,
            value,
            min,
            max,
        });
    }
    Ok(())
}
