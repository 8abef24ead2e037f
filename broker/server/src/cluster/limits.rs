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
