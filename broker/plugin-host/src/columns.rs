//! Reading a [`ColumnarBatch`]: its records in order, the shape check the
//! host runs on a batch a plugin returned (a transform's output is
//! untrusted guest data), and selecting records by a keep mask.

use sluice_columns::{Columns, columns};

use crate::batch::{ColumnarBatch, Header};
use crate::bindings::RecordBatch;

/// One record of a [`ColumnarBatch`], borrowed from its columns (the layout's one copy,
/// shared with the guest SDK).
pub type RecordView<'a> = sluice_columns::Record<'a>;

/// The records of a [`ColumnarBatch`], in order.
pub type RecordViews<'a> = sluice_columns::Records<'a>;

impl ColumnarBatch {
    /// The records in order. Every batch the host builds or accepts from a
    /// plugin has passed [`check_shape`], so this never panics.
    #[must_use]
    pub fn records(&self) -> RecordViews<'_> {
        self.view().records()
    }

    /// Record `i`, whose headers start at header `first_header` (the sum of the header
    /// counts of the records before it), without walking the records before it;
    /// `None` past the last record.
    ///
    /// # Panics
    /// With a `first_header` that is not record `i`'s (a caller bug).
    #[must_use]
    pub fn record_at(&self, i: usize, first_header: usize) -> Option<RecordView<'_>> {
        self.view().record_at(i, first_header)
    }

    /// The columns, borrowed.
    pub(crate) fn view(&self) -> Columns<'_> {
        columns!(self.columns)
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
            let headers: Vec<Header<'_>> = record.headers().iter().collect();
            out.push(
                record.offset,
                record.timestamp,
                record.key(),
                record.value(),
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

/// The layout's checks (`sluice_columns::Columns::check`) on columns a plugin returned.
pub(crate) fn check_shape(c: &RecordBatch) -> Result<(), String> {
    columns!(*c).check().map_err(|e| e.0)
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
    fn select_keeps_records_whole() {
        let b = sample();
        let kept = b.select(&[true, false, true]);
        assert_eq!(kept.offsets(), [10, 12]);
        let expected: Vec<_> = b.records().step_by(2).collect();
        assert_eq!(kept.records().collect::<Vec<_>>(), expected);
        assert!(b.select(&[false; 3]).is_empty());
    }
}
