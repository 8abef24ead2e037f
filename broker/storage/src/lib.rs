//! Sluice's partition log (synchronous; no tokio, no sockets).
//!
//! A partition is a directory of segments; a segment is Kafka RecordBatch v2 bytes exactly
//! as the wire carries them, plus a sparse offset index and a time index. The byte-level
//! format is in `docs/format.md`.
//!
//! # Layout
//! Read in this order:
//! - [`limits`]: every bound, with its unit and why; relations checked at compile time.
//! - [`error`]: `BatchError` (bad input), `AppendError`/`ReadError` (what callers branch
//!   on; an append's and a batch's refusal name their Kafka code, `sluice_kafka::ErrorCode`),
//!   `StorageError`.
//! - [`offset`], [`config`]: the `Offset` newtype, `LogConfig` with Kafka's key names,
//!   `Durability`, `TimestampType`.
//! - [`batch`], `record`, `crc_walk`: RecordBatch v2 header view, CRC-32C, validation,
//!   the in-place rewrites done on append; varints and record layout; the record walk
//!   fused with the CRC on append.
//! - [`io`]: the positional-I/O seam (`Fs`, `StorageFile`), `RealFs`, and `FaultyFs`
//!   (feature `testing`), the in-memory twin that fails the Nth write or sync, keeps
//!   written and durable images apart (of files and of directory entries), loses the
//!   unsynced bytes of a failed sync (as Linux can) and has a "disk full" switch;
//!   [`io::durable`], the one durable metadata mechanism of every crate (write a file,
//!   create, rename and remove directories, stale temp files).
//! - `entry_file`, `index`, `time_index`: fixed-size index entries (the active segment's
//!   mapped writable, sealed ones mapped on first lookup), the sparse offset index and the
//!   time index.
//! - [`FileCache`] (`file_cache.rs`): the broker-wide bound on open sealed-segment files;
//!   a segment's `.log` is held open while active or unsynced, else opened on demand
//!   through it (indexes hold no descriptor: they are mapped).
//! - `segment`: one `.log` + `.index` + `.timeindex`: append, lookup, read ranges, seal.
//! - `producer` (with `producer/`): per-partition producer state (sequences, epochs, open
//!   and aborted transactions) rebuilt from the partition's batches, and its snapshots.
//! - `cleaner` (with `cleaner/`): log compaction of one partition (the offset map, then the
//!   rewrite into `.cleaned` segments swapped in).
//! - `checkpoint`: `partition.checkpoint` (log start offset, recovery point) and the
//!   `clean-shutdown` marker, written atomically.
//! - [`epoch`]: the leader epoch cache (`leader-epoch.checkpoint`): where each leader epoch
//!   began, for OffsetForLeaderEpoch; the epoch stamped into appended batches.
//! - `recovery`: opening a directory: trusted segments opened, the rest scanned and
//!   truncated at the first bad byte, indexes rebuilt.
//! - [`Log`] (`log.rs`): append, read, roll, flush, close, ListOffsets by time;
//!   `retention.rs`: `tick_without_retention` (segment.ms rolls, flush.ms, checkpoint),
//!   `enforce_retention` (retention.ms / retention.bytes), `tick` (both) and
//!   `advance_log_start_offset`; `group_sync.rs`: group commit for acks=all
//!   (`begin_sync`, `PendingSync::run` without the lock, `complete_sync`); `fence.rs`:
//!   fencing after a failed write or fsync and `try_unfence` (probe, cut back to the
//!   durable offset, reopen from disk); `truncate.rs`: `truncate_to` (remove every record
//!   at or after an offset, crash-safe: a follower's divergence, the Raft log's
//!   `truncate_after`); `replicated.rs`: `append_replicated` (a follower appends its
//!   leader's batches byte for byte) and `assign_leader_epoch` (the cluster's epochs).
//! - [`txn_guard`]: KIP-890's verification of a client's transactional batches against
//!   the coordinator (guards handed out before asking it, dropped by markers), in memory.
//! - `testing` (feature `testing`): builders of valid batches for tests and benchmarks;
//!   `fuzz` (feature `fuzz`): the entry points of the `producer_snapshot` and
//!   `leader_epochs` fuzz targets. Both are test scaffolding, never compiled into the broker
//!   binary.
//!
//! Architecture Invariant: nothing here spawns threads, knows sockets or reads clocks;
//! callers pass `now_ms`. A `Log` is `Send + Sync` and used under one lock by the server.
//! Architecture Invariant: every byte written to disk goes through `io::Fs` /
//! `io::StorageFile` (memory-mapped index pages aside), so `FaultyFs` sees it.
//! Architecture Invariant: after a failed write or fsync the log refuses appends until
//! `try_unfence` has probed the disk and reopened it from disk; an fsync is never retried,
//! and bytes whose fsync failed are cut off, never trusted from the page cache.

pub mod batch;
mod checkpoint;
mod cleaner;
pub mod config;
mod crc_walk;
mod entry_file;
pub mod epoch;
pub mod error;
mod fence;
mod file_cache;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
mod group_sync;
mod index;
pub mod io;
pub mod limits;
mod log;
pub mod offset;
mod producer;
pub mod record;
mod recovery;
mod replicated;
mod retention;
mod segment;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod time_index;
mod truncate;
pub mod txn_guard;

pub use batch::{BatchHeader, Compression};
pub use cleaner::{CleanOutcome, CleanPlan, Cleaned, Dirtiness};
pub use config::{CleanupPolicy, Durability, LogConfig, TimestampType};
pub use crc_walk::validate_records;
pub use error::{AppendError, BatchError, ReadError, StorageError};
pub use file_cache::FileCache;
pub use group_sync::PendingSync;
pub use io::{Fs, RealFs, StorageFile};
pub use log::{AppendOutcome, Log, ReadSlice};
pub use offset::Offset;
pub use producer::{AbortedTxn, Marker, ProducerEntry, ProducerStateMap};
pub use replicated::ReplicatedAppend;
pub use retention::TickOutcome;
pub use segment::Decompress;
pub use txn_guard::{Admission, TxnAppend, TxnGuard};

/// The server keeps a `Log` behind a mutex shared by tokio tasks and hands `ReadSlice`s to
/// connection tasks: both must cross threads.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Log>();
    send_sync::<ReadSlice>();
    send_sync::<PendingSync>();
};
