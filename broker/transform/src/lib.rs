//! Materialized transforms, the pure core (docs/design/materialized-transforms.md): a
//! transform reads a source topic inside the broker, runs every record through a transform
//! plugin, and appends what it returns to one to eight output topics exactly once, the
//! source position committed in the same transaction as the output.
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why.
//! - [`spec`]: [`TransformSpec`] (the spec file), its checks, `--from-offset`, the reserved
//!   group and transactional ids.
//! - [`partitioning`]: [`output_partition`], where an output record goes.
//! - [`policy`]: [`Bisect`], the calls that isolate the failing records of a failed call.
//!
//! Architecture Invariant: sluice-transform does no I/O and reads no clock; it depends on
//! no Sluice crate but `sluice-hash`.

pub mod limits;
pub mod partitioning;
pub mod policy;
pub mod spec;

pub use partitioning::output_partition;
pub use policy::Bisect;
pub use spec::{FromOffset, FromOffsetError, OnError, Partitioning, SpecError, TransformSpec};
