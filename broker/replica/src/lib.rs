//! Sluice's partition replication, the pure part: Kafka's ISR replication (KIP-101, 279,
//! 320, 497, 841, 903, 966; docs/design/cluster-brief.md §3.2 and §4b) as a state machine
//! per partition replica, fed `(now_ms, Event)` and returning [`Effect`]s.
//!
//! Pure: no tokio, no sockets, no files, no clock. The leader and the ISR are the
//! controller's (`sluice-cluster`): a replica learns them from the metadata image and asks
//! for ISR changes with AlterPartition, compare-and-set on its leader epoch and the
//! partition epoch. Followers fetch from the leader with their last fetched epoch (Fetch
//! v12+); the leader answers a diverging epoch and the follower truncates to where that
//! epoch ends in the leader's log. The high watermark is the minimum log end over the ISR,
//! never advancing while the ISR is smaller than `min.insync.replicas`, never going back on
//! a leader; acks=all is answered once it passes the batch. With `sluice.acks.all.fsync`
//! (Sluice's default) a follower's fetch offset and the leader's own share of the high
//! watermark are durable offsets, so an acknowledged record is on disk on every ISR member.
//!
//! # Layout
//! - [`limits`]: every bound and default, with its unit and why.
//! - [`log`]: [`ReplicaLog`], what replication knows of one replica's log (batch headers,
//!   the leader-epoch cache, the durable offset) and its [`CrashImage`]s.
//! - [`replica`]: [`Replica`], the state machine: [`Event`] in, [`Effect`] out; the
//!   leader's side (produce, follower fetches, high watermark, ISR shrink and expand) and
//!   the follower's (fetch, divergence, truncation, append, fsync before reporting).
//! - `mutants` (crate-private): the deliberate bugs the simulator must catch, off outside
//!   tests.
//! - `sim_tests` (tests): the seeded simulator: N replicas, the real [`sluice_cluster::Controller`]
//!   and image, a network that drops, duplicates, delays and reorders, crashes with each
//!   crash image, whole-cluster power losses, pauses, idempotent and plain producers,
//!   consumers, and the oracle checked after every step.
//!
//! # How the server uses it
//!
//! ```text
//! per partition replica:  Replica::new(config, topic_id, partition, ReplicaLog::recover(headers)?)
//! each new image:         handle(now, Event::Metadata { broker_epoch, partition })
//! produce / fetch:        handle(now, Event::Produce(..) | Event::Fetch(..) | Event::FetchResponse(..))
//! then, in order:         Append / BeginEpoch / Truncate / Fsync on sluice_storage::Log,
//!                         SendFetch / SendFetchResponse on the inter-broker listener,
//!                         SendAlterPartition to the controller, ProduceAnswer to the client
//! ```
//!
//! Architecture Invariant: this crate depends on no async runtime and no I/O; it depends on
//! `sluice-cluster` (the image's partition state, AlterPartition, the controller in its
//! simulator) and `sluice-kafka` (error codes, the seeded generator) only.

#![forbid(unsafe_code)]

pub mod limits;
pub mod log;
mod mutants;
pub mod replica;
#[cfg(test)]
mod sim_tests;

pub use log::{Batch, CrashImage, EpochEntry, LogError, ReplicaLog};
pub use replica::{
    Acks, Appended, Effect, EpochEndOffset, Event, FetchData, FetchRequest, FetchResponse,
    ProduceAck, ProduceRequest, Replica, ReplicaConfig,
};
