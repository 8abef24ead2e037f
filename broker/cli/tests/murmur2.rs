//! The CLI's murmur2 (`src/murmur2.rs`, compiled into this test) agrees with the SDK's
//! `sluice_sdk::hash::murmur2`, whose tests pin Kafka's vectors; so `sluice produce` puts a
//! key where the Java client and a Sluice murmur2 partitioner plugin would.

#[path = "../src/murmur2.rs"]
mod murmur2;

#[test]
fn murmur2_agrees_with_the_sdk_on_every_tail_length_and_byte() {
    // Keys of every length (each tail length 0-3) and every byte value.
    let keys: Vec<Vec<u8>> = (0..=64u8)
        .map(|n| (0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect())
        .chain((0..=255u8).map(|b| vec![b; usize::from(b % 9)]))
        .chain([b"21".to_vec(), b"foobar".to_vec(), b"abc".to_vec()])
        .collect();
    for key in &keys {
        assert_eq!(
            murmur2::murmur2(key),
            sluice_sdk::hash::murmur2(key),
            "key {key:?}"
        );
    }
}
