//! `EntryFile`: a file of fixed-size index entries, memory-mapped when it is a real file.
//!
//! An active segment's index file is sized to `segment.index.bytes` (sparse: no blocks yet)
//! and mapped whole; entries are written into the map. Disk blocks are reserved
//! (`StorageFile::allocate`) only ahead of the entries, `INDEX_ALLOCATION_STEP_BYTES` at a
//! time, before the write that needs them ([`EntryFile::reserve`], and `push` itself): an
//! empty partition's indexes cost no blocks, and a full disk fails a reservation (an I/O
//! error that fences the log), never a write into the map (SIGBUS). When the segment rolls
//! (or the log closes) the file is trimmed to its entries, which frees the reservation
//! past them. A sealed index is mapped (read-only) on its first lookup only, as Kafka's lazy
//! indexes: opening a log maps nothing but its active segment, and a broker with many
//! segments stays far from `vm.max_map_count`. A real index file holds no descriptor: a
//! mapping keeps the file itself alive, so the descriptor is closed once the file is mapped,
//! and the rare calls that need one (reserving blocks, fsync, the trim on seal, the first
//! lookup of a sealed index) open the file by its path for the call. Over the in-memory
//! twin (`FaultyFs`) there
//! is nothing to map: entries live in a heap copy and go to the file with `write_at`, after
//! the same reservations (so the twin's file may be longer than its entries by zeros, as a
//! real one is, and its faults reach the reservations too).

use crate::io::{Fs, StorageFile};
use crate::limits::INDEX_ALLOCATION_STEP_BYTES;
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

#[derive(Debug)]
pub(crate) struct EntryFile {
    /// The twin's file, kept; `None` for a real file (reopened by `path` when needed).
    kept: Option<Arc<dyn StorageFile>>,
    fs: Arc<dyn Fs>,
    path: PathBuf,
    /// A real file: mapped, no descriptor held.
    real: bool,
    /// A sealed real file's first and last entries, read while it was open.
    sealed_ends: Option<(Vec<u8>, Vec<u8>)>,
    entry_bytes: usize,
    /// Active real file: the whole (sparse) file, mapped writable.
    map: Option<MmapMut>,
    /// Sealed real file: mapped read-only on first use (`None` inside if that failed).
    lazy: OnceLock<Option<Mmap>>,
    /// Entries when the file cannot be mapped (the in-memory twin).
    heap: Vec<u8>,
    entries: usize,
    capacity_entries: usize,
    /// Entries from the file's start whose blocks are reserved: every entry written lies
    /// below (`capacity_entries` at most).
    reserved_entries: usize,
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
    /// Opens for appending: keeps the first `entries` entries, sizes the file (sparse) to
    /// `capacity_bytes` and maps it, with blocks reserved for the entries kept.
    pub fn open_active(
        file: Arc<dyn StorageFile>,
        (fs, path): (&Arc<dyn Fs>, &Path),
        entry_bytes: usize,
        entries: usize,
        capacity_bytes: usize,
    ) -> io::Result<Self> {
        let capacity_entries = (capacity_bytes / entry_bytes).max(entries);
        let mut heap = Vec::new();
        let real = file.std_file().is_some();
        let map = if real {
            // Sparse: `set_len` reserves no blocks, `reserve` does before each write.
            file.set_len((capacity_entries * entry_bytes) as u64)?;
            map(file.as_ref(), capacity_entries * entry_bytes)?
        } else {
            heap = vec![0u8; entries * entry_bytes];
            file.read_at(&mut heap, 0)?;
            file.set_len(heap.len() as u64)?;
            None
        };
        let mut entry_file = EntryFile {
            kept: Some(file),
            fs: Arc::clone(fs),
            path: path.to_owned(),
            real,
            sealed_ends: None,
            entry_bytes,
            map,
            lazy: OnceLock::new(),
            heap,
            entries,
            capacity_entries,
            reserved_entries: 0,
            dirty: false,
        };
        // The kept entries were written, so they have blocks; this reserves the rest of
        // their step (nothing at all for an empty index).
        entry_file.reserve(0)?;
        if real {
            entry_file.kept = None; // the map keeps the file; the descriptor closes
        }
        Ok(entry_file)
    }

    /// The file, open: the twin's, or the real one reopened by its path for one call.
    fn file(&self) -> io::Result<Arc<dyn StorageFile>> {
        match &self.kept {
            Some(file) => Ok(Arc::clone(file)),
            None => self.fs.open(&self.path, false),
        }
    }

    /// Opens a sealed (trimmed) file: its length is its entries. Maps nothing yet.
    pub fn open_sealed(
        file: Arc<dyn StorageFile>,
        (fs, path): (&Arc<dyn Fs>, &Path),
        entry_bytes: usize,
    ) -> io::Result<Self> {
        let len = file.len()? as usize;
        let entries = len / entry_bytes;
        let mut heap = Vec::new();
        let real = file.std_file().is_some();
        let mut sealed_ends = None;
        if !real {
            heap = vec![0u8; entries * entry_bytes];
            file.read_at(&mut heap, 0)?;
        } else if entries > 0 {
            let (mut first, mut last) = (vec![0u8; entry_bytes], vec![0u8; entry_bytes]);
            file.read_at(&mut first, 0)?;
            file.read_at(&mut last, ((entries - 1) * entry_bytes) as u64)?;
            sealed_ends = Some((first, last));
        }
        Ok(EntryFile {
            kept: (!real).then_some(file),
            fs: Arc::clone(fs),
            path: path.to_owned(),
            real,
            sealed_ends,
            entry_bytes,
            map: None,
            lazy: OnceLock::new(),
            heap,
            entries,
            capacity_entries: entries,
            reserved_entries: entries,
            dirty: false,
        })
    }

    /// The valid entries, concatenated (maps a sealed real file on first use).
    pub fn bytes(&self) -> &[u8] {
        let len = self.entries * self.entry_bytes;
        if let Some(map) = &self.map {
            return &map[..len];
        }
        if !self.real {
            return &self.heap[..len];
        }
        let mapped = self.lazy.get_or_init(|| {
            let file = self.fs.open(&self.path, false);
            file.and_then(|file| map_read_only(file.as_ref(), len)).unwrap_or_else(|error| {
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
        if let (None, Some(ends)) = (&self.map, &self.sealed_ends) {
            return Ok(Some(ends.clone()));
        }
        let read = |i: usize| -> io::Result<Vec<u8>> {
            let mut entry = vec![0u8; self.entry_bytes];
            match (&self.map, self.real) {
                (Some(map), _) => {
                    entry.copy_from_slice(&map[i * self.entry_bytes..(i + 1) * self.entry_bytes])
                }
                (None, false) => entry
                    .copy_from_slice(&self.heap[i * self.entry_bytes..(i + 1) * self.entry_bytes]),
                (None, true) => self
                    .file()?
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

    /// Makes sure blocks are reserved for `additional` more entries (up to the capacity),
    /// growing the reservation a whole `INDEX_ALLOCATION_STEP_BYTES` at a time. An error
    /// (ENOSPC) changes nothing written: the caller fences before writing anything.
    pub fn reserve(&mut self, additional: usize) -> io::Result<()> {
        let wanted = self
            .entries
            .saturating_add(additional)
            .min(self.capacity_entries);
        if wanted <= self.reserved_entries {
            return Ok(());
        }
        let step = (INDEX_ALLOCATION_STEP_BYTES as usize / self.entry_bytes).max(1);
        let end = wanted.div_ceil(step).saturating_mul(step);
        let end = end.min(self.capacity_entries);
        let from = self.reserved_entries * self.entry_bytes;
        let len = end * self.entry_bytes - from;
        self.file()?.allocate(from as u64, len as u64)?;
        self.reserved_entries = end;
        assert!(
            self.reserved_entries >= wanted && self.reserved_entries <= self.capacity_entries,
            "a reservation covers what was asked, inside the capacity"
        );
        Ok(())
    }

    /// Appends one entry (reserving its blocks first if needed). The caller checks
    /// `is_full` first (a full index rolls the segment).
    pub fn push(&mut self, entry: &[u8]) -> io::Result<()> {
        assert_eq!(entry.len(), self.entry_bytes, "index entry size");
        assert!(
            !self.is_full(),
            "index full: the segment should have rolled"
        );
        self.reserve(1)?;
        assert!(
            self.entries < self.reserved_entries,
            "an entry is written only over reserved blocks"
        );
        let at = self.entries * self.entry_bytes;
        match &mut self.map {
            Some(map) => map[at..at + entry.len()].copy_from_slice(entry),
            None => {
                self.file()?.write_at(entry, at as u64)?;
                self.heap.extend_from_slice(entry);
            }
        }
        self.entries += 1;
        self.dirty = true;
        Ok(())
    }

    /// Trims the file to its entries (freeing the blocks reserved past them; mapped again
    /// lazily); no more appends.
    pub fn seal(&mut self) -> io::Result<()> {
        self.flush()?;
        self.map = None;
        self.lazy = OnceLock::new();
        let file = self.file()?;
        file.set_len((self.entries * self.entry_bytes) as u64)?;
        self.capacity_entries = self.entries;
        self.reserved_entries = self.entries;
        file.sync()?;
        if self.real && self.entries > 0 {
            let (mut first, mut last) = (vec![0u8; self.entry_bytes], vec![0u8; self.entry_bytes]);
            file.read_at(&mut first, 0)?;
            file.read_at(&mut last, ((self.entries - 1) * self.entry_bytes) as u64)?;
            self.sealed_ends = Some((first, last));
        }
        Ok(())
    }

    /// The file now lives at `path` (renamed by the cleaner's swap).
    pub fn renamed(&mut self, path: &Path) {
        path.clone_into(&mut self.path);
    }

    /// Makes the entries durable.
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(map) = &self.map {
            map.flush()?;
        }
        self.file()?.sync()?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! What index files cost on a real disk (`st_blocks`), and recovery of an active index
    //! file longer than its entries (its sparse tail of zeros).
    use crate::limits::{INDEX_ALLOCATION_STEP_BYTES, INDEX_ENTRY_BYTES};
    use crate::testing::build_value_batch;
    use crate::{Durability, Log, LogConfig, Offset};
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    /// What an empty log may cost on disk: its checkpoint's block and little more, whatever
    /// `segment.index.bytes` says (its indexes are sparse until entries are written).
    const EMPTY_LOG_DISK_BYTES_MAX: u64 = 16 * 1024;
    /// `segment.index.bytes` of these tests: far above what they may cost on disk.
    const INDEX_BYTES: u32 = 10 * 1024 * 1024;

    fn config() -> LogConfig {
        LogConfig {
            segment_index_bytes: INDEX_BYTES,
            index_interval_bytes: 0,
            ..LogConfig::default()
        }
    }

    /// Bytes of disk `path` occupies (`st_blocks` counts 512-byte units).
    fn disk_bytes(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    fn segment_file(dir: &Path, ext: &str) -> PathBuf {
        dir.join(format!("{:020}.{ext}", 0))
    }

    /// Appends batches `from..to`, batch `i` with timestamp `1_000 + i`.
    fn append(log: &mut Log, from: usize, to: usize) {
        for i in from..to {
            let mut batch = build_value_batch(1, 10, i as u8, 1_000 + i as i64);
            log.append(&mut batch, Durability::OsCache, 1_000).unwrap();
        }
    }

    #[test]
    fn an_empty_log_costs_kilobytes_whatever_segment_index_bytes_says() {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), config(), 0).unwrap();
        for ext in ["index", "timeindex"] {
            let path = segment_file(dir.path(), ext);
            let len = std::fs::metadata(&path).unwrap().len();
            assert!(
                len + 12 > u64::from(INDEX_BYTES) && len <= u64::from(INDEX_BYTES),
                "{ext}: sized to segment.index.bytes ({len})"
            );
            assert_eq!(disk_bytes(&path), 0, "{ext}: sparse, no block reserved");
        }
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| disk_bytes(&e.unwrap().path()))
            .sum();
        assert!(
            total <= EMPTY_LOG_DISK_BYTES_MAX,
            "an empty log takes {total} bytes of disk"
        );
        log.close().unwrap();
    }

    #[test]
    fn blocks_are_reserved_a_step_ahead_of_the_entries_and_trimmed_on_close() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), config(), 0).unwrap();
        let step_entries = (INDEX_ALLOCATION_STEP_BYTES / INDEX_ENTRY_BYTES) as usize;
        append(&mut log, 0, step_entries + 2); // every batch but the first gets an entry
        let index = segment_file(dir.path(), "index");
        let reserved = disk_bytes(&index);
        let step = u64::from(INDEX_ALLOCATION_STEP_BYTES);
        assert!(
            reserved >= 2 * step - u64::from(INDEX_ENTRY_BYTES) && reserved <= 2 * step,
            "entries past one step reserve a second one: {reserved} bytes"
        );
        assert!(
            std::fs::metadata(&index).unwrap().len() > 4 * step,
            "the file is still sized to segment.index.bytes"
        );
        log.close().unwrap();
        let entries = (step_entries + 1) as u64;
        assert_eq!(
            std::fs::metadata(&index).unwrap().len(),
            entries * u64::from(INDEX_ENTRY_BYTES),
            "trimmed to its entries"
        );
        assert!(
            disk_bytes(&index) < 2 * step,
            "the trim freed the reservation"
        );
    }

    /// Every batch reads back at its offset and ListOffsets by time finds each.
    fn check_all(log: &Log, batches: usize) {
        assert_eq!(log.log_end_offset(), Offset(batches as i64));
        for i in 0..batches {
            let slice = log.read(Offset(i as i64), 1).unwrap();
            let bytes = slice.read_to_vec().unwrap();
            let (header, _) = crate::batch::iter_batches(&bytes).next().unwrap().unwrap();
            assert_eq!(header.base_offset, i as i64);
            let found = log.offset_for_timestamp(1_000 + i as i64).unwrap();
            assert_eq!(found.map(|(o, _)| o), Some(Offset(i as i64)));
        }
    }

    #[test]
    fn an_index_longer_than_its_entries_recovers() {
        let batches = 300;
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), config(), 0).unwrap();
        append(&mut log, 0, batches);
        log.flush().unwrap();
        drop(log); // a crash: no trim, the files keep their sparse tails of zeros
        let index = segment_file(dir.path(), "index");
        assert!(std::fs::metadata(&index).unwrap().len() > 1024 * 1024);
        let log = Log::open(dir.path(), config(), 0).unwrap();
        check_all(&log, batches);
        log.close().unwrap();

        // A clean close trims; zeros past the entries anyway (as a crash in the middle of
        // a trim could leave): the trusted open finds them insane and rebuilds.
        for ext in ["index", "timeindex"] {
            let path = segment_file(dir.path(), ext);
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.set_len(file.metadata().unwrap().len() + 96).unwrap();
        }
        let mut log = Log::open(dir.path(), config(), 0).unwrap();
        check_all(&log, batches);
        append(&mut log, batches, batches + 1);
        log.close().unwrap();
        let log = Log::open(dir.path(), config(), 0).unwrap();
        check_all(&log, batches + 1);
    }
}
