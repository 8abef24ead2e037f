//! The key hashes of the Kafka clients, byte-exact, so a Sluice partitioner
//! puts a key where the client's own partitioner would. One copy: guest plugins reach it as
//! `sluice_sdk::hash`, and `sluice produce` partitions keys with it.
//!
//! # Layout
//! One file: [`murmur2`], [`to_positive`] and [`murmur2_partition`] (the Java client),
//! [`crc32`] (librdkafka's consistent partitioner), [`fnv1a32`] and [`sarama_partition`]
//! (sarama), each pinned to the client's own vectors.

/// Kafka's `Utils.murmur2` (Java client, `DefaultPartitioner` /
/// `BuiltInPartitioner` for keyed records), as a signed Java `int`.
#[must_use]
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate().rev() {
            h ^= u32::from(byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's `Utils.toPositive`: clears the sign bit (not `abs`).
#[must_use]
pub fn to_positive(n: i32) -> u32 {
    (n & 0x7fff_ffff) as u32
}

/// The Java client's partition for a keyed record:
/// `toPositive(murmur2(key)) % numPartitions`.
#[must_use]
pub fn murmur2_partition(key: &[u8], partition_count: u32) -> u32 {
    to_positive(murmur2(key)) % partition_count
}

/// CRC-32 (IEEE 802.3, as zlib and librdkafka's `rd_crc32`).
#[must_use]
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = crc32_table();
    let mut crc = !0u32;
    for &byte in data {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 == 1 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// FNV-1a, 32 bits (Go's `hash/fnv.New32a`).
#[must_use]
pub fn fnv1a32(data: &[u8]) -> u32 {
    let mut h = 0x811c_9dc5u32;
    for &byte in data {
        h ^= u32::from(byte);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// sarama's `HashPartitioner` (default settings): the hash read as an
/// `int32`, Go's truncating `%`, then negated if negative. This differs
/// from `hash % n` on the unsigned value whenever the top bit is set.
#[must_use]
pub fn sarama_partition(key: &[u8], partition_count: u32) -> u32 {
    let n = partition_count as i32;
    (fnv1a32(key) as i32 % n).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafka_utils() {
        // Values of org.apache.kafka.common.utils.Utils.murmur2, as pinned by
        // Kafka's UtilsTest and by Akka's Murmur2Spec.
        let cases: [(&[u8], i32); 11] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
            (b"1", -1_993_445_489),
            (b"12", 126_087_238),
            (b"123", -267_702_483),
            (b"1234", -1_614_185_708),
            (b"12345", -1_188_365_604),
        ];
        for (key, expected) in cases {
            assert_eq!(
                murmur2(key),
                expected,
                "key {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn to_positive_clears_the_sign_bit() {
        assert_eq!(to_positive(-1), 0x7fff_ffff);
        assert_eq!(to_positive(i32::MIN), 0);
        assert_eq!(to_positive(5), 5);
    }

    #[test]
    fn crc32_matches_the_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn fnv1a32_and_sarama_sign_handling() {
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
        // 0xe40c292c as int32 is -468965076; Go: -468965076 % 7 = -6 -> 6,
        // where the unsigned remainder would be 5.
        assert_eq!(sarama_partition(b"a", 7), 6);
        assert_eq!(fnv1a32(b"a") % 7, 5);
    }
}
