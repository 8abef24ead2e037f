//! Hostile: a transform that traps (a panic in wasm) on any record whose value contains
//! `poison`, and otherwise keeps every record unchanged for the first output. One poison
//! record fails the whole call, so a materialized transform must bisect the batch to find
//! it and apply its failure policy to that record alone.

use sluice_sdk::{Output, Record, transform};

#[transform]
pub fn poison(record: &Record<'_>, out: &mut Output) {
    let value = record.value().unwrap_or_default();
    if value.windows(6).any(|w| w == b"poison") {
        panic!("a poison record");
    }
    out.keep(record);
}
