//! `EntryFile`: a file of fixed-size index entries, memory-mapped when it is a real file.
//!
//! An active segment's index file is preallocated to `segment.index.bytes` and mapped
//! whole; entries are written into the map. When the segment rolls (or the log closes) the
//! file is trimmed to its entries and remapped. Over the in-memory twin (`FaultyFs`) there
//! is nothing to map: entries live in a heap copy and go to the file with `write_at`.

use crate::io::StorageFile;
use memmap2::{MmapMut, MmapOptions};
use std::io;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct EntryFile {
    file: Arc<dyn StorageFile>,
    entry_bytes: usize,
    /// The mapping (real files only); covers the whole file.
    map: Option<MmapMut>,
    /// Entries when the file cannot be mapped.
    heap: Vec<u8>,
    entries: usize,
    capacity_entries: usize,
    dirty: bool,
}

/// Maps `len` bytes of `file`, or `None` if it is not a real file or `len` is 0.
fn map(file: &dyn StorageFile, len: usize) -> io::Result<Option<MmapMut>> {
    match file.std_file() {
        // SAFETY: the log owns its partition directory; nothing else writes or truncates
        // index files while they are mapped, and the file is at least `len` bytes (we just
        // set its length), so the mapping never covers missing pages.
        Some(std_file) if len > 0 => Ok(Some(unsafe {
            MmapOptions::new().len(len).map_mut(std_file)?
        })),
        _ => Ok(None),
    }
}

impl EntryFile {
    /// Opens for appending: keeps the first `entries` entries, preallocates to
    /// `capacity_bytes` and maps it.
    pub fn open_active(
        file: Arc<dyn StorageFile>,
        entry_bytes: usize,
        entries: usize,
        capacity_bytes: usize,
    ) -> io::Result<Self> {
        let capacity_entries = (capacity_bytes / entry_bytes).max(entries);
        let mut heap = Vec::new();
        let map = if file.std_file().is_some() {
            file.set_len((capacity_entries * entry_bytes) as u64)?;
            map(file.as_ref(), capacity_entries * entry_bytes)?
        } else {
            heap = vec![0u8; entries * entry_bytes];
            file.read_at(&mut heap, 0)?;
            file.set_len(heap.len() as u64)?;
            None
        };
        Ok(EntryFile {
            file,
            entry_bytes,
            map,
            heap,
            entries,
            capacity_entries,
            dirty: false,
        })
    }

    /// Opens a sealed (trimmed) file read-only-in-spirit: its length is its entries.
    pub fn open_sealed(file: Arc<dyn StorageFile>, entry_bytes: usize) -> io::Result<Self> {
        let len = file.len()? as usize;
        let entries = len / entry_bytes;
        let (map, heap) = if file.std_file().is_some() {
            (map(file.as_ref(), len)?, Vec::new())
        } else {
            let mut heap = vec![0u8; len];
            file.read_at(&mut heap, 0)?;
            (None, heap)
        };
        Ok(EntryFile {
            file,
            entry_bytes,
            map,
            heap,
            entries,
            capacity_entries: entries,
            dirty: false,
        })
    }

    /// The valid entries, concatenated.
    pub fn bytes(&self) -> &[u8] {
        let len = self.entries * self.entry_bytes;
        match &self.map {
            Some(map) => &map[..len],
            None => &self.heap[..len],
        }
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        &self.bytes()[i * self.entry_bytes..(i + 1) * self.entry_bytes]
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn capacity(&self) -> usize {
        self.capacity_entries
    }

    pub fn is_full(&self) -> bool {
        self.entries >= self.capacity_entries
    }

    /// Appends one entry. The caller checks `is_full` first (a full index rolls the segment).
    pub fn push(&mut self, entry: &[u8]) -> io::Result<()> {
        assert_eq!(entry.len(), self.entry_bytes, "index entry size");
        assert!(
            !self.is_full(),
            "index full: the segment should have rolled"
        );
        let at = self.entries * self.entry_bytes;
        match &mut self.map {
            Some(map) => map[at..at + entry.len()].copy_from_slice(entry),
            None => {
                self.file.write_at(entry, at as u64)?;
                self.heap.extend_from_slice(entry);
            }
        }
        self.entries += 1;
        self.dirty = true;
        Ok(())
    }

    /// Trims the file to its entries and remaps it; no more appends.
    pub fn seal(&mut self) -> io::Result<()> {
        self.flush()?;
        self.map = None;
        let len = self.entries * self.entry_bytes;
        self.file.set_len(len as u64)?;
        self.map = map(self.file.as_ref(), len)?;
        self.capacity_entries = self.entries;
        self.file.sync()
    }

    /// Makes the entries durable.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(map) = &self.map {
            map.flush()?;
        }
        self.file.sync()?;
        self.dirty = false;
        Ok(())
    }
}
