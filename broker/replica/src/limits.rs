//! Every bound and default of the replication core, with its unit and why. Nothing here
//! grows from a count the network sent: a fetch response carries at most
//! [`FETCH_BATCHES_MAX`] batches and a follower appends only what it checked against its
//! own log end; the leader tracks at most [`REPLICAS_MAX`] followers (the ones the
//! metadata image names, never the ones that merely fetch).

/// Most replicas of one partition: the controller's own bound.
pub use sluice_cluster::limits::REPLICAS_MAX;

/// Most batches one fetch response carries (the stand-in for `replica.fetch.max.bytes`:
/// the server bounds a response by bytes; the model by batches).
pub const FETCH_BATCHES_MAX: usize = 64;

/// Most acks=all produces one leader keeps waiting for its high watermark (Kafka's produce
/// purgatory, bounded). Past it a produce is answered REQUEST_TIMED_OUT before its append:
/// the client retries, nothing is appended twice.
pub const PENDING_PRODUCES_MAX: usize = 4096;

/// Most batches the in-memory log model holds. The simulator's logs stay far below; the
/// server's log is `sluice_storage::Log`, which the model mirrors (see the crate docs).
pub const LOG_BATCHES_MAX: usize = 1 << 20;

/// Batch headers a server replica keeps of its real log (`ReplicaLog::tail`): enough for
/// the newest fetches' answers; the bytes and producer state are the storage log's.
pub const TAIL_BATCHES_KEPT: usize = 64;

/// Batches per producer id the duplicate check looks back over: Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN` (an idempotent producer has at most five
/// requests in flight).
pub const PRODUCER_BATCHES_KEPT: usize = 5;

/// Most effects one event returns: an event appends, truncates, fsyncs, answers and sends
/// a bounded number of things; the pending produces it answers are bounded by
/// [`PENDING_PRODUCES_MAX`].
pub const EFFECTS_PER_EVENT_MAX: usize = PENDING_PRODUCES_MAX + 16;

/// `replica.lag.time.max.ms` default: Kafka's (30 s since KIP-537).
pub const DEFAULT_REPLICA_LAG_TIME_MAX_MS: i64 = 30_000;

/// `replica.fetch.wait.max.ms` default (Kafka's 500 ms): how long a follower waits after a
/// fetch that brought nothing (the model answers at once; the real leader holds the fetch
/// this long).
pub const DEFAULT_FETCH_IDLE_MS: i64 = 500;

/// `replica.fetch.backoff.ms` default (Kafka's 1 s): the wait after a fetch error.
pub const DEFAULT_FETCH_BACKOFF_MS: i64 = 1_000;

/// `replica.socket.timeout.ms` default (Kafka's 30 s): a fetch not answered in this long is
/// sent again.
pub const DEFAULT_FETCH_TIMEOUT_MS: i64 = 30_000;

/// How long a leader waits for an AlterPartition answer (or the metadata that shows it)
/// before it proposes again (Kafka's `AlterPartitionManager` retry, 50 ms backoff; a lost
/// answer is found by the timeout).
pub const DEFAULT_ALTER_PARTITION_RETRY_MS: i64 = 3_000;

/// Longest `replica.lag.time.max.ms` accepted: a day. A longer one keeps a dead follower in
/// the ISR, blocking acks=all, for longer than anyone waits.
pub const REPLICA_LAG_TIME_MAX_MS_MAX: i64 = 86_400_000;

const _: () = assert!(DEFAULT_REPLICA_LAG_TIME_MAX_MS <= REPLICA_LAG_TIME_MAX_MS_MAX);
const _: () = assert!(DEFAULT_FETCH_IDLE_MS < DEFAULT_REPLICA_LAG_TIME_MAX_MS);
const _: () = assert!(PRODUCER_BATCHES_KEPT >= 1 && FETCH_BATCHES_MAX >= 1);
const _: () = assert!(EFFECTS_PER_EVENT_MAX > PENDING_PRODUCES_MAX);
