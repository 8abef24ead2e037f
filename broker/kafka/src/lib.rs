//! What Sluice's pure crates share about speaking Kafka, defined once: Kafka's error codes,
//! the bounds on the names more than one crate checks, the strict big-endian byte reader and
//! writer their record formats are written with, and the seeded generator their simulators
//! and tests draw from. Before this crate each of them kept its own copy, and the copies
//! were kept equal by hand.
//!
//! # Layout
//! - [`error_code`]: [`ErrorCode`], Kafka's numbers and names (`Errors.java`), for every
//!   code a Sluice crate returns; each crate's typed errors map to it.
//! - [`limits`]: the name bounds shared across crates (topic names, group ids,
//!   transactional ids, plugin names and parameters, the reserved transform prefix).
//! - [`bytes`]: [`bytes::Reader`], a strict reader (every length checked against its limit
//!   and the bytes left before anything is allocated, errors that name the field and the
//!   limit) and [`bytes::Writer`], its twin.
//! - [`rng`]: [`rng::SplitMix64`], the seeded generator of tests and simulations.
//!
//! Architecture Invariant: this crate is a leaf. It depends on no crate of ours, does no
//! I/O, reads no clock and holds no state; it builds wherever `std` does.

pub mod bytes;
pub mod error_code;
pub mod limits;
pub mod rng;

pub use error_code::ErrorCode;
