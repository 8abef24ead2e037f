//! Zero-copy views over the columnar `record-batch` of the WIT contract.
//!
//! The host sends a batch as a fixed set of columns (see `wit/sluice-plugin.wit`; the
//! layout is written once, in `sluice-columns`, shared with the host); [`Batch::new`]
//! checks their shapes once, then [`Batch::iter`] hands out [`Record`]s that borrow from
//! the columns without copying a byte.

pub use sluice_columns::{Columns, Headers, Record, Records};

use crate::Error;

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
        columns.check().map_err(|e| Error::failed(e.to_string()))?;
        Ok(Self { columns })
    }

    /// Number of records.
    #[must_use]
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// No records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The records, in order.
    #[must_use]
    pub fn iter(&self) -> Records<'a> {
        self.columns.records()
    }
}

/// Owned columns, built record by record: what a transform returns, and
/// what native unit tests feed to a plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs, reason = "the fields are the WIT record-batch's columns")]
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
    /// An empty builder.
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
        sluice_columns::columns!(mut *self).push(offset, timestamp, key, value, headers);
    }

    /// Borrow the columns.
    #[must_use]
    pub fn columns(&self) -> Columns<'_> {
        sluice_columns::columns!(*self)
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
