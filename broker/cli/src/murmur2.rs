//! Kafka's murmur2 for `sluice produce`'s key partitioning: the broker side's one copy of the
//! guest SDK's `sluice_sdk::hash::murmur2` (the SDK is a wasm guest crate, so the binary does
//! not link it). `tests/murmur2.rs` checks the two agree byte for byte; the SDK's own tests
//! pin Kafka's vectors.

/// Kafka's murmur2 (the Java client's `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let mut h = SEED ^ data.len() as u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate().rev() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}
