//! `EntryFile`: a file of fixed-size index entries, memory-mapped when it is a real file.
//!
//! An active segment's index file is preallocated to `segment.index.bytes` and mapped
//! whole; entries are written into the map. When the segment rolls (or the log closes) the
//! file is trimmed to its entries. A sealed index is mapped (read-only) on its first lookup
//! only, as Kafka's lazy indexes: opening a log maps nothing but its active segment, and a
//! broker with many segments stays far from `vm.max_map_count`. Over the in-memory twin
//! (`FaultyFs`) there is nothing to map: entries live in a heap copy and go to the file
//! with `write_at`. The preallocation reserves its blocks (`StorageFile::allocate`), so a
//! full disk fails the roll or open, never a write into the map.

use crate::io::StorageFile;
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::io;
use std::sync::{Arc, OnceLock};

#[derive(Debug)]
pub(crate) struct EntryFile {
    file: Arc<dyn StorageFile>,
    entry_bytes: usize,
    /// Active real file: the whole preallocated file, mapped writable.
    map: Option<MmapMut>,
    /// Sealed real file: mapped read-only on first use (`None` inside if that failed).
    lazy: OnceLock<Option<Mmap>>,
    /// Entries when the file cannot be mapped (the in-memory twin).
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

/// Maps `len` bytes of a sealed `file` read-only, or `None` if `len` is 0.
fn map_read_only(file: &dyn StorageFile, len: usize) -> io::Result<Option<Mmap>> {
    match file.std_file() {
        // SAFETY: as for `map`; a sealed index is never written again, only unlinked, and
        // the mapping (like an open descriptor) keeps its pages valid after that.
        Some(std_file) if len > 0 => {
            Ok(Some(unsafe { MmapOptions::new().len(len).map(std_file)? }))
        }
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
            // Blocks reserved, not a sparse file: a full disk fails here (an I/O error that
            // fences the log), never later as SIGBUS on a write into the map.
            file.allocate((capacity_entries * entry_bytes) as u64)?;
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
            lazy: OnceLock::new(),
            heap,
            entries,
            capacity_entries,
            dirty: false,
        })
    }

    /// Opens a sealed (trimmed) file: its length is its entries. Maps nothing yet.
    pub fn open_sealed(file: Arc<dyn StorageFile>, entry_bytes: usize) -> io::Result<Self> {
        let len = file.len()? as usize;
        let entries = len / entry_bytes;
        let mut heap = Vec::new();
        if file.std_file().is_none() {
            heap = vec![0u8; entries * entry_bytes];
            file.read_at(&mut heap, 0)?;
        }
        Ok(EntryFile {
            file,
            entry_bytes,
            map: None,
            lazy: OnceLock::new(),
            heap,
            entries,
            capacity_entries: entries,
            dirty: false,
        })
    }

    /// The valid entries, concatenated (maps a sealed real file on first use).
    pub fn bytes(&self) -> &[u8] {
        let len = self.entries * self.entry_bytes;
        if let Some(map) = &self.map {
            return &map[..len];
        }
        if self.file.std_file().is_none() {
            return &self.heap[..len];
        }
        let mapped = self.lazy.get_or_init(|| {
            map_read_only(self.file.as_ref(), len).unwrap_or_else(|error| {
                tracing::warn!(%error, "cannot map a sealed index; lookups fall back to scanning");
                None
            })
        });
        mapped.as_ref().map_or(&[], |map| &map[..len])
    }

    /// The first and last entries, read without mapping the file (sanity checks on open).
    pub fn ends(&self) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        if self.entries == 0 {
            return Ok(None);
        }
        let read = |i: usize| -> io::Result<Vec<u8>> {
            let mut entry = vec![0u8; self.entry_bytes];
            match (&self.map, self.file.std_file()) {
                (Some(map), _) => {
                    entry.copy_from_slice(&map[i * self.entry_bytes..(i + 1) * self.entry_bytes])
                }
                (None, None) => entry
                    .copy_from_slice(&self.heap[i * self.entry_bytes..(i + 1) * self.entry_bytes]),
                (None, Some(_)) => self
                    .file
                    .read_at(&mut entry, (i * self.entry_bytes) as u64)?,
            }
            Ok(entry)
        };
        Ok(Some((read(0)?, read(self.entries - 1)?)))
    }

    pub fn entry(&self, i: usize) -> &[u8] {
        &self.bytes()[i * self.entry_bytes..(i + 1) * self.entry_bytes]
    }

    /// Entries available to lookups (0 if a sealed file could not be mapped).
    pub fn len(&self) -> usize {
        self.bytes().len() / self.entry_bytes
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

    /// Trims the file to its entries (mapped again lazily); no more appends.
    pub fn seal(&mut self) -> io::Result<()> {
        self.flush()?;
        self.map = None;
        self.lazy = OnceLock::new();
        self.file
            .set_len((self.entries * self.entry_bytes) as u64)?;
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
