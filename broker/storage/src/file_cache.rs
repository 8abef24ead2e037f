//! `FileCache`: the broker-wide bound on open sealed-segment files, and `SegmentLog`, a
//! segment's `.log` file opened on demand through it.
//!
//! A partition keeps one descriptor open: its active segment's `.log` (appends go to it,
//! and it stays open while it holds bytes not yet fsynced, so an fsync error is always
//! seen through a descriptor that was open when the bytes were written). A sealed segment's
//! `.log` is opened on its first read and kept in this cache, least recently used first
//! out, at most `files_max` at a time; the indexes hold no descriptor at all (see
//! `entry_file.rs`). A reader that took a file (`ReadSlice`, a clean in progress) keeps it
//! open after eviction, as it keeps an unlinked segment's bytes: eviction only drops the
//! cache's own reference.

use crate::io::{Fs, StorageFile};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Open sealed-segment files shared by every log opened with it (one per broker).
#[derive(Debug)]
pub struct FileCache {
    files_max: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Bumped by every use; the smallest tick is the least recently used file.
    clock: u64,
    next_id: u64,
    by_id: HashMap<u64, (Arc<dyn StorageFile>, u64)>,
    by_use: BTreeMap<u64, u64>,
    opens: u64,
}

impl FileCache {
    /// A cache holding at most `files_max` (at least 1) open files.
    #[must_use]
    pub fn new(files_max: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            files_max: files_max.max(1),
            state: Mutex::new(State::default()),
        })
    }

    /// The bound.
    #[must_use]
    pub fn files_max(&self) -> usize {
        self.files_max
    }

    /// Files the cache holds open now (readers may hold evicted ones a little longer).
    #[must_use]
    pub fn open_files(&self) -> usize {
        self.lock().by_id.len()
    }

    /// Files opened through the cache so far (misses).
    #[must_use]
    pub fn opens(&self) -> u64 {
        self.lock().opens
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn next_id(&self) -> u64 {
        let mut state = self.lock();
        state.next_id += 1;
        state.next_id
    }

    /// The file of `id`, opened with `open` on a miss (outside the lock); the least
    /// recently used files past the bound are dropped (closed once no reader holds them).
    fn get_or_open(
        &self,
        id: u64,
        open: impl FnOnce() -> io::Result<Arc<dyn StorageFile>>,
    ) -> io::Result<Arc<dyn StorageFile>> {
        if let Some(file) = self.lock().touch(id) {
            return Ok(file);
        }
        let file = open()?;
        let evicted = {
            let mut state = self.lock();
            state.opens += 1;
            if let Some(raced) = state.touch(id) {
                return Ok(raced); // another reader opened it meanwhile; ours is closed
            }
            state.clock += 1;
            let tick = state.clock;
            state.by_id.insert(id, (Arc::clone(&file), tick));
            state.by_use.insert(tick, id);
            let mut evicted = Vec::new();
            while state.by_id.len() > self.files_max {
                let (_, oldest) = state.by_use.pop_first().expect("entries have ticks");
                evicted.extend(state.by_id.remove(&oldest).map(|(f, _)| f));
            }
            assert_eq!(state.by_id.len(), state.by_use.len(), "one tick per entry");
            evicted
        };
        drop(evicted); // closed outside the lock
        Ok(file)
    }

    /// Drops `id`'s file (its segment is gone or renamed).
    fn forget(&self, id: u64) {
        let removed = {
            let mut state = self.lock();
            let removed = state.by_id.remove(&id);
            if let Some((_, tick)) = &removed {
                state.by_use.remove(tick);
            }
            removed
        };
        drop(removed);
    }
}

impl State {
    fn touch(&mut self, id: u64) -> Option<Arc<dyn StorageFile>> {
        self.clock += 1;
        let tick = self.clock;
        let (file, used) = self.by_id.get_mut(&id)?;
        self.by_use.remove(used);
        *used = tick;
        let file = Arc::clone(file);
        self.by_use.insert(tick, id);
        Some(file)
    }
}

/// Where a segment's `.log` lives and which cache opens it; forgotten by the cache when the
/// last reference goes.
#[derive(Debug)]
struct FileKey {
    id: u64,
    path: PathBuf,
    fs: Arc<dyn Fs>,
    cache: Arc<FileCache>,
}

impl Drop for FileKey {
    fn drop(&mut self) {
        self.cache.forget(self.id);
    }
}

/// A segment's `.log`: held open (`pinned`) while the segment is active or holds unsynced
/// bytes, otherwise opened on demand through the cache.
#[derive(Debug)]
pub(crate) struct SegmentLog {
    key: Arc<FileKey>,
    pinned: Option<Arc<dyn StorageFile>>,
}

/// The filesystem and the cache every segment of a log is opened with.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    pub fs: Arc<dyn Fs>,
    pub cache: Arc<FileCache>,
}

impl SegmentLog {
    /// `file` (already open at `path`), held open.
    pub fn pinned(files: &Files, path: &Path, file: Arc<dyn StorageFile>) -> SegmentLog {
        let unpinned = SegmentLog {
            key: Arc::new(FileKey {
                id: 0,
                path: PathBuf::new(),
                fs: Arc::clone(&files.fs),
                cache: Arc::clone(&files.cache),
            }),
            pinned: Some(file),
        };
        unpinned.renamed(files, path)
    }

    /// Identifies the segment file (the same across evictions and reopens).
    pub fn id(&self) -> u64 {
        self.key.id
    }

    /// Whether the file is held open outside the cache.
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }

    /// The open file: the pinned one, or the cache's (opened now on a miss).
    pub fn file(&self) -> io::Result<Arc<dyn StorageFile>> {
        if let Some(file) = &self.pinned {
            return Ok(Arc::clone(file));
        }
        let key = &self.key;
        key.cache
            .get_or_open(key.id, || key.fs.open(&key.path, false))
    }

    /// From now on opened on demand (the segment is sealed and fsynced).
    pub fn unpin(&mut self) {
        self.pinned = None;
    }

    /// The same file, now named `path` (a cleaned segment swapped in): a new key, so the
    /// cache never hands out the file under its old name.
    pub fn renamed(&self, files: &Files, path: &Path) -> SegmentLog {
        let key = FileKey {
            id: files.cache.next_id(),
            path: path.to_owned(),
            fs: Arc::clone(&files.fs),
            cache: Arc::clone(&files.cache),
        };
        SegmentLog {
            key: Arc::new(key),
            pinned: self.pinned.clone(),
        }
    }

    /// The file held open, if it is.
    pub fn pinned_file(&self) -> Option<Arc<dyn StorageFile>> {
        self.pinned.clone()
    }
}

#[cfg(test)]
mod tests {
    //! The cache's bound, reopening on demand, and concurrent readers, over `FaultyFs` and
    //! a real directory.
    use super::*;
    use crate::io::{FaultyFs, RealFs};

    fn files(fs: Arc<dyn Fs>, files_max: usize) -> Files {
        Files {
            fs,
            cache: FileCache::new(files_max),
        }
    }

    /// Segment logs at `/p/<i>`, each holding `i` as 8 bytes, unpinned.
    fn segments(files: &Files, dir: &Path, count: u64) -> Vec<SegmentLog> {
        (0..count)
            .map(|i| {
                let path = dir.join(i.to_string());
                let file = files.fs.open(&path, true).unwrap();
                file.write_at(&i.to_be_bytes(), 0).unwrap();
                let mut log = SegmentLog::pinned(files, &path, file);
                log.unpin();
                log
            })
            .collect()
    }

    fn value(log: &SegmentLog) -> u64 {
        let mut buf = [0u8; 8];
        log.file().unwrap().read_at(&mut buf, 0).unwrap();
        u64::from_be_bytes(buf)
    }

    #[test]
    fn holds_at_most_its_bound_and_reopens_evicted_files_with_the_same_bytes() {
        let files = files(Arc::new(FaultyFs::new()), 4);
        let logs = segments(&files, Path::new("/p"), 10);
        for round in 0..3 {
            for (i, log) in logs.iter().enumerate() {
                assert_eq!(value(log), i as u64, "round {round}");
                assert!(files.cache.open_files() <= 4);
            }
        }
        assert_eq!(
            files.cache.opens(),
            30,
            "10 files through 4 slots: every read misses"
        );
        // The 4 most recent stay: reading them again opens nothing.
        for log in &logs[6..] {
            assert_eq!(
                value(log),
                logs.iter().position(|l| l.id() == log.id()).unwrap() as u64
            );
        }
        assert_eq!(files.cache.opens(), 30);
        drop(logs);
        assert_eq!(
            files.cache.open_files(),
            0,
            "dropped segments leave the cache"
        );
    }

    #[test]
    fn a_reader_keeps_an_evicted_file_open_and_readable() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(Arc::new(RealFs), 1);
        let logs = segments(&files, dir.path(), 3);
        let held = logs[0].file().unwrap();
        assert_eq!(value(&logs[1]), 1); // evicts file 0 from the cache
        assert_eq!(files.cache.open_files(), 1);
        let mut buf = [0u8; 8];
        held.read_at(&mut buf, 0).unwrap();
        assert_eq!(u64::from_be_bytes(buf), 0);
    }

    #[test]
    fn concurrent_readers_see_their_own_segments_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(Arc::new(RealFs), 3);
        let logs = segments(&files, dir.path(), 16);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let logs = &logs;
                let cache = &files.cache;
                scope.spawn(move || {
                    for round in 0..200 {
                        let i = (round * 7 + t * 5) % logs.len();
                        assert_eq!(value(&logs[i]), i as u64);
                        assert!(cache.open_files() <= 3);
                    }
                });
            }
        });
    }

    #[test]
    fn a_pinned_file_stays_out_of_the_cache() {
        let files = files(Arc::new(FaultyFs::new()), 2);
        let path = Path::new("/p/0");
        let log = SegmentLog::pinned(&files, path, files.fs.open(path, true).unwrap());
        log.file().unwrap().write_at(b"x", 0).unwrap();
        assert!(log.is_pinned());
        assert_eq!((files.cache.open_files(), files.cache.opens()), (0, 0));
    }
}
