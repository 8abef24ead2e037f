//! Write Sluice plugins as plain Rust functions.
//!
//! ```text
//! use sluice_sdk::{partitioner, Record};
//!
//! #[partitioner]
//! fn by_key_length(record: &Record<'_>, partition_count: u32) -> u32 {
//!     record.key().map_or(0, |k| k.len() as u32) % partition_count
//! }
//! ```
//!
//! A plugin crate is a `cdylib` whose `Cargo.toml` lists only `sluice-sdk`;
//! `sdk/build-plugins.sh` builds it for `wasm32-unknown-unknown` and the
//! broker turns the module into a component on upload. The function stays
//! an ordinary function: call it from `cargo test` with records made by
//! [`BatchBuilder`].
//!
//! # Layout
//! - [`macro@partitioner`], [`macro@filter`], [`macro@transform`],
//!   [`macro@validator`]: one attribute macro per plugin kind (crate
//!   `sluice-sdk-macros`); each
//!   accepts a stateless function, or a stateful one whose first argument is
//!   `&mut S` with `S:` [`Init`] built from the plugin's parameters.
//! - [`batch`]: zero-copy [`Record`] views over the columnar batch, and the
//!   [`BatchBuilder`] that makes batches (transform output, tests).
//! - [`params`]: [`Params`], [`Init`] and the plugin [`Error`].
//! - [`transform`]: a transform's [`Output`], and [`Target`]: which output (of a view, one;
//!   of a materialized transform, one per `--to` topic) each record goes to
//!   (`Output::keep_to`, `Output::push_to`: the reserved header `sluice.output`).
//! - [`hash`]: the key hashes of the Kafka clients (murmur2, crc32, FNV-1a).
//! - [`json`]: find a field in a JSON value without parsing all of it.
//! - [`log`]: report to the broker's log (stderr in native tests).
//! - `__private`: what the macros expand to; not an API.

pub mod batch;
pub use sluice_hash as hash;
pub mod json;
pub mod log;
pub mod params;
pub mod transform;

#[doc(hidden)]
pub mod __private;

pub use batch::{Batch, BatchBuilder, Columns, Headers, Record, Records};
pub use params::{Error, ErrorKind, Init, Params};
pub use sluice_sdk_macros::{filter, partitioner, transform, validator};
pub use transform::{Output, Target};
/// The bindings generator the macros expand to, so a plugin needs no
/// dependency but this SDK.
pub use wit_bindgen;

/// The version of the WIT package this SDK builds plugins for.
pub const WIT_VERSION: &str = "0.2.0";
