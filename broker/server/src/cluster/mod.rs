//! The metadata quorum's consensus: openraft, and its storage on Sluice's own log.
//!
//! This is the only module of the server (and of the workspace) that imports openraft
//! (`tests/check_layers.py`); the rest of the server sees the types re-exported here. The
//! metadata records themselves are `sluice-cluster`'s: to the Raft storage an entry's data is
//! an opaque, bounded payload, and the image is whatever implements [`MetadataApply`]
//! ([`ImageApplier`] in the service). The broker uses [`ClusterService`] and
//! [`ClusterHandle`] only.
//!
//! # Layout
//! Read in this order:
//! - [`limits`]: every bound and timing of the module, with its unit and why;
//!   [`raft_config`] turns them into openraft's `Config`.
//! - `types.rs`: [`MetaTypes`], the openraft type configuration (`u64` node ids and terms,
//!   [`MetadataPayload`] data, [`ApplyResponse`] replies, [`ControllerNode`] nodes), the
//!   aliases of openraft's types, and [`MetadataApply`], the seam to the image.
//! - `entry_codec.rs`: one Raft entry as one record batch (offset = index; term and leader
//!   in the record key), strictly decoded.
//! - `quorum_state.rs`: the `quorum-state` file (vote, committed log id, purge mark), one
//!   checksummed fixed-size file written with `write_durable`.
//! - `log_store.rs`: [`MetaLogStore`] / [`MetaLogReader`], openraft's log storage on a
//!   `sluice_storage::Log` (append with fsync, `truncate_after` = `Log::truncate_to`,
//!   purge = the log start offset).
//! - `state_machine.rs`: [`MetadataStateMachine`], openraft's state machine over the image,
//!   with bounded, CRC-checked snapshots stored with `write_durable`.
//! - `image.rs`: [`ImageApplier`], the [`MetadataApply`] over `sluice_cluster::MetadataImage`:
//!   decodes and applies each entry (a refused one changes only the applied index, the same
//!   on every node) and publishes the latest image on a watch channel ([`ImageWatch`]).
//! - `wire.rs`: the controller listener's frames (kind, bounded length, postcard body), the
//!   hello that names the cluster id and node id, and the messages.
//! - `network.rs`: [`NetworkFactory`] / [`PeerClient`], openraft's network over TCP (one
//!   lazily opened connection per client, reconnect backoff, bounded timeouts; failures are
//!   openraft's `Unreachable` / `NetworkError`), also used to forward operations.
//! - `server.rs`: the controller listener: hello first, then AppendEntries, Vote and full
//!   snapshots to the local Raft and forwarded operations to the controller task.
//! - `ops.rs`: [`ControllerOp`] / [`ControllerReply`], the controller's operations and
//!   answers, serializable for forwarding.
//! - `controller_task.rs`: the one task that owns the `sluice_cluster::Controller` while this
//!   node leads: built once the image has applied every earlier term, ticked at its session
//!   deadlines, fed through a bounded queue, each decision committed before the next.
//! - `service.rs`: [`ClusterService`] (start from a [`QuorumConfig`]: open the store, start
//!   Raft, the listener and the tasks, initialize an empty quorum from the lowest voter) and
//!   [`ClusterHandle`] (`submit` with forwarding and read-your-writes, `image`, `status`,
//!   `shutdown`).
//! - `lifecycle.rs`: a broker's registration, heartbeats and controlled shutdown.
//! - `fuzz.rs` (feature `fuzz`): the decoders above for the `cluster_frames` fuzz target.
//! - `tests/` (tests only): openraft's own storage suite against the two, restart and crash
//!   tests, three nodes over an in-memory network, and the service over real TCP (election,
//!   forwarding, failover, restart, snapshot catch-up, another cluster refused).
//!
//! A node that is not a voter (`process.roles=broker`) follows the log as a Raft learner:
//! its lifecycle asks the active controller to add it (`ControllerOp::AddLearner`, a
//! membership change the controller task runs) before it registers, and until it knows a
//! leader it sends its operations to the voters in turn.
//!
//! Not here yet: TLS on the controller listener, and the supervisor that rebuilds a Raft
//! instance after a storage error (openraft treats every storage `io::Error` as fatal).

pub mod limits;

mod controller_task;
mod entry_codec;
mod image;
mod lifecycle;
mod log_store;
mod network;
mod ops;
mod quorum_state;
mod server;
mod service;
mod state_machine;
mod types;
mod wire;

#[cfg(feature = "fuzz")]
pub mod fuzz;

#[cfg(test)]
mod tests;

pub use image::{ImageApplier, ImageWatch};
pub use log_store::{MetaLogReader, MetaLogStore};
pub(crate) use network::PeerStream;
pub use network::{CallError, Identity, NetworkFactory, PeerClient, PeerTls};
pub use ops::{ControllerOp, ControllerReply, OpError, TopicOutcome, TopicSpec};
pub use server::BrokerMessages;
pub use service::{
    BrokerConfig, ClusterError, ClusterHandle, ClusterService, QuorumConfig, QuorumStatus,
    VoterStatus,
};
pub use state_machine::{MetaSnapshot, MetadataStateMachine};
pub use types::{
    ApplyResponse, ControllerNode, Entry, LogId, Membership, MetaTypes, MetadataApply,
    MetadataPayload, PayloadTooLarge, RestoreError, Vote,
};
pub use wire::{
    BrokerAnswer, BrokerMessage, BrokerReply, Kind as FrameKind, TransformTxnStep, TxnOffset,
    WireError,
};

/// A Raft instance of the metadata quorum over the image `A`.
pub type MetaRaft<A> = openraft::Raft<MetaTypes, MetadataStateMachine<A>>;

/// openraft's settings for the metadata quorum, every one from [`limits`], validated.
pub fn raft_config(
    cluster_name: &str,
) -> Result<std::sync::Arc<openraft::Config>, openraft::ConfigError> {
    raft_config_with(cluster_name, limits::SNAPSHOT_AFTER_ENTRIES)
}

/// [`raft_config`] with a snapshot every `snapshot_after` entries
/// (`sluice.metadata.snapshot.entries`); the entries kept below a snapshot are
/// `LOG_ENTRIES_KEPT_AFTER_SNAPSHOT`, or a fifth of `snapshot_after` when that is fewer.
pub fn raft_config_with(
    cluster_name: &str,
    snapshot_after: u64,
) -> Result<std::sync::Arc<openraft::Config>, openraft::ConfigError> {
    let config = openraft::Config {
        cluster_name: cluster_name.to_owned(),
        heartbeat_interval: limits::HEARTBEAT_INTERVAL_MS,
        election_timeout_min: limits::ELECTION_TIMEOUT_MIN_MS,
        election_timeout_max: limits::ELECTION_TIMEOUT_MAX_MS,
        max_payload_entries: limits::APPEND_ENTRIES_PER_RPC_MAX,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_after),
        max_in_snapshot_log_to_keep: limits::LOG_ENTRIES_KEPT_AFTER_SNAPSHOT
            .min(snapshot_after / 5),
        ..openraft::Config::default()
    };
    Ok(std::sync::Arc::new(config.validate()?))
}
