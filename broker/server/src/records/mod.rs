//! Records inside a RecordBatch v2, for the two paths that open batches: re-routing produced
//! batches through a partitioner plugin (`reroute/`) and fetching through a view's filters
//! and transforms (`views/`). [`decode`] checks a batch (the storage engine's rules),
//! decompresses it with the codec its attributes name, under a named limit, and fills the
//! plugin's columnar batch with its records; the encoders write new batches with the same
//! codec and a new CRC: [`encode_renumbered`] (a subset for another partition) and
//! [`encode_kept`] / [`empty_batch`] (what a view keeps, at the original offsets), and
//! [`encode_produced`] (a new batch as a producer writes one: a materialized transform's
//! output).

pub mod validate;

use std::borrow::Cow;
use std::cell::RefCell;

use bytes::BytesMut;
use kafka_protocol::ResponseError;
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use sluice_plugin_host::{ColumnarBatch, RecordView};
use sluice_storage::Compression;
use sluice_storage::batch::{self, BatchHeader, HEADER_BYTES, pos};
use sluice_storage::record::{read_varint, read_varlong, write_varlong};

use crate::error::KafkaError;

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

/// A batch, decoded: the header, the uncompressed records (borrowed from the batch when it
/// is not compressed), each record's span.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub header: BatchHeader,
    records: Cow<'a, [u8]>,
    spans: Vec<Span>,
}

impl Decoded<'_> {
    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.spans.len()
    }
}

/// A batch a plugin step (`reroute`, `validator`) could not decode, as the partition's
/// Kafka error: the storage engine's refusal, CORRUPT_MESSAGE for damaged records or codecs,
/// INVALID_RECORD for a transactional batch a partitioner cannot re-route.
pub fn kafka_error(topic: &str, index: impl std::fmt::Display, e: CodecError) -> KafkaError {
    let code = match &e {
        CodecError::Invalid(b) => return KafkaError::from_batch(&format!("{topic}-{index}"), b),
        CodecError::BadRecord { .. } | CodecError::Codec { .. } => ResponseError::CorruptMessage,
        CodecError::Transactional => ResponseError::InvalidRecord,
    };
    KafkaError::new(code, format!("{topic}-{index}: {e}"))
}

/// The most a batch's records may decompress to, and the name of the limit (for errors).
#[derive(Debug, Clone, Copy)]
pub struct DecompressLimit {
    pub bytes: usize,
    pub name: &'static str,
}

/// Decodes one whole batch (validated by the storage engine's rules first) and fills
/// `columns` with its records for the plugin, each at its offset (base offset + offset
/// delta; a produced batch's base offset is 0, so there the offset is the index).
pub fn decode<'a>(
    bytes: &'a [u8],
    columns: &mut ColumnarBatch,
    limit: DecompressLimit,
) -> Result<Decoded<'a>, CodecError> {
    let header = batch::validate(bytes)?;
    let section = &bytes[HEADER_BYTES..];
    let records = match header.compression() {
        Compression::None => Cow::Borrowed(section),
        codec => Cow::Owned(decompress(codec, section, limit)?),
    };
    // The count is the client's word: reserve no more than the bytes can hold.
    let most = records.len() / sluice_storage::record::RECORD_BYTES_MIN;
    let mut spans = Vec::with_capacity((header.records_count.max(0) as usize).min(most));
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
        let offset_delta = read_varint(rec, &mut p).ok_or(bad("offsetDelta"))?;
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
        let offset = header.base_offset.saturating_add(i64::from(offset_delta));
        columns.push(offset, timestamp, key, value, &headers);
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

/// Most bytes of columns a thread keeps for its next batch ([`with_columns`]); a bigger set
/// is freed after use.
const COLUMNS_KEPT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Runs `f` with this thread's columnar batch, empty, and keeps it (up to
/// `COLUMNS_KEPT_BYTES_MAX`) for the next call: fresh columns for every request meant
/// allocating and page-faulting them in again (a third of a re-routed produce's time).
pub fn with_columns<T>(f: impl FnOnce(&mut ColumnarBatch) -> T) -> T {
    thread_local! {
        static COLUMNS: RefCell<ColumnarBatch> = RefCell::new(ColumnarBatch::new());
    }
    COLUMNS.with(|cell| {
        let mut columns = cell.take();
        columns.clear();
        let out = f(&mut columns);
        if columns.capacity_bytes() <= COLUMNS_KEPT_BYTES_MAX {
            columns.clear();
            cell.replace(columns);
        }
        out
    })
}

/// A new batch of the records at `indices` (in order) of `decoded`, for another partition:
/// same attributes (codec, timestamp type), base timestamp, and leader epoch; offset deltas
/// 0..n; written without producer id, epoch and sequence (-1), since the client's sequence
/// numbers count the batch it sent to another partition. Record bodies are copied as bytes:
/// only the length prefix and the offset delta of each record change.
pub fn encode_renumbered(decoded: &Decoded, indices: &[u32]) -> Result<Vec<u8>, CodecError> {
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
    let h = &decoded.header;
    let header = BatchHeader {
        base_offset: 0,
        last_offset_delta: indices.len() as i32 - 1,
        max_timestamp: kept_max_timestamp(h, max_timestamp),
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records_count: indices.len() as i32,
        ..*h
    };
    let out = write_batch(&header, &compress(h.compression(), section)?);
    debug_assert_eq!(
        batch::validate(&out).map(|h| h.records_count).ok(),
        Some(indices.len() as i32)
    );
    Ok(out)
}

/// The batch a view sends in place of `original`: the records of `kept` (a subset of its
/// records, possibly transformed, each with its original offset and timestamp) under the
/// same base offset, last offset delta, codec, producer fields and leader epoch; new CRC. The
/// offset range stays the original's, so a consumer moves past dropped records (gaps, as on a
/// compacted topic). Records are written field by field from `kept`.
pub fn encode_kept(original: &BatchHeader, kept: &ColumnarBatch) -> Result<Vec<u8>, CodecError> {
    let mut section = Vec::with_capacity(kept.len() * 64);
    let mut record = Vec::with_capacity(256);
    let mut max_timestamp = i64::MIN;
    for r in kept.records() {
        record.clear();
        record.push(0); // attributes: unused in v2 records
        write_varlong(&mut record, r.timestamp - original.base_timestamp);
        write_varlong(&mut record, r.offset - original.base_offset);
        write_nullable(&mut record, r.key());
        write_nullable(&mut record, r.value());
        write_varlong(&mut record, r.headers().len() as i64);
        for (name, value) in r.headers().iter() {
            write_nullable(&mut record, Some(name));
            write_nullable(&mut record, Some(value));
        }
        write_varlong(&mut section, record.len() as i64);
        section.extend_from_slice(&record);
        max_timestamp = max_timestamp.max(r.timestamp);
    }
    if kept.is_empty() {
        return Ok(empty_batch(original, original.last_offset()));
    }
    let header = BatchHeader {
        max_timestamp: kept_max_timestamp(original, max_timestamp),
        records_count: kept.len() as i32,
        ..*original
    };
    Ok(write_batch(
        &header,
        &compress(original.compression(), section)?,
    ))
}

/// Who writes a batch made with [`encode_produced`]: an idempotent or transactional
/// producer's fields, as a client's producer would set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence of the batch's first record (the partition's next, per producer).
    pub base_sequence: i32,
    /// Part of a transaction.
    pub transactional: bool,
}

/// A new batch, as a producer writes one, of `records` (in order): offset deltas 0..n (the
/// storage engine assigns the offsets), CreateTime timestamps as the records carry them,
/// `producer`'s fields, compressed with `codec`. What a materialized transform appends to an
/// output partition; the records are views into whatever columns hold them, written into
/// the batch without an intermediate copy.
///
/// # Panics
/// If `records` is empty (a caller bug).
pub fn encode_produced(
    records: &[RecordView<'_>],
    producer: ProducerFields,
    codec: Compression,
) -> Result<Vec<u8>, CodecError> {
    assert!(!records.is_empty(), "a produced batch has records");
    let base_timestamp = records
        .iter()
        .map(|r| r.timestamp)
        .min()
        .unwrap_or_default();
    let payload: usize = records
        .iter()
        .map(|r| r.key().map_or(0, <[u8]>::len) + r.value().map_or(0, <[u8]>::len))
        .sum();
    let mut section = Vec::with_capacity(payload + records.len() * 16);
    let mut record = Vec::with_capacity(256);
    let mut max_timestamp = i64::MIN;
    for (delta, r) in records.iter().enumerate() {
        record.clear();
        record.push(0); // attributes: unused in v2 records
        write_varlong(&mut record, r.timestamp - base_timestamp);
        write_varlong(&mut record, delta as i64);
        write_nullable(&mut record, r.key());
        write_nullable(&mut record, r.value());
        write_varlong(&mut record, r.headers().len() as i64);
        for (name, value) in r.headers().iter() {
            write_nullable(&mut record, Some(name));
            write_nullable(&mut record, Some(value));
        }
        write_varlong(&mut section, record.len() as i64);
        section.extend_from_slice(&record);
        max_timestamp = max_timestamp.max(r.timestamp);
    }
    let codec_bits = match codec {
        Compression::None | Compression::Unknown(_) => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    };
    let transactional = if producer.transactional {
        batch::attr::TRANSACTIONAL
    } else {
        0
    };
    let count = i32::try_from(records.len()).map_err(|_| CodecError::BadRecord {
        index: records.len(),
        reason: "more records than a batch holds",
    })?;
    let header = BatchHeader {
        base_offset: 0,
        batch_length: 0,
        partition_leader_epoch: -1,
        magic: 2,
        crc: 0,
        attributes: codec_bits | transactional,
        last_offset_delta: count - 1,
        base_timestamp,
        max_timestamp,
        producer_id: producer.producer_id,
        producer_epoch: producer.producer_epoch,
        base_sequence: producer.base_sequence,
        records_count: count,
    };
    Ok(write_batch(&header, &compress(codec, section)?))
}

/// A batch of no records covering offsets `first.base_offset..=last_offset` (Kafka leaves
/// such batches after compaction): clients take it as progress and fetch from
/// `last_offset + 1`. Uncompressed, whatever `first`'s codec.
pub fn empty_batch(first: &BatchHeader, last_offset: i64) -> Vec<u8> {
    let span = last_offset - first.base_offset;
    debug_assert!((0..=i64::from(i32::MAX)).contains(&span));
    let header = BatchHeader {
        attributes: first.attributes & !COMPRESSION_MASK,
        last_offset_delta: span as i32,
        records_count: 0,
        ..*first
    };
    write_batch(&header, &[])
}

/// Bits of a batch's attributes that name its codec.
const COMPRESSION_MASK: i16 = 0x07;

/// The max timestamp of a batch holding some of `original`'s records: the batch's own under
/// LogAppendTime (the broker's), else the largest of the kept records'.
fn kept_max_timestamp(original: &BatchHeader, kept_max: i64) -> i64 {
    if original.timestamp_type() == sluice_storage::TimestampType::LogAppendTime {
        original.max_timestamp
    } else {
        kept_max
    }
}

/// A whole v2 batch: `h`'s fields (its length, magic and CRC are computed) and `section`,
/// the (compressed) records.
fn write_batch(h: &BatchHeader, section: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + section.len());
    out.extend_from_slice(&h.base_offset.to_be_bytes());
    out.extend_from_slice(&((HEADER_BYTES - 12 + section.len()) as i32).to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&h.attributes.to_be_bytes());
    out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&h.base_timestamp.to_be_bytes());
    out.extend_from_slice(&h.max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer_epoch.to_be_bytes());
    out.extend_from_slice(&h.base_sequence.to_be_bytes());
    out.extend_from_slice(&h.records_count.to_be_bytes());
    out.extend_from_slice(section);
    let crc = batch::compute_crc(&out);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Decompresses through the broker's bounded codec (`crate::codec`), so a batch that
/// inflates past `limit` is refused instead of exhausting memory.
fn decompress(
    codec: Compression,
    section: &[u8],
    limit: DecompressLimit,
) -> Result<Vec<u8>, CodecError> {
    let DecompressLimit { bytes: limit, name } = limit;
    match crate::codec::decompress(codec, section, limit) {
        Ok(Some(records)) => Ok(records),
        Ok(None) if matches!(codec, Compression::None | Compression::Unknown(_)) => {
            Ok(section.to_vec())
        }
        Ok(None) => Err(CodecError::Codec {
            codec,
            message: format!("records decompress to more than {name} ({limit} bytes)"),
        }),
        Err(e) => Err(CodecError::Codec {
            codec,
            message: e.to_string(),
        }),
    }
}

fn compress(codec: Compression, section: Vec<u8>) -> Result<Vec<u8>, CodecError> {
    if matches!(codec, Compression::None | Compression::Unknown(_)) {
        return Ok(section);
    }
    let mut out = BytesMut::with_capacity(section.len() / 2 + 64);
    let fill = |b: &mut BytesMut| {
        b.extend_from_slice(&section);
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

/// A `length varint | bytes` field; length -1 for `None`.
fn write_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varlong(out, -1),
        Some(b) => {
            write_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests;
