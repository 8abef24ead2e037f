//! Sluice's Kafka-protocol broker: the only crate that knows sockets, config files and
//! signals. The storage engine below it is synchronous; this crate drives it from tokio.
//!
//! # Layout
//! Read in this order:
//! - [`config`]: the one typed config (defaults < TOML < `SLUICE_*` env < flags), Kafka key
//!   names, each key one entry of the key table `config/keys.rs` (from which the struct,
//!   defaults, `set`/`get`, the key list, topic overrides and secrets follow); [`units`]
//!   parses "100 MiB" / "7d"; [`topic_config`] maps topic keys (`retention.ms`, ...) onto
//!   broker keys and the storage `LogConfig`; `topic_name`: Kafka's topic name rules and the
//!   names of its internal topics, which Sluice refuses (it keeps their state in its own logs).
//! - [`limits`]: every limit with its unit and reason.
//! - [`listener`]: bind, accept, graceful shutdown; `background`: the background work in
//!   one place (the group and transaction coordinators and the transforms service started
//!   in order at bind, the log ticker, fence prober and log cleaner when the server runs),
//!   holding their handles and stopping them in order at shutdown; [`admission`]: what a
//!   client must be granted first (`max.connections`, `max.connections.per.ip`, and the
//!   broker-wide request budget `queued.max.request.bytes`).
//! - [`connection`]: the only code touching socket bytes: bounded framing, read-ahead,
//!   in-order responses, the sendfile writer. [`wire`]: the types between it and the
//!   handlers (the client and the connection's services, responses as chunks, framing errors); it imports neither.
//!   `connection/stream.rs`: the plain-or-TLS reader and writer halves.
//! - [`tls`]: SSL listeners' rustls config from `ssl.*` keys, reloaded when the files
//!   change; `tls/principal.rs`: a client certificate's subject as Kafka's principal.
//! - [`sasl`]: SASL on a connection (SaslHandshake, SaslAuthenticate, KIP-368
//!   re-authentication): what a connection may send before it authenticates, the PLAIN and
//!   SCRAM exchanges against the security state, failed logins limited per address.
//! - [`authz`]: where requests (and the admin API) ask the ACL engine in the security
//!   state whether their principal may do an operation on a resource, and whether the owner
//!   a view or transform acts for still may; [`audit`]: the one log line per change to
//!   plugins, views, transforms, ACLs, users and quotas, with its principal.
//! - `handler/`: dispatch by domain (`produce_fetch/`, `groups/`, `transactions/`,
//!   `topics/`, `security/`, `cluster/`, each with its own `dispatch`) and one file per
//!   Kafka API, all shaped `handle(ctx, request) -> response`, where `ctx` holds the client,
//!   its authorization and only the services its domain uses. What a request may be before a handler sees it is the sans-IO protocol
//!   crate's (`sluice_protocol`): framing, the one version table (ApiVersions is derived
//!   from it), the shape guard that refuses impossible array counts before decoding, the
//!   rewrites of the oldest API versions the codec crate dropped, and the hand-encoded
//!   FetchResponse whose record sets stay file ranges (the zero-copy path).
//! - [`broker`]: the broker's config, cluster id, advertised listeners, clock and data-dir
//!   lock, and the services it opens. [`clock`]: the one clock everything stamps or ages
//!   by (the system's, or a test's `ManualClock`); [`data_dir`]: the data dir's lock (one
//!   process at a time: a broker, or an offline command) and its `meta.json` (`sluice
//!   cluster format`, the migration of single-node data dirs). [`descriptors`]: the
//!   file-descriptor budget (`RLIMIT_NOFILE` raised at start; partitions, connections, the
//!   segment file cache and a reserve checked against it at start and at creation).
//! - [`security`]: the security state (SCRAM credentials, ACLs, client quotas) as records
//!   in an fsynced log, replayed at start, with the failed-login limiter and the quota
//!   windows.
//! - [`topics`]: the topic registry, partitions (log + fetch wake-up), persisted topic
//!   metadata, the live views; `topics/change.rs`: the registry's seam for the metadata log
//!   (a change decided, recorded in topic.json or a view file, applied to this broker by one
//!   `apply`); `topics/group_commit.rs`: acks=all group commit, one sync task
//!   per busy partition (fsync without the partition lock; one fsync answers every append
//!   made before it began); `topics/append.rs`: one append with its Kafka error mapping.
//!   `files`: the broker's own small files (topic, view and transform specs) through the
//!   storage crate's durable-write path, and removals that log their failure.
//! - [`group`]: the consumer-group coordinator service: the task that owns the pure
//!   `sluice_group::Coordinator`, and the internal offsets log (committed offsets).
//! - [`txn`]: the transaction coordinator service: the task that owns the pure
//!   `sluice_txn::Coordinator` and the transaction log, and writes the COMMIT/ABORT markers.
//!   Both internal logs are a [`compacted_log`] of their records; `internal_log`: the codec
//!   of the internal logs' batches (records to bounded batches, and back, checked).
//!   `topic_regex`: consumer groups' subscription regexes (RE2, compiled programs cached),
//!   their matches filtered by the member's DESCRIBE rights.
//! - [`transforms`]: materialized transforms: the service the admin API drives (deploy,
//!   pause, resume, delete; the spec files), one runner task per source partition carrying
//!   out `sluice_transform::Runner`'s effects, exactly once through the transaction
//!   coordinator.
//! - [`telemetry`]: the metrics clients push about themselves (KIP-714): subscriptions,
//!   pushes checked as Kafka checks them, the bounded store; `telemetry/otlp.rs` reads the
//!   OTLP protobuf.
//! - [`metrics`]: relaxed atomic counters and latency histograms on the request, produce and
//!   fetch paths; [`admin`] serves them (Prometheus text) with the admin HTTP API (axum):
//!   topics, groups, `/health`, `/ready`.
//! - `fence`: the fence prober, one task that probes fenced partitions and reopens their
//!   logs from disk once a probe write and fsync succeed.
//! - `cleaner`: the log cleaner task, compacting `cleanup.policy=compact` partitions the
//!   dirtiest first (the reading and writing off the partition lock).
//! - [`plugins`]: the plugin registry (`plugin.dir`, hot reload) opened with the broker, and a
//!   topic's plugin bindings (`sluice.partitioner`, `sluice.validator`); `validator`:
//!   Produce through a validator plugin (decode, one call per batch, refused records as
//!   INVALID_RECORD with `record_errors`, the batches appended as sent otherwise);
//!   `reroute/`: Produce through a partitioner plugin (decode, one plugin call per batch,
//!   split per partition with the same codec).
//! - [`views`]: read-only topics whose fetches run a source topic's records through filter
//!   and transform plugins: the spec and its checks, and `views/apply.rs`; the live view
//!   (spec + source topic + bound chain) is the registry's (`topics/views.rs`); `records` decodes and re-encodes the batches
//!   for views and for `reroute/`.
//! - [`cluster`]: the metadata quorum's consensus, the only importer of openraft: the type
//!   configuration, the Raft log on a `sluice_storage::Log`, the state machine over the
//!   metadata image ([`cluster::MetadataApply`]) with bounded, checksummed snapshots.
//! - [`kraft`]: the broker in a cluster (voters configured): starts its node of the quorum,
//!   publishes each new image into the topic registry (topics and each partition's
//!   placement), answers where brokers and coordinators are, and submits changes to the
//!   active controller with read-your-writes.
//! - [`error`]: config, Kafka and server errors.
//! - [`random`]: `OsRng`, the one place the OS's randomness is read (SCRAM nonces and
//!   salts, member ids, topic and cluster ids).
//! - `fuzz` (feature `fuzz`, test scaffolding: never in the broker binary): the fuzz
//!   targets' entry points and `fuzz/seeds.rs`, their seed corpus.
//! - `codec`: bounded decompression of batch payloads (Produce's record walk, the timestamp
//!   look-ups of ListOffsets and of transforms started from a time; fetch never decodes).
//!
//! Architecture Invariant: `connection.rs` is the only module that reads or writes socket
//! bytes; handlers see decoded requests and return responses (or chunks of them).
//!
//! Architecture Invariant: only framing problems close a connection (bad length, unknown API
//! or version, an undecodable body), and SASL (a request before authentication, a failed
//! exchange, an ended session); everything else is a Kafka error code in the response.
//!
//! Architecture Invariant: nothing decodes or re-encodes stored record batches, except
//! `validator` (which decodes a produced batch for its plugin and appends the client's bytes
//! unchanged), `reroute/` for topics with a partitioner plugin (and there only batches whose records the
//! plugin moves to another partition) and `views/` for fetches of a view (and there only
//! batches a plugin thinned out or transformed). Produce hands the client's bytes to the storage engine
//! (which validates headers and CRCs), Fetch hands file ranges to the socket.
//!
//! Architecture Invariant: storage calls that may block on disk (append, read, tick, open,
//! close) run on tokio's blocking pool, never on a runtime worker.

pub mod admin;
pub mod admission;
pub mod audit;
pub mod authz;
mod background;
pub mod broker;
mod cleaner;
pub mod clock;
pub mod cluster;
mod codec;
pub mod compacted_log;
pub mod config;
pub mod connection;
pub mod data_dir;
pub mod descriptors;
pub mod error;
mod fence;
mod files;
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub mod fuzz;
pub mod group;
mod handler;
mod internal_log;
pub mod kraft;
pub mod limits;
pub mod listener;
pub mod metrics;
pub mod plugins;
pub mod random;
mod records;
mod reroute;
pub mod sasl;
pub mod security;
pub mod telemetry;
pub mod tls;
pub mod topic_config;
mod topic_name;
mod topic_regex;
pub mod topics;
pub mod transforms;
pub mod txn;
pub mod units;
mod validator;
pub mod views;
pub mod wire;

pub use broker::Seams;
pub use clock::{Clock, ManualClock, SharedClock};
pub use config::BrokerConfig;
pub use error::{ConfigError, ServerError};
pub use listener::Server;
/// The plugin host, for the CLI's `sluice plugin test` (the same host the broker runs).
pub use sluice_plugin_host as plugin_host;
