//! Kafka error codes the coordinator returns (Kafka's numbers, never ours), and the typed
//! error for decoding records of the transaction log.

/// A Kafka protocol error code, limited to the ones this crate returns or documents.
///
/// `as i16` (or [`ErrorCode::code`]) gives the number to put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum ErrorCode {
    /// The producer-id space is exhausted (a corrupt log claimed ids near `i64::MAX`).
    UnknownServerError = -1,
    /// Success.
    None = 0,
    /// A TxnOffsetCommit metadata string over [`crate::limits::OFFSET_METADATA_BYTES_MAX`].
    OffsetMetadataTooLarge = 12,
    /// The server is still replaying the transaction log (answered by the server).
    CoordinatorLoadInProgress = 14,
    /// The server could not append the returned records, or [`crate::limits::TXNS_MAX`]
    /// is reached (retriable).
    CoordinatorNotAvailable = 15,
    /// This broker is not the transaction coordinator (answered by the server).
    NotCoordinator = 16,
    /// An empty or over-long group id in AddOffsetsToTxn / TxnOffsetCommit.
    InvalidGroupId = 24,
    /// A TxnOffsetCommit would take the transaction over
    /// [`crate::limits::PENDING_OFFSETS_MAX`].
    InvalidCommitOffsetSize = 28,
    /// An empty or over-long transactional id or topic, or a transaction over
    /// [`crate::limits::TXN_PARTITIONS_MAX`] or [`crate::limits::TXN_GROUPS_MAX`].
    InvalidRequest = 42,
    /// Fenced producer epoch, for request versions before KIP-588 (the server maps
    /// [`ErrorCode::ProducerFenced`] to this for them).
    InvalidProducerEpoch = 47,
    /// The operation is not legal in the transaction's state.
    InvalidTxnState = 48,
    /// The transactional id is unknown, or belongs to another producer id.
    InvalidProducerIdMapping = 49,
    /// `transaction.timeout.ms` is not in `1..=transaction.max.timeout.ms`.
    InvalidTransactionTimeout = 50,
    /// The transaction is completing, or another change to it is being persisted; retry.
    ConcurrentTransactions = 51,
    /// An idempotent producer's state is unknown (for the server's producer state).
    UnknownProducerId = 59,
    /// A newer producer with the same transactional id has fenced this one.
    ProducerFenced = 90,
    /// DescribeTransactions on an unknown transactional id (answered by the server when
    /// [`crate::Coordinator::describe`] returns `None`).
    TransactionalIdNotFound = 105,
    /// A verified partition is not in the producer's transaction (KIP-890's verification;
    /// a partition leader answers Produce before v11 with INVALID_TXN_STATE instead).
    TransactionAbortable = 120,
}

impl ErrorCode {
    /// Kafka's wire number.
    pub const fn code(self) -> i16 {
        self as i16
    }

    /// True for [`ErrorCode::None`].
    pub const fn is_ok(self) -> bool {
        matches!(self, ErrorCode::None)
    }
}

/// A record of the transaction log that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record ended before a field did.
    #[error("transaction record truncated: needed {needed} bytes at byte {at}, have {len}")]
    Truncated {
        /// Byte position of the field.
        at: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Length of the record part.
        len: usize,
    },
    /// The version field is one this build does not know.
    #[error("transaction record version {0} is not supported (this build reads version 0)")]
    UnknownVersion(i16),
    /// The key kind is neither producer-id block (0) nor transaction (1).
    #[error("transaction record key kind {0} is unknown")]
    UnknownKeyKind(i16),
    /// The state byte names no [`crate::TxnState`].
    #[error("transaction record state {0} is unknown")]
    UnknownState(i8),
    /// A string field is not UTF-8.
    #[error("transaction record has a string that is not UTF-8")]
    InvalidUtf8,
    /// A length or count is negative (other than -1 for a null string where allowed).
    #[error("transaction record has a negative length or count {0}")]
    Negative(i32),
    /// Bytes remain after the last field.
    #[error("transaction record has {0} trailing bytes")]
    TrailingBytes(usize),
    /// A producer-id block key without a value: the block record is never deleted.
    #[error("producer-id block record without a value")]
    BlockTombstone,
    /// A string is longer than its limit in [`crate::limits`].
    #[error("transaction record field of {len} bytes is over the limit of {max} bytes")]
    TooLong {
        /// Length read.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A count is over its limit in [`crate::limits`].
    #[error("transaction record has {count} entries where the limit is {max}")]
    TooMany {
        /// Count read.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Partitions, groups or offsets are not strictly ascending (unsorted or repeated).
    #[error("transaction record lists {0} out of order or twice")]
    NotSorted(&'static str),
    /// The transactional id is empty.
    #[error("transaction record with an empty transactional id")]
    EmptyTransactionalId,
}
