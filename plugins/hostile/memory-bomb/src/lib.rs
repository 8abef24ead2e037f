//! Hostile: allocates without bound in `partition` when the key is `bomb`.

use sluice_sdk::{Record, partitioner};

#[partitioner]
pub fn bomb(record: &Record<'_>, _partition_count: u32) -> u32 {
    if record.key() == Some(b"bomb") {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![1u8; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
    0
}
