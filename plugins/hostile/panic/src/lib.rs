//! Hostile: panics (a trap in wasm) when the key is `panic`, returns an
//! out-of-range partition when the key is `range`, and reports a guest
//! error through the log and an empty answer otherwise is not possible
//! with the SDK, so it stops there.

use sluice_sdk::{Record, partitioner};

#[partitioner]
pub fn boom(record: &Record<'_>, partition_count: u32) -> u32 {
    match record.key() {
        Some(b"panic") => panic!("the key was `panic`"),
        Some(b"range") => partition_count + 1,
        _ => 0,
    }
}
