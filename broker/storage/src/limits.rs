//! Named limits of the storage engine, with their units and why they exist.
//!
//! Relations between limits are checked at compile time at the bottom of the file.

/// Bytes of the RecordBatch v2 header, from `baseOffset` to `recordsCount` inclusive.
pub const BATCH_HEADER_BYTES: u32 = 61;

/// Bytes before `batchLength` counts: `baseOffset` (8) + `batchLength` (4).
pub const BATCH_LOG_OVERHEAD_BYTES: u32 = 12;

/// Largest RecordBatch accepted on append or trusted on recovery. `message.max.bytes` may not
/// be set above it. 64 MiB keeps one batch well inside a segment and bounds the recovery
/// scanner's buffer.
pub const BATCH_BYTES_MAX: u32 = 64 * 1024 * 1024;

/// Smallest `segment.bytes`: room for at least one minimal batch (tests use tiny segments).
pub const SEGMENT_BYTES_MIN: u32 = 128;

/// Largest `segment.bytes`: file positions in the offset index are u32, and Kafka caps
/// `segment.bytes` at `i32::MAX`, so we do too (a segment is always < 2 GiB).
pub const SEGMENT_BYTES_MAX: u32 = i32::MAX as u32;

/// Bytes per offset-index entry: relative offset (u32) + file position (u32).
pub const INDEX_ENTRY_BYTES: u32 = 8;

/// Bytes per time-index entry: max timestamp so far (i64) + relative offset (u32).
pub const TIME_INDEX_ENTRY_BYTES: u32 = 12;

/// Smallest `segment.index.bytes`: a handful of entries of either index.
pub const SEGMENT_INDEX_BYTES_MIN: u32 = 4 * INDEX_ENTRY_BYTES * TIME_INDEX_ENTRY_BYTES;

/// Largest `segment.index.bytes` (1 GiB): an index is memory-mapped whole.
pub const SEGMENT_INDEX_BYTES_MAX: u32 = 1024 * 1024 * 1024;

/// Bytes of an active index file whose disk blocks are reserved (`fallocate`) at a time,
/// ahead of the entries written. The file is sized to `segment.index.bytes` but sparse (as
/// Kafka's preallocated indexes are), so an empty partition costs no index blocks whatever
/// that key says, while every entry written into the memory map lands on a reserved block:
/// a full disk fails the reservation, an I/O error that fences the log before the write that
/// needs it, never a SIGBUS on the map. 16 KiB is 2,048 offset-index entries, 8 MiB of log
/// at the default `index.interval.bytes`: one `fallocate` per that much appended, and a
/// partition holding a few records reserves one step of time index (its sealing entry).
pub const INDEX_ALLOCATION_STEP_BYTES: u32 = 16 * 1024;

/// Offsets inside one segment are stored relative to its base offset as u32; a segment rolls
/// before its relative offsets would overflow.
pub const SEGMENT_RELATIVE_OFFSET_MAX: i64 = u32::MAX as i64;

/// Bytes read per call by the recovery scanner (and the benchmark's raw read baseline).
pub const RECOVERY_READ_CHUNK_BYTES: u32 = 4 * 1024 * 1024;

/// Bytes read per call when a fetch scans batch headers forward from an index entry.
pub const READ_SCAN_CHUNK_BYTES: u32 = 16 * 1024;

/// How often `tick` persists an advanced recovery point (ms). A stale recovery point only
/// makes recovery scan more; it is never ahead of durable data.
pub const RECOVERY_POINT_CHECKPOINT_INTERVAL_MS: i64 = 60_000;

/// Digits of the zero-padded base offset in segment file names (as Kafka: 20).
pub const SEGMENT_NAME_DIGITS: usize = 20;

/// Open sealed-segment files of a log opened without a shared `FileCache` (`Log::open` and
/// `Log::open_with`: tests, tools and the broker's internal logs). The broker's partitions
/// share one cache whose bound is the `sluice.log.open.segments.max` key.
pub const SEGMENT_FILES_OPEN_PER_LOG_MAX: usize = 16;

/// Descriptors one open partition holds at rest: its active segment's `.log`. Its indexes
/// are memory-mapped without a descriptor, sealed segments' files live in the `FileCache`,
/// and checkpoint files are opened only for the write. A sealed segment not yet fsynced
/// (rolled since the last flush) holds its `.log` too until the next flush.
pub const DESCRIPTORS_PER_PARTITION: u64 = 1;

const _: () = assert!(BATCH_HEADER_BYTES > BATCH_LOG_OVERHEAD_BYTES);
const _: () = assert!(SEGMENT_BYTES_MIN >= BATCH_HEADER_BYTES);
const _: () = assert!(SEGMENT_BYTES_MIN < SEGMENT_BYTES_MAX);
const _: () = assert!(BATCH_BYTES_MAX <= SEGMENT_BYTES_MAX);
const _: () = assert!(SEGMENT_BYTES_MAX as u64 <= u32::MAX as u64);
const _: () = assert!(SEGMENT_INDEX_BYTES_MIN.is_multiple_of(INDEX_ENTRY_BYTES));
const _: () = assert!(SEGMENT_INDEX_BYTES_MIN.is_multiple_of(TIME_INDEX_ENTRY_BYTES));
const _: () = assert!(SEGMENT_INDEX_BYTES_MIN < SEGMENT_INDEX_BYTES_MAX);
const _: () = assert!(INDEX_ALLOCATION_STEP_BYTES >= TIME_INDEX_ENTRY_BYTES);
const _: () = assert!(INDEX_ALLOCATION_STEP_BYTES >= INDEX_ENTRY_BYTES);
const _: () = assert!(
    INDEX_ALLOCATION_STEP_BYTES.is_multiple_of(4096),
    "whole pages"
);
const _: () = assert!(INDEX_ALLOCATION_STEP_BYTES <= SEGMENT_INDEX_BYTES_MAX);
const _: () = assert!(RECOVERY_READ_CHUNK_BYTES >= BATCH_HEADER_BYTES);
const _: () = assert!(READ_SCAN_CHUNK_BYTES >= BATCH_HEADER_BYTES);

/// Bytes the fence probe writes and fsyncs in a fenced partition's directory before the log
/// is reopened (`Log::try_unfence`): one page, the smallest write that needs a free block,
/// and the room the reopen's small metadata rewrites (checkpoint, snapshot) take. (The probe
/// also reserves, without writing, `INDEX_ALLOCATION_STEP_BYTES` per index the reopen
/// rebuilds, so a disk that is still full fails the probe instead of the reopen.)
pub const FENCE_PROBE_BYTES: usize = 4096;

/// Batches remembered per producer for duplicate detection: Kafka's
/// `NUM_BATCHES_TO_RETAIN`, the clients' `max.in.flight.requests.per.connection` cap for
/// idempotence (a retry is always of one of the last 5 batches).
pub const PRODUCER_BATCHES_RETAINED: usize = 5;

/// Producers one partition remembers. Past it the producer idle the longest (with no open
/// transaction) is forgotten, as if expired: memory stays bounded whatever the number of
/// producer ids clients obtain.
pub const PRODUCERS_PER_PARTITION_MAX: usize = 100_000;

/// Transaction verifications (KIP-890) one partition holds in memory, of each kind: guards
/// handed out to transactional produces waiting on the coordinator, and open transactions
/// bound to the transactional id they were verified under (`txn_guard.rs`). A guard is
/// used within one coordinator round trip, so past the cap the oldest goes (its append is
/// refused and retried); a binding over the cap is not kept (the next batch is verified
/// again). Bounds what requests naming made-up producer ids can make a partition hold.
pub const TXN_VERIFICATIONS_PER_PARTITION_MAX: usize = 10_000;

/// Aborted transactions one read reports, the oldest first. A read of at most
/// `fetch.max.bytes` overlaps fewer unless its transactions average under ~500 bytes;
/// past it, the records of the aborted transactions left off would reach a read_committed
/// consumer (a known gap, docs/transactions.md), so the bound is far above real use.
pub const ABORTED_TXNS_PER_READ_MAX: usize = 100_000;

/// Producer-state snapshots kept per partition (the newest is used; an older one if it
/// is damaged).
pub const PRODUCER_SNAPSHOTS_KEPT: usize = 2;

/// Largest producer-state snapshot read at open (bytes): above it the file is not trusted.
/// `PRODUCERS_PER_PARTITION_MAX` producers with all their batches take ~20 MiB.
pub const PRODUCER_SNAPSHOT_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// Entries kept in a partition's leader epoch cache (`leader-epoch.checkpoint`): one per
/// leadership that appended records. Past it the oldest entry is dropped; a question about
/// an epoch older than the first entry kept is answered with the first entry's start offset,
/// which is still a safe truncation point. Bounds the file (12 bytes per entry) and memory.
pub const LEADER_EPOCH_ENTRIES_MAX: usize = 1024;

/// Recent cleans remembered per partition for `delete.retention.ms` (`cleaner.checkpoint`):
/// when full the oldest is forgotten, and the tombstones it covered count from the next
/// one (kept longer, never shorter).
pub const CLEANER_HORIZONS_MAX: usize = 32;

/// Default bound on the cleaner's offset map (bytes of keys plus
/// `CLEANER_MAP_ENTRY_OVERHEAD_BYTES` each), Kafka's `log.cleaner.dedupe.buffer.size`. A
/// dirty section with more keys is cleaned a prefix at a time.
pub const CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT: u64 = 128 * 1024 * 1024;

/// What one offset-map entry costs besides its key's bytes (hash slot, box, offset), for
/// the dedupe buffer's accounting.
pub const CLEANER_MAP_ENTRY_OVERHEAD_BYTES: u64 = 64;

/// Bytes the cleaner reads from a segment at a time (whole batches; a larger batch is read
/// alone).
pub const CLEANER_READ_CHUNK_BYTES: u32 = 4 * 1024 * 1024;

const _: () = assert!(PRODUCER_BATCHES_RETAINED <= u8::MAX as usize);
const _: () = assert!(CLEANER_HORIZONS_MAX >= 1);
const _: () = assert!(CLEANER_READ_CHUNK_BYTES >= BATCH_HEADER_BYTES);
const _: () = assert!(PRODUCER_SNAPSHOTS_KEPT >= 1);
const _: () = assert!(TXN_VERIFICATIONS_PER_PARTITION_MAX >= 1);
