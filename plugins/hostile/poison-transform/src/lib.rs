//! Hostile: a transform that traps (a panic in wasm) on any record whose value contains
//! `poison`, never returns on one whose value contains `spin` (the host's deadline stops
//! it), and otherwise keeps every record unchanged for the first output. One such record
//! fails the whole call, so a materialized transform must bisect the batch to find it and
//! apply its failure policy to that record alone.

use sluice_sdk::{Output, Record, transform};

#[transform]
pub fn poison(record: &Record<'_>, out: &mut Output) {
    let value = record.value().unwrap_or_default();
    let contains = |needle: &[u8]| value.windows(needle.len()).any(|w| w == needle);
    if contains(b"poison") {
        panic!("a poison record");
    }
    let mut n: u64 = 0;
    while contains(b"spin") {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    out.keep(record);
}
