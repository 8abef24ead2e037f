//! The one typed broker config: embedded defaults, then a TOML file, then `SLUICE_*`
//! environment variables, then command-line flags. Validated once at start; unknown keys and
//! bad values are errors naming the key; nothing is silently clamped.
//!
//! Keys are Kafka's names (`num.partitions`, `log.retention.ms`, ...). Byte and time values
//! accept Kafka's plain numbers or human units (`"100 MiB"`, `"7d"`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use sluice_group::GroupConfig;
use sluice_group::limits as group_limits;
use sluice_plugin_host::limits as plugin_limits;
use sluice_security::principal::SuperUsers;

use crate::error::ConfigError;
use crate::limits;
use crate::units::{parse_bytes, parse_ms};

pub use admin_keys::AdminAuth;
pub use listener_keys::{
    ClientAuth, ListenerAddr, ListenerSpec, SecurityProtocol, parse_listener_list,
};
pub use security_keys::SaslMechanism;

/// How a record batch's timestamp is set (`log.message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Keep the producer's timestamps.
    CreateTime,
    /// Stamp batches with the broker's clock at append.
    LogAppendTime,
}

impl TimestampType {
    /// Parses Kafka's spelling.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "CreateTime" => Ok(Self::CreateTime),
            "LogAppendTime" => Ok(Self::LogAppendTime),
            _ => Err(format!("{text:?} is not CreateTime or LogAppendTime")),
        }
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateTime => "CreateTime",
            Self::LogAppendTime => "LogAppendTime",
        }
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

/// The broker's configuration. Field names are the Kafka keys with `.` -> `_`.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// `listeners`: where the Kafka protocol listeners bind, `NAME://host:port` each.
    pub listeners: Vec<ListenerAddr>,
    /// `listener.security.protocol.map`: listener name -> protocol; a name not in it is
    /// its own protocol (Kafka's default map).
    pub listener_security_protocol_map: Vec<(String, SecurityProtocol)>,
    /// `advertised.listeners`: what Metadata tells a client of each listener; a listener
    /// not named here advertises its bound address.
    pub advertised_listeners: Vec<ListenerAddr>,
    /// `ssl.keystore.location`: one PEM file, the private key and the certificate chain
    /// (`ssl.keystore.type` is always PEM).
    pub ssl_keystore_location: Option<PathBuf>,
    /// `ssl.truststore.location`: the PEM CA bundle client certificates are checked against.
    pub ssl_truststore_location: Option<PathBuf>,
    /// `ssl.client.auth`: none, requested or required.
    pub ssl_client_auth: ClientAuth,
    /// `sasl.enabled.mechanisms`: what SASL listeners offer in SaslHandshake.
    pub sasl_enabled_mechanisms: Vec<SaslMechanism>,
    /// `connections.max.reauth.ms`: a SASL session's lifetime (KIP-368); 0 = no limit.
    pub connections_max_reauth_ms: u64,
    /// `connection.failed.authentication.delay.ms`: how long a failed SASL authentication
    /// waits before it is answered and the connection closed (slows password guessing).
    pub connection_failed_authentication_delay_ms: u64,
    /// `super.users`: principals every ACL check allows.
    pub super_users: SuperUsers,
    /// `allow.everyone.if.no.acl.found`; `None` = the default by the listeners (see
    /// [`BrokerConfig::allow_everyone_if_no_acl_found`]).
    pub allow_everyone_if_no_acl_found: Option<bool>,
    /// `data.dir`: topics and partitions live here.
    pub data_dir: PathBuf,
    /// `num.partitions`: partitions of an auto-created topic.
    pub num_partitions: i32,
    /// `auto.create.topics.enable`: Metadata/Produce for an unknown topic creates it.
    pub auto_create_topics_enable: bool,
    /// `message.max.bytes`: largest record batch accepted.
    pub message_max_bytes: u32,
    /// `socket.request.max.bytes`: largest request frame accepted.
    pub socket_request_max_bytes: u32,
    /// `connections.max.idle.ms`: a connection that sends no request for this long is closed.
    pub connections_max_idle_ms: u64,
    /// `log.segment.bytes`: segment file size that triggers a roll.
    pub log_segment_bytes: u32,
    /// `log.roll.ms`: segment age that triggers a roll.
    pub log_roll_ms: i64,
    /// `log.retention.ms`: age after which whole segments are deleted; -1 forever.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`: partition size above which old segments go; -1 unlimited.
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms`: how often retention runs.
    pub log_retention_check_interval_ms: u64,
    /// `log.cleanup.policy`: delete, compact, or compact,delete (topic: `cleanup.policy`).
    pub log_cleanup_policy: sluice_storage::CleanupPolicy,
    /// `log.cleaner.min.cleanable.ratio` in parts per million (topic:
    /// `min.cleanable.dirty.ratio`).
    pub log_cleaner_min_cleanable_ratio_ppm: u32,
    /// `log.cleaner.min.compaction.lag.ms` (topic: `min.compaction.lag.ms`).
    pub log_cleaner_min_compaction_lag_ms: i64,
    /// `log.cleaner.max.compaction.lag.ms` (topic: `max.compaction.lag.ms`).
    pub log_cleaner_max_compaction_lag_ms: i64,
    /// `log.cleaner.delete.retention.ms` (topic: `delete.retention.ms`).
    pub log_cleaner_delete_retention_ms: i64,
    /// `log.cleaner.backoff.ms`: how long the cleaner sleeps when no log is cleanable.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: bytes of the cleaner's offset map.
    pub log_cleaner_dedupe_buffer_bytes: u64,
    /// `producer.id.expiration.ms`: a partition forgets an idle producer's sequence numbers
    /// this long after its newest batch (if it has no open transaction).
    pub producer_id_expiration_ms: i64,
    /// `transactional.id.expiration.ms`: a transactional id with no transaction in progress
    /// is forgotten this long after its last update.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.max.timeout.ms`: the largest `transaction.timeout.ms` a producer may ask.
    pub transaction_max_timeout_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often the
    /// coordinator looks for transactions open past their timeout.
    pub transaction_abort_cleanup_interval_ms: i64,
    /// `log.flush.interval.messages`: fsync after this many records; `u64::MAX` never.
    pub log_flush_interval_messages: u64,
    /// `log.flush.interval.ms`: fsync at least this often; `u64::MAX` never.
    pub log_flush_interval_ms: u64,
    /// `log.message.timestamp.type`: CreateTime or LogAppendTime.
    pub log_message_timestamp_type: TimestampType,
    /// `log.index.interval.bytes`: bytes between offset index entries.
    pub log_index_interval_bytes: u32,
    /// `log.segment.index.bytes`: index file size per segment.
    pub log_segment_index_bytes: u32,
    /// `sluice.acks.all.fsync`: a produce with acks=-1 fsyncs before it is answered.
    pub acks_all_fsync: bool,
    /// `group.initial.rebalance.delay.ms`: an empty group's first rebalance waits this long
    /// for more members.
    pub group_initial_rebalance_delay_ms: u32,
    /// `group.min.session.timeout.ms`: smallest session timeout a member may ask for.
    pub group_min_session_timeout_ms: u32,
    /// `group.max.session.timeout.ms`: largest session timeout a member may ask for.
    pub group_max_session_timeout_ms: u32,
    /// `group.max.size`: members per consumer group.
    pub group_max_size: u32,
    /// `offsets.retention.minutes`: committed offsets of an empty group expire after this.
    pub offsets_retention_minutes: u32,
    /// `plugin.dir`: where plugins live; `None` = `<data.dir>/plugins`.
    pub plugin_dir: Option<PathBuf>,
    /// `plugin.call.timeout.ms`: wall-clock budget of one call into a plugin.
    pub plugin_call_timeout_ms: u64,
    /// `plugin.memory.bytes.max`: most linear memory one plugin instance may grow to.
    pub plugin_memory_bytes_max: u64,
    /// `plugin.module.bytes.max`: largest plugin upload accepted.
    pub plugin_module_bytes_max: u64,
    /// `transform.calls.concurrent.max`: materialized transforms' plugin calls in flight.
    pub transform_calls_concurrent_max: usize,
    /// `admin.listen`: where the admin HTTP API binds; `None` (empty string) turns it off.
    pub admin_listen: Option<HostPort>,
    /// `admin.token`: when set, admin requests need `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// `admin.auth`: `none`, or `basic` (HTTP Basic against the SCRAM users).
    pub admin_auth: AdminAuth,
    /// `admin.ssl.enabled`: the admin API serves HTTPS with `ssl.keystore.location`.
    pub admin_ssl_enabled: bool,
    /// `admin.allow.insecure`: serve an admin API asking no credentials on a non-loopback address.
    pub admin_allow_insecure: bool,
    /// `admin.allowed.hosts`: `Host` names (lowercase) answered besides loopback and the
    /// connection's own address; anything else is 421 (DNS rebinding).
    pub admin_allowed_hosts: Vec<String>,
    /// `admin.max.connections`: open admin API connections; more are closed at accept.
    pub admin_max_connections: u32,
    /// `queued.max.request.bytes`: request bytes read but not yet answered, across every
    /// connection; reading pauses above it (nothing is dropped).
    pub queued_max_request_bytes: u64,
    /// `max.connections`: open client connections; accepting pauses above it.
    pub max_connections: u32,
    /// `max.connections.per.ip`: open connections from one address; more are closed at once.
    pub max_connections_per_ip: u32,
    /// `sluice.partitions.max`: partitions on this broker; creating more is POLICY_VIOLATION.
    pub partitions_max: u32,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listeners: vec![ListenerAddr {
                name: "PLAINTEXT".into(),
                addr: HostPort {
                    host: "127.0.0.1".into(),
                    port: 9092,
                },
            }],
            listener_security_protocol_map: Vec::new(),
            advertised_listeners: Vec::new(),
            ssl_keystore_location: None,
            ssl_truststore_location: None,
            ssl_client_auth: ClientAuth::None,
            sasl_enabled_mechanisms: security_keys::SASL_ENABLED_MECHANISMS_DEFAULT.to_vec(),
            connections_max_reauth_ms: 0,
            connection_failed_authentication_delay_ms: 100,
            super_users: SuperUsers::default(),
            allow_everyone_if_no_acl_found: None,
            data_dir: PathBuf::from("./sluice-data"),
            num_partitions: 1,
            auto_create_topics_enable: true,
            message_max_bytes: limits::MESSAGE_MAX_BYTES_DEFAULT,
            socket_request_max_bytes: limits::SOCKET_REQUEST_MAX_BYTES_DEFAULT,
            connections_max_idle_ms: 600_000,
            log_segment_bytes: 1 << 30,
            log_roll_ms: 7 * 86_400_000,
            log_retention_ms: 7 * 86_400_000,
            log_retention_bytes: -1,
            log_retention_check_interval_ms: 300_000,
            log_cleanup_policy: sluice_storage::CleanupPolicy::Delete,
            log_cleaner_min_cleanable_ratio_ppm: sluice_storage::config::RATIO_PPM_ONE / 2,
            log_cleaner_min_compaction_lag_ms: 0,
            log_cleaner_max_compaction_lag_ms: i64::MAX,
            log_cleaner_delete_retention_ms: 86_400_000,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_dedupe_buffer_bytes:
                sluice_storage::limits::CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT,
            producer_id_expiration_ms: 86_400_000,
            transactional_id_expiration_ms: 7 * 86_400_000,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_cleanup_interval_ms: 10_000,
            log_flush_interval_messages: u64::MAX,
            log_flush_interval_ms: u64::MAX,
            log_message_timestamp_type: TimestampType::CreateTime,
            log_index_interval_bytes: 4096,
            log_segment_index_bytes: 10 * 1024 * 1024,
            acks_all_fsync: true,
            group_initial_rebalance_delay_ms: group_limits::DEFAULT_INITIAL_REBALANCE_DELAY_MS,
            group_min_session_timeout_ms: group_limits::DEFAULT_SESSION_TIMEOUT_MIN_MS,
            group_max_session_timeout_ms: group_limits::DEFAULT_SESSION_TIMEOUT_MAX_MS,
            group_max_size: group_limits::GROUP_MEMBERS_MAX as u32,
            offsets_retention_minutes: (group_limits::DEFAULT_OFFSETS_RETENTION_MS / 60_000) as u32,
            plugin_dir: None,
            plugin_call_timeout_ms: plugin_limits::PLUGIN_CALL_TIMEOUT_MS_DEFAULT,
            plugin_memory_bytes_max: plugin_limits::PLUGIN_MEMORY_BYTES_MAX_DEFAULT,
            plugin_module_bytes_max: plugin_limits::PLUGIN_MODULE_BYTES_MAX_DEFAULT,
            transform_calls_concurrent_max:
                sluice_transform::limits::TRANSFORM_CALLS_CONCURRENT_DEFAULT,
            admin_listen: Some(HostPort {
                host: "127.0.0.1".into(),
                port: limits::ADMIN_PORT_DEFAULT,
            }),
            admin_token: None,
            admin_auth: AdminAuth::None,
            admin_ssl_enabled: false,
            admin_allow_insecure: false,
            admin_allowed_hosts: Vec::new(),
            admin_max_connections: limits::ADMIN_MAX_CONNECTIONS_DEFAULT as u32,
            queued_max_request_bytes: limits::QUEUED_MAX_REQUEST_BYTES_DEFAULT,
            max_connections: limits::CONNECTIONS_MAX as u32,
            max_connections_per_ip: limits::CONNECTIONS_MAX as u32,
            partitions_max: limits::PARTITIONS_MAX_DEFAULT,
        }
    }
}

/// Every broker key, in the order DescribeConfigs and the default file list them.
pub const BROKER_KEYS: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.truststore.location",
    "ssl.client.auth",
    "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
    "connection.failed.authentication.delay.ms",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "data.dir",
    "num.partitions",
    "auto.create.topics.enable",
    "message.max.bytes",
    "socket.request.max.bytes",
    "queued.max.request.bytes",
    "connections.max.idle.ms",
    "max.connections",
    "max.connections.per.ip",
    "sluice.partitions.max",
    "log.segment.bytes",
    "log.roll.ms",
    "log.retention.ms",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.cleanup.policy",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "producer.id.expiration.ms",
    "transactional.id.expiration.ms",
    "transaction.max.timeout.ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.message.timestamp.type",
    "log.index.interval.bytes",
    "log.segment.index.bytes",
    "sluice.acks.all.fsync",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "offsets.retention.minutes",
    "plugin.dir",
    "plugin.call.timeout.ms",
    "plugin.memory.bytes.max",
    "plugin.module.bytes.max",
    "transform.calls.concurrent.max",
    "admin.listen",
    "admin.token",
    "admin.auth",
    "admin.ssl.enabled",
    "admin.allowed.hosts",
    "admin.max.connections",
    "admin.allow.insecure",
];

/// Keys whose values are secrets: DescribeConfigs and `--print-config` never show them.
pub const SENSITIVE_KEYS: &[&str] = &["admin.token"];

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
    /// Sets one key from its text form (file, env and flags all come through here).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |reason: String| ConfigError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        };
        match key {
            "data.dir" => self.data_dir = PathBuf::from(value),
            "num.partitions" => {
                self.num_partitions =
                    ranged(parse_i64(value), 1, limits::PARTITIONS_PER_TOPIC_MAX.into())
                        .map_err(bad)? as i32;
            }
            "auto.create.topics.enable" => {
                self.auto_create_topics_enable = parse_bool(value).map_err(bad)?
            }
            "message.max.bytes" => self.message_max_bytes = bytes_u32(value, 1).map_err(bad)?,
            "socket.request.max.bytes" => {
                self.socket_request_max_bytes =
                    bytes_u32(value, limits::REQUEST_HEADER_MIN_BYTES as i64).map_err(bad)?;
            }
            "log.segment.bytes" => self.log_segment_bytes = bytes_u32(value, 1024).map_err(bad)?,
            "log.roll.ms" => {
                self.log_roll_ms = ranged(parse_ms(value), 1, i64::MAX).map_err(bad)?
            }
            "log.retention.ms" => {
                self.log_retention_ms = ranged(parse_ms(value), -1, i64::MAX).map_err(bad)?
            }
            "log.retention.bytes" => {
                self.log_retention_bytes = ranged(parse_bytes(value), -1, i64::MAX).map_err(bad)?
            }
            "connections.max.idle.ms" => {
                self.connections_max_idle_ms =
                    ranged(parse_ms(value), 1, i64::MAX).map_err(bad)? as u64;
            }
            "log.retention.check.interval.ms" => {
                self.log_retention_check_interval_ms =
                    ranged(parse_ms(value), 1, i64::MAX).map_err(bad)? as u64;
            }
            "log.flush.interval.messages" => {
                self.log_flush_interval_messages = never_or(parse_i64(value)).map_err(bad)?
            }
            "log.flush.interval.ms" => {
                self.log_flush_interval_ms = never_or(parse_ms(value)).map_err(bad)?
            }
            "log.message.timestamp.type" => {
                self.log_message_timestamp_type = TimestampType::parse(value).map_err(bad)?
            }
            "log.index.interval.bytes" => {
                self.log_index_interval_bytes = bytes_u32(value, 0).map_err(bad)?
            }
            "log.segment.index.bytes" => {
                self.log_segment_index_bytes = bytes_u32(value, 4096).map_err(bad)?
            }
            "sluice.acks.all.fsync" => self.acks_all_fsync = parse_bool(value).map_err(bad)?,
            "admin.listen" => {
                self.admin_listen = match value.trim() {
                    "" => None,
                    v => Some(HostPort::parse(v).map_err(bad)?),
                }
            }
            "admin.token" => {
                self.admin_token = Some(value.trim().to_owned()).filter(|t| !t.is_empty())
            }
            _ => match self
                .set_group_key(key, value)
                .or_else(|| self.set_txn_key(key, value))
                .or_else(|| self.set_plugin_key(key, value))
                .or_else(|| self.set_limit_key(key, value))
                .or_else(|| self.set_listener_key(key, value))
                .or_else(|| self.set_security_key(key, value))
                .or_else(|| self.set_admin_key(key, value))
                .or_else(|| self.set_cleaner_key(key, value))
            {
                Some(result) => result.map_err(bad)?,
                None => return Err(ConfigError::UnknownKey(key.to_owned())),
            },
        }
        Ok(())
    }

    /// Sets a producer-id or transaction key; `None` for any other key.
    fn set_txn_key(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let (slot, max) = match key {
            "producer.id.expiration.ms" => (&mut self.producer_id_expiration_ms, i64::MAX),
            "transactional.id.expiration.ms" => {
                (&mut self.transactional_id_expiration_ms, i64::MAX)
            }
            "transaction.max.timeout.ms" => {
                (&mut self.transaction_max_timeout_ms, i64::from(i32::MAX))
            }
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                (&mut self.transaction_abort_cleanup_interval_ms, i64::MAX)
            }
            _ => return None,
        };
        Some(ranged(parse_ms(value), 1, max).map(|v| *slot = v))
    }

    /// Sets a `group.*` / `offsets.*` key; `None` for any other key.
    fn set_group_key(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let set = |key: &str, this: &mut Self| -> Result<bool, String> {
            match key {
                "group.initial.rebalance.delay.ms" => {
                    this.group_initial_rebalance_delay_ms = ms_u32(value, 0)?
                }
                "group.min.session.timeout.ms" => {
                    this.group_min_session_timeout_ms = ms_u32(value, 1)?
                }
                "group.max.session.timeout.ms" => {
                    this.group_max_session_timeout_ms = ms_u32(value, 1)?
                }
                "group.max.size" => {
                    this.group_max_size =
                        ranged(parse_i64(value), 1, group_limits::GROUP_MEMBERS_MAX as i64)? as u32
                }
                "offsets.retention.minutes" => {
                    this.offsets_retention_minutes =
                        ranged(parse_i64(value), 1, i64::from(i32::MAX))? as u32
                }
                _ => return Ok(false),
            }
            Ok(true)
        };
        match set(key, self) {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// The current value of a key in Kafka's text form (DescribeConfigs).
    pub fn get(&self, key: &str) -> Option<String> {
        Some(match key {
            "data.dir" => self.data_dir.display().to_string(),
            "num.partitions" => self.num_partitions.to_string(),
            "auto.create.topics.enable" => self.auto_create_topics_enable.to_string(),
            "message.max.bytes" => self.message_max_bytes.to_string(),
            "socket.request.max.bytes" => self.socket_request_max_bytes.to_string(),
            "log.segment.bytes" => self.log_segment_bytes.to_string(),
            "log.roll.ms" => self.log_roll_ms.to_string(),
            "log.retention.ms" => self.log_retention_ms.to_string(),
            "log.retention.bytes" => self.log_retention_bytes.to_string(),
            "log.retention.check.interval.ms" => self.log_retention_check_interval_ms.to_string(),
            "producer.id.expiration.ms" => self.producer_id_expiration_ms.to_string(),
            "transactional.id.expiration.ms" => self.transactional_id_expiration_ms.to_string(),
            "transaction.max.timeout.ms" => self.transaction_max_timeout_ms.to_string(),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.transaction_abort_cleanup_interval_ms.to_string()
            }
            "connections.max.idle.ms" => self.connections_max_idle_ms.to_string(),
            "log.flush.interval.messages" => kafka_never(self.log_flush_interval_messages),
            "log.flush.interval.ms" => kafka_never(self.log_flush_interval_ms),
            "log.message.timestamp.type" => self.log_message_timestamp_type.as_str().to_owned(),
            "log.index.interval.bytes" => self.log_index_interval_bytes.to_string(),
            "log.segment.index.bytes" => self.log_segment_index_bytes.to_string(),
            "sluice.acks.all.fsync" => self.acks_all_fsync.to_string(),
            "group.initial.rebalance.delay.ms" => self.group_initial_rebalance_delay_ms.to_string(),
            "group.min.session.timeout.ms" => self.group_min_session_timeout_ms.to_string(),
            "group.max.session.timeout.ms" => self.group_max_session_timeout_ms.to_string(),
            "group.max.size" => self.group_max_size.to_string(),
            "offsets.retention.minutes" => self.offsets_retention_minutes.to_string(),
            "admin.listen" => self
                .admin_listen
                .as_ref()
                .map_or_else(String::new, ToString::to_string),
            "admin.token" => self.admin_token.clone().unwrap_or_default(),
            _ => {
                return self
                    .get_plugin_key(key)
                    .or_else(|| self.get_limit_key(key))
                    .or_else(|| self.get_listener_key(key))
                    .or_else(|| self.get_security_key(key))
                    .or_else(|| self.get_admin_key(key))
                    .or_else(|| self.get_cleaner_key(key));
            }
        })
    }

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
            ..sluice_txn::TxnConfig::default()
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

fn parse_i64(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| format!("{text:?} is not an integer"))
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{text:?} is not true or false")),
    }
}

fn ranged(value: Result<i64, String>, min: i64, max: i64) -> Result<i64, String> {
    let value = value?;
    if value < min || value > max {
        return Err(format!("{value} is outside {min}..={max}"));
    }
    Ok(value)
}

fn ms_u32(text: &str, min: i64) -> Result<u32, String> {
    ranged(parse_ms(text), min, i64::from(i32::MAX)).map(|v| v as u32)
}

fn bytes_u32(text: &str, min: i64) -> Result<u32, String> {
    ranged(parse_bytes(text), min, i64::from(i32::MAX)).map(|v| v as u32)
}

/// Kafka writes "never" as `Long.MAX_VALUE`; `-1` is accepted as a spelling of it too.
fn never_or(value: Result<i64, String>) -> Result<u64, String> {
    match value? {
        -1 | i64::MAX => Ok(u64::MAX),
        v if v >= 1 => Ok(v as u64),
        v => Err(format!("{v} must be positive (or -1 for never)")),
    }
}

fn kafka_never(value: u64) -> String {
    if value == u64::MAX {
        i64::MAX.to_string()
    } else {
        value.to_string()
    }
}

mod admin_keys;
pub mod cleaner_keys;
pub mod docs;
mod limit_keys;
mod listener_keys;
mod plugin_keys;
mod security_keys;

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
