//! Zero-copy views over the columnar `record-batch` of the WIT contract.
//!
//! The host sends a batch as a fixed set of columns (see
//! `wit/sluice-plugin.wit`); [`Batch::new`] checks their shapes once, then
//! [`Batch::iter`] hands out [`Record`]s that borrow from the columns
//! without copying a byte.

use crate::Error;

/// The columns of one batch, borrowed from wherever they live (the guest's
/// copy of the host's lists, or test data built with [`BatchBuilder`]).
#[derive(Debug, Clone, Copy, Default)]
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

/// A checked batch: every record of it can be read without panicking.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    columns: Columns<'a>,
}

impl<'a> Batch<'a> {
    /// Check the columns' shapes: one entry per record in every per-record
    /// column, bitmaps long enough, byte ends non-decreasing and in bounds,
    /// two header ends per header.
    ///
    /// # Errors
    /// [`Error::failed`] naming the first column that does not fit.
    pub fn new(columns: Columns<'a>) -> Result<Self, Error> {
        let n = columns.offsets.len();
        let bitmap_len = n.div_ceil(8);
        let per_record = [
            ("timestamps", columns.timestamps.len()),
            ("key-ends", columns.key_ends.len()),
            ("value-ends", columns.value_ends.len()),
            ("header-counts", columns.header_counts.len()),
        ];
        for (name, len) in per_record {
            if len != n {
                return Err(Error::failed(format!(
                    "column {name} has {len} entries, expected {n}"
                )));
            }
        }
        for (name, bitmap) in [
            ("key-nulls", columns.key_nulls),
            ("value-nulls", columns.value_nulls),
        ] {
            if bitmap.len() < bitmap_len {
                return Err(Error::failed(format!(
                    "bitmap {name} has {} bytes, expected {bitmap_len}",
                    bitmap.len()
                )));
            }
        }
        check_ends("key-ends", columns.key_ends, columns.key_bytes.len())?;
        check_ends("value-ends", columns.value_ends, columns.value_bytes.len())?;
        check_ends(
            "header-ends",
            columns.header_ends,
            columns.header_bytes.len(),
        )?;
        let headers: u64 = columns.header_counts.iter().map(|&c| u64::from(c)).sum();
        if headers * 2 != columns.header_ends.len() as u64 {
            return Err(Error::failed(format!(
                "header-ends has {} entries, expected 2 per header ({headers} headers)",
                columns.header_ends.len()
            )));
        }
        Ok(Self { columns })
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.columns.offsets.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records in order.
    #[must_use]
    pub fn iter(&self) -> Records<'a> {
        Records {
            columns: self.columns,
            index: 0,
            key_start: 0,
            value_start: 0,
            header_index: 0,
        }
    }
}

fn check_ends(name: &str, ends: &[u32], bytes_len: usize) -> Result<(), Error> {
    let mut previous = 0u32;
    for &end in ends {
        if end < previous || end as usize > bytes_len {
            return Err(Error::failed(format!(
                "column {name} is not a non-decreasing list of ends within {bytes_len} bytes"
            )));
        }
        previous = end;
    }
    Ok(())
}

/// Iterator over the records of a [`Batch`].
#[derive(Debug, Clone)]
pub struct Records<'a> {
    columns: Columns<'a>,
    index: usize,
    key_start: u32,
    value_start: u32,
    header_index: u32,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let c = &self.columns;
        let i = self.index;
        let offset = *c.offsets.get(i)?;
        let key_end = c.key_ends[i];
        let value_end = c.value_ends[i];
        let key =
            (!bit(c.key_nulls, i)).then(|| &c.key_bytes[self.key_start as usize..key_end as usize]);
        let value = (!bit(c.value_nulls, i))
            .then(|| &c.value_bytes[self.value_start as usize..value_end as usize]);
        let header_count = c.header_counts[i];
        let header_ends = &c.header_ends
            [self.header_index as usize * 2..(self.header_index + header_count) as usize * 2];
        let header_start = match self.header_index {
            0 => 0,
            h => c.header_ends[h as usize * 2 - 1],
        };
        let record = Record {
            offset,
            timestamp: c.timestamps[i],
            key,
            value,
            headers: Headers {
                bytes: c.header_bytes,
                ends: header_ends,
                start: header_start,
            },
        };
        self.index += 1;
        self.key_start = key_end;
        self.value_start = value_end;
        self.header_index += header_count;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.columns.offsets.len() - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Records<'_> {}

fn bit(bitmap: &[u8], i: usize) -> bool {
    bitmap[i / 8] >> (i % 8) & 1 == 1
}

/// One record, borrowed from its batch.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The record's offset in its partition (for a produced batch not yet
    /// appended: its index in the batch).
    pub offset: i64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: Headers<'a>,
}

impl<'a> Record<'a> {
    /// The key, or `None` for a record without one.
    #[must_use]
    pub fn key(&self) -> Option<&'a [u8]> {
        self.key
    }

    /// The value, or `None` for a tombstone.
    #[must_use]
    pub fn value(&self) -> Option<&'a [u8]> {
        self.value
    }

    #[must_use]
    pub fn headers(&self) -> Headers<'a> {
        self.headers
    }

    /// The value of the first header called `name`.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }
}

/// The headers of one record, in order.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    bytes: &'a [u8],
    /// Two ends (name, value) per header of this record.
    ends: &'a [u32],
    start: u32,
}

impl<'a> Headers<'a> {
    #[must_use]
    pub fn len(&self) -> usize {
        self.ends.len() / 2
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + 'a {
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

/// Owned columns, built record by record: what a transform returns, and
/// what native unit tests feed to a plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchBuilder {
    pub offsets: Vec<i64>,
    pub timestamps: Vec<i64>,
    pub key_bytes: Vec<u8>,
    pub key_ends: Vec<u32>,
    pub key_nulls: Vec<u8>,
    pub value_bytes: Vec<u8>,
    pub value_ends: Vec<u32>,
    pub value_nulls: Vec<u8>,
    pub header_counts: Vec<u32>,
    pub header_bytes: Vec<u8>,
    pub header_ends: Vec<u32>,
}

impl BatchBuilder {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Append one record.
    pub fn push(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
    ) {
        let i = self.offsets.len();
        self.offsets.push(offset);
        self.timestamps.push(timestamp);
        push_nullable(
            &mut self.key_bytes,
            &mut self.key_ends,
            &mut self.key_nulls,
            i,
            key,
        );
        push_nullable(
            &mut self.value_bytes,
            &mut self.value_ends,
            &mut self.value_nulls,
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

    /// Borrow the columns.
    #[must_use]
    pub fn columns(&self) -> Columns<'_> {
        Columns {
            offsets: &self.offsets,
            timestamps: &self.timestamps,
            key_bytes: &self.key_bytes,
            key_ends: &self.key_ends,
            key_nulls: &self.key_nulls,
            value_bytes: &self.value_bytes,
            value_ends: &self.value_ends,
            value_nulls: &self.value_nulls,
            header_counts: &self.header_counts,
            header_bytes: &self.header_bytes,
            header_ends: &self.header_ends,
        }
    }

    /// A checked view of what was pushed.
    ///
    /// # Panics
    /// Never: a builder's columns always have a valid shape.
    #[must_use]
    pub fn batch(&self) -> Batch<'_> {
        Batch::new(self.columns()).expect("a BatchBuilder always builds a valid batch")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_columns() {
        let mut b = BatchBuilder::new();
        b.push(
            0,
            10,
            Some(b"k0"),
            Some(b"v0"),
            &[(b"h", b"1"), (b"g", b"")],
        );
        b.push(1, 11, None, None, &[]);
        b.push(2, 12, Some(b""), Some(b"value"), &[(b"h", b"2")]);
        let batch = b.batch();
        let records: Vec<_> = batch.iter().collect();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].key(), Some(&b"k0"[..]));
        assert_eq!(records[0].header("g"), Some(&b""[..]));
        assert_eq!(records[0].headers().len(), 2);
        assert_eq!(records[1].key(), None);
        assert_eq!(records[1].value(), None);
        assert_eq!(records[1].timestamp, 11);
        assert_eq!(records[2].key(), Some(&b""[..]));
        assert_eq!(records[2].value(), Some(&b"value"[..]));
        assert_eq!(records[2].header("h"), Some(&b"2"[..]));
    }

    #[test]
    fn malformed_columns_are_rejected() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(b"k"), Some(b"v"), &[(b"h", b"1")]);
        let mut c = b.columns();
        c.timestamps = &[];
        assert!(Batch::new(c).is_err());
        let mut c = b.columns();
        c.key_ends = &[7];
        assert!(Batch::new(c).is_err());
        let mut c = b.columns();
        c.header_ends = &[1];
        assert!(Batch::new(c).is_err());
        let mut c = b.columns();
        c.key_nulls = &[];
        assert!(Batch::new(c).is_err());
    }
}
