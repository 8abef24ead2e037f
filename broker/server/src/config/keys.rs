//! The key table: every broker key declared once, in the order DescribeConfigs and
//! `sluice serve --print-config` list them. An entry is the key's Kafka name, its field and
//! Rust type, its default, its codec (text form, units, range or validator: `value.rs`),
//! optionally the topic key that overrides it and the storage `LogConfig` field it feeds,
//! and whether it is a secret (`table.rs` says how an entry reads). Adding a key is one
//! entry here plus its row in docs/config.md and its line in sluice.toml (tests check
//! both). Checks across keys are `BrokerConfig::validate`.

use std::path::PathBuf;

use sluice_group::limits as group;
use sluice_plugin_host::limits as plugin;
use sluice_security::principal::SuperUsers;
use sluice_storage::{CleanupPolicy, TimestampType};
use sluice_transform::limits as transform;

use super::admin_keys::{self as admin, AdminAuth};
use super::cleaner_keys as cleaner;
use super::cluster_keys::{self as cluster, ProcessRoles, QuorumVoter};
use super::listener_keys::{self as listener, ClientAuth, KeystoreType, ListenerAddr};
use super::security_keys::{self as security, SaslMechanism};
use super::table::broker_keys;
use super::value::{I32_MAX, boolean, bytes, count, ms, never_count, never_ms, optional};
use super::value::{path, string, text};
use super::{HostPort, SecurityProtocol, parse_timestamp_type, timestamp_type_name};
use crate::limits;

const DAY_MS: i64 = 86_400_000;

broker_keys! {
    // Listeners, TLS and SASL: listener_keys.rs, security_keys.rs.
    /// Where the Kafka protocol listeners bind, `NAME://host:port` each.
    "listeners" => listeners: Vec<ListenerAddr> = listener::listeners_default(),
        text(listener::parse_listeners, |l| listener::print_listeners(l));
    /// What Metadata tells a client of each listener; a listener not named here advertises
    /// its bound address.
    "advertised.listeners" => advertised_listeners: Vec<ListenerAddr> = Vec::new(),
        text(listener::parse_listener_list, |l| listener::print_listeners(l));
    /// Listener name -> protocol; a name not in it is its own protocol (Kafka's default map).
    "listener.security.protocol.map" =>
        listener_security_protocol_map: Vec<(String, SecurityProtocol)> = Vec::new(),
        text(listener::parse_protocol_map, |m| listener::print_protocol_map(m));
    /// One PEM file, the private key and the certificate chain.
    "ssl.keystore.location" => ssl_keystore_location: Option<PathBuf> = None, optional(path());
    /// Always PEM.
    "ssl.keystore.type" => ssl_keystore_type: KeystoreType = KeystoreType::Pem,
        text(KeystoreType::parse, |_| KeystoreType::PEM.to_owned());
    /// The PEM CA bundle client certificates are checked against.
    "ssl.truststore.location" => ssl_truststore_location: Option<PathBuf> = None,
        optional(path());
    /// None, requested or required.
    "ssl.client.auth" => ssl_client_auth: ClientAuth = ClientAuth::None,
        text(ClientAuth::parse, |a| a.as_str().to_owned());
    /// What SASL listeners offer in SaslHandshake.
    "sasl.enabled.mechanisms" => sasl_enabled_mechanisms: Vec<SaslMechanism> =
        security::SASL_ENABLED_MECHANISMS_DEFAULT.to_vec(),
        text(security::parse_mechanisms, |m| security::print_mechanisms(m));
    /// A SASL session's lifetime (KIP-368); 0 = no limit.
    "connections.max.reauth.ms" => connections_max_reauth_ms: u64 = 0,
        text(security::parse_reauth_ms, u64::to_string);
    /// How long a failed SASL authentication waits before it is answered and the
    /// connection closed (slows password guessing).
    "connection.failed.authentication.delay.ms" =>
        connection_failed_authentication_delay_ms: u64 = 100,
        text(security::parse_failed_authentication_delay_ms, u64::to_string);
    /// Principals every ACL check allows.
    "super.users" => super_users: SuperUsers = SuperUsers::default(),
        text(security::parse_super_users, security::print_super_users);
    /// `None` = the default by the listeners (see
    /// [`BrokerConfig::allow_everyone_if_no_acl_found`]).
    "allow.everyone.if.no.acl.found" => allow_everyone_if_no_acl_found: Option<bool> = None,
        optional(boolean());
    /// The key delegation tokens' HMACs are made with (KIP-48); unset = tokens disabled.
    sensitive "delegation.token.secret.key" => delegation_token_secret_key: Option<String> =
        None, optional(string());
    /// The longest a delegation token lives, renewals included.
    "delegation.token.max.lifetime.ms" => delegation_token_max_lifetime_ms: i64 = 7 * DAY_MS,
        ms(1..=i64::MAX);
    /// How long a delegation token lives between renewals.
    "delegation.token.expiry.time.ms" => delegation_token_expiry_time_ms: i64 = DAY_MS,
        ms(1..=i64::MAX);
    /// How often expired delegation tokens are removed.
    "delegation.token.expiry.check.interval.ms" =>
        delegation_token_expiry_check_interval_ms: i64 = 3_600_000, ms(1..=i64::MAX);

    // The cluster (KRaft's keys): cluster_keys.rs.
    /// This node's id: in Metadata, FindCoordinator and DescribeCluster, and its voter id.
    "node.id" => node_id: i32 = 0, count(0..=I32_MAX);
    /// What this node does: broker, controller (a voter of the metadata quorum), or both.
    "process.roles" => process_roles: ProcessRoles = ProcessRoles::COMBINED,
        text(ProcessRoles::parse, ProcessRoles::print);
    /// The metadata quorum's voters, `id@host:port,...` (their controller listeners). Empty:
    /// a cluster of one, this node its only voter, formatted on first start.
    "controller.quorum.voters" => controller_quorum_voters: Vec<QuorumVoter> = Vec::new(),
        text(cluster::parse_voters, |v| cluster::print_voters(v));
    /// The listeners (of `listeners`) the quorum speaks on; never served to clients.
    "controller.listener.names" => controller_listener_names: Vec<String> =
        vec!["CONTROLLER".to_owned()],
        text(cluster::parse_names, |n| n.join(","));
    /// The listener brokers reach each other on; unset: the first client listener.
    "inter.broker.listener.name" => inter_broker_listener_name: Option<String> = None,
        optional(string());
    /// The SASL mechanism this broker logs in to other brokers' SASL inter-broker listeners
    /// with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
    "sasl.mechanism.inter.broker.protocol" => sasl_mechanism_inter_broker_protocol:
        Option<SaslMechanism> = None,
        optional(text(security::parse_mechanism, |m| m.name().to_owned()));
    /// The credentials it logs in with, in Kafka's JAAS form
    /// (`... required username="broker" password="...";`).
    sensitive "sasl.jaas.config" => sasl_jaas_config: Option<String> = None, optional(string());
    /// This broker's rack: new topics spread their replicas over racks.
    "broker.rack" => broker_rack: Option<String> = None, optional(string());
    /// A broker not heard from for this long is fenced and its partitions' leadership moves.
    "broker.session.timeout.ms" => broker_session_timeout_ms: i64 = 9_000, ms(1..=I32_MAX);
    /// How often a broker heartbeats to the controller.
    "broker.heartbeat.interval.ms" => broker_heartbeat_interval_ms: i64 = 2_000,
        ms(1..=I32_MAX);
    /// A snapshot of the metadata image every this many metadata-log entries; the log is
    /// purged below it (keeping a fifth of this, at most 1,000 entries), so a broker further
    /// behind catches up from the snapshot.
    "sluice.metadata.snapshot.entries" => metadata_snapshot_entries: u64 = 5_000,
        count(10..=10_000_000);
    /// Partitions of `__consumer_offsets` in a cluster: a group's coordinator is the leader
    /// of partition `hash(group) % this` (Kafka's placement). Fixed once the cluster made it.
    "offsets.topic.num.partitions" => offsets_topic_num_partitions: i32 = 50,
        count(1..=limits::PARTITIONS_PER_TOPIC_MAX as i64);
    /// Partitions of `__transaction_state` in a cluster: a transactional id's coordinator
    /// is the leader of partition `hash(id) % this`.
    "transaction.state.log.num.partitions" => transaction_state_log_num_partitions: i32 = 50,
        count(1..=limits::PARTITIONS_PER_TOPIC_MAX as i64);

    // Replication (Kafka's keys): kraft/replicas.rs.
    /// The active controller moves leadership back to each partition's preferred replica
    /// (the first listed) when it is in the ISR and its broker has more than
    /// `leader.imbalance.per.broker.percentage` of its preferred partitions led elsewhere,
    /// every `leader.imbalance.check.interval.seconds`.
    "auto.leader.rebalance.enable" => auto_leader_rebalance_enable: bool = true, boolean();
    /// How often that check runs.
    "leader.imbalance.check.interval.seconds" => leader_imbalance_check_interval_seconds: i64 =
        300, count(1..=86_400);
    /// The share of a broker's preferred partitions that may be led elsewhere before they
    /// move back.
    "leader.imbalance.per.broker.percentage" => leader_imbalance_per_broker_percentage: u32 =
        10, count(0..=100);
    /// Replicas of a topic created without a replication factor (-1), auto-created topics
    /// included. Above 1 only in a cluster of at least that many brokers.
    "default.replication.factor" => default_replication_factor: i16 = 1,
        count(1..=sluice_cluster::limits::REPLICAS_MAX as i64);
    /// An in-sync follower that has not caught up with its leader for this long leaves the
    /// ISR (AlterPartition), and rejoins once caught up.
    "replica.lag.time.max.ms" => replica_lag_time_max_ms: i64 = 30_000,
        ms(1..=sluice_replica::limits::REPLICA_LAG_TIME_MAX_MS_MAX);
    /// The fewest in-sync replicas an acks=all produce needs (else NOT_ENOUGH_REPLICAS); a
    /// replicated partition's high watermark stands still below it.
    "min.insync.replicas" => min_insync_replicas: u32 = 1,
        count(1..=sluice_cluster::limits::REPLICAS_MAX as i64), topic "min.insync.replicas";
    /// A partition whose in-sync replicas are all gone is led by any live replica (`true`),
    /// or waits for one of them (`false`).
    "unclean.leader.election.enable" => unclean_leader_election_enable: bool = false,
        boolean(), topic "unclean.leader.election.enable";
    /// How long a leader holds a follower's fetch that finds nothing new.
    "replica.fetch.wait.max.ms" => replica_fetch_wait_max_ms: i64 = 500, ms(0..=30_000);
    /// Bytes a follower asks for per partition in one fetch (at least one batch comes).
    "replica.fetch.max.bytes" => replica_fetch_max_bytes: u32 = 1024 * 1024,
        bytes(1024..=8 * 1024 * 1024);
    /// How long a follower waits after a failed fetch before fetching again.
    "replica.fetch.backoff.ms" => replica_fetch_backoff_ms: i64 = 1_000, ms(0..=60_000);

    // Topics and requests.
    /// Topics and partitions live here.
    "data.dir" => data_dir: PathBuf = PathBuf::from("./sluice-data"), path();
    /// Partitions of an auto-created topic.
    "num.partitions" => num_partitions: i32 = 1,
        count(1..=limits::PARTITIONS_PER_TOPIC_MAX as i64);
    /// Metadata/Produce for an unknown topic creates it.
    "auto.create.topics.enable" => auto_create_topics_enable: bool = true, boolean();
    /// Largest record batch accepted.
    "message.max.bytes" => message_max_bytes: u32 = limits::MESSAGE_MAX_BYTES_DEFAULT,
        bytes(1..=I32_MAX), topic "max.message.bytes", log max_message_bytes;
    /// Largest request frame accepted.
    "socket.request.max.bytes" =>
        socket_request_max_bytes: u32 = limits::SOCKET_REQUEST_MAX_BYTES_DEFAULT,
        bytes(sluice_protocol::limits::REQUEST_HEADER_MIN_BYTES as i64..=I32_MAX);
    /// Request bytes read but not yet answered, across every connection; reading pauses
    /// above it (nothing is dropped).
    "queued.max.request.bytes" =>
        queued_max_request_bytes: u64 = limits::QUEUED_MAX_REQUEST_BYTES_DEFAULT,
        bytes(1..=i64::MAX);
    /// A connection that sends no request for this long is closed.
    "connections.max.idle.ms" => connections_max_idle_ms: u64 = 600_000, ms(1..=i64::MAX);
    /// Client telemetry (KIP-714): the metric name prefixes every client is asked to push,
    /// comma-separated; `*` all, empty none.
    "client.telemetry.metrics" => client_telemetry_metrics: Vec<String> =
        vec!["*".to_owned()], text(parse_prefixes, |p| p.join(","));
    /// How often clients push their metrics.
    "client.telemetry.push.interval.ms" => client_telemetry_push_interval_ms: i64 = 300_000,
        ms(100..=I32_MAX);
    /// Largest client metrics push accepted (Kafka's key).
    "telemetry.max.bytes" => telemetry_max_bytes: u32 = 1_048_576, bytes(1..=I32_MAX);
    /// Open client connections; accepting pauses above it.
    "max.connections" => max_connections: u32 = limits::CONNECTIONS_MAX as u32,
        count(1..=I32_MAX);
    /// Open connections from one address; more are closed at once.
    "max.connections.per.ip" => max_connections_per_ip: u32 = limits::CONNECTIONS_MAX as u32,
        count(1..=I32_MAX);
    /// Partitions on this broker; creating more is POLICY_VIOLATION.
    "sluice.partitions.max" => partitions_max: u32 = limits::PARTITIONS_MAX_DEFAULT,
        count(1..=I32_MAX);
    /// Sealed segments' files held open at once across every partition (opened on demand).
    "sluice.segment.files.open.max" =>
        segment_files_open_max: u32 = limits::SEGMENT_FILES_OPEN_MAX_DEFAULT,
        count(1..=I32_MAX);

    // The log: segments, retention, compaction (cleaner_keys.rs), producers, flushing.
    /// Segment file size that triggers a roll.
    "log.segment.bytes" => log_segment_bytes: u32 = 1 << 30,
        bytes(1024..=I32_MAX), topic "segment.bytes", log segment_bytes;
    /// Segment age that triggers a roll.
    "log.roll.ms" => log_roll_ms: i64 = 7 * DAY_MS,
        ms(1..=i64::MAX), topic "segment.ms", log segment_ms;
    /// Age after which whole segments are deleted; -1 forever.
    "log.retention.ms" => log_retention_ms: i64 = 7 * DAY_MS,
        ms(-1..=i64::MAX), topic "retention.ms", log retention_ms;
    /// Partition size above which old segments go; -1 unlimited.
    "log.retention.bytes" => log_retention_bytes: i64 = -1,
        bytes(-1..=i64::MAX), topic "retention.bytes", log retention_bytes;
    /// How often retention runs.
    "log.retention.check.interval.ms" => log_retention_check_interval_ms: u64 = 300_000,
        ms(1..=i64::MAX);
    /// Delete, compact, or compact,delete.
    "log.cleanup.policy" => log_cleanup_policy: CleanupPolicy = CleanupPolicy::Delete,
        text(cleaner::parse_policy, |p| cleaner::policy_name(*p).to_owned()),
        topic "cleanup.policy", log cleanup_policy;
    /// In parts per million.
    "log.cleaner.min.cleanable.ratio" => log_cleaner_min_cleanable_ratio_ppm: u32 =
        sluice_storage::config::RATIO_PPM_ONE / 2,
        text(cleaner::parse_ratio_ppm, |r| cleaner::ratio_text(*r)),
        topic "min.cleanable.dirty.ratio", log min_cleanable_dirty_ratio_ppm;
    /// A segment with a record younger than this is not compacted yet.
    "log.cleaner.min.compaction.lag.ms" => log_cleaner_min_compaction_lag_ms: i64 = 0,
        ms(0..=i64::MAX), topic "min.compaction.lag.ms", log min_compaction_lag_ms;
    /// A dirty segment older than this is compacted whatever the ratio.
    "log.cleaner.max.compaction.lag.ms" => log_cleaner_max_compaction_lag_ms: i64 = i64::MAX,
        ms(1..=i64::MAX), topic "max.compaction.lag.ms", log max_compaction_lag_ms;
    /// A tombstone stays readable this long after the clean that first covered it.
    "log.cleaner.delete.retention.ms" => log_cleaner_delete_retention_ms: i64 = DAY_MS,
        ms(0..=i64::MAX), topic "delete.retention.ms", log delete_retention_ms;
    /// How long the cleaner sleeps when no log is cleanable.
    "log.cleaner.backoff.ms" => log_cleaner_backoff_ms: u64 = 15_000, ms(1..=i64::MAX);
    /// Bytes of the cleaner's offset map.
    "log.cleaner.dedupe.buffer.size" => log_cleaner_dedupe_buffer_bytes: u64 =
        sluice_storage::limits::CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT,
        bytes(limits::CLEANER_DEDUPE_BUFFER_BYTES_MIN as i64..=i64::MAX);
    /// A partition forgets an idle producer's sequence numbers this long after its newest
    /// batch (if it has no open transaction).
    "producer.id.expiration.ms" => producer_id_expiration_ms: i64 = DAY_MS,
        ms(1..=i64::MAX), log producer_id_expiration_ms;
    /// A transactional id with no transaction in progress is forgotten this long after its
    /// last update.
    "transactional.id.expiration.ms" => transactional_id_expiration_ms: i64 = 7 * DAY_MS,
        ms(1..=i64::MAX);
    /// The largest `transaction.timeout.ms` a producer may ask.
    "transaction.max.timeout.ms" => transaction_max_timeout_ms: i64 = 900_000,
        ms(1..=I32_MAX);
    /// The finalized `transaction.version` feature level ApiVersions advertises (Kafka
    /// sets it with `kafka-storage format --feature` or `kafka-features upgrade`): 2, the
    /// default, lets clients speak the transaction protocol v2 (KIP-890 part 2: an epoch
    /// bump per transaction, no AddPartitionsToTxn); 1 keeps them on the protocol v1. The
    /// broker serves both whichever is set.
    "transaction.version" => transaction_version: i32 = 2, count(1..=2);
    /// How often the coordinator looks for transactions open past their timeout.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms" =>
        transaction_abort_cleanup_interval_ms: i64 = 10_000,
        ms(1..=i64::MAX);
    /// Fsync after this many records; `u64::MAX` never.
    "log.flush.interval.messages" => log_flush_interval_messages: u64 = u64::MAX,
        never_count(), topic "flush.messages", log flush_messages;
    /// Fsync at least this often; `u64::MAX` never.
    "log.flush.interval.ms" => log_flush_interval_ms: u64 = u64::MAX,
        never_ms(), topic "flush.ms", log flush_ms;
    /// CreateTime or LogAppendTime.
    "log.message.timestamp.type" =>
        log_message_timestamp_type: TimestampType = TimestampType::CreateTime,
        text(parse_timestamp_type, |t| timestamp_type_name(*t).to_owned()),
        topic "message.timestamp.type", log message_timestamp_type;
    /// Bytes between offset index entries.
    "log.index.interval.bytes" => log_index_interval_bytes: u32 = 4096,
        bytes(0..=I32_MAX), topic "index.interval.bytes", log index_interval_bytes;
    /// Index file size per segment.
    "log.segment.index.bytes" => log_segment_index_bytes: u32 = 10 * 1024 * 1024,
        bytes(4096..=I32_MAX), topic "segment.index.bytes", log segment_index_bytes;
    /// A produce with acks=-1 fsyncs before it is answered.
    "sluice.acks.all.fsync" => acks_all_fsync: bool = true, boolean();

    // Consumer groups.
    /// An empty group's first rebalance waits this long for more members.
    "group.initial.rebalance.delay.ms" => group_initial_rebalance_delay_ms: u32 =
        group::DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        ms(0..=I32_MAX);
    /// Smallest session timeout a member may ask for.
    "group.min.session.timeout.ms" => group_min_session_timeout_ms: u32 =
        group::DEFAULT_SESSION_TIMEOUT_MIN_MS,
        ms(1..=I32_MAX);
    /// Largest session timeout a member may ask for.
    "group.max.session.timeout.ms" => group_max_session_timeout_ms: u32 =
        group::DEFAULT_SESSION_TIMEOUT_MAX_MS,
        ms(1..=I32_MAX);
    /// Members per consumer group.
    "group.max.size" => group_max_size: u32 = group::GROUP_MEMBERS_MAX as u32,
        count(1..=group::GROUP_MEMBERS_MAX as i64);
    /// Committed offsets of an empty group expire after this.
    "offsets.retention.minutes" => offsets_retention_minutes: u32 =
        (group::DEFAULT_OFFSETS_RETENTION_MS / 60_000) as u32,
        count(1..=I32_MAX);

    // Plugins and transforms (plugin_keys.rs).
    /// Where plugins live; `None` = `<data.dir>/plugins`.
    "plugin.dir" => plugin_dir: Option<PathBuf> = None, optional(path());
    /// Wall-clock budget of one call into a plugin.
    "plugin.call.timeout.ms" => plugin_call_timeout_ms: u64 =
        plugin::PLUGIN_CALL_TIMEOUT_MS_DEFAULT,
        ms(1..=I32_MAX);
    /// Most linear memory one plugin instance may grow to.
    "plugin.memory.bytes.max" => plugin_memory_bytes_max: u64 =
        plugin::PLUGIN_MEMORY_BYTES_MAX_DEFAULT,
        bytes(1..=i64::MAX);
    /// Largest plugin upload accepted.
    "plugin.module.bytes.max" => plugin_module_bytes_max: u64 =
        plugin::PLUGIN_MODULE_BYTES_MAX_DEFAULT,
        bytes(1..=i64::MAX);
    /// Materialized transforms' plugin calls in flight.
    "transform.calls.concurrent.max" => transform_calls_concurrent_max: usize =
        transform::TRANSFORM_CALLS_CONCURRENT_DEFAULT,
        count(1..=transform::TRANSFORM_CALLS_CONCURRENT_MAX as i64);

    // The admin HTTP API (admin_keys.rs).
    /// Where the admin HTTP API binds; `None` (empty string) turns it off.
    "admin.listen" => admin_listen: Option<HostPort> = Some(admin::listen_default()),
        optional(text(HostPort::parse, HostPort::to_string));
    /// When set, admin requests need `Authorization: Bearer <token>`.
    sensitive "admin.token" => admin_token: Option<String> = None, optional(string());
    /// `none`, or `basic` (HTTP Basic against the SCRAM users).
    "admin.auth" => admin_auth: AdminAuth = AdminAuth::None,
        text(AdminAuth::parse, |a| a.as_str().to_owned());
    /// The admin API serves HTTPS with `ssl.keystore.location`.
    "admin.ssl.enabled" => admin_ssl_enabled: bool = false, boolean();
    /// `Host` names (lowercase) answered besides loopback and the connection's own address;
    /// anything else is 421 (DNS rebinding).
    "admin.allowed.hosts" => admin_allowed_hosts: Vec<String> = Vec::new(),
        text(admin::parse_hosts, |h| h.join(","));
    /// Open admin API connections; more are closed at accept.
    "admin.max.connections" => admin_max_connections: u32 =
        limits::ADMIN_MAX_CONNECTIONS_DEFAULT as u32,
        count(1..=limits::ADMIN_MAX_CONNECTIONS_MAX as i64);
    /// Serve an admin API asking no credentials on a non-loopback address.
    "admin.allow.insecure" => admin_allow_insecure: bool = false, boolean();
}

/// `client.telemetry.metrics` as a list: trimmed, empties dropped.
fn parse_prefixes(value: &str) -> Result<Vec<String>, String> {
    Ok(value
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect())
}
