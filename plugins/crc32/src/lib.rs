//! librdkafka's `consistent` partitioner: `crc32(key) % partitions`, with a
//! missing key hashed as the empty key (so it lands on partition 0, as
//! librdkafka does).

use sluice_sdk::hash::crc32;
use sluice_sdk::{Record, partitioner};

#[partitioner]
pub fn consistent(record: &Record<'_>, partition_count: u32) -> u32 {
    crc32(record.key().unwrap_or_default()) % partition_count
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn partition_of(key: Option<&[u8]>, partition_count: u32) -> u32 {
        let mut b = BatchBuilder::new();
        b.push(0, 0, key, None, &[]);
        consistent(&b.batch().iter().next().unwrap(), partition_count)
    }

    #[test]
    fn keys_land_where_librdkafka_consistent_puts_them() {
        // crc32("123456789") = 0xcbf43926 (the CRC-32 check value) = 3421780262.
        assert_eq!(partition_of(Some(b"123456789"), 10), 3_421_780_262 % 10);
        assert_eq!(partition_of(Some(b"123456789"), 7), 3_421_780_262 % 7);
        // crc32("a") = 0xe8b7be43 = 3904355907.
        assert_eq!(partition_of(Some(b"a"), 6), 3_904_355_907 % 6);
        assert_eq!(partition_of(None, 6), 0);
        assert_eq!(partition_of(Some(b""), 6), 0);
    }
}
