//! The Kafka error codes the coordinator returns ([`ErrorCode`], Kafka's numbers and names,
//! defined once in `sluice-kafka`), and the typed error for decoding records of the
//! transaction log.
//!
//! The codes the coordinator returns or documents, and when:
//! - `UNKNOWN_SERVER_ERROR`: the producer-id space is exhausted (a corrupt log claimed ids
//!   near `i64::MAX`);
//! - `OFFSET_METADATA_TOO_LARGE`: a TxnOffsetCommit metadata string over
//!   [`crate::limits::OFFSET_METADATA_BYTES_MAX`];
//! - `COORDINATOR_NOT_AVAILABLE`: the server could not append the returned records, or
//!   [`crate::limits::TXNS_MAX`] is reached (retriable); `COORDINATOR_LOAD_IN_PROGRESS`
//!   and `NOT_COORDINATOR` are answered by the server;
//! - `INVALID_GROUP_ID`: an empty or over-long group id in AddOffsetsToTxn /
//!   TxnOffsetCommit; `INVALID_COMMIT_OFFSET_SIZE`: a TxnOffsetCommit over
//!   [`crate::limits::PENDING_OFFSETS_MAX`];
//! - `INVALID_REQUEST`: an empty or over-long transactional id or topic, or a transaction
//!   over [`crate::limits::TXN_PARTITIONS_MAX`] or [`crate::limits::TXN_GROUPS_MAX`];
//! - `PRODUCER_FENCED`: a newer producer with the same transactional id has fenced this one
//!   (the server answers `INVALID_PRODUCER_EPOCH` instead to request versions before
//!   KIP-588);
//! - `INVALID_TXN_STATE`: the operation is not legal in the transaction's state;
//!   `INVALID_PRODUCER_ID_MAPPING`: the transactional id is unknown, or belongs to another
//!   producer id; `INVALID_TRANSACTION_TIMEOUT`: `transaction.timeout.ms` outside
//!   `1..=transaction.max.timeout.ms`; `CONCURRENT_TRANSACTIONS`: the transaction is
//!   completing, or another change to it is being persisted (retry);
//! - `UNKNOWN_PRODUCER_ID`: for the server's producer state;
//!   `TRANSACTIONAL_ID_NOT_FOUND`: DescribeTransactions on an unknown id (answered by the
//!   server when [`crate::Coordinator::describe`] returns `None`);
//! - `TRANSACTION_ABORTABLE`: a verified partition is not in the producer's transaction
//!   (KIP-890; a partition leader answers Produce before v11 with `INVALID_TXN_STATE`).

pub use sluice_kafka::ErrorCode;

use sluice_kafka::bytes::ReadError;

/// A record of the transaction log that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A field is cut short, negative, over its limit or not UTF-8, a count promises more
    /// entries than its limit or the bytes left, or bytes remain after the last field (the
    /// error names the field and the limit).
    #[error("transaction record: {0}")]
    Read(#[from] ReadError),
    /// The version field is one this build does not know.
    #[error("transaction record version {0} is not supported (this build reads version 0)")]
    UnknownVersion(i16),
    /// The key kind is neither producer-id block (0) nor transaction (1).
    #[error("transaction record key kind {0} is unknown")]
    UnknownKeyKind(i16),
    /// The state byte names no [`crate::TxnState`].
    #[error("transaction record state {0} is unknown")]
    UnknownState(i8),
    /// A producer-id block key without a value: the block record is never deleted.
    #[error("producer-id block record without a value")]
    BlockTombstone,
    /// Partitions, groups or offsets are not strictly ascending (unsorted or repeated).
    #[error("transaction record lists {0} out of order or twice")]
    NotSorted(&'static str),
    /// The transactional id is empty.
    #[error("transaction record with an empty transactional id")]
    EmptyTransactionalId,
}
