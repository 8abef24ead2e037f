//! A Sluice partitioner. `cargo test` tests it natively; `sluice plugin build .` builds
//! the `.wasm`; deploy it with `sluice plugin deploy`, then set the topic config
//! `sluice.partitioner` to its name.

use sluice_sdk::{Record, partitioner};

/// Same key, same partition: the Java client's choice for keyed records.
/// Keyless records go to partition 0.
#[partitioner]
pub fn {{module}}(record: &Record<'_>, partition_count: u32) -> u32 {
    record.key().map_or(0, |key| sluice_sdk::hash::murmur2_partition(key, partition_count))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    #[test]
    fn same_key_same_partition() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(b"customer-1"), None, &[]);
        b.push(1, 0, Some(b"customer-1"), None, &[]);
        b.push(2, 0, None, None, &[]);
        let p: Vec<u32> = b.batch().iter().map(|r| {{module}}(&r, 12)).collect();
        assert_eq!(p[0], p[1]);
        assert!(p[0] < 12);
        assert_eq!(p[2], 0);
    }
}
