//! RecordBatch v2: zero-copy header view, CRC-32C, validation before append, and the few
//! in-place rewrites the log makes (base offset, leader epoch, log-append time).
//!
//! Byte layout (big-endian), see docs/format.md:
//! `baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
//! attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 |
//! producerId i64 | producerEpoch i16 | baseSequence i32 | recordsCount i32 | records...`
//! The CRC covers `attributes` to the end, so the first three fields can be rewritten freely.

use crate::config::TimestampType;
use crate::error::BatchError;
use crate::limits;

/// Bytes of the batch header (`baseOffset` .. `recordsCount`).
pub const HEADER_BYTES: usize = limits::BATCH_HEADER_BYTES as usize;
/// Bytes not counted by `batchLength`: `baseOffset` + `batchLength`.
pub const LOG_OVERHEAD_BYTES: usize = limits::BATCH_LOG_OVERHEAD_BYTES as usize;
/// The only magic we store.
pub const MAGIC_V2: i8 = 2;
/// Timestamp value meaning "none".
pub const NO_TIMESTAMP: i64 = -1;
/// Leader epoch stamped into appended batches while no epoch has begun (a log whose owner
/// never calls `Log::begin_next_leader_epoch`: the internal logs).
pub const PARTITION_LEADER_EPOCH: i32 = 0;

/// Field positions inside the header.
pub mod pos {
    pub const BASE_OFFSET: usize = 0;
    pub const BATCH_LENGTH: usize = 8;
    pub const PARTITION_LEADER_EPOCH: usize = 12;
    pub const MAGIC: usize = 16;
    pub const CRC: usize = 17;
    pub const ATTRIBUTES: usize = 21;
    pub const LAST_OFFSET_DELTA: usize = 23;
    pub const BASE_TIMESTAMP: usize = 27;
    pub const MAX_TIMESTAMP: usize = 35;
    pub const PRODUCER_ID: usize = 43;
    pub const PRODUCER_EPOCH: usize = 51;
    pub const BASE_SEQUENCE: usize = 53;
    pub const RECORDS_COUNT: usize = 57;
}

/// Attribute bits.
pub mod attr {
    pub const COMPRESSION_MASK: i16 = 0x07;
    pub const TIMESTAMP_TYPE: i16 = 0x08;
    pub const TRANSACTIONAL: i16 = 0x10;
    pub const CONTROL: i16 = 0x20;
}

/// Compression codec from attribute bits 0..2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
    /// 5..7: not a codec.
    Unknown(u8),
}

/// The codec named by a batch's attributes.
#[must_use]
pub fn compression(attributes: i16) -> Compression {
    match (attributes & attr::COMPRESSION_MASK) as u8 {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        other => Compression::Unknown(other),
    }
}

/// A decoded RecordBatch v2 header (the first 61 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Bytes of the whole batch, header included.
    #[must_use]
    pub fn total_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES + self.batch_length as usize
    }

    /// Offset of the batch's last record.
    #[must_use]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    #[must_use]
    pub fn compression(&self) -> Compression {
        compression(self.attributes)
    }

    #[must_use]
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & attr::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    #[must_use]
    pub fn is_transactional(&self) -> bool {
        self.attributes & attr::TRANSACTIONAL != 0
    }

    #[must_use]
    pub fn is_control(&self) -> bool {
        self.attributes & attr::CONTROL != 0
    }
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

/// Decodes the header and checks magic and `batchLength` bounds. Does not need the whole
/// batch (`bytes` may be just the first 61 bytes) and does not check the CRC.
pub fn parse_header(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    if bytes.len() < HEADER_BYTES {
        return Err(BatchError::Truncated {
            needed: HEADER_BYTES as u64,
            available: bytes.len() as u64,
        });
    }
    let magic = bytes[pos::MAGIC] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::BadMagic { magic });
    }
    let batch_length = be_i32(bytes, pos::BATCH_LENGTH);
    let min = limits::BATCH_HEADER_BYTES - limits::BATCH_LOG_OVERHEAD_BYTES;
    let max = limits::BATCH_BYTES_MAX - limits::BATCH_LOG_OVERHEAD_BYTES;
    if batch_length < min as i32 || batch_length as u32 > max {
        return Err(BatchError::BadLength {
            batch_length,
            min,
            max,
        });
    }
    Ok(BatchHeader {
        base_offset: be_i64(bytes, pos::BASE_OFFSET),
        batch_length,
        partition_leader_epoch: be_i32(bytes, pos::PARTITION_LEADER_EPOCH),
        magic,
        crc: be_i32(bytes, pos::CRC) as u32,
        attributes: be_i16(bytes, pos::ATTRIBUTES),
        last_offset_delta: be_i32(bytes, pos::LAST_OFFSET_DELTA),
        base_timestamp: be_i64(bytes, pos::BASE_TIMESTAMP),
        max_timestamp: be_i64(bytes, pos::MAX_TIMESTAMP),
        producer_id: be_i64(bytes, pos::PRODUCER_ID),
        producer_epoch: be_i16(bytes, pos::PRODUCER_EPOCH),
        base_sequence: be_i32(bytes, pos::BASE_SEQUENCE),
        records_count: be_i32(bytes, pos::RECORDS_COUNT),
    })
}

/// CRC-32C (Castagnoli) of `attributes` .. end of batch.
#[must_use]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[pos::ATTRIBUTES..])
}

/// Checks that `batch` is exactly one whole batch and its CRC matches.
pub fn verify_crc(batch: &[u8]) -> Result<(), BatchError> {
    let header = parse_header(batch)?;
    if batch.len() != header.total_bytes() {
        return Err(BatchError::Truncated {
            needed: header.total_bytes() as u64,
            available: batch.len() as u64,
        });
    }
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Iterates concatenated batches, yielding each header with its whole-batch bytes. Stops
/// after the first error (which it yields). Does not check CRCs.
pub fn iter_batches(bytes: &[u8]) -> BatchIter<'_> {
    BatchIter {
        rest: bytes,
        failed: false,
    }
}

/// Iterator returned by [`iter_batches`].
#[derive(Debug)]
pub struct BatchIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<(BatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let item = split_batch(self.rest);
        match item {
            Ok((header, batch, rest)) => {
                self.rest = rest;
                Some(Ok((header, batch)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

fn split_batch(bytes: &[u8]) -> Result<(BatchHeader, &[u8], &[u8]), BatchError> {
    let header = parse_header(bytes)?;
    let total = header.total_bytes();
    if bytes.len() < total {
        return Err(BatchError::Truncated {
            needed: total as u64,
            available: bytes.len() as u64,
        });
    }
    let (batch, rest) = bytes.split_at(total);
    Ok((header, batch, rest))
}

/// Everything `append` checks of one whole batch: CRC, record count, codec, and for
/// uncompressed batches every record ([`crate::validate_records`]: each field well formed,
/// offset deltas `0..recordsCount` in order, the records filling the batch exactly).
/// Compressed batches' records are checked by the caller after bounded decompression
/// (the server's produce path), with the same `validate_records`. The CRC is checked first
/// (a damaged batch is CORRUPT_MESSAGE whatever else is wrong with it).
pub fn validate(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = parse_header(batch)?;
    if batch.len() != header.total_bytes() {
        return Err(BatchError::Truncated {
            needed: header.total_bytes() as u64,
            available: batch.len() as u64,
        });
    }
    let records = match header.compression() {
        Compression::None => {
            let crc_region = &batch[pos::ATTRIBUTES..];
            let (computed, records) = crate::crc_walk::crc_and_validate_records(
                crc_region,
                HEADER_BYTES - pos::ATTRIBUTES,
                header.records_count,
            );
            check_crc(header.crc, computed)?;
            records
        }
        Compression::Unknown(codec) => {
            check_crc(header.crc, compute_crc(batch))?;
            Err(BatchError::UnknownCompression { codec })
        }
        _ => check_crc(header.crc, compute_crc(batch)),
    };
    if header.records_count <= 0 || header.last_offset_delta != header.records_count - 1 {
        return Err(BatchError::BadRecordCount {
            records_count: header.records_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    records?;
    Ok(header)
}

fn check_crc(stored: u32, computed: u32) -> Result<(), BatchError> {
    if stored == computed {
        Ok(())
    } else {
        Err(BatchError::CrcMismatch { stored, computed })
    }
}

/// Rewrites `baseOffset` (not covered by the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[pos::BASE_OFFSET..pos::BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites `partitionLeaderEpoch` (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    let at = pos::PARTITION_LEADER_EPOCH;
    batch[at..at + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch LogAppendTime with `max_timestamp = now_ms` and recomputes the CRC.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attributes = be_i16(batch, pos::ATTRIBUTES) | attr::TIMESTAMP_TYPE;
    batch[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[pos::MAX_TIMESTAMP..pos::MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A transaction marker: the control batch the transaction coordinator writes to end a
/// producer's transaction in a partition (Kafka's `EndTransactionMarker`). One record,
/// key `version i16 = 0 | type i16` (ABORT = 0, COMMIT = 1), value
/// `version i16 = 0 | coordinator_epoch i32`; base offset 0 until the log numbers it.
#[must_use]
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker_type: i16,
    coordinator_epoch: i32,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&marker_type.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut body = vec![0u8]; // attributes
    for v in [0i64, 0, key.len() as i64] {
        crate::record::write_varlong(&mut body, v); // timestamp delta, offset delta, key length
    }
    body.extend_from_slice(&key);
    crate::record::write_varlong(&mut body, value.len() as i64);
    body.extend_from_slice(&value);
    crate::record::write_varlong(&mut body, 0); // headers
    let mut out = vec![0u8; HEADER_BYTES];
    crate::record::write_varlong(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    let batch_length = (out.len() - LOG_OVERHEAD_BYTES) as i32;
    let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
    put(pos::BATCH_LENGTH, &batch_length.to_be_bytes());
    put(
        pos::PARTITION_LEADER_EPOCH,
        &PARTITION_LEADER_EPOCH.to_be_bytes(),
    );
    put(pos::MAGIC, &[MAGIC_V2 as u8]);
    put(
        pos::ATTRIBUTES,
        &(attr::TRANSACTIONAL | attr::CONTROL).to_be_bytes(),
    );
    put(pos::LAST_OFFSET_DELTA, &0i32.to_be_bytes());
    put(pos::BASE_TIMESTAMP, &timestamp_ms.to_be_bytes());
    put(pos::MAX_TIMESTAMP, &timestamp_ms.to_be_bytes());
    put(pos::PRODUCER_ID, &producer_id.to_be_bytes());
    put(pos::PRODUCER_EPOCH, &producer_epoch.to_be_bytes());
    put(pos::BASE_SEQUENCE, &(-1i32).to_be_bytes());
    put(pos::RECORDS_COUNT, &1i32.to_be_bytes());
    let crc = compute_crc(&out);
    out[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The marker type and coordinator epoch of a control batch's first record (`None` if the
/// record is not a well-formed transaction marker).
#[must_use]
pub fn parse_control_record(batch: &[u8]) -> Option<(i16, i32)> {
    let body = batch.get(HEADER_BYTES..)?;
    let mut at = 0;
    let _length = crate::record::read_varint(body, &mut at)?;
    at += 1; // attributes
    crate::record::read_varlong(body, &mut at)?; // timestamp delta
    crate::record::read_varint(body, &mut at)?; // offset delta
    let key_length = usize::try_from(crate::record::read_varint(body, &mut at)?).ok()?;
    let key = body.get(at..at.checked_add(key_length)?)?;
    at += key_length;
    if key_length < 4 || be_i16(key, 0) != 0 {
        return None;
    }
    let marker_type = be_i16(key, 2);
    let value_length = usize::try_from(crate::record::read_varint(body, &mut at)?).ok()?;
    let value = body.get(at..at.checked_add(value_length)?)?;
    let coordinator_epoch = if value_length >= 6 {
        be_i32(value, 2)
    } else {
        -1
    };
    Some((marker_type, coordinator_epoch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TestRecord, build_batch};

    fn one() -> Vec<u8> {
        build_batch(0, 1_000, &[TestRecord::value(b"hello")])
    }

    #[test]
    fn parse_and_validate_roundtrip() {
        let b = build_batch(
            7,
            1_000,
            &[TestRecord::value(b"a"), TestRecord::value(b"bc")],
        );
        let h = validate(&b).unwrap();
        assert_eq!(h.base_offset, 7);
        assert_eq!(h.records_count, 2);
        assert_eq!(h.last_offset(), 8);
        assert_eq!(h.total_bytes(), b.len());
        assert_eq!(h.compression(), Compression::None);
    }

    #[test]
    fn crc_detects_flip_but_not_base_offset_change() {
        let mut b = one();
        set_base_offset(&mut b, 1234);
        set_partition_leader_epoch(&mut b, 9);
        validate(&b).unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(validate(&b), Err(BatchError::CrcMismatch { .. })));
    }

    #[test]
    fn rejects_bad_magic_length_and_count() {
        let mut b = one();
        b[pos::MAGIC] = 1;
        assert_eq!(parse_header(&b), Err(BatchError::BadMagic { magic: 1 }));
        let mut b = one();
        b[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(
            parse_header(&b),
            Err(BatchError::BadLength { .. })
        ));
        let b = one();
        assert!(matches!(
            validate(&b[..b.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        let mut b = one();
        b[pos::RECORDS_COUNT..pos::RECORDS_COUNT + 4].copy_from_slice(&2i32.to_be_bytes());
        let crc = compute_crc(&b);
        b[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(
            validate(&b),
            Err(BatchError::BadRecordCount { .. })
        ));
    }

    #[test]
    fn log_append_time_rewrites_and_keeps_crc_valid() {
        let mut b = one();
        set_log_append_time(&mut b, 99);
        let h = validate(&b).unwrap();
        assert_eq!(h.max_timestamp, 99);
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    }

    #[test]
    fn iter_batches_splits_and_stops_on_error() {
        let mut bytes = one();
        bytes.extend(one());
        bytes.extend_from_slice(&one()[..10]);
        let items: Vec<_> = iter_batches(&bytes).collect();
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_ok() && items[2].is_err());
    }
}
