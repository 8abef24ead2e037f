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

/// `cleanup.policy`: what happens to old segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// Whole segments are deleted by `retention.ms` / `retention.bytes` (Kafka's default).
    #[default]
    Delete,
    /// The cleaner keeps the latest record of each key (`cleaner.rs`); no retention.
    Compact,
    /// Both: compaction, and time/size retention of whole segments.
    CompactDelete,
}

impl CleanupPolicy {
    /// Whether the cleaner compacts this log.
    #[must_use]
    pub fn compacts(self) -> bool {
        self != CleanupPolicy::Delete
    }

    /// Whether retention deletes whole segments.
    #[must_use]
    pub fn deletes(self) -> bool {
        self != CleanupPolicy::Compact
    }
}

/// `min.cleanable.dirty.ratio` is held in parts per million (1.0 = `RATIO_PPM_ONE`), so the
/// config stays `Eq` and the ratio compares exactly.
pub const RATIO_PPM_ONE: u32 = 1_000_000;

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Per-partition log settings. `Default` gives Kafka's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would grow past this.
    pub segment_bytes: u32,
    /// `segment.ms`: roll the active segment once its first append is this old.
    pub segment_ms: i64,
    /// `segment.index.bytes`: size of each active index file (sparse: blocks are reserved
    /// `INDEX_ALLOCATION_STEP_BYTES` at a time ahead of the entries); a full index rolls.
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
    /// `cleanup.policy`.
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`, in parts per million: the cleaner picks a log once
    /// dirty bytes / cleanable bytes reach it.
    pub min_cleanable_dirty_ratio_ppm: u32,
    /// `min.compaction.lag.ms`: a segment with a record newer than this is not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment older than this is cleaned whatever the ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: a tombstone stays this long after the clean that first saw it.
    pub delete_retention_ms: i64,
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
            cleanup_policy: CleanupPolicy::Delete,
            min_cleanable_dirty_ratio_ppm: RATIO_PPM_ONE / 2,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: DAY_MS,
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
        check(
            "min.cleanable.dirty.ratio (ppm)",
            i64::from(self.min_cleanable_dirty_ratio_ppm),
            0,
            i64::from(RATIO_PPM_ONE),
        )?;
        check(
            "min.compaction.lag.ms",
            self.min_compaction_lag_ms,
            0,
            i64::MAX,
        )?;
        check(
            "max.compaction.lag.ms",
            self.max_compaction_lag_ms,
            1,
            i64::MAX,
        )?;
        check("delete.retention.ms", self.delete_retention_ms, 0, i64::MAX)?;
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
