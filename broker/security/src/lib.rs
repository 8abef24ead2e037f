//! Sluice's security core: who a connection is, how it proves it, what it may do, how
//! fast it may go, and the records that carry that state. The Kafka security model with
//! Kafka's names, codes and behaviour, as pure code.
//!
//! Pure: no tokio, no sockets, no files, no clock. Time is a parameter (`now_ms`) and
//! randomness is injected ([`rng::SecurityRng`]), so every behaviour is a table-driven
//! test that replays exactly. The server owns the outside world: it reads the SASL bytes
//! off the socket, picks the mechanism from SaslHandshake, feeds the messages here, turns
//! [`sasl::SaslError`]s into SaslAuthenticate responses, asks the [`acl::Authorizer`]
//! before each API does its work, puts the [`quota::QuotaTracker`]'s throttle into
//! `throttle_time_ms` and mutes the channel, and appends [`records::SecurityRecord`]s to
//! a log it replays into a [`state::SecurityState`] at start. None of that wiring exists
//! yet (docs/security.md, "Security core").
//!
//! # Layout
//! - [`limits`]: every bound, with its unit and why.
//! - [`rng`]: [`rng::SecurityRng`] injection and Kafka's random strings (nonces, salts).
//! - [`principal`]: [`principal::KafkaPrincipal`] (`User:alice`) and `super.users`.
//! - [`sasl`]: [`sasl::SaslError`], what a failed step answers (Kafka's codes and texts).
//! - [`scram`]: SCRAM-SHA-256/512 credentials ([`scram::ScramCredential`]), the client
//!   message parsers ([`scram::messages`]) and the server state machine
//!   ([`scram::ScramServer`]).
//! - [`plain`]: SASL/PLAIN, checked against the stored SCRAM credentials.
//! - [`acl`]: Kafka's ACL enums and codes, bindings and filters ([`acl::binding`]), and
//!   the [`acl::Authorizer`] (StandardAuthorizer's rules).
//! - [`quota`]: client quota entities and Kafka's 8-level resolution; [`quota::rate`],
//!   sampled byte rates and throttle times.
//! - [`records`]: [`records::SecurityRecord`], the versioned, bounded byte layout (written
//!   and read with `sluice_kafka::bytes`).
//! - [`state`]: [`state::SecurityState`], rebuilt from records; snapshots for compaction.
//! - [`users`]: AlterUserScramCredentials and DescribeUserScramCredentials decisions.
//! - `fuzz` (feature `fuzz`, test scaffolding: never in the broker binary): the fuzz targets'
//!   entry points and their seed corpus.
//!
//! Architecture Invariant: this crate depends on no other Sluice crate but the leaf
//! `sluice-kafka` (Kafka's error codes, the byte reader, the seeded generator), does no I/O,
//! opens no sockets and reads no clock. It never stores, logs or returns a password:
//! credentials are Kafka's salted, iterated keys, and `Debug` leaves keys and passwords out.
//!
//! Architecture Invariant: every comparison of a secret (a SCRAM proof, a PLAIN password)
//! is constant-time (`subtle`); every parser of client bytes is bounded by a named limit
//! before it allocates.

pub mod acl;
#[cfg(any(test, feature = "fuzz"))]
pub mod fuzz;
pub mod limits;
pub mod plain;
pub mod principal;
pub mod quota;
pub mod records;
pub mod rng;
pub mod sasl;
pub mod scram;
pub mod state;
pub mod users;
