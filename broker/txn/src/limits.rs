//! Every bound the transaction coordinator enforces, with its unit and why.
//!
//! Hard limits (`*_MAX`) cap memory and record sizes that grow from client input; the
//! record decoder enforces the same limits, so a record the coordinator wrote always
//! decodes and a corrupt one never makes it allocate more. Defaults (`DEFAULT_*`) are
//! Kafka's broker defaults and are overridable through [`crate::TxnConfig`].

/// Longest accepted `transactional.id`, in bytes (255: `sluice_kafka::limits`, which
/// materialized transforms build their ids within). Longer ids get `INVALID_REQUEST`.
pub use sluice_kafka::limits::TRANSACTIONAL_ID_BYTES_MAX;

/// Longest topic name, in bytes (Kafka's own limit, `Topic.MAX_NAME_LENGTH`:
/// `sluice_kafka::limits`). Longer names get `INVALID_REQUEST`; the server answers unknown
/// topics before asking us.
pub use sluice_kafka::limits::TOPIC_NAME_BYTES_MAX;

/// Longest consumer-group id added to a transaction, in bytes (the group coordinator's
/// bound: `sluice_kafka::limits`). Longer ids get `INVALID_GROUP_ID`.
pub use sluice_kafka::limits::GROUP_ID_BYTES_MAX;

/// Longest offset-commit metadata string kept in a transaction, in bytes (Kafka's
/// `offset.metadata.max.bytes` default). Longer strings get `OFFSET_METADATA_TOO_LARGE`.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// Most partitions one transaction may write to. Kafka has no bound; each
/// AddPartitionsToTxn rewrites the whole transaction record, so we cap its size. A request
/// that would go beyond it gets `INVALID_REQUEST` and leaves the transaction unchanged.
pub const TXN_PARTITIONS_MAX: usize = 10_000;

/// Most consumer groups one transaction may commit offsets for (AddOffsetsToTxn). Beyond
/// it: `INVALID_REQUEST`.
pub const TXN_GROUPS_MAX: usize = 1_000;

/// Most pending offsets (group, partition pairs) one transaction may hold before it
/// commits. A TxnOffsetCommit that would go beyond it gets `INVALID_COMMIT_OFFSET_SIZE`
/// (as the group coordinator answers a group over its offset cap).
pub const PENDING_OFFSETS_MAX: usize = 10_000;

/// Most transactional ids one coordinator holds. InitProducerId for a new id beyond it
/// gets `COORDINATOR_NOT_AVAILABLE` (retriable) until idle ids expire
/// (`transactional.id.expiration.ms`); existing ids keep working.
pub const TXNS_MAX: usize = 100_000;

/// Producer ids reserved per `ProducerIdBlock` record. Kafka's controller hands brokers
/// blocks of 1000 (`ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`): one fsynced record per 1000
/// InitProducerId calls, and at most 1000 ids skipped per restart.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1_000;

/// Kafka's `transaction.max.timeout.ms` default, in milliseconds (15 min).
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// Kafka's `transactional.id.expiration.ms` default, in milliseconds (7 days).
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms` default, in
/// milliseconds (10 s).
pub const DEFAULT_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS: i64 = 10_000;

/// Kafka's `transaction.remove.expired.transaction.cleanup.interval.ms` default, in
/// milliseconds (1 h).
pub const DEFAULT_REMOVE_EXPIRED_CLEANUP_INTERVAL_MS: i64 = 3_600_000;

/// The largest value a transaction record can have, in bytes: the fixed fields, every
/// partition with the longest topic, every group with the longest id, every pending offset
/// with the longest topic and metadata. The server's transaction-log partition must accept
/// records this large.
pub const TXN_VALUE_BYTES_MAX: usize = 64
    + TXN_PARTITIONS_MAX * (2 + TOPIC_NAME_BYTES_MAX + 4)
    + TXN_GROUPS_MAX * (2 + GROUP_ID_BYTES_MAX + 4)
    + PENDING_OFFSETS_MAX * (2 + TOPIC_NAME_BYTES_MAX + 4 + 8 + 4 + 2 + OFFSET_METADATA_BYTES_MAX);

// Strings are written with an i16 length.
const _: () = assert!(TRANSACTIONAL_ID_BYTES_MAX <= i16::MAX as usize);
const _: () = assert!(TOPIC_NAME_BYTES_MAX <= i16::MAX as usize);
const _: () = assert!(GROUP_ID_BYTES_MAX <= i16::MAX as usize);
const _: () = assert!(OFFSET_METADATA_BYTES_MAX <= i16::MAX as usize);
// Counts are written as i32.
const _: () = assert!(TXN_PARTITIONS_MAX <= i32::MAX as usize);
const _: () = assert!(PENDING_OFFSETS_MAX <= i32::MAX as usize);
// One transaction record stays well under 64 MiB.
const _: () = assert!(TXN_VALUE_BYTES_MAX <= 64 * 1024 * 1024);
const _: () = assert!(PRODUCER_ID_BLOCK_SIZE > 0);
const _: () = assert!(DEFAULT_MAX_TIMEOUT_MS > 0);
