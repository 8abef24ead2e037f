//! The broker-wide bounds on work and memory, with Kafka's names where Kafka has them:
//! `queued.max.request.bytes` (request bytes read but not yet answered, across every
//! connection), `max.connections` and `max.connections.per.ip`, and Sluice's
//! `sluice.partitions.max` (partitions on this broker, checked when topics are created): the
//! check across them (the keys themselves are in `keys.rs`).

use super::BrokerConfig;
use crate::error::ConfigError;

impl BrokerConfig {
    /// Cross-key checks of these keys.
    pub(super) fn validate_limit_keys(&self) -> Result<(), ConfigError> {
        if self.queued_max_request_bytes < u64::from(self.socket_request_max_bytes) {
            return Err(ConfigError::Inconsistent(format!(
                "queued.max.request.bytes ({}) must be at least socket.request.max.bytes ({}), \
                 or the largest request could never be read",
                self.queued_max_request_bytes, self.socket_request_max_bytes
            )));
        }
        Ok(())
    }
}
