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

// The controller listener (wire.rs, network.rs, server.rs).

/// Bytes of a frame's body before the peer's hello is accepted (the hello itself and its
/// answer): a cluster id and a node id fit many times over, and an unauthenticated peer can
/// make us buffer no more.
pub const HELLO_FRAME_BYTES_MAX: u32 = 4 * 1024;

/// Bytes of one frame's body after the hello (AppendEntries, Vote, forwarded operations and
/// their answers): one AppendEntries carries at most `LIMITED_READ_BYTES_MAX` of entries
/// (plus an entry past it); the rest is headroom for the encoding.
pub const FRAME_BYTES_MAX: u32 = 2 * LIMITED_READ_BYTES_MAX as u32 + 64 * 1024;

/// Learners (broker-only nodes) following the metadata log: each is one more replication
/// stream from the active controller.
pub const LEARNERS_MAX: usize = 64;

/// Bytes of one broker message's frame body (`BrokerMessage`: a plugin copied to every
/// broker, up to `plugin.module.bytes.max`'s default of 32 MiB; re-routed records, up to one
/// Produce request): the reader reserves `FRAME_READ_CHUNK_BYTES` at a time, so a peer
/// announcing this much costs only what it sends.
pub const BROKER_FRAME_BYTES_MAX: u32 = 64 * 1024 * 1024;

/// Bytes of a full-snapshot frame's body: the snapshot's data (the framed image, at most
/// `SNAPSHOT_BYTES_MAX` plus its frame) and its meta.
pub const SNAPSHOT_FRAME_BYTES_MAX: u32 =
    SNAPSHOT_BYTES_MAX as u32 + SNAPSHOT_META_BYTES_MAX as u32 + 64 * 1024;

/// Bytes a frame's reader reserves before the bytes arrive: a peer announcing a large
/// frame and sending nothing costs us no more than this.
pub const FRAME_READ_CHUNK_BYTES: usize = 64 * 1024;

const _: () =
    assert!(FRAME_BYTES_MAX as usize >= LIMITED_READ_BYTES_MAX + ENTRY_BATCH_BYTES_MAX as usize);
const _: () = assert!(SNAPSHOT_FRAME_BYTES_MAX as usize > SNAPSHOT_BYTES_MAX);
const _: () = assert!(HELLO_FRAME_BYTES_MAX < FRAME_BYTES_MAX);

/// Milliseconds to open a TCP connection to a peer's controller listener and exchange hellos:
/// a peer that does not answer within it is unreachable for now.
pub const PEER_CONNECT_TIMEOUT_MS: u64 = 1_000;

/// Milliseconds one RPC (request written, answer read) may take at most, whatever openraft
/// allows: a stuck peer frees its connection.
pub const PEER_RPC_TIMEOUT_MS: u64 = 5_000;

/// Milliseconds a full snapshot's transfer and install may take (up to `SNAPSHOT_BYTES_MAX`
/// over loopback or a LAN).
pub const PEER_SNAPSHOT_TIMEOUT_MS: u64 = 120_000;

/// Reconnect backoff to an unreachable peer, in milliseconds: the first retry waits the
/// minimum, each failure doubles it up to the maximum (a dead peer costs one connect
/// attempt per maximum, not one per heartbeat).
pub const PEER_RECONNECT_BACKOFF_MIN_MS: u64 = 50;
pub const PEER_RECONNECT_BACKOFF_MAX_MS: u64 = 2_000;

const _: () = assert!(PEER_RECONNECT_BACKOFF_MIN_MS < PEER_RECONNECT_BACKOFF_MAX_MS);
const _: () = assert!(PEER_RECONNECT_BACKOFF_MAX_MS <= ELECTION_TIMEOUT_MAX_MS);

/// Connections the controller listener serves at once: every voter and learner opens a few
/// (one per replication stream, votes, forwards); more are refused at accept.
pub const CONTROLLER_CONNECTIONS_MAX: usize = 256;

/// Requests one connection of the controller listener serves at once: one (each answer is
/// written before the next request is read), so a peer can never queue work on us.
pub const REQUESTS_PER_CONNECTION_MAX: usize = 1;

/// Milliseconds a peer's connection may stay silent before the listener closes it (the
/// leader's heartbeats arrive every `HEARTBEAT_INTERVAL_MS`).
pub const CONNECTION_IDLE_TIMEOUT_MS: u64 = 60_000;

const _: () = assert!(CONNECTION_IDLE_TIMEOUT_MS > 10 * HEARTBEAT_INTERVAL_MS);

// The controller service (service.rs, controller_task.rs).

/// Commands queued for the task that owns the controller (local submits and forwarded
/// operations); a full queue makes submitters wait (backpressure), never grow it.
pub const CONTROLLER_COMMANDS_MAX: usize = 64;

/// Milliseconds a `submit` keeps retrying while no leader is known or the leader changes
/// (an election takes at most a few `ELECTION_TIMEOUT_MAX_MS`), and waits for its change to
/// apply locally; past it the submit fails with `ClusterError::Timeout`.
pub const SUBMIT_DEADLINE_MS: u64 = 15_000;

/// Milliseconds between retries of a submit that found no leader.
pub const SUBMIT_RETRY_MS: u64 = 50;

const _: () = assert!(SUBMIT_DEADLINE_MS >= 5 * ELECTION_TIMEOUT_MAX_MS);

/// Milliseconds the controller task sleeps at most between ticks while leading: session
/// expiry is due at `next_deadline_ms`, and this bound re-checks after heartbeats moved it.
pub const CONTROLLER_TICK_MAX_MS: u64 = 1_000;

/// Milliseconds a controlled shutdown waits for the controller to release the broker
/// before the node stops anyway.
pub const CONTROLLED_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;

/// Milliseconds a leader that shuts down waits for the voter it hands leadership to
/// (`transfer_leader`) to take over before it stops anyway (the others then elect one after
/// an election timeout).
pub const LEADER_TRANSFER_TIMEOUT_MS: u64 = ELECTION_TIMEOUT_MAX_MS;

/// Milliseconds between the heartbeats of a controlled shutdown (at most; the heartbeat
/// interval if shorter): the controller moves leaderships away, then releases the broker.
pub const CONTROLLED_SHUTDOWN_RETRY_MS: u64 = 200;

const _: () = assert!(CONTROLLED_SHUTDOWN_RETRY_MS < CONTROLLED_SHUTDOWN_TIMEOUT_MS);

/// Rounds of `Controller::tick` (each one committed entry) per wake-up of the controller
/// task: session expiry fences one broker per round, so this many expire at once before
/// commands get a turn again.
pub const TICK_ROUNDS_PER_WAKE_MAX: usize = 64;
