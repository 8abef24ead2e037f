//! The one typed broker config: embedded defaults, then a TOML file, then `SLUICE_*`
//! environment variables, then command-line flags. Validated once at start; unknown keys and
//! bad values are errors naming the key; nothing is silently clamped.
//!
//! Keys are Kafka's names (`num.partitions`, `log.retention.ms`, ...), each declared once in
//! the key table (`config/keys.rs`), from which `BrokerConfig`, its defaults, `set`/`get`,
//! `BROKER_KEYS`, the topic overrides and the secrets follow (`config/table.rs`). Byte and
//! time values accept Kafka's plain numbers or human units (`"100 MiB"`, `"7d"`:
//! `config/value.rs`). The `*_keys.rs` files hold the value types, parsers and cross-key
//! checks of their group of keys.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use sluice_group::GroupConfig;

use crate::error::ConfigError;

pub use admin_keys::AdminAuth;
pub use cluster_keys::{ProcessRoles, QuorumVoter, print_voters};
pub use keys::{BROKER_KEYS, BrokerConfig, KEYS};
pub use listener_keys::{
    ClientAuth, KeystoreType, ListenerAddr, ListenerSpec, SecurityProtocol, parse_listener_list,
};
pub use security_keys::{SaslMechanism, jaas_credentials};
pub use table::Key;

/// How a record batch's timestamp is set (`log.message.timestamp.type`): the storage
/// engine's type, in Kafka's spelling here.
pub use sluice_storage::TimestampType;

/// Parses `log.message.timestamp.type` in Kafka's spelling.
pub fn parse_timestamp_type(text: &str) -> Result<TimestampType, String> {
    match text {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        _ => Err(format!("{text:?} is not CreateTime or LogAppendTime")),
    }
}

/// Kafka's spelling of a timestamp type.
pub fn timestamp_type_name(timestamp_type: TimestampType) -> &'static str {
    match timestamp_type {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// A host and port as clients should dial it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Host name or IP literal.
    pub host: String,
    /// TCP port; 0 in `listeners` means "pick one".
    pub port: u16,
}

impl HostPort {
    /// Parses `host:port` or Kafka's `PLAINTEXT://host:port`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let text = text.strip_prefix("PLAINTEXT://").unwrap_or(text);
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("{text:?} is not host:port"))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{port:?} is not a TCP port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || text.contains(',') {
            return Err(format!("{text:?} is not a single host:port"));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
        })
    }

    /// The socket address to bind; the host must be an IP literal or `localhost`.
    pub fn socket_addr(&self) -> Result<SocketAddr, String> {
        let host = if self.host == "localhost" {
            "127.0.0.1"
        } else {
            &self.host
        };
        let ip = host
            .parse::<std::net::IpAddr>()
            .map_err(|_| format!("{host:?} is not an IP address to bind"))?;
        Ok(SocketAddr::new(ip, self.port))
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Whether `key` is a secret (the table's `sensitive`): DescribeConfigs and
/// `--print-config` never show its value.
pub fn is_sensitive(key: &str) -> bool {
    KEYS.iter().any(|k| k.name == key && k.sensitive)
}

/// Environment variables starting with `SLUICE_` that are not config keys.
const ENV_NON_KEYS: &[&str] = &[
    "SLUICE_LOG",
    "SLUICE_LOG_FORMAT",
    "SLUICE_CONFIG",
    // The operator commands' default `--brokers`.
    "SLUICE_BROKERS",
    // Their default `--admin-url`, and its older name.
    "SLUICE_ADMIN_URL",
    "SLUICE_ADMIN",
    // `--admin-user` of the operator commands, and its password.
    "SLUICE_ADMIN_USER",
    "SLUICE_ADMIN_PASSWORD",
    "SLUICE_ADMIN_CA_FILE",
];

impl BrokerConfig {
    /// Applies a TOML document. Dotted keys may be quoted (`"num.partitions" = 3`) or bare
    /// (`num.partitions = 3`, which TOML reads as nested tables); both name the same key.
    pub fn apply_toml(&mut self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        let mut flat = BTreeMap::new();
        flatten_toml("", &toml::Value::Table(table), &mut flat);
        for (key, value) in flat {
            self.set(&key, &value)?;
        }
        Ok(())
    }

    /// Applies `SLUICE_<KEY>` variables (key uppercased, `.` -> `_`). Unknown `SLUICE_*`
    /// variables are errors, so a typo is not silently ignored.
    pub fn apply_env(
        &mut self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), ConfigError> {
        for (name, value) in vars {
            let Some(_) = name.strip_prefix("SLUICE_") else {
                continue;
            };
            if ENV_NON_KEYS.contains(&name.as_str()) {
                continue;
            }
            let key = BROKER_KEYS
                .iter()
                .find(|k| env_name(k) == name)
                .ok_or_else(|| ConfigError::UnknownEnv(name.clone()))?;
            self.set(key, &value)?;
        }
        Ok(())
    }

    /// Cross-key checks, run once after every source is applied.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.message_max_bytes >= self.socket_request_max_bytes {
            return Err(ConfigError::Inconsistent(format!(
                "message.max.bytes ({}) must be below socket.request.max.bytes ({})",
                self.message_max_bytes, self.socket_request_max_bytes
            )));
        }
        self.validate_limit_keys()?;
        self.group_config()
            .validate()
            .map_err(|e| ConfigError::Inconsistent(e.to_string()))?;
        self.txn_config()
            .validate()
            .map_err(|e| ConfigError::Inconsistent(e.to_string()))?;
        self.plugin_config()
            .validate()
            .map_err(ConfigError::Inconsistent)?;
        self.validate_listener_keys()?;
        self.validate_cluster_keys()?;
        self.validate_security_keys()?;
        if let Some(admin) = &self.admin_listen {
            admin
                .socket_addr()
                .map_err(|reason| ConfigError::BadValue {
                    key: "admin.listen".into(),
                    value: admin.to_string(),
                    reason,
                })?;
        }
        self.validate_admin_keys()
    }
}

impl BrokerConfig {
    /// The transaction coordinator's settings (`transaction*` keys).
    pub fn txn_config(&self) -> sluice_txn::TxnConfig {
        sluice_txn::TxnConfig {
            max_timeout_ms: i32::try_from(self.transaction_max_timeout_ms).unwrap_or(i32::MAX),
            transactional_id_expiration_ms: self.transactional_id_expiration_ms,
            abort_timed_out_transaction_cleanup_interval_ms: self
                .transaction_abort_cleanup_interval_ms,
            ..self.producer_id_range(sluice_txn::TxnConfig::default())
        }
    }

    /// The producer ids this broker hands out: all of them on a single node; in a cluster
    /// the node id's own range of `PRODUCER_IDS_PER_NODE`, so two brokers never hand out
    /// the same id (the space holds every node id: 2^31 ranges of 2^32).
    fn producer_id_range(&self, config: sluice_txn::TxnConfig) -> sluice_txn::TxnConfig {
        if !self.needs_format() {
            return config;
        }
        let start = i64::from(self.node_id) * crate::limits::PRODUCER_IDS_PER_NODE;
        sluice_txn::TxnConfig {
            producer_id_start: start,
            producer_id_end: start + crate::limits::PRODUCER_IDS_PER_NODE,
            ..config
        }
    }

    /// The consumer-group coordinator's settings (`group.*`, `offsets.*`).
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig {
            session_timeout_min_ms: self.group_min_session_timeout_ms,
            session_timeout_max_ms: self.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            group_max_size: self.group_max_size as usize,
            offsets_retention_ms: u64::from(self.offsets_retention_minutes) * 60_000,
            ..GroupConfig::default()
        }
    }
}

/// The environment variable that sets `key`.
pub fn env_name(key: &str) -> String {
    format!("SLUICE_{}", key.to_ascii_uppercase().replace('.', "_"))
}

fn flatten_toml(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(table) => {
            for (k, v) in table {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_toml(&key, v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_owned(), s.clone());
        }
        other => {
            out.insert(prefix.to_owned(), other.to_string());
        }
    }
}

mod admin_keys;
pub mod cleaner_keys;
mod cluster_keys;
pub mod docs;
mod keys;
mod limit_keys;
mod listener_keys;
mod plugin_keys;
mod security_keys;
mod table;
mod value;

#[cfg(test)]
mod tests;

/// A validated config from `(key, value)` pairs, for the key modules' tests.
#[cfg(test)]
pub(crate) fn config_from(pairs: &[(&str, &str)]) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    for (k, v) in pairs {
        c.set(k, v).map_err(|e| e.to_string())?;
    }
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}
