//! Reading a [`ColumnarBatch`]: its records in order, the shape check the
//! host runs on a batch a plugin returned (a transform's output is
//! untrusted guest data), and selecting records by a keep mask.

use crate::batch::{ColumnarBatch, Header};
use crate::bindings::RecordBatch;

/// One record of a [`ColumnarBatch`], borrowed from its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    /// `None`: no key.
    pub key: Option<&'a [u8]>,
    /// `None`: a tombstone.
    pub value: Option<&'a [u8]>,
    headers: HeaderView<'a>,
}

impl<'a> RecordView<'a> {
    /// `(name, value)` pairs, in order.
    pub fn headers(&self) -> impl ExactSizeIterator<Item = Header<'a>> + 'a {
        let HeaderView { bytes, ends, start } = self.headers;
        let mut start = start as usize;
        ends.chunks_exact(2).map(move |pair| {
            let (name_end, value_end) = (pair[0] as usize, pair[1] as usize);
            let header = (&bytes[start..name_end], &bytes[name_end..value_end]);
            start = value_end;
            header
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeaderView<'a> {
    bytes: &'a [u8],
    /// Two ends (name, value) per header of this record.
    ends: &'a [u32],
    start: u32,
}

/// The records of a [`ColumnarBatch`], in order.
#[derive(Debug, Clone)]
pub struct RecordViews<'a> {
    columns: &'a RecordBatch,
    index: usize,
    header_index: usize,
}

impl<'a> Iterator for RecordViews<'a> {
    type Item = RecordView<'a>;

    fn next(&mut self) -> Option<RecordView<'a>> {
        let c = self.columns;
        let i = self.index;
        let offset = *c.offsets.get(i)?;
        let count = c.header_counts[i] as usize;
        let ends = &c.header_ends[self.header_index * 2..(self.header_index + count) * 2];
        let start = match self.header_index {
            0 => 0,
            h => c.header_ends[h * 2 - 1],
        };
        let record = RecordView {
            offset,
            timestamp: c.timestamps[i],
            key: nullable(&c.key_bytes, &c.key_ends, &c.key_nulls, i),
            value: nullable(&c.value_bytes, &c.value_ends, &c.value_nulls, i),
            headers: HeaderView {
                bytes: &c.header_bytes,
                ends,
                start,
            },
        };
        self.index += 1;
        self.header_index += count;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.columns.offsets.len() - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RecordViews<'_> {}

fn nullable<'a>(bytes: &'a [u8], ends: &[u32], nulls: &[u8], i: usize) -> Option<&'a [u8]> {
    if nulls[i / 8] >> (i % 8) & 1 == 1 {
        return None;
    }
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    Some(&bytes[start..ends[i] as usize])
}

impl ColumnarBatch {
    /// The records in order. Every batch the host builds or accepts from a
    /// plugin has passed [`check_shape`], so this never panics.
    #[must_use]
    pub fn records(&self) -> RecordViews<'_> {
        RecordViews {
            columns: &self.columns,
            index: 0,
            header_index: 0,
        }
    }

    /// The offset of every record, in order.
    #[must_use]
    pub fn offsets(&self) -> &[i64] {
        &self.columns.offsets
    }

    /// The records whose `keep` entry is true, as a new batch.
    ///
    /// # Panics
    /// If `keep` does not have one entry per record (a host bug).
    #[must_use]
    pub fn select(&self, keep: &[bool]) -> Self {
        assert_eq!(keep.len(), self.len(), "one keep flag per record");
        let bytes = self.columns.key_bytes.len() + self.columns.value_bytes.len();
        let kept = keep.iter().filter(|&&k| k).count();
        let mut out = Self::with_capacity(kept, bytes.min(bytes / self.len().max(1) * kept));
        for (record, _) in self.records().zip(keep).filter(|(_, k)| **k) {
            let headers: Vec<Header<'_>> = record.headers().collect();
            out.push(
                record.offset,
                record.timestamp,
                record.key,
                record.value,
                &headers,
            );
        }
        out
    }

    /// Adopt columns a plugin returned, after checking their shape.
    pub(crate) fn from_guest(columns: RecordBatch) -> Result<Self, String> {
        check_shape(&columns)?;
        Ok(Self { columns })
    }
}

/// Every per-record column has one entry per record, the bitmaps are long
/// enough, the byte ends are non-decreasing and in bounds, and there are
/// two header ends per header: what [`RecordViews`] relies on.
pub(crate) fn check_shape(c: &RecordBatch) -> Result<(), String> {
    let n = c.offsets.len();
    for (name, len) in [
        ("timestamps", c.timestamps.len()),
        ("key-ends", c.key_ends.len()),
        ("value-ends", c.value_ends.len()),
        ("header-counts", c.header_counts.len()),
    ] {
        if len != n {
            return Err(format!("column {name} has {len} entries for {n} records"));
        }
    }
    for (name, bitmap) in [("key-nulls", &c.key_nulls), ("value-nulls", &c.value_nulls)] {
        if bitmap.len() < n.div_ceil(8) {
            return Err(format!(
                "bitmap {name} has {} bytes for {n} records",
                bitmap.len()
            ));
        }
    }
    check_ends("key-ends", &c.key_ends, c.key_bytes.len())?;
    check_ends("value-ends", &c.value_ends, c.value_bytes.len())?;
    check_ends("header-ends", &c.header_ends, c.header_bytes.len())?;
    let headers: u64 = c.header_counts.iter().map(|&h| u64::from(h)).sum();
    if headers * 2 != c.header_ends.len() as u64 {
        return Err(format!(
            "header-ends has {} entries for {headers} headers (expected 2 per header)",
            c.header_ends.len()
        ));
    }
    Ok(())
}

fn check_ends(name: &str, ends: &[u32], bytes_len: usize) -> Result<(), String> {
    let mut previous = 0;
    for &end in ends {
        if end < previous || end as usize > bytes_len {
            return Err(format!(
                "column {name} is not a non-decreasing list of ends within {bytes_len} bytes"
            ));
        }
        previous = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ColumnarBatch {
        let mut b = ColumnarBatch::new();
        b.push(
            10,
            1,
            Some(b"k0"),
            Some(b"v0"),
            &[(b"a", b"1"), (b"b", b"")],
        );
        b.push(11, 2, None, None, &[]);
        b.push(12, 3, Some(b""), Some(b"v2"), &[(b"c", b"3")]);
        b
    }

    #[test]
    fn records_read_back_what_was_pushed() {
        let b = sample();
        let records: Vec<_> = b.records().collect();
        assert_eq!(records.len(), 3);
        assert_eq!(
            (records[0].offset, records[0].key, records[0].value),
            (10, Some(&b"k0"[..]), Some(&b"v0"[..]))
        );
        let h0: Vec<_> = records[0].headers().collect();
        assert_eq!(h0, [(&b"a"[..], &b"1"[..]), (&b"b"[..], &b""[..])]);
        assert_eq!((records[1].key, records[1].value), (None, None));
        assert_eq!(records[1].headers().len(), 0);
        assert_eq!(records[2].key, Some(&b""[..]));
        assert_eq!(
            records[2].headers().collect::<Vec<_>>(),
            [(&b"c"[..], &b"3"[..])]
        );
        assert!(check_shape(&b.columns).is_ok());
    }

    #[test]
    fn select_keeps_records_whole() {
        let b = sample();
        let kept = b.select(&[true, false, true]);
        assert_eq!(kept.offsets(), [10, 12]);
        let expected: Vec<_> = b.records().step_by(2).collect();
        assert_eq!(kept.records().collect::<Vec<_>>(), expected);
        assert!(b.select(&[false; 3]).is_empty());
    }

    #[test]
    fn malformed_columns_are_named() {
        let mut c = sample().columns;
        c.timestamps.pop();
        assert!(check_shape(&c).unwrap_err().contains("timestamps"));
        let mut c = sample().columns;
        c.value_ends[2] = 1000;
        assert!(check_shape(&c).unwrap_err().contains("value-ends"));
        let mut c = sample().columns;
        c.header_counts[1] = 1;
        assert!(check_shape(&c).unwrap_err().contains("header-ends"));
        let mut c = sample().columns;
        c.key_nulls.clear();
        assert!(check_shape(&c).unwrap_err().contains("key-nulls"));
        let mut c = sample().columns;
        c.key_ends[0] = 3;
        assert!(check_shape(&c).unwrap_err().contains("key-ends"));
    }
}
