//! Every bound of a materialized transform, with its unit and why
//! (docs/design/materialized-transforms.md, "Backpressure and bounds").
//!
//! Bounds other crates check too (topic names, group and transactional ids, plugin names
//! and parameters, the reserved id prefix) are `sluice_kafka::limits`'s, the one copy the
//! coordinators and the plugin host use; the ids a transform builds are checked against
//! them here at compile time.

pub use sluice_kafka::limits::{
    GROUP_ID_BYTES_MAX, PLUGIN_NAME_BYTES_MAX, TOPIC_NAME_BYTES_MAX, TRANSACTIONAL_ID_BYTES_MAX,
};

/// Most materialized transforms per broker: each costs a task and a transactional id per
/// source partition. Deploying one more is refused.
pub const TRANSFORMS_MAX: usize = 100;

/// Most `--to` output topics of one transform (the "1 to 8"), not counting the
/// dead-letter topic. An output index travels in a header value of at most 3 digits.
pub const TRANSFORM_OUTPUTS_MAX: usize = 8;

/// The prefix of a transform's transactional ids and of its offsets group
/// (`sluice_kafka::limits::TRANSFORM_ID_PREFIX`, whose groups the group coordinator never
/// expires). `/` cannot appear in a topic name or a transform name, so these ids never
/// collide with a client's.
pub use sluice_kafka::limits::TRANSFORM_ID_PREFIX as RESERVED_PREFIX;

/// Digits of the largest source partition index (`i32::MAX` = 2147483647).
pub const PARTITION_DIGITS_MAX: usize = 10;

/// Longest transform name, in bytes: a topic name's characters, but short enough that the
/// transactional id `__sluice_transform/<name>/<partition>` fits
/// [`TRANSACTIONAL_ID_BYTES_MAX`] (255 - 19 - 1 - 10 = 225, not a topic's 249).
pub const TRANSFORM_NAME_BYTES_MAX: usize =
    TRANSACTIONAL_ID_BYTES_MAX - RESERVED_PREFIX.len() - 1 - PARTITION_DIGITS_MAX;

/// The longest parameter key or value, in bytes (as [`TRANSFORM_PARAMS_MAX`]).
pub use sluice_kafka::limits::PLUGIN_PARAM_BYTES_MAX as TRANSFORM_PARAM_BYTES_MAX;
/// Most parameters given to the plugin (the plugin host's bound, which `init` enforces
/// again: `sluice_kafka::limits::PLUGIN_PARAMS_MAX`).
pub use sluice_kafka::limits::PLUGIN_PARAMS_MAX as TRANSFORM_PARAMS_MAX;

/// Longest principal recorded in a spec, in bytes (`User:<name>`; Kafka user names are
/// short, this bounds the spec file).
pub const PRINCIPAL_BYTES_MAX: usize = 1024;

/// Most source partitions a spec holds start offsets for: the group keeps one committed
/// offset per source partition, and Kafka topics rarely pass a few thousand partitions.
/// Deploy also checks `sluice_group::limits::GROUP_OFFSETS_MAX` (100,000), far above.
pub const TRANSFORM_SOURCE_PARTITIONS_MAX: usize = 10_000;

/// The outputs' partitions plus the dead-letter topic's, checked at deploy so AddPartitions
/// can never refuse: at most `sluice_txn::limits::TXN_PARTITIONS_MAX` (the server, which
/// sees both crates, checks it at compile time).
pub const TRANSFORM_TXN_PARTITIONS_MAX: usize = 10_000;

/// One read of the source, in bytes (whole batches, at least one): the runner's read buffer.
pub const TRANSFORM_READ_BYTES_MAX: usize = 1024 * 1024;

/// One source batch decompressed, in bytes (as `VIEW_DECOMPRESSED_BYTES_MAX`); past it the
/// partition fails with the limit named.
pub const TRANSFORM_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// One call's output, in bytes (it lives in the guest's memory first, bounded by
/// `plugin.memory.bytes.max`); past it the call is a failure (`too-large`).
pub const TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX: u64 = 64 * 1024 * 1024;

/// Output appended in one open transaction, in bytes: in-flight output holds the outputs'
/// last stable offset, so read_committed consumers wait behind it. Reaching it commits.
pub const TRANSFORM_TXN_OUTPUT_BYTES_MAX: u64 = 16 * 1024 * 1024;

/// Default of a transform's `commit_interval_ms` (set per transform at deploy), in
/// milliseconds: the longest a transaction stays open while records flow (Kafka Streams'
/// exactly-once default), so the end-to-end latency seen by read_committed consumers.
pub const TRANSFORM_COMMIT_INTERVAL_MS_DEFAULT: i64 = 100;
/// Shortest commit interval, in milliseconds: each commit costs the coordinator five log
/// appends, so a shorter interval buys no latency, only coordinator load.
pub const TRANSFORM_COMMIT_INTERVAL_MS_MIN: i64 = 10;
/// Longest commit interval, in milliseconds: it bounds the output latency and, through
/// [`txn_timeout_ms`], the producer's `transaction.timeout.ms`.
pub const TRANSFORM_COMMIT_INTERVAL_MS_MAX: i64 = 5_000;

/// How long a runner with an open transaction waits for new source records, once it has
/// read everything below the last stable offset, before it commits without waiting for
/// `commit_interval_ms`, in milliseconds: the output of a burst reaches read_committed
/// consumers this long after its last record instead of up to the interval later. While
/// records keep coming faster than this, transactions run their whole interval, so it
/// adds at most one commit per this long per runner (a source trickling just slower).
pub const TRANSFORM_IDLE_COMMIT_MS: i64 = 20;

/// Least `transaction.timeout.ms` of a runner's producer, in milliseconds (Kafka's
/// producer default).
pub const TRANSFORM_TXN_TIMEOUT_MS_MIN: i64 = 60_000;

/// Default of `transform.calls.concurrent.max`: transform plugin calls in flight over all
/// transforms (one fair semaphore in the broker), the CPU transforms may take from fetches
/// and produces.
pub const TRANSFORM_CALLS_CONCURRENT_DEFAULT: usize = 2;

/// The most `transform.calls.concurrent.max` may be: each call holds a blocking-pool thread
/// and a plugin instance.
pub const TRANSFORM_CALLS_CONCURRENT_MAX: usize = 64;

/// Extra plugin calls spent isolating the failing records of one failed call (the first
/// call not counted). One poison record among 512 takes 18.
pub const TRANSFORM_BISECT_CALLS_MAX: u32 = 64;

/// First wait, in milliseconds, after a retriable failure (Busy, CONCURRENT_TRANSACTIONS,
/// COORDINATOR_NOT_AVAILABLE, a storage error); doubled after each further failure.
pub const TRANSFORM_RETRY_BACKOFF_MS: i64 = 100;
/// Longest wait between retries, in milliseconds.
pub const TRANSFORM_RETRY_BACKOFF_MS_MAX: i64 = 30_000;

/// Longest `sluice.dlq.reason` header value, in bytes; longer error texts are cut at a
/// character boundary.
pub const TRANSFORM_DLQ_REASON_BYTES_MAX: usize = 1024;

/// The producer's `transaction.timeout.ms` for a commit interval and a plugin call timeout,
/// both in milliseconds: the larger of [`TRANSFORM_TXN_TIMEOUT_MS_MIN`] and four times the
/// longest a live runner can hold a transaction open (the interval plus a failed call and
/// its bisect), so a live runner always commits before the coordinator aborts it.
#[must_use]
pub fn txn_timeout_ms(commit_interval_ms: i64, call_timeout_ms: i64) -> i64 {
    let calls = 1 + i64::from(TRANSFORM_BISECT_CALLS_MAX);
    let held_ms = commit_interval_ms.saturating_add(call_timeout_ms.saturating_mul(calls));
    held_ms.saturating_mul(4).max(TRANSFORM_TXN_TIMEOUT_MS_MIN)
}

// The ids built from a name fit the coordinators' bounds.
const _: () = assert!(
    RESERVED_PREFIX.len() + TRANSFORM_NAME_BYTES_MAX + 1 + PARTITION_DIGITS_MAX
        <= TRANSACTIONAL_ID_BYTES_MAX
);
const _: () = assert!(RESERVED_PREFIX.len() + TRANSFORM_NAME_BYTES_MAX <= GROUP_ID_BYTES_MAX);
const _: () = assert!(TRANSFORM_NAME_BYTES_MAX <= TOPIC_NAME_BYTES_MAX);
// An output index fits the routing header's 3 digits and a u32.
const _: () = assert!(TRANSFORM_OUTPUTS_MAX >= 1 && TRANSFORM_OUTPUTS_MAX <= 999);
// One transaction can always hold every output's partitions, bounded at deploy.
const _: () = assert!(TRANSFORM_OUTPUTS_MAX < TRANSFORM_TXN_PARTITIONS_MAX);
// A read fits in what one open transaction may hold, and one call's output may pass it
// (then the transaction commits right after that call's appends).
const _: () = assert!((TRANSFORM_READ_BYTES_MAX as u64) < TRANSFORM_TXN_OUTPUT_BYTES_MAX);
const _: () = assert!(TRANSFORM_TXN_OUTPUT_BYTES_MAX <= TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX);
const _: () = assert!(TRANSFORM_READ_BYTES_MAX <= TRANSFORM_DECOMPRESSED_BYTES_MAX);
const _: () = assert!(TRANSFORM_COMMIT_INTERVAL_MS_MIN <= TRANSFORM_COMMIT_INTERVAL_MS_DEFAULT);
const _: () = assert!(TRANSFORM_COMMIT_INTERVAL_MS_DEFAULT <= TRANSFORM_COMMIT_INTERVAL_MS_MAX);
// The commit interval leaves a live runner far inside its transaction timeout.
const _: () = assert!(TRANSFORM_COMMIT_INTERVAL_MS_MAX * 4 <= TRANSFORM_TXN_TIMEOUT_MS_MIN);
const _: () = assert!(TRANSFORM_RETRY_BACKOFF_MS > 0);
const _: () = assert!(TRANSFORM_RETRY_BACKOFF_MS <= TRANSFORM_RETRY_BACKOFF_MS_MAX);
// A bisect call count fits the runner's counters; splitting needs two calls.
const _: () = assert!(TRANSFORM_BISECT_CALLS_MAX >= 2);
const _: () = assert!(TRANSFORM_SOURCE_PARTITIONS_MAX <= i32::MAX as usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_timeout_covers_a_bisected_call_and_never_drops_below_the_floor() {
        assert_eq!(txn_timeout_ms(100, 0), TRANSFORM_TXN_TIMEOUT_MS_MIN);
        // 4 x (100 + 1,000 x 65) = 260,400 ms.
        assert_eq!(txn_timeout_ms(100, 1_000), 260_400);
        assert_eq!(txn_timeout_ms(i64::MAX, i64::MAX), i64::MAX);
    }

    #[test]
    fn the_longest_name_makes_the_longest_ids() {
        let name = "n".repeat(TRANSFORM_NAME_BYTES_MAX);
        let id = format!("{RESERVED_PREFIX}{name}/{}", i32::MAX);
        assert_eq!(id.len(), TRANSACTIONAL_ID_BYTES_MAX);
    }
}
