//! sarama's default `HashPartitioner`: FNV-1a 32 of the key, read as an
//! `int32`, Go's truncating `%`, negated if negative. Records without a key
//! go round-robin (sarama picks at random; a broker should not).

use sluice_sdk::hash::sarama_partition;
use sluice_sdk::{Error, Init, Params, Record, partitioner};

#[derive(Debug, Default)]
pub struct Keyless {
    next: u32,
}

impl Init for Keyless {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&[])?;
        Ok(Self::default())
    }
}

#[partitioner]
pub fn sarama_hash(keyless: &mut Keyless, record: &Record<'_>, partition_count: u32) -> u32 {
    match record.key() {
        Some(key) => sarama_partition(key, partition_count),
        None => {
            keyless.next = keyless.next.wrapping_add(1);
            (keyless.next - 1) % partition_count
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn partition_of(key: &[u8], partition_count: u32) -> u32 {
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(key), None, &[]);
        sarama_hash(
            &mut Keyless::default(),
            &b.batch().iter().next().unwrap(),
            partition_count,
        )
    }

    #[test]
    fn keys_land_where_sarama_puts_them() {
        // fnv1a32("a") = 0xe40c292c: as int32 -468965076; Go gives
        // -468965076 % 7 = -6, negated: 6 (the unsigned remainder is 5).
        assert_eq!(partition_of(b"a", 7), 6);
        // fnv1a32("foobar") = 0xbf9cf968: int32 -1080231576; % 10 = -6 -> 6.
        assert_eq!(partition_of(b"foobar", 10), 6);
        // fnv1a32("") = 0x811c9dc5: int32 -2128831035; % 3 = -0 -> 0.
        assert_eq!(partition_of(b"", 3), 0);
    }
}
