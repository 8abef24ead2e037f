//! What the coordinator's calls return, as plain types: records to persist, the markers
//! to write, descriptions.

use crate::error::ErrorCode;
use crate::records::{PendingOffsets, ProducerId, TopicPartition, TxnRecord};

/// Write a transaction's markers: a COMMIT or ABORT control batch with this producer id
/// and epoch to every partition, and (commit only) the offsets to the consumer groups;
/// then call [`crate::Coordinator::markers_written`]. Markers are idempotent in storage,
/// so writing them again (after a restart) is harmless.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteMarkers {
    /// The transaction.
    pub transactional_id: String,
    /// Producer id to put in the markers.
    pub producer_id: ProducerId,
    /// Producer epoch to put in the markers (bumped when the abort fences a producer).
    pub producer_epoch: i16,
    /// Commit (true) or abort (false).
    pub commit: bool,
    /// The partitions that get a marker, ascending.
    pub partitions: Vec<TopicPartition>,
    /// Offsets to commit to each group (empty for an abort), ascending by group id.
    pub offsets_to_commit: Vec<PendingOffsets>,
}

/// The answer to InitProducerId.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum InitOutcome {
    /// Persist `records` (may be empty), apply them, then answer with the id and epoch.
    Done {
        /// The producer id to answer.
        producer_id: ProducerId,
        /// The epoch to answer.
        producer_epoch: i16,
        /// Records to append and then [`crate::Coordinator::apply`].
        records: Vec<TxnRecord>,
    },
    /// The id's transaction was Ongoing: persist and apply `records` (PrepareAbort with a
    /// bumped epoch, fencing the old producer), write `markers` as after EndTxn, and
    /// answer `CONCURRENT_TRANSACTIONS`; the client retries and then gets a new epoch.
    AbortFirst {
        /// Records to append and then apply.
        records: Vec<TxnRecord>,
        /// The abort markers to write once the records are applied.
        markers: WriteMarkers,
    },
    /// Answer this error; nothing to persist.
    Error(ErrorCode),
}

/// The answer to EndTxn.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum EndOutcome {
    /// Persist and apply `records` (PrepareCommit or PrepareAbort), answer success, then
    /// write `markers`.
    Prepared {
        /// Records to append and then apply.
        records: Vec<TxnRecord>,
        /// The markers to write once the records are applied.
        markers: WriteMarkers,
    },
    /// A retry of an EndTxn that already completed the same way: answer success, with
    /// the producer id and epoch the transactional id has now (EndTxn v5 carries them).
    AlreadyDone {
        /// The current producer id.
        producer_id: ProducerId,
        /// The current epoch.
        producer_epoch: i16,
    },
    /// Answer this error; nothing to persist.
    Error(ErrorCode),
}

/// The transaction protocol a request speaks (Kafka's `TransactionVersion` as the
/// coordinator infers it from the request's version: EndTxn v5+, Produce v12+ and
/// TxnOffsetCommit v5+ are KIP-890 part 2's protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnProtocol {
    /// The client adds partitions (AddPartitionsToTxn) and groups (AddOffsetsToTxn) before
    /// writing to them; the epoch changes only at InitProducerId or when fenced.
    V1,
    /// KIP-890 part 2: a partition joins the transaction when the first transactional
    /// batch reaches it, a group with its first TxnOffsetCommit, and every EndTxn bumps the
    /// epoch (markers carry the new one), so a zombie's late write cannot join the next
    /// transaction. An EndTxn(abort) with nothing added is allowed.
    V2,
}

/// What a timer tick found: persist and apply `records` (PrepareAbort of timed-out
/// transactions, with bumped epochs, and tombstones of expired ids) in one batch, then
/// write each of `markers`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Tick {
    /// Records to append and then apply.
    pub records: Vec<TxnRecord>,
    /// Abort markers of the timed-out transactions.
    pub markers: Vec<WriteMarkers>,
}

/// Whether one partition is in the ongoing transaction (AddPartitionsToTxn v4 verifyOnly,
/// KIP-890's verification of a transactional produce).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionVerification {
    /// The partition.
    pub tp: TopicPartition,
    /// `NONE` if it is part of the ongoing transaction, else `TRANSACTION_ABORTABLE`.
    pub error: ErrorCode,
}

/// DescribeTransactions' view of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    /// The transactional id.
    pub transactional_id: String,
    /// Kafka's state name.
    pub state: &'static str,
    /// The producer's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the current (or last) transaction started, ms since the Unix epoch; -1 if none.
    pub txn_start_ms: i64,
    /// Current producer id.
    pub producer_id: ProducerId,
    /// Current epoch.
    pub producer_epoch: i16,
    /// Partitions in the transaction, ascending.
    pub partitions: Vec<TopicPartition>,
}

/// ListTransactions' view of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTxn {
    /// The transactional id.
    pub transactional_id: String,
    /// Current producer id.
    pub producer_id: ProducerId,
    /// Kafka's state name.
    pub state: &'static str,
    /// When its current transaction started (ms; -1: none since the last epoch bump), for
    /// ListTransactions v1's duration filter.
    pub txn_start_ms: i64,
}
