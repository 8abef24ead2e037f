use sluice_sdk::{Record, partitioner};

#[partitioner]
fn p(record: &Record<'_>) -> u32 {
    record.offset as u32
}

fn main() {}
