//! Records inside an uncompressed RecordBatch v2: zigzag varints and the per-record layout
//! `length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint | headers`.
//! Used to validate appends and to find a record's timestamp; see docs/format.md.

use crate::error::BatchError;

/// The smallest record: a 1-byte length, attributes, and one-byte timestampDelta,
/// offsetDelta, key length, value length and header count. A section of `n` bytes holds at
/// most `n / RECORD_BYTES_MIN` records, whatever its header claims.
pub const RECORD_BYTES_MIN: usize = 7;

/// Bytes of a varint (i32) at most.
const VARINT_BYTES_MAX: usize = 5;
/// Bytes of a varlong (i64) at most.
const VARLONG_BYTES_MAX: usize = 10;

/// Reads a zigzag varint of at most `max_bytes` from `buf` at `*at`, advancing `*at`.
/// One-byte values (most lengths, deltas and counts) take the inlined fast path.
#[inline(always)]
fn read_zigzag(buf: &[u8], at: &mut usize, max_bytes: usize) -> Option<i64> {
    let first = *buf.get(*at)?;
    if first < 0x80 {
        *at += 1;
        return Some(unzigzag(u64::from(first)));
    }
    match buf.get(*at + 1) {
        Some(&second) if second < 0x80 => {
            *at += 2;
            Some(unzigzag(u64::from(first & 0x7f) | u64::from(second) << 7))
        }
        _ => read_zigzag_slow(buf, at, max_bytes),
    }
}

#[inline(always)]
fn unzigzag(raw: u64) -> i64 {
    (raw >> 1) as i64 ^ -((raw & 1) as i64)
}

#[inline(never)]
fn read_zigzag_slow(buf: &[u8], at: &mut usize, max_bytes: usize) -> Option<i64> {
    let mut raw: u64 = 0;
    for i in 0..max_bytes {
        let byte = *buf.get(*at)?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(unzigzag(raw));
        }
    }
    None
}

/// Reads a zigzag varint (Kafka's `ByteUtils.readVarint`: at most 5 bytes, fits an `i32`)
/// from `buf` at `*at`, advancing `*at`; `None` if truncated, too long or out of range.
/// The one copy of Kafka's varint decoding: the server and the CLI use it too.
#[inline]
pub fn read_varint(buf: &[u8], at: &mut usize) -> Option<i32> {
    let v = read_zigzag(buf, at, VARINT_BYTES_MAX)?;
    i32::try_from(v).ok()
}

/// Reads a zigzag varlong (at most 10 bytes) from `buf` at `*at`, advancing `*at`.
#[inline]
pub fn read_varlong(buf: &[u8], at: &mut usize) -> Option<i64> {
    read_zigzag(buf, at, VARLONG_BYTES_MAX)
}

/// Appends `v` as a zigzag varint/varlong (the same bytes for an `i32` widened to `i64`).
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// One record's fields that the log cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordMeta {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
}

pub(crate) fn bad(index: i32, reason: &'static str) -> BatchError {
    BatchError::BadRecord { index, reason }
}

/// Skips a `length varint | bytes` field (length -1 = null allowed if `nullable`).
fn skip_bytes_field(body: &[u8], at: &mut usize, nullable: bool) -> Option<()> {
    let len = read_varint(body, at)?;
    if len == -1 && nullable {
        return Some(());
    }
    let len = usize::try_from(len).ok()?;
    if body.len() - *at < len {
        return None;
    }
    *at += len;
    Some(())
}

/// Parses one record body (after its length varint), checking every field fits exactly.
#[inline]
pub(crate) fn parse_body(body: &[u8], index: i32) -> Result<RecordMeta, BatchError> {
    let mut at = 1; // attributes (unused in v2)
    if body.is_empty() {
        return Err(bad(index, "empty record"));
    }
    let timestamp_delta =
        read_varlong(body, &mut at).ok_or_else(|| bad(index, "timestampDelta"))?;
    let offset_delta = read_varint(body, &mut at).ok_or_else(|| bad(index, "offsetDelta"))?;
    skip_bytes_field(body, &mut at, true).ok_or_else(|| bad(index, "key"))?;
    skip_bytes_field(body, &mut at, true).ok_or_else(|| bad(index, "value"))?;
    let headers = read_varint(body, &mut at).ok_or_else(|| bad(index, "headerCount"))?;
    if headers < 0 {
        return Err(bad(index, "negative headerCount"));
    }
    for _ in 0..headers {
        skip_bytes_field(body, &mut at, false).ok_or_else(|| bad(index, "header key"))?;
        skip_bytes_field(body, &mut at, true).ok_or_else(|| bad(index, "header value"))?;
    }
    if at != body.len() {
        return Err(bad(index, "record length does not match its fields"));
    }
    Ok(RecordMeta {
        timestamp_delta,
        offset_delta,
    })
}

/// Iterates the records of an uncompressed batch body (bytes after the 61-byte header).
pub(crate) fn records(
    body: &[u8],
    count: i32,
) -> impl Iterator<Item = Result<RecordMeta, BatchError>> + '_ {
    let mut at = 0usize;
    (0..count).map(move |index| {
        let len = read_varint(body, &mut at).ok_or_else(|| bad(index, "length"))?;
        let len = usize::try_from(len).map_err(|_| bad(index, "negative length"))?;
        if body.len() - at < len {
            return Err(bad(index, "length past end of batch"));
        }
        let meta = parse_body(&body[at..at + len], index)?;
        at += len;
        Ok(meta)
    })
}

/// One record of an uncompressed batch body, as the cleaner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordView<'a> {
    /// The whole record, its length varint included: copied verbatim when kept.
    pub bytes: &'a [u8],
    pub offset_delta: i32,
    /// `None` for a record without a key.
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone.
    pub tombstone: bool,
}

/// Reads a nullable `length varint | bytes` field.
fn nullable_field<'a>(body: &'a [u8], at: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = read_varint(body, at)?;
    if len == -1 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let field = body.get(*at..at.checked_add(len)?)?;
    *at += len;
    Some(Some(field))
}

/// The key, tombstone flag and offset delta of one record body (after its length varint).
fn view_body(body: &[u8]) -> Option<(i32, Option<&[u8]>, bool)> {
    let mut at = 1; // attributes
    read_varlong(body, &mut at)?; // timestampDelta
    let offset_delta = read_varint(body, &mut at)?;
    let key = nullable_field(body, &mut at)?;
    let value = nullable_field(body, &mut at)?;
    Some((offset_delta, key, value.is_none()))
}

/// Walks the records of an uncompressed batch body; a record that does not parse ends the
/// walk with an error naming its index.
pub(crate) fn record_views(
    body: &[u8],
    count: i32,
) -> impl Iterator<Item = Result<RecordView<'_>, BatchError>> + '_ {
    let mut at = 0usize;
    (0..count).map(move |index| {
        let start = at;
        let len = read_varint(body, &mut at).ok_or_else(|| bad(index, "length"))?;
        let len = usize::try_from(len).map_err(|_| bad(index, "negative length"))?;
        if body.len() - at < len {
            return Err(bad(index, "length past end of batch"));
        }
        let (offset_delta, key, tombstone) =
            view_body(&body[at..at + len]).ok_or_else(|| bad(index, "record fields"))?;
        at += len;
        Ok(RecordView {
            bytes: &body[start..at],
            offset_delta,
            key,
            tombstone,
        })
    })
}

/// The index of the first record without a key (compacted topics refuse such batches,
/// as Kafka does: "Compacted topic cannot accept message without key"); `None` if every
/// record has one or the body does not parse (validation reports that).
#[must_use]
pub fn first_keyless_record(body: &[u8], count: i32) -> Option<i32> {
    record_views(body, count)
        .map_while(Result::ok)
        .position(|r| r.key.is_none())
        .map(|i| i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_roundtrip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i64::from(i32::MAX),
            i64::from(i32::MIN),
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            let mut at = 0;
            assert_eq!(read_varlong(&out, &mut at), Some(v));
            assert_eq!(at, out.len());
        }
        let mut at = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], &mut at),
            None
        );
    }
}
#[cfg(test)]
mod keyless_tests {
    use super::*;
    use crate::testing::{TestRecord, build_batch};

    #[test]
    fn the_first_keyless_record_is_found() {
        let keyed = TestRecord {
            key: Some(b"k"),
            value: Some(b"v"),
            ..TestRecord::default()
        };
        let batch = build_batch(0, 0, &[keyed.clone(), TestRecord::value(b"x"), keyed]);
        let body = &batch[crate::batch::HEADER_BYTES..];
        assert_eq!(first_keyless_record(body, 3), Some(1));
        let keyed_only = build_batch(
            0,
            0,
            &[TestRecord {
                key: Some(b"k"),
                value: None,
                ..TestRecord::default()
            }],
        );
        assert_eq!(
            first_keyless_record(&keyed_only[crate::batch::HEADER_BYTES..], 1),
            None
        );
    }
}
