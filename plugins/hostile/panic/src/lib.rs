//! Hostile: logs through the host's `log` import and then panics (a trap
//! in wasm) when the key is `panic`; returns an out-of-range partition when
//! the key is `range`; logs more than the per-call budget when the key is
//! `chatty`; partition 0 otherwise.

use sluice_sdk::{Record, log, partitioner};

#[partitioner]
pub fn boom(record: &Record<'_>, partition_count: u32) -> u32 {
    match record.key() {
        Some(b"panic") => {
            log::error("about to panic on purpose");
            panic!("the key was `panic`")
        }
        Some(b"range") => partition_count + 1,
        Some(b"chatty") => {
            for i in 0..1000 {
                log::info(&format!("message {i}: {}", "x".repeat(4000)));
            }
            0
        }
        _ => 0,
    }
}
