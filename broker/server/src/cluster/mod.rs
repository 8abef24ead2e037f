//! The metadata quorum's consensus: openraft, and its storage on Sluice's own log.
//!
//! This is the only module of the server (and of the workspace) that imports openraft
//! (`tests/check_layers.py`); the rest of the server sees the types re-exported here. The
//! metadata records themselves are `sluice-cluster`'s: here an entry's data is an opaque,
//! bounded payload, and the image is whatever implements [`MetadataApply`].
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
//! - `tests/` (tests only): openraft's own storage suite against the two, restart and crash
//!   tests, and a three-node election and write over an in-memory network.
//!
//! Not here yet (issue 36): the network on the CONTROLLER listener, the controller task,
//! forwarding, and the supervisor that rebuilds a Raft instance after a storage error
//! (openraft treats every storage `io::Error` as fatal).

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

#[cfg(test)]
mod tests;

pub use image::{ImageApplier, ImageWatch};
pub use log_store::{MetaLogReader, MetaLogStore};
pub use network::{CallError, Identity, NetworkFactory, PeerClient};
pub use ops::{ControllerOp, ControllerReply, OpError, TopicOutcome, TopicSpec};
pub use service::{
    BrokerConfig, ClusterError, ClusterHandle, ClusterService, QuorumConfig, QuorumStatus,
    VoterStatus,
};
pub use state_machine::{MetaSnapshot, MetadataStateMachine};
pub use types::{
    ApplyResponse, ControllerNode, Entry, LogId, Membership, MetaTypes, MetadataApply,
    MetadataPayload, PayloadTooLarge, RestoreError, Vote,
};
pub use wire::{Kind as FrameKind, WireError};

/// A Raft instance of the metadata quorum over the image `A`.
pub type MetaRaft<A> = openraft::Raft<MetaTypes, MetadataStateMachine<A>>;

/// openraft's settings for the metadata quorum, every one from [`limits`], validated.
pub fn raft_config(
    cluster_name: &str,
) -> Result<std::sync::Arc<openraft::Config>, openraft::ConfigError> {
    let config = openraft::Config {
        cluster_name: cluster_name.to_owned(),
        heartbeat_interval: limits::HEARTBEAT_INTERVAL_MS,
        election_timeout_min: limits::ELECTION_TIMEOUT_MIN_MS,
        election_timeout_max: limits::ELECTION_TIMEOUT_MAX_MS,
        max_payload_entries: limits::APPEND_ENTRIES_PER_RPC_MAX,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(limits::SNAPSHOT_AFTER_ENTRIES),
        max_in_snapshot_log_to_keep: limits::LOG_ENTRIES_KEPT_AFTER_SNAPSHOT,
        ..openraft::Config::default()
    };
    Ok(std::sync::Arc::new(config.validate()?))
}
