//! Records inside a produced RecordBatch v2, for re-routing: decode a batch (decompressing
//! it with the codec its attributes name) into record spans plus the plugin's columnar view,
//! and encode a new batch from a subset of its records (same codec, same base timestamp,
//! offset deltas renumbered, new CRC). Record bodies are copied as bytes, never re-encoded
//! field by field: only the length prefix and the offset delta of each record change.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use sluice_plugin_host::ColumnarBatch;
use sluice_storage::Compression;
use sluice_storage::batch::{self, BatchHeader, HEADER_BYTES, pos};

/// A batch the broker cannot split; the produce handler maps it to a Kafka error.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The batch failed the storage engine's checks (CRC, lengths, record count).
    #[error(transparent)]
    Invalid(#[from] sluice_storage::BatchError),
    /// A record inside a (decompressed) batch does not parse.
    #[error("record {index}: {reason}")]
    BadRecord { index: usize, reason: &'static str },
    /// The codec failed.
    #[error("{codec:?} decompression failed: {message}")]
    Codec { codec: Compression, message: String },
    /// Transactional and control batches are not re-routed (transactions are unsupported).
    #[error("transactional and control batches cannot be re-routed by a partitioner")]
    Transactional,
}

/// One record of a decoded batch.
#[derive(Debug, Clone, Copy)]
struct Span {
    /// Start of the record body (after its length varint) in the records section.
    body: usize,
    /// End of the record.
    end: usize,
    /// Where the key length starts: the body after `attributes`, `timestampDelta` and
    /// `offsetDelta`.
    after_offset_delta: usize,
    /// Bytes of attributes + timestampDelta (copied as they are).
    head_len: usize,
    timestamp: i64,
}

/// A produced batch, decoded: the header, the uncompressed records, each record's span.
#[derive(Debug)]
pub struct Decoded {
    pub header: BatchHeader,
    records: Bytes,
    spans: Vec<Span>,
}

impl Decoded {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.spans.len()
    }
}

/// Decodes one whole batch (validated by the storage engine's rules first) and fills
/// `columns` with its records for the plugin (offset = index in the batch). An uncompressed
/// batch's records are not copied: `Decoded` holds a slice of `bytes`.
pub fn decode(bytes: &Bytes, columns: &mut ColumnarBatch) -> Result<Decoded, CodecError> {
    let header = batch::validate(bytes)?;
    if header.is_transactional() || header.is_control() {
        return Err(CodecError::Transactional);
    }
    let records = match header.compression() {
        Compression::None => bytes.slice(HEADER_BYTES..),
        codec => decompress(codec, &bytes[HEADER_BYTES..])?,
    };
    let mut spans = Vec::with_capacity(header.records_count.max(0) as usize);
    let mut at = 0usize;
    let mut headers: Vec<(&[u8], &[u8])> = Vec::new();
    for index in 0..header.records_count as usize {
        let bad = |reason| CodecError::BadRecord { index, reason };
        let len = read_varint(&records, &mut at).ok_or(bad("length"))?;
        let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
        let body = at;
        let end = body
            .checked_add(len)
            .filter(|&e| e <= records.len())
            .ok_or(bad("length past end"))?;
        let rec = &records[..end];
        let mut p = body + 1;
        let ts_delta = read_varlong(rec, &mut p).ok_or(bad("timestampDelta"))?;
        let head_len = p - body;
        read_varint(rec, &mut p).ok_or(bad("offsetDelta"))?;
        let after_offset_delta = p;
        let key = read_bytes(rec, &mut p).ok_or(bad("key"))?;
        let value = read_bytes(rec, &mut p).ok_or(bad("value"))?;
        let count = read_varint(rec, &mut p).ok_or(bad("headerCount"))?;
        headers.clear();
        for _ in 0..count.max(0) {
            let name = read_bytes(rec, &mut p).flatten().ok_or(bad("header key"))?;
            let value = read_bytes(rec, &mut p).ok_or(bad("header value"))?;
            headers.push((name, value.unwrap_or_default()));
        }
        if p != end {
            return Err(bad("record length does not match its fields"));
        }
        let timestamp = header.base_timestamp.saturating_add(ts_delta);
        columns.push(index as i64, timestamp, key, value, &headers);
        spans.push(Span {
            body,
            end,
            after_offset_delta,
            head_len,
            timestamp,
        });
        at = end;
    }
    Ok(Decoded {
        header,
        records,
        spans,
    })
}

/// A new batch of the records at `indices` (in order) of `decoded`: same attributes (codec,
/// timestamp type), base timestamp, and leader epoch; offset deltas 0..n; written without
/// producer id, epoch and sequence (-1), since the client's sequence numbers count the batch
/// it sent to another partition.
pub fn encode(decoded: &Decoded, indices: &[u32]) -> Result<Vec<u8>, CodecError> {
    let mut section = Vec::with_capacity(decoded.records.len());
    let mut max_timestamp = i64::MIN;
    for (delta, &i) in indices.iter().enumerate() {
        let span = decoded.spans[i as usize];
        let r = &decoded.records;
        let mut delta_bytes = Vec::with_capacity(5);
        write_varlong(&mut delta_bytes, delta as i64);
        let len = span.head_len + delta_bytes.len() + (span.end - span.after_offset_delta);
        write_varlong(&mut section, len as i64);
        section.extend_from_slice(&r[span.body..span.body + span.head_len]);
        section.extend_from_slice(&delta_bytes);
        section.extend_from_slice(&r[span.after_offset_delta..span.end]);
        max_timestamp = max_timestamp.max(span.timestamp);
    }
    let codec = decoded.header.compression();
    let section = match codec {
        Compression::None => section,
        codec => compress(codec, &section)?,
    };
    let h = &decoded.header;
    let mut out = Vec::with_capacity(HEADER_BYTES + section.len());
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&((HEADER_BYTES - 12 + section.len()) as i32).to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(h.magic as u8);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&h.attributes.to_be_bytes());
    out.extend_from_slice(&(indices.len() as i32 - 1).to_be_bytes());
    out.extend_from_slice(&h.base_timestamp.to_be_bytes());
    let max_timestamp = if h.timestamp_type() == sluice_storage::TimestampType::LogAppendTime {
        h.max_timestamp
    } else {
        max_timestamp
    };
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&(indices.len() as i32).to_be_bytes());
    out.extend_from_slice(&section);
    let crc = batch::compute_crc(&out);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    debug_assert_eq!(
        batch::validate(&out).map(|h| h.records_count).ok(),
        Some(indices.len() as i32)
    );
    Ok(out)
}

/// Decompresses through the broker's bounded codec (`crate::codec`), so a batch that
/// inflates past `REROUTE_DECOMPRESSED_BYTES_MAX` is refused instead of exhausting memory.
fn decompress(codec: Compression, section: &[u8]) -> Result<Bytes, CodecError> {
    let limit = crate::limits::REROUTE_DECOMPRESSED_BYTES_MAX;
    match crate::codec::decompress(codec, section, limit) {
        Ok(Some(records)) => Ok(Bytes::from(records)),
        Ok(None) if matches!(codec, Compression::None | Compression::Unknown(_)) => {
            Ok(Bytes::copy_from_slice(section))
        }
        Ok(None) => Err(CodecError::Codec {
            codec,
            message: format!(
                "records decompress to more than REROUTE_DECOMPRESSED_BYTES_MAX ({limit} bytes)"
            ),
        }),
        Err(e) => Err(CodecError::Codec {
            codec,
            message: e.to_string(),
        }),
    }
}

fn compress(codec: Compression, section: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut out = BytesMut::with_capacity(section.len() / 2 + 64);
    let fill = |b: &mut BytesMut| {
        b.extend_from_slice(section);
        Ok(())
    };
    let result = match codec {
        Compression::Gzip => Gzip::compress(&mut out, fill),
        Compression::Snappy => Snappy::compress(&mut out, fill),
        Compression::Lz4 => Lz4::compress(&mut out, fill),
        Compression::Zstd => Zstd::compress(&mut out, fill),
        Compression::None | Compression::Unknown(_) => fill(&mut out),
    };
    result.map_err(|e| CodecError::Codec {
        codec,
        message: format!("compressing: {e:#}"),
    })?;
    Ok(out.to_vec())
}

fn read_varlong(buf: &[u8], at: &mut usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let byte = *buf.get(*at)?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    None
}

fn read_varint(buf: &[u8], at: &mut usize) -> Option<i32> {
    read_varlong(buf, at).and_then(|v| i32::try_from(v).ok())
}

/// A `length varint | bytes` field; `Some(None)` for length -1 (null).
fn read_bytes<'a>(buf: &'a [u8], at: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = read_varint(buf, at)?;
    if len == -1 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let bytes = buf.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some(Some(bytes))
}

fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

#[cfg(test)]
mod tests;
