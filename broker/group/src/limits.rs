//! Every bound the coordinator enforces, with its unit and why.
//!
//! Hard limits (`*_MAX`) cap memory that grows from client input. Defaults (`DEFAULT_*`)
//! are Kafka's broker defaults and are overridable through [`crate::GroupConfig`]; the
//! server validates a config against the hard limits with [`crate::GroupConfig::validate`].

/// Longest accepted `group.id`, in bytes (255, shared with the transaction coordinator and
/// materialized transforms: `sluice_kafka::limits`). Longer ids get `INVALID_GROUP_ID`.
pub use sluice_kafka::limits::GROUP_ID_BYTES_MAX;

/// Longest accepted `group.instance.id`, in bytes (same reasoning as group ids).
/// Longer ids get `INVALID_REQUEST`.
pub const GROUP_INSTANCE_ID_BYTES_MAX: usize = 255;

/// Longest client id kept in a member id (`<client_id>-<uuid>`), in bytes. Longer client
/// ids get `INVALID_REQUEST` on JoinGroup.
pub const CLIENT_ID_BYTES_MAX: usize = 255;

/// Longest client host string kept for DescribeGroups, in bytes (an IPv6 literal with a
/// `/` prefix fits easily).
pub const CLIENT_HOST_BYTES_MAX: usize = 255;

/// Longest principal a member's heartbeat carries (`User:` and a SASL name or a client
/// certificate's subject; set by the server, bounded here anyway).
pub const PRINCIPAL_BYTES_MAX: usize = 4096;

/// Most protocols (assignors) one member may offer in a JoinGroup. Real clients offer 1-3.
pub const MEMBER_PROTOCOLS_MAX: usize = 32;

/// Largest protocol metadata (subscription) one member may send per protocol, in bytes.
/// A subscription to 10k topics with owned partitions fits in well under 1 MiB.
pub const PROTOCOL_METADATA_BYTES_MAX: usize = 1024 * 1024;

/// Largest assignment the leader may hand one member in SyncGroup, in bytes.
pub const ASSIGNMENT_BYTES_MAX: usize = 1024 * 1024;

/// Hard cap on members (plus pending members) of one group; `group.max.size` may be set
/// lower. Kafka's default is unbounded; we bound it.
pub const GROUP_MEMBERS_MAX: usize = 10_000;

/// Hard cap on groups held by one coordinator (groups with members or committed offsets).
/// New groups beyond it get `COORDINATOR_NOT_AVAILABLE` (retriable) until some expire.
pub const GROUPS_MAX: usize = 100_000;

/// Hard cap on committed offsets (topic-partitions) one group may hold. Commits adding
/// partitions beyond it get `INVALID_COMMIT_OFFSET_SIZE` for those partitions.
pub const GROUP_OFFSETS_MAX: usize = 100_000;

/// Hard cap on partitions in one OffsetCommit request, also bounding one persist batch.
pub const COMMIT_PARTITIONS_MAX: usize = 100_000;

/// Hard cap on offset-commit batches handed to the server and not yet acknowledged
/// through [`crate::Coordinator::persisted`]. Commits beyond it get
/// `COORDINATOR_NOT_AVAILABLE` (retriable): the log is not keeping up.
pub const PENDING_PERSISTS_MAX: usize = 10_000;

/// Largest offset-commit metadata string the config may allow, in bytes.
pub const OFFSET_METADATA_BYTES_MAX: usize = 1024 * 1024;

/// Kafka's `group.min.session.timeout.ms` default, in milliseconds (6 s).
pub const DEFAULT_SESSION_TIMEOUT_MIN_MS: u32 = 6_000;

/// Kafka's `group.max.session.timeout.ms` default, in milliseconds (30 min).
pub const DEFAULT_SESSION_TIMEOUT_MAX_MS: u32 = 1_800_000;

/// Kafka's `group.initial.rebalance.delay.ms` default, in milliseconds (3 s).
pub const DEFAULT_INITIAL_REBALANCE_DELAY_MS: u32 = 3_000;

/// Kafka's `offsets.retention.minutes` default (7 days), in milliseconds.
pub const DEFAULT_OFFSETS_RETENTION_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// Kafka's `offsets.retention.check.interval.ms` default, in milliseconds (10 min).
pub const DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS: u64 = 600_000;

/// Kafka's `offset.metadata.max.bytes` default, in bytes.
pub const DEFAULT_OFFSET_METADATA_MAX_BYTES: usize = 4096;

/// How long a new member's JoinGroup may wait for the rebalance before the member is
/// dropped (Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`, 5 min): a client that gave
/// up on a long rebalance and retried must not leave defunct members behind.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 300_000;

const _: () = assert!(DEFAULT_SESSION_TIMEOUT_MIN_MS <= DEFAULT_SESSION_TIMEOUT_MAX_MS);
const _: () = assert!(DEFAULT_OFFSET_METADATA_MAX_BYTES <= OFFSET_METADATA_BYTES_MAX);
const _: () = assert!(OFFSET_METADATA_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(GROUP_ID_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(COMMIT_PARTITIONS_MAX <= GROUP_OFFSETS_MAX);

/// Keys whose tombstone appends failed and are written again at the next tick; past it the
/// rest come back after a restart (as every deletion would without the retry).
pub const OWED_TOMBSTONES_MAX: usize = 100_000;

/// Least time between two writes of owed tombstones, in ms.
pub const TOMBSTONE_RETRY_MS: u64 = 1_000;

/// Longest member id of a consumer-protocol member, in bytes (Java clients send a 22-byte
/// base64 UUID; classic ids are `<client_id>-<uuid>`, under 300).
pub const MEMBER_ID_BYTES_MAX: usize = 512;

/// Topic names (plus one regex) one consumer-protocol member may subscribe to.
pub const SUBSCRIBED_TOPICS_MAX: usize = 10_000;

/// Longest subscribed topic name or regex, in bytes (Kafka topic names stop at 249).
pub const SUBSCRIPTION_BYTES_MAX: usize = 4096;

/// Partitions a consumer-protocol member may report owning in one heartbeat.
pub const OWNED_PARTITIONS_MAX: usize = 100_000;

/// Groups whose offsets never expire: a materialized transform's source positions
/// (`__sluice_transform/<name>`, written by its transactions). A transform whose source is
/// idle for `offsets.retention.minutes` must not lose its position. (The one prefix of
/// `sluice_kafka::limits`, which transforms name their groups with.)
pub use sluice_kafka::limits::TRANSFORM_ID_PREFIX as NEVER_EXPIRING_GROUP_PREFIX;

/// Default `group.consumer.session.timeout.ms` (Kafka's).
pub const DEFAULT_CONSUMER_SESSION_TIMEOUT_MS: u32 = 45_000;

/// Default `group.consumer.heartbeat.interval.ms` (Kafka's).
pub const DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS: u32 = 5_000;

const _: () = assert!(DEFAULT_CONSUMER_HEARTBEAT_INTERVAL_MS < DEFAULT_CONSUMER_SESSION_TIMEOUT_MS);
