//! The broker-wide bounds on work and memory, with Kafka's names where Kafka has them:
//! `queued.max.request.bytes` (request bytes read but not yet answered, across every
//! connection), `max.connections` and `max.connections.per.ip`, and Sluice's
//! `sluice.partitions.max` (partitions on this broker, checked when topics are created).

use super::{BrokerConfig, parse_bytes, parse_i64, ranged};
use crate::error::ConfigError;

impl BrokerConfig {
    /// Sets one of these keys; `None` for any other key.
    pub(super) fn set_limit_key(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let count = |v: &str| ranged(parse_i64(v), 1, i64::from(i32::MAX)).map(|v| v as u32);
        let result = match key {
            "queued.max.request.bytes" => ranged(parse_bytes(value), 1, i64::MAX)
                .map(|v| self.queued_max_request_bytes = v as u64),
            "max.connections" => count(value).map(|v| self.max_connections = v),
            "max.connections.per.ip" => count(value).map(|v| self.max_connections_per_ip = v),
            "sluice.partitions.max" => count(value).map(|v| self.partitions_max = v),
            _ => return None,
        };
        Some(result)
    }

    /// One of these keys' value in text form; `None` for any other key.
    pub(super) fn get_limit_key(&self, key: &str) -> Option<String> {
        Some(match key {
            "queued.max.request.bytes" => self.queued_max_request_bytes.to_string(),
            "max.connections" => self.max_connections.to_string(),
            "max.connections.per.ip" => self.max_connections_per_ip.to_string(),
            "sluice.partitions.max" => self.partitions_max.to_string(),
            _ => return None,
        })
    }

    /// Cross-key checks of these keys.
    pub(super) fn validate_limit_keys(&self) -> Result<(), ConfigError> {
        if self.queued_max_request_bytes < u64::from(self.socket_request_max_bytes) {
            return Err(ConfigError::Inconsistent(format!(
                "queued.max.request.bytes ({}) must be at least socket.request.max.bytes ({}), \
                 or the largest request could never be read",
                self.queued_max_request_bytes, self.socket_request_max_bytes
            )));
        }
        if self.max_connections_per_ip > self.max_connections {
            return Err(ConfigError::Inconsistent(format!(
                "max.connections.per.ip ({}) must not exceed max.connections ({})",
                self.max_connections_per_ip, self.max_connections
            )));
        }
        Ok(())
    }
}
