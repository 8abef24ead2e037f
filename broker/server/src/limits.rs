//! Every limit of the server, with its unit and why it has the value it has.
//!
//! Limits a user may want to change are config keys (see `config.rs`); their defaults live
//! here so the two can be checked against each other at compile time.

/// Default `socket.request.max.bytes`: Kafka's 100 MiB. A frame whose length prefix is above
/// the configured value is refused before a buffer is allocated for it.
pub const SOCKET_REQUEST_MAX_BYTES_DEFAULT: u32 = 100 * 1024 * 1024;

/// Default `message.max.bytes`: Kafka's 1 MiB + 12 bytes of log overhead, per record batch.
pub const MESSAGE_MAX_BYTES_DEFAULT: u32 = 1_048_588;

/// Requests read from one connection but not yet answered. Kafka handles one request per
/// connection at a time; we read ahead this far so parsing overlaps processing, then stop
/// reading (TCP backpressure) until the writer catches up.
pub const IN_FLIGHT_REQUESTS_PER_CONNECTION_MAX: usize = 16;

/// Bytes of request frames read from one connection but not yet handled. Together with the
/// request count above it bounds a connection's read-ahead memory; a frame larger than this
/// (up to `socket.request.max.bytes`) is read only when nothing else is queued.
pub const READ_AHEAD_BYTES_PER_CONNECTION_MAX: u32 = 16 * 1024 * 1024;

/// Responses encoded (or, for acks=all produces, waiting for their group commit) but not yet
/// written to one connection's socket. Also how many of one producer's pipelined acks=all
/// requests one fsync can answer together.
pub const QUEUED_RESPONSES_PER_CONNECTION_MAX: usize = 16;

/// Default `max.connections` (and `max.connections.per.ip`): open client connections;
/// accepting stops (the kernel backlog holds the rest) above it.
pub const CONNECTIONS_MAX: usize = 10_000;

/// Default `queued.max.request.bytes`: request frame bytes read from every connection but
/// not yet answered. Readers wait for room (TCP backpressure), so a flood of large requests
/// from many connections cannot hold more than this; Kafka's key, which Kafka leaves
/// unbounded by default.
pub const QUEUED_MAX_REQUEST_BYTES_DEFAULT: u64 = 512 * 1024 * 1024;

/// Default `sluice.partitions.max`: partitions on one broker. Each open partition maps its
/// active segment's two index files (plus sealed ones on lookup) and holds file
/// descriptors; Linux's default `vm.max_map_count` is 65,530, which the pooling plugin
/// allocator shares. Creation past it is POLICY_VIOLATION; a data dir already holding more
/// (after lowering the key) still opens.
pub const PARTITIONS_MAX_DEFAULT: u32 = 10_000;

/// Default `sluice.segment.files.open.max`: sealed segments' `.log` files held open at
/// once, across every partition (the storage `FileCache`; least recently read first out).
/// Consumers mostly read the active segment, which every partition holds open anyway; this
/// bounds what catching-up readers of old segments cost, at one `open` per miss.
pub const SEGMENT_FILES_OPEN_MAX_DEFAULT: u32 = 512;

/// At most this share (in percent) of the descriptor limit goes to connections, and
/// [`SEGMENT_FILES_SHARE_PERCENT`] to the segment cache, whatever `max.connections` and
/// `sluice.segment.files.open.max` say: under a low limit (a hard `ulimit -n` of 1,024 or
/// 4,096) the defaults (10,000 and 512) would leave no descriptor for a single partition, so
/// they are lowered to fit (logged at start) and `sluice serve` still just works.
pub const CONNECTIONS_SHARE_PERCENT: u64 = 50;
/// See [`CONNECTIONS_SHARE_PERCENT`].
pub const SEGMENT_FILES_SHARE_PERCENT: u64 = 10;

/// Threads opening topic dirs at start. Opening a cleanly closed partition is one fsync
/// (its clean-shutdown marker's removal) and a few small reads; the disk serves many fsyncs
/// at once, so the start is bounded by fsync latency / this, not by the core count.
pub const STARTUP_OPEN_THREADS: usize = 16;

/// Descriptors the broker holds besides partitions, connections and the segment cache:
/// listeners and the admin listener, the runtime's epoll and wakers, the data dir lock, the
/// internal logs (offsets, transactions, cluster metadata, each with its own small segment
/// cache: `sluice_storage::limits::SEGMENT_FILES_OPEN_PER_LOG_MAX`), plugin and certificate
/// files read at start or on reload, stdio. Measured at about 60 on an idle broker; the rest
/// is headroom for files opened briefly (checkpoints, index reservations).
pub const BROKER_DESCRIPTORS_RESERVED: u64 = 256;

const _: () = assert!(
    BROKER_DESCRIPTORS_RESERVED
        >= 4 * sluice_storage::limits::SEGMENT_FILES_OPEN_PER_LOG_MAX as u64,
    "the internal logs' segment caches fit the reserve"
);

const _: () = assert!(
    QUEUED_MAX_REQUEST_BYTES_DEFAULT >= SOCKET_REQUEST_MAX_BYTES_DEFAULT as u64,
    "the largest request must fit the broker-wide read budget"
);

/// A TLS client gets this long from its TCP accept to a finished handshake; then it is
/// closed, so a client that never finishes does not hold a `max.connections` slot.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// Over TLS (no sendfile) a record set is read from its segment file and written through
/// the TLS stream in pieces of at most this many bytes, so a large fetch never sits whole
/// in memory.
pub const TLS_FILE_CHUNK_BYTES: usize = 256 * 1024;

/// Certificate file changes are gathered for this long before one reload, so a key and a
/// chain written one after the other are read together.
pub const TLS_RELOAD_DEBOUNCE_MS: u64 = 200;

/// TLS handshake failures logged at WARN per `TLS_FAILURE_WARNING_WINDOW_MS`; the rest of a
/// window's go to DEBUG (every one is counted in `sluice_tls_handshake_failures_total`).
pub const TLS_FAILURE_WARNINGS_PER_WINDOW: u32 = 10;

/// The window of `TLS_FAILURE_WARNINGS_PER_WINDOW`.
pub const TLS_FAILURE_WARNING_WINDOW_MS: i64 = 60_000;

/// A failure that repeats (a fenced partition refusing appends, a topic that cannot be
/// created) is logged at ERROR at most once per this interval per partition (per broker for
/// topic creation), with the count of those suppressed since the line before
/// (`broker/repeated.rs`): a producer retrying against a full disk must not fill it with log
/// lines. The rest go to DEBUG; metrics count every one.
pub const REPEATED_FAILURE_LOG_INTERVAL_MS: i64 = 60_000;

/// Failed logins (SASL, and the admin API's HTTP Basic) of one user name from one source
/// address within `LOGIN_FAILURE_WINDOW_MS` before that user's next attempts from that
/// address are refused without being checked. Other users on the address are not affected.
pub const LOGIN_FAILURES_PER_USER_MAX: u32 = 10;

/// The window over which failed logins are counted per (source address, user name).
pub const LOGIN_FAILURE_WINDOW_MS: i64 = 60_000;

/// (source address, user name) failure windows remembered at once, in all; past it an
/// expired window is forgotten first, then the oldest one still under its limit.
pub const LOGIN_FAILURE_ENTRIES_MAX: usize = 10_000;

/// User names with failure windows per source address: one address spraying user names
/// pushes out only its own windows.
pub const LOGIN_FAILURE_USERS_PER_SOURCE_MAX: usize = 100;

/// Bytes of a user name kept in the limiter's key (longer names are cut).
pub const LOGIN_FAILURE_USER_KEY_BYTES_MAX: usize = 256;

const _: () = assert!(LOGIN_FAILURE_USERS_PER_SOURCE_MAX < LOGIN_FAILURE_ENTRIES_MAX);

/// Pause after a failed `accept` (EMFILE, ENOMEM) so the loop does not spin.
pub const ACCEPT_ERROR_BACKOFF_MS: u64 = 100;

/// Upper bound on a Fetch's `max_wait_ms`, so a client cannot park a connection forever.
pub const FETCH_MAX_WAIT_MS_MAX: u64 = 30_000;

/// Default and cap of a Fetch response's total bytes when the request says 0 or less
/// (Kafka's `fetch.max.bytes`, 50 MiB).
pub const FETCH_RESPONSE_MAX_BYTES: u32 = 50 * 1024 * 1024;

/// Topics in one Metadata / CreateTopics / DeleteTopics request, and partitions per topic at
/// creation. Kafka has no hard cap; we refuse more rather than let a request balloon memory.
pub const TOPICS_PER_REQUEST_MAX: usize = 10_000;

/// Groups one OffsetFetch (v8+) or ConsumerGroupDescribe answers; groups past it are left
/// out of the answer.
pub const GROUPS_PER_REQUEST_MAX: usize = 1_000;

/// `num.partitions` / CreateTopics `num_partitions` upper bound per topic.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;

/// Kafka's topic name length limit (249: leaves room for `-<partition>` in a 255-byte file
/// name; `sluice_kafka::limits`, which the transaction coordinator and transforms check too).
pub use sluice_kafka::limits::TOPIC_NAME_BYTES_MAX;

/// How often the background ticker calls `Log::tick` (flush.ms, segment.ms, retention).
pub const LOG_TICK_INTERVAL_MS: u64 = 200;

/// Smallest `log.cleaner.dedupe.buffer.size` (bytes): the offset map must hold at least
/// one large batch's keys, or no clean could make progress.
pub const CLEANER_DEDUPE_BUFFER_BYTES_MIN: u64 = 1024 * 1024;

/// How often the fence prober (`fence.rs`) probes fenced partitions (ms). A fenced disk
/// frees space by retention (every `log.retention.check.interval.ms`) or by an operator, so
/// producers waiting a second more costs little, while each probe of a still-full disk is a
/// page written and fsynced per fenced partition.
pub const FENCE_PROBE_INTERVAL_MS: u64 = 1_000;

/// Fenced partitions probed per tick of the fence prober (the rest wait for later ticks,
/// round robin): bounds the fsyncs one tick issues when a whole disk of partitions fenced.
pub const FENCE_PROBES_PER_TICK_MAX: usize = 32;

/// Longest wait before the first retention run after start (Kafka's 30 s initial task delay),
/// when `log.retention.check.interval.ms` is longer.
pub const LOG_RETENTION_INITIAL_DELAY_MS: u64 = 30_000;

/// Time a graceful shutdown waits for in-flight connections before closing logs anyway.
pub const SHUTDOWN_GRACE_MS: u64 = 10_000;

/// Largest decompressed records section ListOffsets-by-time opens to find the exact record
/// in a compressed batch (bytes); above it the batch's first offset answers. Bounds the
/// memory a decompression bomb can claim.
pub const TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Largest decompressed records section of one batch a partitioner plugin re-routes
/// (bytes); a batch inflating past it is refused with CORRUPT_MESSAGE. Bounds the memory a
/// decompression bomb sent to a `sluice.partitioner` topic can claim.
pub const REROUTE_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Largest decompressed records section of one batch a validator plugin checks (bytes); a
/// batch inflating past it is refused with CORRUPT_MESSAGE. Bounds the memory a
/// decompression bomb sent to a `sluice.validator` topic can claim.
pub const VALIDATOR_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Record errors one refused partition entry carries back (KIP-467 `record_errors`); a
/// validator refusing more records is reported by count in the error message. Bounds the
/// response a batch of a million bad records makes.
pub const VALIDATOR_RECORD_ERRORS_MAX: usize = 1_000;

/// Largest decompressed records section of one stored batch a view's plugins see (bytes); a
/// fetch over a bigger one fails with KAFKA_STORAGE_ERROR naming this limit.
pub const VIEW_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Filters and transforms in one view's chain. Each stage is a plugin call per fetched batch.
pub const VIEW_STAGES_MAX: usize = 16;

/// Views per broker, ephemeral ones included (each holds pooled plugin instances).
pub const VIEWS_MAX: usize = 1_000;

/// An ephemeral view (`sluice consume --filter`) no fetch has used for this long is dropped
/// (ms). Consumers fetch at least every `FETCH_MAX_WAIT_MS_MAX`, so a live one never expires.
pub const VIEW_EPHEMERAL_IDLE_MS: u64 = 5 * 60 * 1000;

const _: () = assert!(VIEW_EPHEMERAL_IDLE_MS > 2 * FETCH_MAX_WAIT_MS_MAX);

const _: () = assert!(MESSAGE_MAX_BYTES_DEFAULT < SOCKET_REQUEST_MAX_BYTES_DEFAULT);
const _: () = assert!(FETCH_RESPONSE_MAX_BYTES >= MESSAGE_MAX_BYTES_DEFAULT);
const _: () = assert!(QUEUED_RESPONSES_PER_CONNECTION_MAX <= IN_FLIGHT_REQUESTS_PER_CONNECTION_MAX);

/// Segment size of the compacted internal logs (offsets, transactions), in bytes. The
/// cleaner never touches the active segment, so this bounds the uncleaned tail a start
/// replays; Kafka's `offsets.topic.segment.bytes` is 100 MiB for a log many brokers share.
pub const INTERNAL_LOG_SEGMENT_BYTES: u32 = 16 * 1024 * 1024;

/// `delete.retention.ms` of the compacted internal logs: how long a tombstone outlives the
/// clean that first covered it (Kafka's default, as for `__consumer_offsets`).
pub const INTERNAL_LOG_DELETE_RETENTION_MS: i64 = 86_400_000;

/// Least time between two checks whether a compacted internal log is due for a clean, in
/// ms (Kafka's `log.cleaner.backoff.ms` default).
pub const INTERNAL_LOG_CLEAN_CHECK_MS: i64 = 15_000;

/// The cleaner's offset map for a compacted internal log, in bytes (keys plus
/// `sluice_storage::limits::CLEANER_MAP_ENTRY_OVERHEAD_BYTES` each): a dirty section with more
/// keys is cleaned a prefix at a time.
pub const INTERNAL_LOG_DEDUPE_BUFFER_BYTES: u64 = 16 * 1024 * 1024;

/// Index file size (`segment.index.bytes`) of each internal log (offsets, transactions,
/// security), in bytes: room for 131,072 entries, one per 4 KiB of log, so a segment of
/// `INTERNAL_LOG_SEGMENT_BYTES` never fills it (the files are sparse, so the size costs
/// address space, not disk).
pub const INTERNAL_LOG_INDEX_BYTES: u32 = 1024 * 1024;

/// Bytes read per step while replaying the offsets log at start.
pub const OFFSETS_READ_CHUNK_BYTES: u32 = 4 * 1024 * 1024;

/// Records per batch written to the offsets log (a large commit or snapshot is split).
pub const OFFSETS_RECORDS_PER_BATCH_MAX: usize = 1_000;

/// Key and value bytes after which a batch of the offsets log is closed and a new one begun
/// (well under the storage engine's batch limit, since one record may reach 1 MiB).
pub const OFFSETS_BATCH_BYTES_TARGET: usize = 1024 * 1024;

/// Requests queued for the group coordinator task. Senders wait when it is full
/// (backpressure on the connections that send group requests).
pub const GROUP_COMMANDS_QUEUED_MAX: usize = 1_024;

/// Names an error message lists at most (e.g. the topics a consumer group member may not
/// describe); the rest are left out so the message stays small.
pub const ERROR_NAMES_LISTED_MAX: usize = 20;

/// Compiled consumer-group subscription regexes kept (`topic_regex.rs`); the cache is
/// emptied when full, so a flood of distinct regexes costs compile time, not memory.
pub const SUBSCRIPTION_REGEXES_CACHED_MAX: usize = 256;

/// The compiled size one subscription regex may take (the regex crate's `size_limit`); a
/// larger one is INVALID_REGULAR_EXPRESSION. The text itself is capped by the group
/// crate's `SUBSCRIPTION_BYTES_MAX`.
pub const SUBSCRIPTION_REGEX_PROGRAM_BYTES_MAX: usize = 1024 * 1024;

/// Offset batches queued for the offsets-log writer, and results queued back. The
/// coordinator caps unacknowledged batches at `sluice_group::limits::PENDING_PERSISTS_MAX`;
/// beyond this queue a batch fails with COORDINATOR_NOT_AVAILABLE (retriable).
pub const OFFSETS_WRITES_QUEUED_MAX: usize = 1_024;

/// Persist batches the writer combines into one append (and one fsync).
pub const OFFSETS_WRITES_PER_APPEND_MAX: usize = 256;

/// Longest the coordinator task sleeps between timer checks, in ms: a wall-clock jump
/// cannot park the timers for longer than this.
pub const GROUP_TIMER_SLEEP_MAX_MS: u64 = 1_000;

/// Requests queued for the transaction coordinator task. Senders wait when it is full
/// (backpressure on the connections of transactional producers).
pub const TXN_COMMANDS_QUEUED_MAX: usize = 1_024;

/// Longest the transaction coordinator sleeps between timer checks, in ms (a wall-clock
/// jump cannot park the timeouts for longer).
pub const TXN_TIMER_SLEEP_MAX_MS: i64 = 1_000;

/// How long the transaction coordinator waits before writing again the markers of a
/// transaction whose markers could not all be written (a fenced partition), in ms.
pub const TXN_MARKER_RETRY_MS: i64 = 1_000;

/// Default port of the admin HTTP API (`admin.listen`), Redpanda's admin port.
pub const ADMIN_PORT_DEFAULT: u16 = 9644;

/// Largest admin API request body, in bytes (a topic creation with its configs is < 1 KiB).
pub const ADMIN_BODY_BYTES_MAX: usize = 64 * 1024;

/// Consumer groups whose lag one `/metrics` scrape reports; beyond it the scrape is cut
/// short (and says so in `sluice_metrics_groups_truncated`) so a scrape stays cheap.
pub const ADMIN_METRICS_GROUPS_MAX: usize = 1_000;

/// Default `admin.max.connections`: open admin API connections. An operator's tools need a
/// handful; past it new connections are closed at accept (`sluice_admin_connections_refused_total`),
/// so a flood cannot exhaust file descriptors the Kafka listener needs.
pub const ADMIN_MAX_CONNECTIONS_DEFAULT: usize = 64;

/// Largest `admin.max.connections`: as many as the Kafka listener's default `max.connections`.
pub const ADMIN_MAX_CONNECTIONS_MAX: usize = CONNECTIONS_MAX;
const _: () = assert!(ADMIN_MAX_CONNECTIONS_DEFAULT <= ADMIN_MAX_CONNECTIONS_MAX);

/// How long the admin API may take to finish its requests at shutdown, in milliseconds. An
/// HTTP client that keeps a connection open (or sends half a request) would otherwise hold
/// the broker's exit forever; after this the admin task is aborted.
pub const ADMIN_SHUTDOWN_GRACE_MS: u64 = 2_000;
const _: () =
    assert!(TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX >= 16 * MESSAGE_MAX_BYTES_DEFAULT as usize);

/// Largest decompressed records section of one produced batch (bytes). Produce inflates
/// every compressed batch to walk its records before appending it; a batch inflating past
/// this is refused with INVALID_RECORD naming this limit. Bounds the memory a decompression
/// bomb can claim (one buffer per blocking thread at a time).
pub const PRODUCE_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Capacity of a blocking thread's produce decompression buffer kept between batches
/// (bytes); a larger one is freed after its batch, so idle threads do not hold bomb-sized
/// buffers.
pub const PRODUCE_SCRATCH_KEPT_BYTES_MAX: usize = 4 * 1024 * 1024;

const _: () = assert!(PRODUCE_SCRATCH_KEPT_BYTES_MAX <= PRODUCE_DECOMPRESSED_BYTES_MAX);
const _: () = assert!(PRODUCE_DECOMPRESSED_BYTES_MAX >= 16 * MESSAGE_MAX_BYTES_DEFAULT as usize);

/// Resources answered in one DescribeConfigs request; the rest get INVALID_REQUEST naming
/// this limit. Each answered resource carries every config key (about 60 with docs), so a
/// 140 KB request of names otherwise builds a response of hundreds of MB. Kafka's tools ask
/// for one resource at a time; admin UIs batch a few hundred topics.
pub const DESCRIBE_CONFIGS_RESOURCES_MAX: usize = 1_000;

const _: () = assert!(INTERNAL_LOG_DEDUPE_BUFFER_BYTES >= CLEANER_DEDUPE_BUFFER_BYTES_MIN);

/// Client instances whose pushed metrics (KIP-714) the broker keeps; past it the one seen
/// longest ago is forgotten (its next push answers UNKNOWN_SUBSCRIPTION_ID and it
/// subscribes again). Bounds the telemetry store and `/metrics` together with the two
/// limits below.
pub const TELEMETRY_CLIENTS_MAX: usize = 1_000;

/// Data points kept from one push (the rest counted as dropped). Kafka's clients push a few
/// dozen.
pub const TELEMETRY_POINTS_PER_PUSH_MAX: usize = 500;

/// Attributes kept per data point (and of a push's resource).
pub const TELEMETRY_ATTRIBUTES_PER_POINT_MAX: usize = 16;

/// Longest metric name or attribute string kept, in bytes (longer ones are cut).
pub const TELEMETRY_STRING_BYTES_MAX: usize = 256;

/// The shortest a client instance is kept after it was last heard from (ms): three push
/// intervals, but never less than this, so a short interval does not make a closed client
/// vanish before anyone looked.
pub const TELEMETRY_FORGET_AFTER_MS_MIN: i64 = 60_000;

/// Largest decompressed push (bytes); a push inflating past it is INVALID_RECORD.
pub const TELEMETRY_DECOMPRESSED_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Distinct (client software name, version) pairs the `sluice_client_software_connections`
/// gauge keeps (KIP-511); connections of further pairs are counted under `_other`. Each
/// pair costs its two strings; a client can send any name, so the map must not grow with
/// them. Kafka's own clients, librdkafka, franz-go and a few tool versions fit many times.
pub const CLIENT_SOFTWARE_ENTRIES_MAX: usize = 1_000;

/// Longest client software name or version (bytes) the gauge keeps as sent; a longer one is
/// counted under `_other`. Kafka's clients send names like `apache-kafka-java` and versions
/// like `4.4.0`.
pub const CLIENT_SOFTWARE_BYTES_MAX: usize = 128;

/// The compiled size of ListTransactions v2's transactional id pattern (the regex crate's
/// `size_limit`, bytes); a larger one is INVALID_REGULAR_EXPRESSION. The pattern is
/// compiled once per request and dropped with it; the text itself is bounded by the frame.
pub const TRANSACTIONAL_ID_PATTERN_PROGRAM_BYTES_MAX: usize = 1024 * 1024;

/// Partitions in one DescribeTopicPartitions page (KIP-966): the request's limit is clamped
/// to 1..=this, Kafka's `max.request.partition.size.limit` default; the client pages on with
/// the answer's cursor. Bounds the response whatever the request asks.
pub const DESCRIBE_TOPIC_PARTITIONS_PARTITIONS_MAX: i32 = 2_000;

/// The most voters `controller.quorum.voters` may list: each is in every commit's majority,
/// so more voters make every metadata change slower; Kafka clusters run 3 or 5.
pub const QUORUM_VOTERS_MAX: usize = 9;

/// Producer ids each broker of a cluster owns (node id `n` hands out
/// `n * this .. (n + 1) * this`): 2^32, so every node id (up to 2^31 - 1) has a range within
/// the 63-bit id space and no two brokers ever hand out the same id.
pub const PRODUCER_IDS_PER_NODE: i64 = 1 << 32;

/// Largest answer a broker gives another's `describe` or `list` of materialized transforms
/// (its runners' partition reports, JSON), in bytes: below the broker message frame bound
/// (`BROKER_FRAME_BYTES_MAX`, 64 MiB), so a broker with very many runners says so, naming
/// this, instead of failing the frame (checked in `transforms/peers.rs`). 100 transforms of 10,000 partitions at ~600 bytes a
/// report would pass it: describe one transform then.
pub const TRANSFORM_REPORTS_BYTES_MAX: usize = 32 * 1024 * 1024;
