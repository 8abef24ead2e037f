//! The sparse offset index (`.index`): entries `relative offset u32 | position u32`
//! (big-endian), one per `index.interval.bytes` of batches, each pointing at the start of a
//! batch. Both columns strictly increase, so both can be binary-searched.

use crate::entry_file::EntryFile;
use crate::io::{Fs, StorageFile};
use crate::limits::INDEX_ENTRY_BYTES;
use std::io;
use std::path::Path;
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
        at: (&Arc<dyn Fs>, &Path),
        entries: usize,
        capacity_bytes: u32,
    ) -> io::Result<Self> {
        Ok(OffsetIndex {
            entries: EntryFile::open_active(file, at, ENTRY, entries, capacity_bytes as usize)?,
        })
    }

    pub fn open_sealed(file: Arc<dyn StorageFile>, at: (&Arc<dyn Fs>, &Path)) -> io::Result<Self> {
        Ok(OffsetIndex {
            entries: EntryFile::open_sealed(file, at, ENTRY)?,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Reserves disk blocks for `additional` more entries (`EntryFile::reserve`).
    pub fn reserve(&mut self, additional: usize) -> io::Result<()> {
        self.entries.reserve(additional)
    }

    pub fn is_full(&self) -> bool {
        self.entries.is_full()
    }

    pub fn entry(&self, i: usize) -> IndexEntry {
        decode(self.entries.entry(i))
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

    /// Cheap check of an index against its segment, reading only its two ends: entries
    /// increase, the first points past position 0, the last inside the log. (Kafka's sanity
    /// check; a full check would read every entry.)
    pub fn is_sane(&self, log_bytes: u32) -> io::Result<bool> {
        let Some((first, last)) = self.entries.ends()? else {
            return Ok(true);
        };
        let (first, last) = (decode(&first), decode(&last));
        Ok(first.position > 0
            && first.relative_offset <= last.relative_offset
            && last.position < log_bytes)
    }

    /// The file now lives at `path`.
    pub fn renamed(&mut self, path: &Path) {
        self.entries.renamed(path);
    }

    pub fn seal(&mut self) -> io::Result<()> {
        self.entries.seal()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.entries.flush()
    }
}

fn decode(e: &[u8]) -> IndexEntry {
    IndexEntry {
        relative_offset: u32::from_be_bytes(e[0..4].try_into().expect("4 bytes")),
        position: u32::from_be_bytes(e[4..8].try_into().expect("4 bytes")),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultyFs, Fs, RealFs};
    use std::path::Path;

    /// Entries (10, 100), (20, 200), (30, 300) over `fs`.
    fn three_entries(fs: &Arc<dyn Fs>, path: &Path) -> OffsetIndex {
        let file = fs.open(path, true).unwrap();
        let mut index = OffsetIndex::open_active(file, (fs, path), 0, 4096).unwrap();
        for i in 1..=3u32 {
            index
                .push(IndexEntry {
                    relative_offset: 10 * i,
                    position: 100 * i,
                })
                .unwrap();
        }
        index
    }

    fn entry(relative_offset: u32, position: u32) -> Option<IndexEntry> {
        Some(IndexEntry {
            relative_offset,
            position,
        })
    }

    fn check_lookups(index: &OffsetIndex) {
        assert_eq!(index.floor_by_offset(5), None, "before the first entry");
        assert_eq!(index.floor_by_offset(10), entry(10, 100), "first");
        assert_eq!(index.floor_by_offset(25), entry(20, 200), "between entries");
        assert_eq!(index.floor_by_offset(30), entry(30, 300), "last");
        assert_eq!(
            index.floor_by_offset(u32::MAX),
            entry(30, 300),
            "past the end"
        );
        assert_eq!(index.floor_by_position(99), None);
        assert_eq!(index.floor_by_position(100), entry(10, 100));
        assert_eq!(index.floor_by_position(299), entry(20, 200));
        assert_eq!(index.floor_by_position(10_000), entry(30, 300));
    }

    #[test]
    fn lookups_in_memory_and_after_seal() {
        let fs: Arc<dyn Fs> = Arc::new(FaultyFs::new());
        let path = Path::new("/p/0.index");
        let mut index = three_entries(&fs, path);
        check_lookups(&index);
        index.seal().unwrap();
        check_lookups(&index);
        let reopened =
            OffsetIndex::open_sealed(fs.open(path, false).unwrap(), (&fs, path)).unwrap();
        check_lookups(&reopened);
    }

    #[test]
    fn lookups_memory_mapped_sized_then_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let fs: Arc<dyn Fs> = Arc::new(RealFs);
        let mut index = three_entries(&fs, &path);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            4096,
            "sized (sparse) to its capacity"
        );
        check_lookups(&index);
        index.seal().unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            24,
            "trimmed on seal"
        );
        let reopened =
            OffsetIndex::open_sealed(fs.open(&path, false).unwrap(), (&fs, &path)).unwrap();
        check_lookups(&reopened);
        assert!(reopened.is_sane(301).unwrap() && !reopened.is_sane(300).unwrap());
    }

    #[test]
    fn empty_index_finds_nothing_and_full_index_says_so() {
        let fs: Arc<dyn Fs> = Arc::new(FaultyFs::new());
        let path = Path::new("/p/1.index");
        let mut index =
            OffsetIndex::open_active(fs.open(path, true).unwrap(), (&fs, path), 0, 16).unwrap();
        assert_eq!(index.floor_by_offset(0), None);
        assert_eq!(index.floor_by_position(0), None);
        index
            .push(IndexEntry {
                relative_offset: 1,
                position: 1,
            })
            .unwrap();
        assert!(!index.is_full());
        index
            .push(IndexEntry {
                relative_offset: 2,
                position: 2,
            })
            .unwrap();
        assert!(index.is_full());
    }
}
