//! The partition of an output record (docs/design/materialized-transforms.md, "Output
//! partitions"): where a Java producer would put it, so per-key order is kept.

use crate::spec::Partitioning;

/// The partition of a record with `key` read from `source_partition`, in an output (or the
/// dead-letter topic) of `partition_count` partitions.
///
/// - [`Partitioning::Key`]: a keyed record goes to `toPositive(murmur2(key)) % count` (the
///   Java client's default partitioner); a keyless one to the source partition modulo count.
/// - [`Partitioning::Source`]: every record to the source partition modulo count, so a
///   source partition's order is kept whole.
///
/// An empty key is a key (the Java client hashes it too); `None` is a null key.
///
/// # Panics
/// If `partition_count` is 0: a topic has at least one partition, so that is our bug.
#[must_use]
pub fn output_partition(
    partitioning: Partitioning,
    key: Option<&[u8]>,
    source_partition: u32,
    partition_count: u32,
) -> u32 {
    assert!(
        partition_count > 0,
        "an output topic has at least one partition"
    );
    let partition = match (partitioning, key) {
        (Partitioning::Key, Some(key)) => sluice_hash::murmur2_partition(key, partition_count),
        (Partitioning::Key, None) | (Partitioning::Source, _) => source_partition % partition_count,
    };
    debug_assert!(partition < partition_count);
    partition
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_records_land_where_the_java_client_puts_them() {
        // toPositive of Kafka's Utils.murmur2 values pinned in sluice-hash's tests.
        let cases: [(&[u8], u32, u32); 8] = [
            (b"21", 7, 3),      // 1,173,551,340 % 7
            (b"foobar", 12, 6), // 1,357,151,166 % 12
            (b"foobar", 7, 0),
            (b"abc", 7, 4), // 479,470,107 % 7
            (b"abc", 12, 3),
            (b"1", 7, 2), // 154,038,159 % 7
            (b"12345", 3, 2),
            (b"12345", 12, 8), // 959,118,044 % 12
        ];
        for (key, count, expected) in cases {
            for source in [0, 5] {
                assert_eq!(
                    output_partition(Partitioning::Key, Some(key), source, count),
                    expected,
                    "key {:?} over {count}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }

    #[test]
    fn keyless_and_source_partitioning_follow_the_source_partition() {
        assert_eq!(output_partition(Partitioning::Key, None, 5, 3), 2);
        assert_eq!(output_partition(Partitioning::Key, None, 1, 3), 1);
        assert_eq!(
            output_partition(Partitioning::Source, Some(b"foobar"), 5, 3),
            2
        );
        assert_eq!(output_partition(Partitioning::Source, None, 7, 7), 0);
        assert_eq!(output_partition(Partitioning::Source, Some(b"x"), 9, 1), 0);
    }

    #[test]
    fn an_empty_key_is_hashed_not_treated_as_null() {
        let hashed = sluice_hash::murmur2_partition(b"", 1000);
        assert_eq!(
            output_partition(Partitioning::Key, Some(b""), 999, 1000),
            hashed
        );
    }

    #[test]
    #[should_panic(expected = "at least one partition")]
    fn zero_partitions_is_our_bug() {
        let _ = output_partition(Partitioning::Key, None, 0, 0);
    }
}
