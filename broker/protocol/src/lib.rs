//! Sluice's Kafka protocol, sans I/O: what a request frame may be before any handler sees
//! it, and the encodings the codec crate (`kafka-protocol`, generated from Kafka's own
//! message specs) does not give us. No tokio, no sockets, no files (the message specs the
//! shape guard reads are embedded at compile time), and none of Sluice's other crates: the
//! server reads the socket and calls in here with bytes.
//!
//! # Layout
//! Read in this order:
//! - [`versions`]: the one version table (which APIs and versions the broker advertises and
//!   serves), and the ApiVersions answer derived from it.
//! - [`shape`]: the request shape guard: every request body walked along its (API,
//!   version)'s shape before decoding, refusing an array count the frame's bytes cannot hold
//!   (the codec reserves `count` elements before reading them) and a length past the frame;
//!   every advertised version has a shape. The shapes come from Kafka's own request message
//!   specs, vendored in `messages/` (Kafka 4.4.0's, see its README) and embedded, resolved
//!   once (`shape/spec.rs`); the versions Kafka removed that [`compat`] still serves have
//!   hand-written ones (`shape/removed.rs`).
//! - [`frame`]: framing, the bytes before a handler: the length prefix checked against
//!   `socket.request.max.bytes` before the body is read, the request header peeked and
//!   decoded, the body checked against its shape; response headers and messages encoded;
//!   [`FrameError`], the refusals that close a connection. [`limits`]: its bounds.
//! - [`fetch_response`]: FetchResponse v4-v18 encoded by hand, its record sets left as the
//!   server holds them (file ranges for sendfile) between the encoded fields: generic over
//!   [`fetch_response::RecordSet`], so no storage I/O here.
//! - [`compat`]: the old request versions the codec crate no longer encodes, read as a newer
//!   layout, and their answers in the old layout (Produce v0-v2's UNSUPPORTED_VERSION too).
//! - `fuzz` (feature `fuzz`, test scaffolding: never in the broker binary): the `request`
//!   fuzz target's entry point and its seeds (not an API).
//! - `examples/shape_cost.rs`: what the shape guard costs per request (a measurement, run in
//!   release; nothing asserts a time).
//! - `kafka-protocol/` (beside `src/`, not a module): the codec crate, kafka-protocol 0.18.0
//!   vendored with the messages of the APIs Kafka 4.4.0 raised regenerated from 4.4.0's specs
//!   by the crate's own generator (its `VENDORED.md`), patched in for crates.io's in the
//!   workspace `Cargo.toml`. `tests/kafka44_codecs.rs` holds those versions' golden bytes.
//!
//! KIP-110's zstd rules (which Produce and Fetch versions may carry zstd batches) are not
//! here: they read record batch headers, for Fetch from segment files, so they stay with
//! the server's produce and fetch handlers (`handler/produce_fetch/kip110.rs`) rather than
//! bring the storage crate in.
//!
//! Architecture Invariant: this crate does no I/O and depends on none of Sluice's crates;
//! the server depends on it, never the other way.

pub mod compat;
pub mod fetch_response;
pub mod frame;
#[doc(hidden)]
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod limits;
pub mod shape;
pub mod versions;

pub use frame::FrameError;
