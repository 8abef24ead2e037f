//! The sparse offset index (`.index`): entries `relative offset u32 | position u32`
//! (big-endian), one per `index.interval.bytes` of batches, each pointing at the start of a
//! batch. Both columns strictly increase, so both can be binary-searched.

use crate::entry_file::EntryFile;
use crate::io::StorageFile;
use crate::limits::INDEX_ENTRY_BYTES;
use std::io;
use std::sync::Arc;

const ENTRY: usize = INDEX_ENTRY_BYTES as usize;

/// One index entry: the batch starting at `position` has base offset `base + relative_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Debug)]
pub(crate) struct OffsetIndex {
    entries: EntryFile,
}

impl OffsetIndex {
    pub fn open_active(
        file: Arc<dyn StorageFile>,
        entries: usize,
        capacity_bytes: u32,
    ) -> io::Result<Self> {
        Ok(OffsetIndex {
            entries: EntryFile::open_active(file, ENTRY, entries, capacity_bytes as usize)?,
        })
    }

    pub fn open_sealed(file: Arc<dyn StorageFile>) -> io::Result<Self> {
        Ok(OffsetIndex {
            entries: EntryFile::open_sealed(file, ENTRY)?,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    pub fn is_full(&self) -> bool {
        self.entries.is_full()
    }

    pub fn entry(&self, i: usize) -> IndexEntry {
        let e = self.entries.entry(i);
        IndexEntry {
            relative_offset: u32::from_be_bytes(e[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(e[4..8].try_into().expect("4 bytes")),
        }
    }

    pub fn last(&self) -> Option<IndexEntry> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    /// The last entry with `relative_offset <= target`, if any.
    pub fn floor_by_offset(&self, target: u32) -> Option<IndexEntry> {
        let n = partition_point(self.len(), |i| self.entry(i).relative_offset <= target);
        n.checked_sub(1).map(|i| self.entry(i))
    }

    /// The last entry with `position <= limit`, if any.
    pub fn floor_by_position(&self, limit: u32) -> Option<IndexEntry> {
        let n = partition_point(self.len(), |i| self.entry(i).position <= limit);
        n.checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends an entry; both columns must strictly increase (our invariant, asserted).
    pub fn push(&mut self, entry: IndexEntry) -> io::Result<()> {
        if let Some(last) = self.last() {
            assert!(
                entry.relative_offset > last.relative_offset,
                "index offsets must increase"
            );
            assert!(
                entry.position > last.position,
                "index positions must increase"
            );
        }
        let mut bytes = [0u8; ENTRY];
        bytes[0..4].copy_from_slice(&entry.relative_offset.to_be_bytes());
        bytes[4..8].copy_from_slice(&entry.position.to_be_bytes());
        self.entries.push(&bytes)
    }

    /// Cheap check of a sealed index against its segment: entries increase at both ends and
    /// point inside the log. (Kafka's sanity check; a full check would read every entry.)
    pub fn is_sane(&self, log_bytes: u32) -> bool {
        let Some(last) = self.last() else {
            return true;
        };
        let first = self.entry(0);
        first.position > 0
            && first.relative_offset <= last.relative_offset
            && last.position < log_bytes
    }

    pub fn seal(&mut self) -> io::Result<()> {
        self.entries.seal()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.entries.flush()
    }
}

/// First `i` in `0..len` for which `pred(i)` is false (`pred` true then false).
pub(crate) fn partition_point(len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
