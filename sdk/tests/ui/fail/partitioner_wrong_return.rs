use sluice_sdk::{Record, partitioner};

#[partitioner]
fn p(record: &Record<'_>, partition_count: u32) -> i64 {
    record.offset % i64::from(partition_count)
}

fn main() {}
