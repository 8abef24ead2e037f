//! The cluster module's limits, each with its unit and why (the server's other limits are in
//! `crate::limits`); relations between them are checked at compile time.

/// Bytes of one Raft entry's application data (an encoded batch of metadata records). The
/// controller packs many records into one `client_write`, but a single entry stays well under
/// a Kafka batch so the metadata log's batches stay ordinary and replication messages small.
pub const ENTRY_PAYLOAD_BYTES_MAX: usize = 1024 * 1024;

/// Bytes of a membership entry's encoding (JSON of the voter and learner sets with each
/// node's controller listener address): hundreds of nodes fit.
pub const MEMBERSHIP_ENTRY_BYTES_MAX: usize = 256 * 1024;

/// Bytes of a record batch of the metadata log (`max.message.bytes` of its `Log`): one entry
/// (payload or membership) plus the batch, record and entry-header overhead.
pub const ENTRY_BATCH_BYTES_MAX: u32 = 2 * 1024 * 1024;

/// Bytes one chunked read of the metadata log takes from a segment; reads loop in chunks
/// so a read of many entries never maps one huge buffer.
pub const LOG_READ_CHUNK_BYTES: u32 = 1024 * 1024;

/// Bytes of entries `limited_get_log_entries` returns at most (at least one entry): what one
/// AppendEntries to a follower carries from storage.
pub const LIMITED_READ_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Segment size of the metadata log, in bytes: small, so purging after a snapshot frees
/// space soon (purge deletes whole segments below the log start offset).
pub const METADATA_SEGMENT_BYTES: u32 = 16 * 1024 * 1024;

/// Bytes of the application's part of a state-machine snapshot (the encoded metadata
/// image). Kafka's KRaft snapshots of large clusters are tens of MiB; this leaves room and
/// still bounds what a follower accepts from its leader.
pub const SNAPSHOT_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Bytes of a snapshot's metadata (last log id and membership, JSON) in its file.
pub const SNAPSHOT_META_BYTES_MAX: usize = MEMBERSHIP_ENTRY_BYTES_MAX + 4096;

const _: () = assert!(ENTRY_PAYLOAD_BYTES_MAX + 4096 <= ENTRY_BATCH_BYTES_MAX as usize);
const _: () = assert!(MEMBERSHIP_ENTRY_BYTES_MAX + 4096 <= ENTRY_BATCH_BYTES_MAX as usize);
const _: () = assert!(LIMITED_READ_BYTES_MAX >= ENTRY_BATCH_BYTES_MAX as usize);
const _: () = assert!(METADATA_SEGMENT_BYTES >= ENTRY_BATCH_BYTES_MAX);

/// openraft's `heartbeat_interval`, in milliseconds: how often the leader tells followers
/// it is alive (and commits). A third of the shortest election timeout, so two lost
/// heartbeats never trigger an election.
pub const HEARTBEAT_INTERVAL_MS: u64 = 250;

/// openraft's election timeout range, in milliseconds: a follower that hears no leader for
/// a random time in it campaigns. Kafka's `controller.quorum.election.timeout.ms` is 1000;
/// the range spreads candidates so one usually wins the first round.
pub const ELECTION_TIMEOUT_MIN_MS: u64 = 1_000;
pub const ELECTION_TIMEOUT_MAX_MS: u64 = 2_000;

/// openraft's `max_payload_entries`: entries per AppendEntries (openraft's default). With
/// `LIMITED_READ_BYTES_MAX` it bounds a replication message.
pub const APPEND_ENTRIES_PER_RPC_MAX: u64 = 300;

/// Entries applied since the last snapshot after which a new one is built
/// (`SnapshotPolicy::LogsSinceLast`, openraft's default): the metadata log is purged up to
/// a snapshot, so this bounds its length (with `LOG_ENTRIES_KEPT_AFTER_SNAPSHOT`).
pub const SNAPSHOT_AFTER_ENTRIES: u64 = 5_000;

/// Entries kept below a snapshot (openraft's `max_in_snapshot_log_to_keep`, its default):
/// a follower this close behind catches up from the log instead of a whole snapshot.
pub const LOG_ENTRIES_KEPT_AFTER_SNAPSHOT: u64 = 1_000;

const _: () = assert!(3 * HEARTBEAT_INTERVAL_MS < ELECTION_TIMEOUT_MIN_MS);
const _: () = assert!(ELECTION_TIMEOUT_MIN_MS < ELECTION_TIMEOUT_MAX_MS);
