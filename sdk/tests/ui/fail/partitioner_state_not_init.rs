use sluice_sdk::{Record, partitioner};

struct NoInit;

#[partitioner]
fn p(_state: &mut NoInit, _record: &Record<'_>, _partition_count: u32) -> u32 {
    0
}

fn main() {}
