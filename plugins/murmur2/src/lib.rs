//! The Java client's partitioner for keyed records:
//! `toPositive(murmur2(key)) % partitions`. Records without a key go
//! round-robin (the Java client's sticky partitioner has no broker-side
//! equivalent: the broker sees one batch at a time).

use sluice_sdk::hash::murmur2_partition;
use sluice_sdk::{Error, Init, Params, Record, partitioner};

/// The round-robin cursor for keyless records.
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
pub fn murmur2(keyless: &mut Keyless, record: &Record<'_>, partition_count: u32) -> u32 {
    match record.key() {
        Some(key) => murmur2_partition(key, partition_count),
        None => {
            let p = keyless.next % partition_count;
            keyless.next = keyless.next.wrapping_add(1);
            p
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn partition_of(key: Option<&[u8]>, partition_count: u32, state: &mut Keyless) -> u32 {
        let mut b = BatchBuilder::new();
        b.push(0, 0, key, Some(b"v"), &[]);
        let record = b.batch().iter().next().unwrap();
        murmur2(state, &record, partition_count)
    }

    #[test]
    fn keyed_records_land_where_the_java_client_puts_them() {
        // toPositive(Utils.murmur2(key)) % n, from Kafka's murmur2 values:
        // "21" -> -973932308, "foobar" -> -790332482, "abc" -> 479470107.
        let mut state = Keyless::default();
        let cases: [(&[u8], u32, u32); 6] = [
            (b"21", 3, (-973_932_308i32 & 0x7fff_ffff) as u32 % 3),
            (b"foobar", 10, (-790_332_482i32 & 0x7fff_ffff) as u32 % 10),
            (b"abc", 7, 479_470_107 % 7),
            (b"21", 3, 0),
            (b"foobar", 10, 6),
            (b"abc", 7, 4),
        ];
        for (key, n, expected) in cases {
            assert_eq!(
                partition_of(Some(key), n, &mut state),
                expected,
                "key {key:?}, {n} partitions"
            );
        }
    }

    #[test]
    fn keyless_records_go_round_robin() {
        let mut state = Keyless::init(&Params::default()).unwrap();
        let got: Vec<u32> = (0..5).map(|_| partition_of(None, 3, &mut state)).collect();
        assert_eq!(got, [0, 1, 2, 0, 1]);
    }

    #[test]
    fn parameters_are_rejected() {
        let err = Keyless::init(&Params::new([("seed", "1")])).unwrap_err();
        assert!(err.message.contains("unknown parameter `seed`"), "{err}");
    }
}
