//! The columnar batch the host sends to a plugin (WIT `record-batch`),
//! built record by record from the broker's records.

use crate::bindings::RecordBatch;

/// A batch of records as columns; see `wit/sluice-plugin.wit` for the
/// layout. Build it with [`ColumnarBatch::push`], then hand it to a plugin.
#[derive(Debug, Clone, Default)]
pub struct ColumnarBatch {
    pub(crate) columns: RecordBatch,
}

/// One header of a record: name and value bytes.
pub type Header<'a> = (&'a [u8], &'a [u8]);

impl Default for RecordBatch {
    fn default() -> Self {
        Self {
            offsets: Vec::new(),
            timestamps: Vec::new(),
            key_bytes: Vec::new(),
            key_ends: Vec::new(),
            key_nulls: Vec::new(),
            value_bytes: Vec::new(),
            value_ends: Vec::new(),
            value_nulls: Vec::new(),
            header_counts: Vec::new(),
            header_bytes: Vec::new(),
            header_ends: Vec::new(),
        }
    }
}

impl ColumnarBatch {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch with room for `records` records of about `bytes` key and
    /// value bytes in all, so building it does not reallocate.
    #[must_use]
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        let mut b = Self::default();
        let c = &mut b.columns;
        c.offsets.reserve(records);
        c.timestamps.reserve(records);
        c.key_ends.reserve(records);
        c.value_ends.reserve(records);
        c.header_counts.reserve(records);
        c.key_nulls.reserve(records.div_ceil(8));
        c.value_nulls.reserve(records.div_ceil(8));
        c.value_bytes.reserve(bytes);
        b
    }

    /// Append a record. `offset` is its offset, or for a produced batch not
    /// yet appended, its index in the batch; `timestamp` is in ms.
    pub fn push(&mut self, offset: i64, timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) {
        let c = &mut self.columns;
        let i = c.offsets.len();
        c.offsets.push(offset);
        c.timestamps.push(timestamp);
        push_nullable(&mut c.key_bytes, &mut c.key_ends, &mut c.key_nulls, i, key);
        push_nullable(&mut c.value_bytes, &mut c.value_ends, &mut c.value_nulls, i, value);
        c.header_counts.push(headers.len() as u32);
        for (name, value) in headers {
            c.header_bytes.extend_from_slice(name);
            c.header_ends.push(c.header_bytes.len() as u32);
            c.header_bytes.extend_from_slice(value);
            c.header_ends.push(c.header_bytes.len() as u32);
        }
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

    /// Empty the batch, keeping its allocations.
    pub fn clear(&mut self) {
        let c = &mut self.columns;
        for v in [&mut c.key_bytes, &mut c.key_nulls, &mut c.value_bytes, &mut c.value_nulls, &mut c.header_bytes] {
            v.clear();
        }
        for v in [&mut c.key_ends, &mut c.value_ends, &mut c.header_counts, &mut c.header_ends] {
            v.clear();
        }
        c.offsets.clear();
        c.timestamps.clear();
    }
}

fn push_nullable(bytes: &mut Vec<u8>, ends: &mut Vec<u32>, nulls: &mut Vec<u8>, i: usize, data: Option<&[u8]>) {
    if i % 8 == 0 {
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
    fn columns_follow_the_wit_layout() {
        let mut b = ColumnarBatch::new();
        b.push(0, 5, Some(b"ab"), None, &[(b"h", b"v")]);
        b.push(1, 6, None, Some(b"xyz"), &[]);
        let c = &b.columns;
        assert_eq!(c.key_ends, [2, 2]);
        assert_eq!(c.key_nulls, [0b10]);
        assert_eq!(c.value_ends, [0, 3]);
        assert_eq!(c.value_nulls, [0b01]);
        assert_eq!(c.header_counts, [1, 0]);
        assert_eq!(c.header_ends, [1, 2]);
        b.clear();
        assert!(b.is_empty());
    }
}
