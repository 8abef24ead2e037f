//! The column layout of the WIT `record-batch` (`wit/sluice-plugin.wit`), written once: the
//! broker's plugin host builds batches with it and checks what a guest returns, and the
//! guest SDK reads and builds batches with it. Both sides hold their own generated
//! `record-batch` type (wasmtime's and wit-bindgen's bindings) and lend its fields here, as
//! [`Columns`] to read and [`ColumnsMut`] to append, so nothing is copied between the two.
//!
//! The layout, for `n` records:
//! - `offsets`, `timestamps`: one entry per record.
//! - `key-bytes` with `key-ends` (one end per record, non-decreasing, within the bytes) and
//!   `key-nulls` (a bitmap, bit `i % 8` of byte `i / 8`, set for a null key; at least
//!   `n.div_ceil(8)` bytes); the same three for values.
//! - `header-counts` (one per record), `header-bytes` with `header-ends`: two ends per
//!   header (name end, value end), so `2 * sum(header-counts)` entries.
//!
//! [`Columns::check`] verifies all of it; [`Columns::records`] relies on it.
//!
//! # Layout
//! - this file: [`Columns`] and [`ColumnsMut`], the layout above and its check.
//! - [`output`]: which output a transform's record goes to (the reserved header
//!   `sluice.output`), read the same way by the host and the SDK.

pub mod output;

use std::fmt;

/// One header: `(name, value)`.
pub type Header<'a> = (&'a [u8], &'a [u8]);

/// Borrowed columns of one batch.
#[derive(Debug, Clone, Copy, Default)]
#[allow(
    missing_docs,
    reason = "the fields are the WIT record's, documented there and above"
)]
pub struct Columns<'a> {
    pub offsets: &'a [i64],
    pub timestamps: &'a [i64],
    pub key_bytes: &'a [u8],
    pub key_ends: &'a [u32],
    pub key_nulls: &'a [u8],
    pub value_bytes: &'a [u8],
    pub value_ends: &'a [u32],
    pub value_nulls: &'a [u8],
    pub header_counts: &'a [u32],
    pub header_bytes: &'a [u8],
    pub header_ends: &'a [u32],
}

/// Why columns do not have the layout's shape; the message names the column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeError(pub String);

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

impl<'a> Columns<'a> {
    /// Records in the batch.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// No records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Every per-record column has one entry per record, the bitmaps are long enough, the
    /// byte ends are non-decreasing and in bounds, and there are two ends per header: what
    /// [`Columns::records`] relies on.
    ///
    /// # Errors
    /// The first column that breaks the layout, by its WIT name.
    pub fn check(&self) -> Result<(), ShapeError> {
        let n = self.len();
        for (name, len) in [
            ("timestamps", self.timestamps.len()),
            ("key-ends", self.key_ends.len()),
            ("value-ends", self.value_ends.len()),
            ("header-counts", self.header_counts.len()),
        ] {
            if len != n {
                return Err(ShapeError(format!(
                    "column {name} has {len} entries for {n} records"
                )));
            }
        }
        for (name, bitmap) in [
            ("key-nulls", self.key_nulls),
            ("value-nulls", self.value_nulls),
        ] {
            if bitmap.len() < n.div_ceil(8) {
                return Err(ShapeError(format!(
                    "bitmap {name} has {} bytes for {n} records",
                    bitmap.len()
                )));
            }
        }
        check_ends("key-ends", self.key_ends, self.key_bytes.len())?;
        check_ends("value-ends", self.value_ends, self.value_bytes.len())?;
        check_ends("header-ends", self.header_ends, self.header_bytes.len())?;
        let headers: u64 = self.header_counts.iter().map(|&h| u64::from(h)).sum();
        if headers * 2 != self.header_ends.len() as u64 {
            return Err(ShapeError(format!(
                "header-ends has {} entries for {headers} headers (expected 2 per header)",
                self.header_ends.len()
            )));
        }
        Ok(())
    }

    /// The records in order, borrowing from the columns.
    ///
    /// # Panics
    /// On columns that fail [`Columns::check`]: check columns from elsewhere first.
    #[must_use]
    pub fn records(&self) -> Records<'a> {
        Records {
            columns: *self,
            index: 0,
            header_index: 0,
        }
    }

    /// Record `i`, whose headers start at header `first_header` (the sum of the header
    /// counts of the records before it); `None` past the last record. For columns that
    /// passed [`Columns::check`], with a right `first_header`, this never panics.
    #[must_use]
    pub fn record_at(&self, i: usize, first_header: usize) -> Option<Record<'a>> {
        let c = self;
        let offset = *c.offsets.get(i)?;
        let count = c.header_counts[i] as usize;
        let ends = &c.header_ends[first_header * 2..(first_header + count) * 2];
        let start = match first_header {
            0 => 0,
            h => c.header_ends[h * 2 - 1],
        };
        Some(Record {
            offset,
            timestamp: c.timestamps[i],
            key: nullable(c.key_bytes, c.key_ends, c.key_nulls, i),
            value: nullable(c.value_bytes, c.value_ends, c.value_nulls, i),
            headers: Headers {
                bytes: c.header_bytes,
                ends,
                start,
            },
        })
    }
}

fn check_ends(name: &str, ends: &[u32], bytes_len: usize) -> Result<(), ShapeError> {
    let mut previous = 0;
    for &end in ends {
        if end < previous || end as usize > bytes_len {
            return Err(ShapeError(format!(
                "column {name} is not a non-decreasing list of ends within {bytes_len} bytes"
            )));
        }
        previous = end;
    }
    Ok(())
}

/// The records of [`Columns`], in order.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    columns: Columns<'a>,
    index: usize,
    header_index: usize,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let record = self.columns.record_at(self.index, self.header_index)?;
        self.index += 1;
        self.header_index += record.headers.len();
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.columns.len() - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Records<'_> {}

fn nullable<'a>(bytes: &'a [u8], ends: &[u32], nulls: &[u8], i: usize) -> Option<&'a [u8]> {
    if nulls[i / 8] >> (i % 8) & 1 == 1 {
        return None;
    }
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    Some(&bytes[start..ends[i] as usize])
}

/// One record, borrowed from its batch's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The record's offset in its partition.
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Headers<'a>,
}

impl<'a> Record<'a> {
    /// The key; `None` when the record has none.
    #[must_use]
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The value; `None` for a tombstone.
    #[must_use]
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    /// The headers, in order.
    #[must_use]
    pub fn headers(&self) -> Headers<'a> {
        self.headers
    }

    /// The value of the first header named `name`.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }
}

/// A record's headers: `(name, value)` pairs, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    bytes: &'a [u8],
    /// Two ends (name, value) per header of this record.
    ends: &'a [u32],
    start: u32,
}

impl<'a> Headers<'a> {
    /// How many.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    /// None at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The pairs in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Header<'a>> + 'a {
        let bytes = self.bytes;
        let mut start = self.start as usize;
        self.ends.chunks_exact(2).map(move |pair| {
            let (name_end, value_end) = (pair[0] as usize, pair[1] as usize);
            let header = (&bytes[start..name_end], &bytes[name_end..value_end]);
            start = value_end;
            header
        })
    }
}

/// The columns of one batch, lent mutably to append records.
#[derive(Debug)]
#[allow(
    missing_docs,
    reason = "the fields are the WIT record's, documented there and above"
)]
pub struct ColumnsMut<'a> {
    pub offsets: &'a mut Vec<i64>,
    pub timestamps: &'a mut Vec<i64>,
    pub key_bytes: &'a mut Vec<u8>,
    pub key_ends: &'a mut Vec<u32>,
    pub key_nulls: &'a mut Vec<u8>,
    pub value_bytes: &'a mut Vec<u8>,
    pub value_ends: &'a mut Vec<u32>,
    pub value_nulls: &'a mut Vec<u8>,
    pub header_counts: &'a mut Vec<u32>,
    pub header_bytes: &'a mut Vec<u8>,
    pub header_ends: &'a mut Vec<u32>,
}

impl ColumnsMut<'_> {
    /// Appends one record (columns that passed [`Columns::check`] still pass it).
    pub fn push(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) {
        let i = self.offsets.len();
        self.offsets.push(offset);
        self.timestamps.push(timestamp);
        push_nullable(self.key_bytes, self.key_ends, self.key_nulls, i, key);
        push_nullable(
            self.value_bytes,
            self.value_ends,
            self.value_nulls,
            i,
            value,
        );
        self.header_counts.push(headers.len() as u32);
        for (name, value) in headers {
            self.header_bytes.extend_from_slice(name);
            self.header_ends.push(self.header_bytes.len() as u32);
            self.header_bytes.extend_from_slice(value);
            self.header_ends.push(self.header_bytes.len() as u32);
        }
    }

    /// Room for `records` more records and `value_bytes` more value bytes.
    pub fn reserve(&mut self, records: usize, value_bytes: usize) {
        self.offsets.reserve(records);
        self.timestamps.reserve(records);
        self.key_ends.reserve(records);
        self.value_ends.reserve(records);
        self.header_counts.reserve(records);
        self.key_nulls.reserve(records.div_ceil(8));
        self.value_nulls.reserve(records.div_ceil(8));
        self.value_bytes.reserve(value_bytes);
    }

    /// Empties every column, keeping the allocations.
    pub fn clear(&mut self) {
        for v in [
            &mut *self.key_bytes,
            &mut *self.key_nulls,
            &mut *self.value_bytes,
            &mut *self.value_nulls,
            &mut *self.header_bytes,
        ] {
            v.clear();
        }
        for v in [
            &mut *self.key_ends,
            &mut *self.value_ends,
            &mut *self.header_counts,
            &mut *self.header_ends,
        ] {
            v.clear();
        }
        self.offsets.clear();
        self.timestamps.clear();
    }
}

fn push_nullable(
    bytes: &mut Vec<u8>,
    ends: &mut Vec<u32>,
    nulls: &mut Vec<u8>,
    i: usize,
    data: Option<&[u8]>,
) {
    if i.is_multiple_of(8) {
        nulls.push(0);
    }
    match data {
        Some(data) => bytes.extend_from_slice(data),
        None => nulls[i / 8] |= 1 << (i % 8),
    }
    ends.push(bytes.len() as u32);
}

/// Lends a generated `record-batch` type's fields as [`Columns`] (`columns!(batch)`) or
/// [`ColumnsMut`] (`columns!(mut batch)`): the host and the guest each have their own
/// generated struct with these eleven fields.
#[macro_export]
macro_rules! columns {
    (mut $b:expr) => {{
        let b = &mut $b;
        $crate::ColumnsMut {
            offsets: &mut b.offsets,
            timestamps: &mut b.timestamps,
            key_bytes: &mut b.key_bytes,
            key_ends: &mut b.key_ends,
            key_nulls: &mut b.key_nulls,
            value_bytes: &mut b.value_bytes,
            value_ends: &mut b.value_ends,
            value_nulls: &mut b.value_nulls,
            header_counts: &mut b.header_counts,
            header_bytes: &mut b.header_bytes,
            header_ends: &mut b.header_ends,
        }
    }};
    ($b:expr) => {{
        let b = &$b;
        $crate::Columns {
            offsets: &b.offsets,
            timestamps: &b.timestamps,
            key_bytes: &b.key_bytes,
            key_ends: &b.key_ends,
            key_nulls: &b.key_nulls,
            value_bytes: &b.value_bytes,
            value_ends: &b.value_ends,
            value_nulls: &b.value_nulls,
            header_counts: &b.header_counts,
            header_bytes: &b.header_bytes,
            header_ends: &b.header_ends,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated struct's shape, as both bindings generate it.
    #[derive(Debug, Default)]
    struct Batch {
        offsets: Vec<i64>,
        timestamps: Vec<i64>,
        key_bytes: Vec<u8>,
        key_ends: Vec<u32>,
        key_nulls: Vec<u8>,
        value_bytes: Vec<u8>,
        value_ends: Vec<u32>,
        value_nulls: Vec<u8>,
        header_counts: Vec<u32>,
        header_bytes: Vec<u8>,
        header_ends: Vec<u32>,
    }

    fn sample() -> Batch {
        let mut b = Batch::default();
        let mut c = columns!(mut b);
        c.push(
            10,
            1,
            Some(b"k0"),
            Some(b"v0"),
            &[(b"a", b"1"), (b"b", b"")],
        );
        c.push(11, 2, None, None, &[]);
        c.push(12, 3, Some(b""), Some(b"v2"), &[(b"c", b"3")]);
        b
    }

    #[test]
    fn columns_follow_the_wit_layout() {
        let mut b = Batch::default();
        columns!(mut b).push(0, 5, Some(b"ab"), None, &[(b"h", b"v")]);
        columns!(mut b).push(1, 6, None, Some(b"xyz"), &[]);
        assert_eq!(b.key_ends, [2, 2]);
        assert_eq!(b.key_nulls, [0b10]);
        assert_eq!(b.value_ends, [0, 3]);
        assert_eq!(b.value_nulls, [0b01]);
        assert_eq!(b.header_counts, [1, 0]);
        assert_eq!(b.header_ends, [1, 2]);
        columns!(mut b).clear();
        assert!(columns!(b).is_empty());
    }

    #[test]
    fn records_read_back_what_was_pushed() {
        let b = sample();
        let c = columns!(b);
        assert!(c.check().is_ok());
        let records: Vec<_> = c.records().collect();
        assert_eq!(records.len(), 3);
        assert_eq!(
            (records[0].offset, records[0].key(), records[0].value()),
            (10, Some(&b"k0"[..]), Some(&b"v0"[..]))
        );
        let h0: Vec<_> = records[0].headers().iter().collect();
        assert_eq!(h0, [(&b"a"[..], &b"1"[..]), (&b"b"[..], &b""[..])]);
        assert_eq!(records[0].header("b"), Some(&b""[..]));
        assert_eq!((records[1].key(), records[1].value()), (None, None));
        assert_eq!((records[1].timestamp, records[1].headers().len()), (2, 0));
        assert_eq!(records[2].key(), Some(&b""[..]));
        assert_eq!(records[2].header("c"), Some(&b"3"[..]));
    }

    #[test]
    fn record_at_reads_any_record_without_walking_the_others() {
        let b = sample();
        let c = columns!(b);
        let mut first_header = 0;
        for (i, want) in c.records().enumerate() {
            assert_eq!(c.record_at(i, first_header), Some(want));
            first_header += c.header_counts[i] as usize;
        }
        assert_eq!(c.record_at(c.len(), first_header), None);
    }

    #[test]
    fn malformed_columns_are_named() {
        let b = sample();
        let good = columns!(b);
        let cases: [(&str, Columns<'_>); 5] = [
            (
                "timestamps",
                Columns {
                    timestamps: &[1, 2],
                    ..good
                },
            ),
            (
                "value-ends",
                Columns {
                    value_ends: &[2, 2, 1000],
                    ..good
                },
            ),
            (
                "header-ends",
                Columns {
                    header_counts: &[2, 1, 1],
                    ..good
                },
            ),
            (
                "key-nulls",
                Columns {
                    key_nulls: &[],
                    ..good
                },
            ),
            (
                "key-ends",
                Columns {
                    key_ends: &[3, 2, 2],
                    ..good
                },
            ),
        ];
        for (column, bad) in cases {
            let err = bad.check().unwrap_err();
            assert!(err.0.contains(column), "{column}: {err}");
        }
    }
}
