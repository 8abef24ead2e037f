//! Bounded decompression of record batch payloads (gzip, snappy in Kafka's xerial framing or
//! raw, lz4 frames, zstd): Produce validates every compressed batch's records
//! (`records::validate`), ListOffsets by time walks the records of the batch it lands in
//! ([`decompress_for_timestamp_lookup`], which transforms starting from a time use too);
//! the output is capped so a small batch that inflates to gigabytes cannot exhaust memory.

use std::io::{self, Read};

use sluice_storage::Compression;

use crate::limits;

/// snappy-java's stream header: magic, then format version and minimum compatible version.
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;

/// Decompresses `input` of `codec`; `Ok(None)` if the output would exceed `limit_bytes` or
/// the codec is not one (uncompressed, or an unknown id).
pub fn decompress(
    codec: Compression,
    input: &[u8],
    limit_bytes: usize,
) -> io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    Ok(decompress_into(codec, input, limit_bytes, &mut out)?.then_some(out))
}

/// Decompresses `input` of `codec` into `out` (cleared first, its capacity reused); false
/// if the output would exceed `limit_bytes` or the codec is not one. Nothing past the limit
/// is allocated: readers stop one byte after it, snappy checks its declared length first.
pub fn decompress_into(
    codec: Compression,
    input: &[u8],
    limit_bytes: usize,
    out: &mut Vec<u8>,
) -> io::Result<bool> {
    out.clear();
    match codec {
        Compression::Gzip => read_bounded(flate2::read::GzDecoder::new(input), limit_bytes, out),
        Compression::Snappy => snappy(input, limit_bytes, out),
        Compression::Lz4 => read_bounded(lz4::Decoder::new(input)?, limit_bytes, out),
        Compression::Zstd => {
            read_bounded(zstd::stream::read::Decoder::new(input)?, limit_bytes, out)
        }
        Compression::None | Compression::Unknown(_) => Ok(false),
    }
}

/// Opens a compressed batch for a timestamp look-up's record walk (ListOffsets by time, and
/// a transform deployed `--from-offset` a time), under
/// `TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX`. A batch we cannot open (bad bytes from the
/// producer, or over the limit) is answered by its first offset, not by an error.
pub fn decompress_for_timestamp_lookup(
    codec: Compression,
    payload: &[u8],
) -> io::Result<Option<Vec<u8>>> {
    let opened = decompress(
        codec,
        payload,
        limits::TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX,
    );
    Ok(opened.unwrap_or_else(|error| {
        tracing::warn!(?codec, %error, "cannot decompress a batch for ListOffsets; answering its first offset");
        None
    }))
}

fn read_bounded(reader: impl Read, limit_bytes: usize, out: &mut Vec<u8>) -> io::Result<bool> {
    reader.take(limit_bytes as u64 + 1).read_to_end(out)?;
    Ok(out.len() <= limit_bytes)
}

/// Kafka's Java clients write snappy-java's framing (16-byte header, then blocks of a
/// big-endian u32 length and a raw snappy block); librdkafka and others may write raw snappy.
fn snappy(input: &[u8], limit_bytes: usize, out: &mut Vec<u8>) -> io::Result<bool> {
    if !input.starts_with(&XERIAL_MAGIC) {
        return snappy_block(input, limit_bytes, out);
    }
    let mut rest = input.get(XERIAL_HEADER_BYTES..).unwrap_or_default();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| invalid("snappy block length cut short"))?;
        let len = u32::from_be_bytes(*len) as usize;
        let block = tail
            .get(..len)
            .ok_or_else(|| invalid("snappy block cut short"))?;
        if !snappy_block(block, limit_bytes, out)? {
            return Ok(false);
        }
        rest = &tail[len..];
    }
    Ok(true)
}

/// Appends one raw snappy block to `out`, refusing before allocation past the limit.
fn snappy_block(block: &[u8], limit_bytes: usize, out: &mut Vec<u8>) -> io::Result<bool> {
    let len = snap::raw::decompress_len(block).map_err(io::Error::other)?;
    let start = out.len();
    if start.saturating_add(len) > limit_bytes {
        return Ok(false);
    }
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(io::Error::other)?;
    Ok(true)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const DATA: &[u8] = b"records records records records records records records";

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn xerial(data: &[u8]) -> Vec<u8> {
        let block = snap::raw::Encoder::new().compress_vec(data).unwrap();
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        out.extend_from_slice(&(block.len() as u32).to_be_bytes());
        out.extend_from_slice(&block);
        out
    }

    fn lz4_frame(data: &[u8]) -> Vec<u8> {
        let mut encoder = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
        encoder.write_all(data).unwrap();
        let (out, result) = encoder.finish();
        result.unwrap();
        out
    }

    #[test]
    fn every_codec_round_trips_within_the_limit() {
        let raw_snappy = snap::raw::Encoder::new().compress_vec(DATA).unwrap();
        let cases = [
            (Compression::Gzip, gzip(DATA)),
            (Compression::Snappy, xerial(DATA)),
            (Compression::Snappy, raw_snappy),
            (Compression::Lz4, lz4_frame(DATA)),
            (Compression::Zstd, zstd::bulk::compress(DATA, 1).unwrap()),
        ];
        for (codec, compressed) in cases {
            let out = decompress(codec, &compressed, DATA.len()).unwrap();
            assert_eq!(out.as_deref(), Some(DATA), "{codec:?}");
            let over = decompress(codec, &compressed, DATA.len() - 1).unwrap();
            assert_eq!(over, None, "{codec:?} over the limit");
        }
    }

    #[test]
    fn garbage_is_an_error_and_none_is_not_a_codec() {
        assert!(decompress(Compression::Zstd, b"not zstd", 100).is_err());
        assert!(decompress(Compression::Gzip, b"not gzip", 100).is_err());
        assert_eq!(decompress(Compression::None, DATA, 100).unwrap(), None);
    }
}
