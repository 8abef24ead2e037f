//! Sluice's metadata quorum, the pure part: the metadata records, the image they build and
//! the controller state machine that decides which records to commit (KRaft's design:
//! KIP-500, KIP-631; docs/design/cluster-brief.md §4a).
//!
//! Pure: no tokio, no sockets, no files, no clock and no consensus. Time comes in as
//! `now_ms` arguments and randomness as a seed; Raft (openraft, in the server's one
//! `cluster` module) orders and replicates the batches this crate encodes. Every broker
//! applies the committed batches to its own [`MetadataImage`]; the broker that leads the
//! Raft group runs the [`Controller`].
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why; relations checked at compile time.
//! - [`records`]: [`MetadataRecord`] (brokers, topics, partitions, configs, security,
//!   views, transforms, plugin versions, producer-id blocks, features, the cluster id),
//!   its versioned strict codec, and [`encode_batch`] / [`decode_batch`] for one Raft
//!   entry's records ([`encode_batches`] splits a decision too large for one entry).
//! - [`image`]: [`MetadataImage`], built by applying batches at increasing Raft indexes
//!   (a registration's broker epoch is its index); its bounded, checksummed snapshot.
//! - [`controller`]: [`Controller`], the active controller's decisions: registration,
//!   heartbeats, session expiry and fencing, controlled shutdown, leader and leader-epoch
//!   assignment, topic placement, configs, AlterPartition, security, views, transforms,
//!   plugin versions, producer-id blocks. Each call returns a [`Decision`]: the records to
//!   commit and the answer to give once they are applied.
//! - `mutants` (crate-private): the deliberate bugs the simulator must catch, off outside
//!   tests.
//! - `fuzz` (feature `fuzz`, and tests): the `metadata_records` fuzz target's entry point,
//!   its seeds, and generators of valid records.
//! - `sim_tests` (tests): the seeded simulator, a Raft model with failovers and lost
//!   proposals, N brokers that crash and return, and the oracle checked after each step.
//!
//! # How the server uses it
//!
//! ```text
//! every broker:  image.apply_batch(index, &decode_batch(entry_bytes)?)  per committed entry
//!                image.snapshot_bytes() / MetadataImage::from_snapshot(bytes)  for Raft snapshots
//! the leader:    Controller::new(config, &image, now_ms, seed) on becoming leader, then
//!                controller.<operation>(&image, now_ms, ...) -> Decision { records, reply }
//!                commit encode_batch(&records), apply, answer with reply
//!                controller.tick(&image, now_ms) on a timer (session expiry)
//! ```
//!
//! Architecture Invariant: this crate depends on no async runtime, no I/O and not on
//! openraft; it depends on `sluice-kafka` (codes, byte codec, rng) and `sluice-security`
//! (its security records travel inside [`MetadataRecord::Security`]) only.

#![forbid(unsafe_code)]

pub mod controller;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod image;
pub mod limits;
mod mutants;
pub mod records;
#[cfg(test)]
mod sim_tests;

pub use controller::{Controller, ControllerConfig, ControllerError, Decision};
pub use image::{MetadataImage, SnapshotError};
pub use records::{MetadataRecord, decode_batch, encode_batch, encode_batches};
