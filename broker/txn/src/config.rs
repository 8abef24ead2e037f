//! [`TxnConfig`]: Kafka's `transaction.*` and `transactional.id.*` broker keys.

use crate::limits;

/// The coordinator's configuration. Field names are Kafka's keys with units last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may
    /// ask for, in milliseconds.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: how long an idle transactional id (no
    /// transaction in progress) is kept, in milliseconds.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are looked for, in milliseconds.
    pub abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired
    /// transactional ids are looked for, in milliseconds.
    pub remove_expired_transactional_id_cleanup_interval_ms: i64,
    /// The producer ids this coordinator hands out: `producer_id_start..producer_id_end`.
    /// One broker owns the whole space; in a cluster each broker owns its own range (its
    /// node id's), so no two brokers ever hand out the same id.
    pub producer_id_start: i64,
    /// The end (exclusive) of the range.
    pub producer_id_end: i64,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout_ms: limits::DEFAULT_MAX_TIMEOUT_MS,
            transactional_id_expiration_ms: limits::DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            abort_timed_out_transaction_cleanup_interval_ms:
                limits::DEFAULT_ABORT_TIMED_OUT_CLEANUP_INTERVAL_MS,
            remove_expired_transactional_id_cleanup_interval_ms:
                limits::DEFAULT_REMOVE_EXPIRED_CLEANUP_INTERVAL_MS,
            producer_id_start: 0,
            producer_id_end: i64::MAX,
        }
    }
}

/// A config value out of range; the message names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} must be at least 1, got {value}")]
pub struct ConfigError {
    /// Kafka's key.
    pub key: &'static str,
    /// The rejected value.
    pub value: i64,
}

impl TxnConfig {
    /// Checks every value is positive (Kafka requires at least 1 for each key).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let keys = [
            ("transaction.max.timeout.ms", i64::from(self.max_timeout_ms)),
            (
                "transactional.id.expiration.ms",
                self.transactional_id_expiration_ms,
            ),
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                self.abort_timed_out_transaction_cleanup_interval_ms,
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                self.remove_expired_transactional_id_cleanup_interval_ms,
            ),
        ];
        for (key, value) in keys {
            if value < 1 {
                return Err(ConfigError { key, value });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_valid() {
        let c = TxnConfig::default();
        assert_eq!(c.max_timeout_ms, 900_000);
        assert_eq!(c.transactional_id_expiration_ms, 604_800_000);
        assert_eq!(c.abort_timed_out_transaction_cleanup_interval_ms, 10_000);
        assert_eq!(
            c.remove_expired_transactional_id_cleanup_interval_ms,
            3_600_000
        );
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn zero_is_rejected_with_the_key() {
        let c = TxnConfig {
            max_timeout_ms: 0,
            ..TxnConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "transaction.max.timeout.ms");
    }
}
