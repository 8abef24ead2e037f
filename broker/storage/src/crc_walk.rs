//! Append-time validation of an uncompressed batch's records, fused with its CRC-32C.
//!
//! The record walk parses every record (its length prefix and each field inside it, as
//! Kafka's LogValidator does) and checks that `recordsCount` records fill the batch
//! exactly, with offset deltas `0..count` in order. The walk is a chain of
//! dependent loads (tens of cycles per record) and the CRC is throughput-bound on the `crc32`
//! instruction, so on x86-64 with SSE4.2 both run in one loop: three CRC streams over the
//! three thirds of the records, one walk step per 96 bytes, the out-of-order core overlaps
//! them. The streams are joined with a CRC "combine" (multiplication by x^(8n) mod P).
//! Elsewhere: `crc32c` in chunks, each followed by the walk over it.

use crate::error::BatchError;
use crate::record::{bad, parse_body, read_varint};

/// Walks record length prefixes.
struct Walker {
    at: usize,
    index: i32,
}

impl Walker {
    fn new() -> Self {
        Walker { at: 0, index: 0 }
    }

    /// Walks one record (the caller checks `index < count`): its length, every field inside
    /// it (`record::parse_body`), and its offset delta, which must equal its index.
    #[inline(always)]
    fn step(&mut self, body: &[u8]) -> Result<(), BatchError> {
        let Some(len) = read_length(body, &mut self.at) else {
            return Err(bad(self.index, "length"));
        };
        if len == 0 || body.len() - self.at < len {
            return Err(bad(self.index, "length past end of batch"));
        }
        let meta = parse_body(&body[self.at..self.at + len], self.index)?;
        if meta.offset_delta != self.index {
            return Err(bad(self.index, "offsetDelta out of sequence"));
        }
        self.at += len;
        self.index += 1;
        Ok(())
    }

    /// Walks every record whose length prefix starts before `limit`.
    fn walk(&mut self, body: &[u8], count: i32, limit: usize) -> Result<(), BatchError> {
        while self.at < limit && self.index < count {
            self.step(body)?;
        }
        Ok(())
    }

    /// After the walk: `count` records fill the body exactly.
    fn finish(&self, body: &[u8], count: i32) -> Result<(), BatchError> {
        let mismatch = |reason| BatchError::RecordsMismatch {
            records_count: count,
            reason,
        };
        if self.index < count {
            return Err(mismatch("fewer records are present"));
        }
        if self.at != body.len() {
            return Err(mismatch("bytes follow the last record"));
        }
        Ok(())
    }
}

/// A record length prefix (zigzag varint, must be positive), advancing `*at`. One- and
/// two-byte prefixes (records under 8 KiB) decode branch-free from a single 2-byte load.
#[inline(always)]
fn read_length(body: &[u8], at: &mut usize) -> Option<usize> {
    let raw = match body.get(*at..*at + 2) {
        Some(&[b0, b1]) if b1 < 0x80 || b0 < 0x80 => {
            let two = b0 >> 7; // 1 if the prefix takes two bytes
            *at += 1 + usize::from(two);
            u64::from(b0 & 0x7f) | ((u64::from(b1) << 7) * u64::from(two))
        }
        _ => return usize::try_from(read_varint(body, at)?).ok(),
    };
    (raw & 1 == 0).then_some((raw >> 1) as usize)
}

/// Walks every record of a records section already decompressed (or uncompressed, without
/// its CRC): exactly `count` records, each well formed and fitting its length, offset deltas
/// `0..count` in order, nothing after the last. Allocates nothing, whatever `count` claims.
pub fn validate_records(body: &[u8], count: i32) -> Result<(), BatchError> {
    let mut walker = Walker::new();
    walker.walk(body, count, body.len())?;
    walker.finish(body, count)
}

/// CRC-32C of `crc_region` (attributes .. end of batch; records start at `records_from`)
/// and the record walk's verdict for `count` records.
pub(crate) fn crc_and_validate_records(
    crc_region: &[u8],
    records_from: usize,
    count: i32,
) -> (u32, Result<(), BatchError>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sse4.2") {
        // SAFETY: the CPU supports SSE4.2, checked just above.
        return unsafe { fused_sse42(crc_region, records_from, count) };
    }
    chunked(crc_region, records_from, count)
}

/// Bytes CRC'd between two stretches of the walk in the portable path (the walk then
/// reads from cache right behind the CRC).
const WALK_CHUNK_BYTES: usize = 32 * 1024;

fn chunked(crc_region: &[u8], records_from: usize, count: i32) -> (u32, Result<(), BatchError>) {
    let body = &crc_region[records_from..];
    let mut crc = crc32c::crc32c(&crc_region[..records_from]);
    let mut walker = Walker::new();
    let mut result = Ok(());
    for start in (0..body.len()).step_by(WALK_CHUNK_BYTES) {
        let end = (start + WALK_CHUNK_BYTES).min(body.len());
        crc = crc32c::crc32c_append(crc, &body[start..end]);
        if result.is_ok() {
            result = walker.walk(body, count, end);
        }
    }
    (crc, result.and_then(|()| walker.finish(body, count)))
}

/// 8-byte words of each CRC stream per walk step (4 words x 3 streams = 96 bytes).
#[cfg(target_arch = "x86_64")]
const WORDS_PER_STEP: usize = 4;

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn fused_sse42(
    crc_region: &[u8],
    records_from: usize,
    count: i32,
) -> (u32, Result<(), BatchError>) {
    use std::arch::x86_64::_mm_crc32_u64;
    let word = |bytes: &[u8], i: usize| {
        u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
    };
    let body = &crc_region[records_from..];
    let stream_bytes = body.len() / 24 * 8;
    let (a, rest) = body.split_at(stream_bytes);
    let (b, rest) = rest.split_at(stream_bytes);
    let (c, tail) = rest.split_at(stream_bytes);
    let mut state = [
        u64::from(!crc32c::crc32c(&crc_region[..records_from])),
        u64::from(u32::MAX),
        u64::from(u32::MAX),
    ];
    let (mut walker, mut result) = (Walker::new(), Ok(()));
    let block = 8 * WORDS_PER_STEP;
    let blocks = a
        .chunks_exact(block)
        .zip(b.chunks_exact(block))
        .zip(c.chunks_exact(block));
    for ((a, b), c) in blocks {
        let (a, b, c): (
            &[u8; 8 * WORDS_PER_STEP],
            &[u8; 8 * WORDS_PER_STEP],
            &[u8; 8 * WORDS_PER_STEP],
        ) = (
            a.try_into().expect("block"),
            b.try_into().expect("block"),
            c.try_into().expect("block"),
        );
        for i in 0..WORDS_PER_STEP {
            state = [
                _mm_crc32_u64(state[0], word(a, i)),
                _mm_crc32_u64(state[1], word(b, i)),
                _mm_crc32_u64(state[2], word(c, i)),
            ];
        }
        if walker.index < count && result.is_ok() {
            result = walker.step(body);
        }
    }
    let done_words = stream_bytes / block * WORDS_PER_STEP;
    for i in done_words..stream_bytes / 8 {
        state = [
            _mm_crc32_u64(state[0], word(a, i)),
            _mm_crc32_u64(state[1], word(b, i)),
            _mm_crc32_u64(state[2], word(c, i)),
        ];
    }
    let [ca, cb, cc] = state.map(|s| !(s as u32));
    let crc = crc32c::crc32c_append(
        combine(combine(ca, cb, stream_bytes), cc, stream_bytes),
        tail,
    );
    let result = result.and_then(|()| walker.walk(body, count, body.len()));
    (crc, result.and_then(|()| walker.finish(body, count)))
}

/// CRC-32C's polynomial, bit-reflected.
const POLY: u32 = 0x82F6_3B78;

/// `a * b mod P` over GF(2), reflected (zlib's `multmodp`).
const fn multmodp(a: u32, mut b: u32) -> u32 {
    let (mut m, mut p) = (1u32 << 31, 0u32);
    loop {
        if a & m != 0 {
            p ^= b;
            if a & (m - 1) == 0 {
                return p;
            }
        }
        m >>= 1;
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
}

/// `X2N[k] = x^(2^k) mod P`.
const X2N: [u32; 32] = {
    let mut table = [0u32; 32];
    let mut p = 1u32 << 30; // x^1
    table[0] = p;
    let mut k = 1;
    while k < 32 {
        p = multmodp(p, p);
        table[k] = p;
        k += 1;
    }
    table
};

/// CRC of `A ++ B` from `crc(A)`, `crc(B)` and `len(B)` (zlib's `crc32_combine`).
fn combine(crc_a: u32, crc_b: u32, len_b: usize) -> u32 {
    let (mut n, mut k, mut x) = (len_b, 3, 1u32 << 31); // x^(8 * len_b)
    while n != 0 {
        if n & 1 != 0 {
            x = multmodp(X2N[k & 31], x);
        }
        n >>= 1;
        k += 1;
    }
    multmodp(x, crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::build_value_batch;

    #[test]
    fn fused_crc_equals_crc32c_for_every_length() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for len in (0..200).chain([511, 767, 1000, 2047, 2999]) {
            for from in [0, 1.min(len), 40.min(len)] {
                let region = &data[..len];
                assert_eq!(
                    crc_and_validate_records(region, from, 1).0,
                    crc32c::crc32c(region),
                    "len {len} from {from}"
                );
                assert_eq!(chunked(region, from, 1).0, crc32c::crc32c(region));
            }
        }
        assert_eq!(
            combine(crc32c::crc32c(b"abc"), crc32c::crc32c(b"defgh"), 5),
            crc32c::crc32c(b"abcdefgh")
        );
    }

    #[test]
    fn walk_accepts_valid_batches_and_rejects_wrong_counts() {
        for (records, value_bytes) in [(1, 0), (1, 100), (7, 3), (200, 100), (3, 9000)] {
            let batch = build_value_batch(records, value_bytes, 1, 0);
            let region = &batch[21..];
            for count in [records as i32, records as i32 - 1, records as i32 + 1] {
                let (crc, result) = crc_and_validate_records(region, 40, count);
                assert_eq!(crc, crc32c::crc32c(region));
                assert_eq!(
                    result.is_ok(),
                    count == records as i32,
                    "{records} records, count {count}"
                );
                assert_eq!(
                    chunked(region, 40, count).1.is_ok(),
                    count == records as i32
                );
            }
        }
    }

    fn recrc(batch: &mut [u8]) {
        let crc = crate::batch::compute_crc(batch);
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    fn two_records() -> Vec<u8> {
        use crate::testing::{TestRecord, build_batch};
        let record = TestRecord {
            key: Some(b"ab"),
            value: Some(b"value"),
            ..TestRecord::default()
        };
        build_batch(0, 0, &[record.clone(), record])
    }

    #[test]
    fn every_field_of_every_record_is_walked() {
        let good = two_records();
        assert!(crate::batch::validate(&good).is_ok());
        assert_eq!(validate_records(&good[61..], 2), Ok(()));
        // Record 0's body starts at 62 (one length byte): attributes, timestampDelta,
        // offsetDelta, then the key length (zigzag 2 = 4) at 65.
        assert_eq!(good[65], 4);
        let mut bad_key = good.clone();
        bad_key[65] = 0x7e; // a 63-byte key inside a 12-byte record
        recrc(&mut bad_key);
        assert_eq!(
            crate::batch::validate(&bad_key),
            Err(BatchError::BadRecord {
                index: 0,
                reason: "key"
            })
        );
        // Record 1's offsetDelta (at 62 + 12 + 1 + 2 = 77) is 1; make it 0.
        let second = 61 + 1 + usize::from(good[61]) / 2 + 1;
        assert_eq!(good[second + 2], 2); // zigzag 1
        let mut out_of_order = good.clone();
        out_of_order[second + 2] = 0;
        recrc(&mut out_of_order);
        assert_eq!(
            crate::batch::validate(&out_of_order),
            Err(BatchError::BadRecord {
                index: 1,
                reason: "offsetDelta out of sequence"
            })
        );
    }

    #[test]
    fn a_count_larger_than_the_records_is_refused_without_allocating() {
        let good = two_records();
        for count in [0, 1, 3, i32::MAX] {
            assert!(validate_records(&good[61..], count).is_err(), "{count}");
        }
        assert!(validate_records(&[], 1).is_err());
    }
}
