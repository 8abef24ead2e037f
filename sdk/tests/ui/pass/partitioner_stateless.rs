use sluice_sdk::{BatchBuilder, Record, partitioner};

#[partitioner]
fn by_key_length(record: &Record<'_>, partition_count: u32) -> u32 {
    record.key().map_or(0, |k| k.len() as u32) % partition_count
}

fn main() {
    // The function stays an ordinary function.
    let mut b = BatchBuilder::new();
    b.push(0, 0, Some(b"abc"), None, &[]);
    assert_eq!(by_key_length(&b.batch().iter().next().unwrap(), 2), 1);
}
