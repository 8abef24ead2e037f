//! Hostile: never returns from `partition`, unless the key is `ok` (so the
//! same plugin also proves the host recovers after stopping it).

use sluice_sdk::{Record, partitioner};

#[partitioner]
pub fn spin(record: &Record<'_>, _partition_count: u32) -> u32 {
    let mut n: u32 = 0;
    while record.key() != Some(b"ok") {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}
