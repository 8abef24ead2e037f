//! Sluice's metadata quorum, the pure part.
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
pub use records::{MetadataRecord, decode_batch, encode_batch};
