//! What the runner is fed and what it returns, as plain types: the records it routes (the
//! server's own types behind two small traits), the effects, the answers, the status.

use std::ops::Range;

use crate::limits::TRANSFORM_DLQ_REASON_BYTES_MAX;
use crate::spec::{OnError, Partitioning, TransformSpec, cut};

/// A source record as the runner sees it. The server's type keeps the payload (or points
/// into its decoded batch); the runner reads only these, and clones a record only to
/// dead-letter it.
pub trait SourceRecord: Clone {
    /// The record's offset in the source partition.
    fn offset(&self) -> i64;
    /// The key, `None` for a null key.
    fn key(&self) -> Option<&[u8]>;
    /// Its size as a dead-letter record, in bytes (counted in the transaction's bytes).
    fn size_bytes(&self) -> u64;
}

/// A record a plugin call returned, already routed (`place_routed`: its `sluice.output`
/// header resolved to an index and removed).
pub trait OutputRecord {
    /// The output it goes to: an index into the spec's outputs.
    fn output(&self) -> u32;
    /// The key, `None` for a null key.
    fn key(&self) -> Option<&[u8]>;
    /// Its encoded size, in bytes (counted against the call and transaction bounds).
    fn size_bytes(&self) -> u64;
    /// The offset of the source record it came from.
    fn source_offset(&self) -> i64;
    /// The partition a partitioner plugin chose for it (taken modulo the output's partition
    /// count), or `None` for the spec's [`crate::Partitioning`] rule.
    fn partition(&self) -> Option<u32> {
        None
    }
}

/// What the runner needs of the spec, for one source partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerConfig {
    /// The source partition this runner reads.
    pub source_partition: u32,
    /// How many outputs the spec has (1 to `TRANSFORM_OUTPUTS_MAX`).
    pub outputs: u32,
    /// The failure policy.
    pub on_error: OnError,
    /// How output partitions are chosen.
    pub partitioning: Partitioning,
    /// The longest a transaction stays open while records flow, in milliseconds.
    pub commit_interval_ms: i64,
    /// Where to start without a committed offset (`None`: the log start offset).
    pub start_offset: Option<i64>,
    /// Start paused (the spec's `paused`).
    pub paused: bool,
    /// Partition counts of the outputs, then of the dead-letter topic if the policy has
    /// one; refreshed with [`crate::Runner::set_partition_counts`], taken at each
    /// transaction's start.
    pub partition_counts: Vec<u32>,
}

impl RunnerConfig {
    /// The config of `spec`'s runner for `source_partition`, with the topics' current
    /// partition counts (outputs in order, then the dead-letter topic).
    #[must_use]
    pub fn from_spec(
        spec: &TransformSpec,
        source_partition: u32,
        partition_counts: Vec<u32>,
    ) -> Self {
        Self {
            source_partition,
            outputs: spec.outputs.len() as u32,
            on_error: spec.on_error,
            partitioning: spec.partitioning,
            commit_interval_ms: spec.commit_interval_ms,
            start_offset: spec.start_offset(source_partition),
            paused: spec.paused,
            partition_counts,
        }
    }

    /// How many partition counts [`RunnerConfig::partition_counts`] holds.
    #[must_use]
    pub fn targets(&self) -> usize {
        self.outputs as usize + usize::from(self.on_error == OnError::DeadLetter)
    }
}

/// Where an append goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// An output, by index into the spec's outputs.
    Output(u32),
    /// The dead-letter topic.
    DeadLetter,
}

/// A partition of an output or of the dead-letter topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetPartition {
    /// The topic.
    pub target: Target,
    /// The partition.
    pub partition: u32,
}

/// The transactional producer a runner writes with (InitProducerId's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Producer {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
}

/// A failed input record to write to the dead-letter topic, with why it failed. The server
/// writes the record's key, value, timestamp and headers unchanged, plus `sluice.dlq.reason`
/// (`reason`), `sluice.dlq.error` (`kind.as_str()`), `sluice.dlq.transform`,
/// `sluice.dlq.plugin`, `sluice.dlq.topic`, `sluice.dlq.partition`, `sluice.dlq.offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter<I> {
    /// The input record.
    pub record: I,
    /// What failed.
    pub kind: CallErrorKind,
    /// The error text, cut at `TRANSFORM_DLQ_REASON_BYTES_MAX`.
    pub reason: String,
}

impl<I> DeadLetter<I> {
    pub(crate) fn new(record: I, error: &CallError) -> Self {
        let reason = cut(&error.message, TRANSFORM_DLQ_REASON_BYTES_MAX).to_owned();
        Self {
            record,
            kind: error.kind,
            reason,
        }
    }
}

/// What the server must do next; it answers with the event named on each variant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Effect<I, O> {
    /// `TxnHandle::init_producer_id(Some(transactional id), TRANSFORM_TXN_TIMEOUT_MS)`
    /// (it aborts an Ongoing transaction of a dead incarnation first) →
    /// [`crate::Runner::on_producer`].
    InitProducer,
    /// The group's committed offset of the source partition and the partition's log start
    /// offset → [`crate::Runner::on_position`].
    FetchPosition,
    /// Read the source read_committed from `from`: the records of the next batch (or
    /// several, up to `TRANSFORM_READ_BYTES_MAX`), control batches and aborted transactions
    /// skipped → [`crate::Runner::on_read`].
    Read {
        /// The first offset to read.
        from: i64,
    },
    /// Call the plugin on `inputs()[range]` (on a fresh instance after a failure); a
    /// validator refusing, or an output record over `message.max.bytes`, is this call's
    /// failure → [`crate::Runner::on_called`].
    Call {
        /// The records, as indices into [`crate::Runner::inputs`].
        range: Range<usize>,
    },
    /// `TxnHandle::add_partitions` with these partitions → [`crate::Runner::on_added`].
    AddPartitions {
        /// The partitions the transaction has not touched yet, ascending.
        partitions: Vec<TargetPartition>,
    },
    /// Encode `records` as one transactional batch (the producer of
    /// [`crate::Runner::producer`], this base sequence) and append it to the output
    /// partition → [`crate::Runner::on_appended`].
    Append {
        /// The output, by index.
        output: u32,
        /// Its partition.
        partition: u32,
        /// The first record's sequence (per partition, from 0 after each InitProducerId).
        base_sequence: i32,
        /// The records, in input order.
        records: Vec<O>,
    },
    /// As `Append`, for failed input records to the dead-letter topic.
    AppendDeadLetters {
        /// The dead-letter topic's partition.
        partition: u32,
        /// The first record's sequence.
        base_sequence: i32,
        /// The records, in input order.
        records: Vec<DeadLetter<I>>,
    },
    /// Commit the transaction with the source position: AddOffsets and TxnOffsetCommit of
    /// `position` to the group, wait until the outputs' appends are durable, EndTxn(commit)
    /// → [`crate::Runner::on_committed`].
    Commit {
        /// The next source offset to read, committed to the group.
        position: i64,
    },
    /// EndTxn(abort) → [`crate::Runner::on_aborted`].
    Abort,
    /// Sleep until `until_ms`, then [`crate::Runner::on_tick`].
    Backoff {
        /// When to wake, in the caller's milliseconds.
        until_ms: i64,
    },
    /// Nothing below the last stable offset: wait for new source records, or until
    /// `until_ms` (the open transaction's commit deadline), then [`crate::Runner::on_tick`].
    Wait {
        /// The commit deadline of the open transaction, if one is open.
        until_ms: Option<i64>,
    },
    /// Nothing to do until a command (paused, failed or stopped: see
    /// [`crate::Runner::state`]).
    Idle,
}

/// What [`Effect::Read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult<I> {
    /// Records at and after `from`, ascending, and the offset after what was read
    /// (control batches, aborted batches and compaction gaps included, so it may be past
    /// the last record). `records` may be empty when `next_offset` moved.
    Records {
        /// The records.
        records: Vec<I>,
        /// The next offset to read.
        next_offset: i64,
    },
    /// Nothing below the last stable offset.
    Nothing,
    /// Nothing below the last stable offset, and records above it held back by an open
    /// transaction of another producer: the one of `producer_id` that starts at
    /// `first_offset` (the last stable offset). Waits as `Nothing` does, and says so in the
    /// status ([`Status::held`]).
    Held {
        /// The producer whose transaction is open.
        producer_id: i64,
        /// Where it starts: the source's last stable offset.
        first_offset: i64,
    },
    /// `from` is below the log start offset (retention removed records never read).
    OutOfRange {
        /// The log start offset now.
        log_start_offset: i64,
    },
}

/// What [`Effect::FetchPosition`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The group's committed offset for the source partition, if any.
    pub committed: Option<i64>,
    /// The source partition's log start offset.
    pub log_start_offset: i64,
}

/// How a step other than a plugin call failed, as the server classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepErrorKind {
    /// Try again after a backoff: COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS, a
    /// storage error, the coordinator task gone.
    Retriable,
    /// A newer incarnation owns the transactional id (PRODUCER_FENCED,
    /// INVALID_PRODUCER_EPOCH): this runner stops.
    Fenced,
    /// Retrying will not help (an output deleted, a timeout over
    /// `transaction.max.timeout.ms`): the partition fails until resumed.
    Fatal,
}

/// A failed step, with the server's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepError {
    /// How to react.
    pub kind: StepErrorKind,
    /// What happened, for the status and the log.
    pub message: String,
}

/// How a plugin call failed (`CallError` of the plugin host, plus the output checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallErrorKind {
    /// No instance free (`Busy`, `PoolFull`): not a failure, call again after a backoff.
    Busy,
    /// The plugin's version moved on since the transaction started: not a failure, commit
    /// and call again on the new version.
    Stale,
    /// The call's deadline passed.
    Timeout,
    /// The instance hit its memory limit.
    Memory,
    /// The guest trapped.
    Trap,
    /// The guest returned an error.
    Guest,
    /// The answer broke the transform contract (routing included).
    Contract,
    /// An output topic's validator refused an output record.
    Validator,
    /// An output record over `message.max.bytes`, or the call's output over
    /// `TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX`.
    TooLarge,
}

impl CallErrorKind {
    /// The `sluice.dlq.error` header value and the status' error kind.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Stale => "stale",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::Guest => "guest",
            Self::Contract => "contract",
            Self::Validator => "validator",
            Self::TooLarge => "too-large",
        }
    }

    /// Whether the records are at fault (the failure policy applies), as opposed to
    /// `Busy` and `Stale`, which retry.
    #[must_use]
    pub fn is_failure(self) -> bool {
        !matches!(self, Self::Busy | Self::Stale)
    }
}

/// A failed plugin call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// What failed.
    pub kind: CallErrorKind,
    /// The host's text.
    pub message: String,
}

/// How a stopping runner ends its open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Commit it (broker shutdown, `restart`): nothing processed is redone.
    Commit,
    /// Abort it (`delete`).
    Abort,
}

/// A runner's state, as `describe` shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum State {
    /// Getting a producer id or the committed position (retrying included).
    #[default]
    Starting,
    /// Reading, calling, appending, committing, or waiting for records.
    Running,
    /// Paused by the operator, after committing.
    Paused,
    /// Stopped by a failure (policy `stop`, or a fatal step error) until resumed.
    Failed,
    /// Stopped for good (stop, delete, or fenced by a newer runner).
    Stopped,
}

impl State {
    /// The name `describe` shows.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
        }
    }
}

/// The last error a runner saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// A call's kind (`trap`, `timeout`, ...; [`CallErrorKind::as_str`]) or the step that
    /// failed (`producer`, `position`, `read`, `add-partitions`, `append`, `commit`,
    /// `abort`, `fenced`).
    pub kind: &'static str,
    /// The error text.
    pub message: String,
    /// The source offset concerned, if one record is.
    pub offset: Option<i64>,
    /// When, in the caller's milliseconds.
    pub at_ms: i64,
}

/// A runner's counters and state, in memory only (they restart at 0 with the runner).
/// Record counters move when a transaction commits, so they count committed work.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The state.
    pub state: State,
    /// The committed source position (the next offset to read after a restart); `None`
    /// until fetched.
    pub position: Option<i64>,
    /// Where reading has got to in the open transaction (equals `position` when none).
    pub open_position: Option<i64>,
    /// Source records consumed by committed transactions.
    pub records_in: u64,
    /// Records written per output by committed transactions.
    pub records_out: Vec<u64>,
    /// Failed records dropped under `skip`.
    pub records_skipped: u64,
    /// Failed records written to the dead-letter topic.
    pub records_dead_lettered: u64,
    /// Records retention removed before the runner read them.
    pub records_lost_to_retention: u64,
    /// Committed transactions.
    pub transactions: u64,
    /// Aborted transactions.
    pub aborts: u64,
    /// When the last commit succeeded.
    pub last_commit_ms: Option<i64>,
    /// When the open transaction started, if one is open.
    pub txn_opened_ms: Option<i64>,
    /// The producer id and epoch, once InitProducerId answered.
    pub producer: Option<Producer>,
    /// The last error seen, kept after recovery.
    pub last_error: Option<LastError>,
    /// The open transaction the runner is waiting on, if its last read found everything
    /// below the source's last stable offset done and records held back above it.
    pub held: Option<Held>,
}

/// An open transaction in the source holding the runner back (a read_committed reader
/// cannot pass its first offset until a marker ends it): what `describe` shows as "waiting
/// on an open transaction of producer P since offset O, for N ms".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The producer whose transaction is open.
    pub producer_id: i64,
    /// Its first offset: the source's last stable offset.
    pub first_offset: i64,
    /// When a read first found the runner held there, in the caller's milliseconds.
    pub since_ms: i64,
}
