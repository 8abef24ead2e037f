//! Error types. Callers branch on `AppendError` and `ReadError`; `BatchError` says what is
//! wrong with client bytes. `AppendError::error_code` and `BatchError::error_code` are the
//! Kafka errors the server answers them with (`sluice_kafka::ErrorCode`).

use crate::offset::Offset;
use sluice_kafka::ErrorCode;
use std::io;

/// What is wrong with a RecordBatch (client input or a corrupt file): never our bug.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than the header or the declared batch length need.
    #[error("record batch truncated: needs {needed} bytes, {available} available")]
    Truncated { needed: u64, available: u64 },
    /// Only RecordBatch v2 (magic 2) is stored.
    #[error("unsupported record batch magic {magic} (only 2 is accepted)")]
    BadMagic { magic: i8 },
    /// `batchLength` is below the header size or above `BATCH_BYTES_MAX`.
    #[error("record batch length {batch_length} out of range [{min}, {max}]")]
    BadLength {
        batch_length: i32,
        min: u32,
        max: u32,
    },
    /// CRC-32C of attributes..end does not match the header.
    #[error("record batch CRC mismatch: header says {stored:#010x}, bytes give {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// `recordsCount` and `lastOffsetDelta` disagree, or the count is not positive.
    #[error(
        "record batch has records_count {records_count} and last_offset_delta {last_offset_delta}"
    )]
    BadRecordCount {
        records_count: i32,
        last_offset_delta: i32,
    },
    /// The records of an uncompressed batch do not parse as `recordsCount` v2 records.
    #[error("record {index} of batch is malformed: {reason}")]
    BadRecord { index: i32, reason: &'static str },
    /// The records present are not the `recordsCount` the header claims.
    #[error("record batch claims {records_count} records: {reason}")]
    RecordsMismatch {
        records_count: i32,
        reason: &'static str,
    },
    /// Compression codec 5..7 does not exist.
    #[error("unknown compression codec {codec}")]
    UnknownCompression { codec: u8 },
    /// An append carried no batch at all.
    #[error("no record batch in request")]
    Empty,
}

impl BatchError {
    /// The Kafka answer to bytes the storage engine refuses: damaged bytes are
    /// CORRUPT_MESSAGE (the client may retry); well-formed batches we refuse (old magic, bad
    /// record count, a malformed record, unknown codec) are INVALID_RECORD, as Kafka answers
    /// them.
    pub const fn error_code(&self) -> ErrorCode {
        match self {
            Self::Truncated { .. }
            | Self::BadLength { .. }
            | Self::CrcMismatch { .. }
            | Self::Empty => ErrorCode::CorruptMessage,
            _ => ErrorCode::InvalidRecord,
        }
    }
}

/// Errors of opening, flushing, ticking and closing a log.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("storage I/O error: {0}")]
    Io(#[from] io::Error),
    /// A previous write or fsync failed; the log refuses work until a probe lifts the fence.
    #[error("log is fenced after an I/O error until a probe write and fsync succeed")]
    Fenced,
    #[error("config {key}={value} out of range [{min}, {max}]")]
    InvalidConfig {
        key: &'static str,
        value: i64,
        min: i64,
        max: i64,
    },
    /// `advance_log_start_offset` past the log end.
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        requested: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    /// `truncate_to` an offset inside a batch: a log is only ever cut between batches.
    #[error("offset {requested} is inside the batch at {batch_base}, not a batch boundary")]
    NotBatchBoundary {
        requested: Offset,
        batch_base: Offset,
    },
    /// A file that must be valid (a checkpoint with a good CRC) is not.
    #[error("corrupt {what}: {reason}")]
    Corrupt { what: String, reason: String },
}

/// Errors of `Log::append`.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// A batch failed validation; nothing was written. (CORRUPT_MESSAGE / INVALID_RECORD)
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// A batch is larger than `message.max.bytes` (capped by `segment.bytes`). (MESSAGE_TOO_LARGE)
    #[error(
        "record batch of {batch_bytes} bytes exceeds the limit of {limit} bytes \
         (message.max.bytes, capped by segment.bytes)"
    )]
    TooLarge { batch_bytes: u32, limit: u32 },
    /// The log is fenced after an earlier I/O error. (KAFKA_STORAGE_ERROR)
    #[error("log is fenced after an I/O error until a probe write and fsync succeed")]
    Fenced,
    /// The write or fsync failed; the log is now fenced. (KAFKA_STORAGE_ERROR)
    #[error("storage I/O error on append: {0}")]
    Io(io::Error),
    /// An idempotent producer's sequence does not continue its last one. (OUT_OF_ORDER_SEQUENCE_NUMBER)
    #[error(
        "out-of-order sequence number for producer {producer_id} at epoch {epoch}: \
         {sequence}, expected {expected}"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        sequence: i32,
        expected: i32,
    },
    /// A batch or marker of an epoch older than the producer's. (INVALID_PRODUCER_EPOCH)
    #[error("producer {producer_id} epoch {epoch} is older than its current epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    /// A leader's batch that does not continue a follower's log (`Log::append_replicated`):
    /// the follower fetched from the wrong offset or the leader sent a gap. (CORRUPT_MESSAGE)
    #[error(
        "replicated batch at offset {base_offset} does not continue the log end {log_end_offset}"
    )]
    NotContiguous {
        base_offset: i64,
        log_end_offset: i64,
    },
    /// A batch that its producer's transaction state does not allow. (INVALID_TXN_STATE)
    #[error("producer {producer_id}: {reason}")]
    InvalidTxnState {
        producer_id: i64,
        reason: &'static str,
    },
}

impl AppendError {
    /// The Kafka error a refused append answers with (each variant's doc names it).
    pub const fn error_code(&self) -> ErrorCode {
        match self {
            Self::InvalidBatch(e) => e.error_code(),
            Self::TooLarge { .. } => ErrorCode::MessageTooLarge,
            Self::Fenced | Self::Io(_) => ErrorCode::KafkaStorageError,
            Self::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
            Self::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            Self::InvalidTxnState { .. } => ErrorCode::InvalidTxnState,
            Self::NotContiguous { .. } => ErrorCode::CorruptMessage,
        }
    }
}

/// Errors of `Log::read`.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// `requested` is outside `[log_start, log_end]`. (OFFSET_OUT_OF_RANGE)
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        requested: Offset,
        log_start: Offset,
        log_end: Offset,
    },
    #[error("storage I/O error on read: {0}")]
    Io(#[from] io::Error),
}

impl From<StorageError> for AppendError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::Io(io) => AppendError::Io(io),
            StorageError::Fenced => AppendError::Fenced,
            other => AppendError::Io(io::Error::other(other.to_string())),
        }
    }
}
