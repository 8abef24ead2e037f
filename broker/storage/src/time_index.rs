//! The time index (`.timeindex`): entries `timestamp i64 | relative offset u32`
//! (big-endian). Each entry says: up to this point of the segment the largest batch max
//! timestamp is `timestamp`, first reached at `base + relative_offset`. Timestamps strictly
//! increase. Written alongside offset-index entries and once more when a segment seals,
//! so a sealed segment's last entry holds its largest timestamp.

use crate::entry_file::EntryFile;
use crate::index::partition_point;
use crate::io::{Fs, StorageFile};
use crate::limits::TIME_INDEX_ENTRY_BYTES;
use std::io;
use std::path::Path;
use std::sync::Arc;

const ENTRY: usize = TIME_INDEX_ENTRY_BYTES as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub timestamp_ms: i64,
    pub relative_offset: u32,
}

#[derive(Debug)]
pub(crate) struct TimeIndex {
    entries: EntryFile,
}

impl TimeIndex {
    pub fn open_active(
        file: Arc<dyn StorageFile>,
        at: (&Arc<dyn Fs>, &Path),
        entries: usize,
        capacity_bytes: u32,
    ) -> io::Result<Self> {
        Ok(TimeIndex {
            entries: EntryFile::open_active(file, at, ENTRY, entries, capacity_bytes as usize)?,
        })
    }

    pub fn open_sealed(file: Arc<dyn StorageFile>, at: (&Arc<dyn Fs>, &Path)) -> io::Result<Self> {
        Ok(TimeIndex {
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

    /// Full for regular entries: one slot stays free for the entry written when sealing.
    pub fn is_full(&self) -> bool {
        self.entries.len() + 1 >= self.entries.capacity()
    }

    pub fn entry(&self, i: usize) -> TimeEntry {
        decode(self.entries.entry(i))
    }

    pub fn last(&self) -> Option<TimeEntry> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    /// The last entry with `timestamp_ms < target_ms`: every batch up to it is older than
    /// the target, so a search for `target_ms` can start at its offset.
    pub fn floor_before(&self, target_ms: i64) -> Option<TimeEntry> {
        let n = partition_point(self.len(), |i| self.entry(i).timestamp_ms < target_ms);
        n.checked_sub(1).map(|i| self.entry(i))
    }

    /// Appends if `entry` advances the timestamp and there is room; otherwise does nothing.
    pub fn maybe_push(&mut self, entry: TimeEntry) -> io::Result<()> {
        if self.is_full() {
            return Ok(());
        }
        self.push_if_newer(entry)
    }

    /// Writes the segment's final entry (uses the reserved slot), then trims the file.
    /// The file now lives at `path`.
    pub fn renamed(&mut self, path: &Path) {
        self.entries.renamed(path);
    }

    pub fn seal(&mut self, last: TimeEntry) -> io::Result<()> {
        if !self.entries.is_full() {
            self.push_if_newer(last)?;
        }
        self.entries.seal()
    }

    fn push_if_newer(&mut self, entry: TimeEntry) -> io::Result<()> {
        if entry.timestamp_ms < 0
            || self
                .last()
                .is_some_and(|last| entry.timestamp_ms <= last.timestamp_ms)
        {
            return Ok(());
        }
        if let Some(last) = self.last() {
            assert!(
                entry.relative_offset >= last.relative_offset,
                "time index offsets must not decrease"
            );
        }
        let mut bytes = [0u8; ENTRY];
        bytes[0..8].copy_from_slice(&entry.timestamp_ms.to_be_bytes());
        bytes[8..12].copy_from_slice(&entry.relative_offset.to_be_bytes());
        self.entries.push(&bytes)
    }

    /// The first and last entries, read without mapping a sealed file.
    pub fn ends(&self) -> io::Result<Option<(TimeEntry, TimeEntry)>> {
        Ok(self
            .entries
            .ends()?
            .map(|(first, last)| (decode(&first), decode(&last))))
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.entries.flush()
    }
}

fn decode(e: &[u8]) -> TimeEntry {
    TimeEntry {
        timestamp_ms: i64::from_be_bytes(e[0..8].try_into().expect("8 bytes")),
        relative_offset: u32::from_be_bytes(e[8..12].try_into().expect("4 bytes")),
    }
}
