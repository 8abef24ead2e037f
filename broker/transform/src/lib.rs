//! Materialized transforms, the pure core (docs/design/materialized-transforms.md): a
//! transform reads a source topic inside the broker, runs every record through a transform
//! plugin, and appends what it returns to one to eight output topics exactly once, the
//! source position committed in the same transaction as the output.
//!
//! The server's `transforms` module (one tokio task per source partition) drives a
//! [`Runner`] per source partition: it carries out the runner's [`Effect`]s with the
//! transaction coordinator (`TxnHandle`), the group coordinator, the source log and the
//! plugin pool, and feeds back the answers. Everything the runner decides (when to read,
//! call, commit, back off, which records a failure concerns, where an output record goes)
//! is here, unit-tested and simulated without tokio; `machine.rs` shows the server's loop.
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why (those other crates check too from
//!   `sluice_kafka::limits`); [`limits::txn_timeout_ms`].
//! - [`spec`]: [`TransformSpec`] (the spec file) and [`TransformSpec::check`] ([`SpecError`]
//!   names the limit), [`FromOffset`] and the `--from-offset` text, the reserved group and
//!   transactional ids ([`spec::group_id`], [`spec::transactional_id`]).
//! - [`partitioning`]: [`output_partition`], where an output record goes (murmur2 as the
//!   Java client, or the source partition).
//! - [`policy`]: [`Bisect`], the calls that isolate the failing records of a failed call.
//! - [`machine`]: [`Runner`], one source partition as a state machine fed
//!   `(now_ms, answer)` and returning [`Effect`]s; `machine/api.rs` holds its plain types
//!   (effects, answers, [`Status`]), `machine/steps.rs` its steps between events,
//!   `machine/sim_tests.rs` the seeded simulator whose oracle checks exactly-once across
//!   crashes.
//!
//! Architecture Invariant: sluice-transform does no I/O and reads no clock; time comes in
//! as `now_ms` and the only Sluice crates it depends on are `sluice-hash` and the leaf
//! `sluice-kafka` (the bounds its ids and names must fit, the simulator's generator).
//!
//! Architecture Invariant: a source record is reflected in committed output if and only if
//! the position past it is committed in the same transaction: the runner asks for a commit
//! only with the position after every record whose output it appended, and after any
//! failed or unknown step it starts over from InitProducerId and the committed position.

pub mod limits;
pub mod machine;
pub mod partitioning;
pub mod policy;
pub mod spec;

pub use machine::{
    CallError, CallErrorKind, DeadLetter, Effect, Finish, Held, LastError, OutputRecord, Position,
    Producer, ReadResult, Runner, RunnerConfig, SourceRecord, State, Status, StepError,
    StepErrorKind, Target, TargetPartition,
};
pub use partitioning::output_partition;
pub use policy::Bisect;
pub use spec::{FromOffset, FromOffsetError, OnError, Partitioning, SpecError, TransformSpec};
