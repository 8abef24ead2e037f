//! `FaultyFs`: an in-memory twin of the filesystem for crash tests.
//!
//! Every file (inode) keeps two images: `written` (what reads see now) and `durable` (what
//! survives a crash: the bytes at its last successful `sync`). Directory entries likewise:
//! `names` now, `durable_names` as of the last `sync_dir`; directories too (`dirs` now,
//! `durable_dirs` once their parent is synced), and a crash loses every entry under a
//! directory whose own entry was not durable. A test can fail the Nth write
//! (`write_at`/`set_len`/`allocate`; what a failed `write_at` leaves is a [`WriteFault`]: by
//! default its first half; a failed `set_len` or `allocate` changes nothing) or the Nth sync
//! (`sync`/`sync_dir`), count operations, and take a crash image to reopen.
//!
//! Each file also knows how many bytes from its start have blocks (`reserved`: what
//! `allocate` and `write_at` covered, cut back by shrinking; growing with `set_len` is
//! sparse and reserves nothing), so tests can see what a file really costs on disk
//! ([`FaultyFs::reserved_bytes`]). `set_disk_full(true)` makes every `write_at` (landing its
//! first half), every `allocate` of bytes not reserved yet and every `sync` of a file with
//! unsynced bytes fail with ENOSPC until it is switched off; such a failed sync loses the
//! dirty pages as `fail_nth_sync_losing_pages` does. Removing files, shrinking them,
//! growing them sparsely and `sync_dir` still work, as on a real full filesystem (deleting
//! is how it frees itself).

use super::{Fs, StorageFile};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Which bytes survive `FaultyFs::crash`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Only synced file contents and synced directory entries.
    DurableOnly,
    /// Everything written (the OS flushed its page cache before dying).
    AllWritten,
    /// Everything written, except the last unsynced write lands only half.
    TornLastWrite,
}

/// What a failed `write_at` leaves in the file before it returns its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteFault {
    /// Its first half ([`FaultyFs::fail_nth_write`]).
    #[default]
    FirstHalf,
    /// A short write: only its first `n` bytes (all of them if it is shorter), as when the
    /// disk fills mid-write; the file grows by no more than that.
    Short(usize),
    /// A torn write: its full length, but from the middle on zeros instead of its bytes
    /// (sectors the device never wrote), so the file has the new length and wrong bytes.
    Torn,
}

#[derive(Debug, Default, Clone)]
struct Inode {
    written: Vec<u8>,
    durable: Vec<u8>,
    /// After a sync failed with `fail_nth_sync_losing_pages` (or on a full disk): position
    /// -> the byte the disk still holds there. Bytes dirty then and not written since never
    /// reach the disk (the kernel marked their pages clean), whatever later syncs say.
    lost: BTreeMap<usize, u8>,
    /// Bytes from the start whose blocks are reserved (written or `allocate`d); a prefix is
    /// all the log engine ever reserves, so the model keeps one number.
    reserved: usize,
}

impl Inode {
    /// `image` without the bytes a failed sync lost.
    fn without_lost(&self, image: &[u8]) -> Vec<u8> {
        let mut out = image.to_vec();
        for (&position, &byte) in self.lost.range(..out.len()) {
            out[position] = byte;
        }
        out
    }

    /// A failed sync that loses pages: every unsynced byte is clean now but not on disk.
    fn lose_unsynced(&mut self) {
        let common = self
            .written
            .iter()
            .zip(&self.durable)
            .take_while(|(w, d)| w == d)
            .count();
        for position in common..self.written.len() {
            let on_disk = self.durable.get(position).copied().unwrap_or(0);
            self.lost.entry(position).or_insert(on_disk);
        }
    }

    /// Bytes written again (or cut off) are no longer lost.
    fn forget_lost(&mut self, range: std::ops::Range<usize>) {
        let written: Vec<usize> = self.lost.range(range).map(|(&p, _)| p).collect();
        for position in written {
            self.lost.remove(&position);
        }
    }
}

fn disk_full() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

#[derive(Debug, Clone)]
struct LastWrite {
    inode: usize,
    pos: usize,
    len: usize,
    prev_len: usize,
    prev_bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    inodes: Vec<Inode>,
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    /// Directories created through this filesystem (with their ancestors); any other
    /// directory a path names is taken as there and durable, like a real mount point.
    dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    writes: u64,
    syncs: u64,
    /// Bytes read from `*.log` files (to prove clean segments are not scanned).
    log_bytes_read: u64,
    fail_write: Option<u64>,
    write_fault: WriteFault,
    fail_sync: Option<u64>,
    /// Whether the failing sync also loses the file's dirty pages.
    sync_loses_pages: bool,
    /// `set_disk_full`: writes and syncs of dirty files fail with ENOSPC.
    disk_full: bool,
    last_write: Option<LastWrite>,
}

/// The fault-injecting in-memory filesystem. Clones share state.
#[derive(Debug, Default, Clone)]
pub struct FaultyFs {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct FaultyFile {
    state: Arc<Mutex<State>>,
    inode: usize,
    is_log: bool,
}

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} failure"))
}

impl FaultyFs {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("faulty fs lock")
    }

    /// Makes the `n`th write from now on (1-based, `write_at`, `set_len` or `allocate`)
    /// fail, a `write_at` landing its first half.
    pub fn fail_nth_write(&self, n: u64) {
        self.fail_nth_write_as(n, WriteFault::FirstHalf);
    }

    /// Makes the `n`th write from now on fail, leaving `fault` in the file (a failing
    /// `set_len` or `allocate` changes nothing).
    pub fn fail_nth_write_as(&self, n: u64, fault: WriteFault) {
        let mut s = self.lock();
        s.fail_write = Some(s.writes + n);
        s.write_fault = fault;
    }

    /// Makes the `n`th sync from now on (1-based, `sync` or `sync_dir`) fail.
    pub fn fail_nth_sync(&self, n: u64) {
        let mut s = self.lock();
        s.fail_sync = Some(s.syncs + n);
    }

    /// Makes the `n`th sync from now on fail as Linux may after an I/O error: the file's
    /// dirty bytes stay readable but never reach the disk, even through later syncs that
    /// succeed (the 2018 fsync-gate lesson: an fsync must never be retried as if it had
    /// worked). A failing `sync_dir` loses nothing more.
    pub fn fail_nth_sync_losing_pages(&self, n: u64) {
        self.fail_nth_sync(n);
        self.lock().sync_loses_pages = true;
    }

    /// While `full`, every write, allocation of unreserved bytes and sync of unsynced bytes
    /// fails with ENOSPC (see the module docs); `false` is the operator freeing space.
    pub fn set_disk_full(&self, full: bool) {
        self.lock().disk_full = full;
    }

    /// Writes so far (`write_at` + `set_len` + `allocate`).
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.lock().writes
    }

    /// Syncs so far (`sync` + `sync_dir`).
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Bytes of the file at `path` that have blocks reserved (written or allocated), at most
    /// its length: what it costs on disk. `NotFound` if there is no such file.
    pub fn reserved_bytes(&self, path: &Path) -> io::Result<u64> {
        let s = self.lock();
        let id = *s
            .names
            .get(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let inode = &s.inodes[id];
        Ok(inode.reserved.min(inode.written.len()) as u64)
    }

    /// Bytes read from segment `.log` files so far.
    #[must_use]
    pub fn log_bytes_read(&self) -> u64 {
        self.lock().log_bytes_read
    }

    /// The filesystem a machine would find after crashing now.
    #[must_use]
    pub fn crash(&self, mode: CrashMode) -> FaultyFs {
        let s = self.lock();
        let mut inodes: Vec<Inode> = s.inodes.clone();
        for inode in &mut inodes {
            inode.written = match mode {
                CrashMode::DurableOnly => inode.durable.clone(),
                CrashMode::AllWritten | CrashMode::TornLastWrite => {
                    inode.without_lost(&inode.written)
                }
            };
            inode.durable = inode.written.clone();
            inode.lost.clear();
            inode.reserved = inode.reserved.min(inode.written.len());
        }
        if let (CrashMode::TornLastWrite, Some(last)) = (mode, &s.last_write) {
            tear(&mut inodes[last.inode], last);
        }
        let (names, dirs) = if mode == CrashMode::DurableOnly {
            let survives = |path: &Path| s.survives(path);
            let names = s.durable_names.iter().filter(|(p, _)| survives(p));
            let dirs = s.durable_dirs.iter().filter(|d| survives(d));
            (
                names.map(|(p, &id)| (p.clone(), id)).collect(),
                dirs.cloned().collect(),
            )
        } else {
            (s.names.clone(), s.dirs.clone())
        };
        let state = State {
            inodes,
            durable_names: names.clone(),
            names,
            durable_dirs: dirs.clone(),
            dirs,
            ..State::default()
        };
        FaultyFs {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Overwrites bytes of a file's written and durable images (a test's bit rot).
    pub fn corrupt(&self, path: &Path, pos: usize, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.lock();
        let id = *s
            .names
            .get(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let inode = &mut s.inodes[id];
        for image in [&mut inode.written, &mut inode.durable] {
            if image.len() < pos + bytes.len() {
                image.resize(pos + bytes.len(), 0);
            }
            image[pos..pos + bytes.len()].copy_from_slice(bytes);
        }
        Ok(())
    }
}

/// Keeps the first half of the last write, restores what was there before for the rest.
fn tear(inode: &mut Inode, last: &LastWrite) {
    let keep = last.len / 2;
    let torn_from = last.pos + keep;
    let end = last.pos + last.len;
    if inode.written.len() < end {
        return; // the file was truncated since; nothing of the write is visible anyway
    }
    let restore_end = end.min(last.prev_len);
    if restore_end > torn_from {
        let from = torn_from - last.pos;
        inode.written[torn_from..restore_end]
            .copy_from_slice(&last.prev_bytes[from..restore_end - last.pos]);
    }
    let new_len = last.prev_len.max(torn_from);
    if end == inode.written.len() {
        inode.written.truncate(new_len);
    }
    inode.durable = inode.written.clone();
}

impl State {
    /// Whether every directory above `path` that this filesystem created is durable.
    fn survives(&self, path: &Path) -> bool {
        path.ancestors().skip(1).all(|dir| {
            let known = self.dirs.contains(dir) || self.durable_dirs.contains(dir);
            !known || self.durable_dirs.contains(dir)
        })
    }

    fn next_write_fails(&mut self) -> bool {
        self.writes += 1;
        self.fail_write == Some(self.writes)
    }

    fn next_sync_fails(&mut self) -> bool {
        self.syncs += 1;
        self.fail_sync == Some(self.syncs)
    }

    fn apply_write(&mut self, id: usize, buf: &[u8], pos: usize) {
        self.inodes[id].forget_lost(pos..pos + buf.len());
        let inode = &mut self.inodes[id];
        inode.reserved = inode.reserved.max(pos + buf.len());
        let image = &mut self.inodes[id].written;
        let prev_len = image.len();
        let prev_bytes = image[pos.min(prev_len)..(pos + buf.len()).min(prev_len)].to_vec();
        let mut prev = vec![0u8; buf.len()];
        prev[..prev_bytes.len()].copy_from_slice(&prev_bytes);
        if image.len() < pos + buf.len() {
            image.resize(pos + buf.len(), 0);
        }
        image[pos..pos + buf.len()].copy_from_slice(buf);
        self.last_write = Some(LastWrite {
            inode: id,
            pos,
            len: buf.len(),
            prev_len,
            prev_bytes: prev,
        });
    }
}

impl FaultyFile {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("faulty fs lock")
    }
}

impl StorageFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        let mut s = self.lock();
        if self.is_log {
            s.log_bytes_read += buf.len() as u64;
        }
        let image = &s.inodes[self.inode].written;
        let pos = pos as usize;
        if pos + buf.len() > image.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&image[pos..pos + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        let mut s = self.lock();
        if s.next_write_fails() || s.disk_full {
            let fault = if s.disk_full {
                WriteFault::FirstHalf
            } else {
                s.write_fault
            };
            let landed = match fault {
                WriteFault::FirstHalf => buf[..buf.len() / 2].to_vec(),
                WriteFault::Short(n) => buf[..n.min(buf.len())].to_vec(),
                WriteFault::Torn => {
                    let mut torn = buf.to_vec();
                    torn[buf.len() / 2..].fill(0);
                    torn
                }
            };
            s.apply_write(self.inode, &landed, pos as usize);
            return Err(if s.disk_full {
                disk_full()
            } else {
                injected("write")
            });
        }
        s.apply_write(self.inode, buf, pos as usize);
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.lock();
        if s.next_write_fails() {
            return Err(injected("set_len"));
        }
        let inode = &mut s.inodes[self.inode];
        inode.written.resize(len as usize, 0);
        inode.reserved = inode.reserved.min(len as usize);
        inode.forget_lost(len as usize..usize::MAX);
        if s.last_write.as_ref().is_some_and(|w| w.inode == self.inode) {
            s.last_write = None;
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().inodes[self.inode].written.len() as u64)
    }

    fn allocate(&self, pos: u64, len: u64) -> io::Result<()> {
        let end = usize::try_from(pos.saturating_add(len)).map_err(io::Error::other)?;
        if len == 0 {
            return Ok(());
        }
        let mut s = self.lock();
        if s.next_write_fails() {
            return Err(injected("allocate"));
        }
        let inode = &mut s.inodes[self.inode];
        let unreserved = end > inode.reserved;
        if unreserved && s.disk_full {
            return Err(disk_full());
        }
        let inode = &mut s.inodes[self.inode];
        inode.reserved = inode.reserved.max(end);
        if inode.written.len() < end {
            inode.written.resize(end, 0);
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut s = self.lock();
        let injected_failure = s.next_sync_fails();
        let inode = &s.inodes[self.inode];
        let full = !injected_failure && s.disk_full && inode.written != inode.durable;
        if injected_failure || full {
            if s.sync_loses_pages || full {
                s.inodes[self.inode].lose_unsynced();
            }
            return Err(if full { disk_full() } else { injected("sync") });
        }
        let inode = &mut s.inodes[self.inode];
        inode.durable = inode.without_lost(&inode.written);
        if s.last_write.as_ref().is_some_and(|w| w.inode == self.inode) {
            s.last_write = None;
        }
        Ok(())
    }
}

impl Fs for FaultyFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>> {
        let mut s = self.lock();
        let inode = match s.names.get(path) {
            Some(&id) => id,
            None if create => {
                s.inodes.push(Inode::default());
                let id = s.inodes.len() - 1;
                s.names.insert(path.to_path_buf(), id);
                id
            }
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        let is_log = path.extension().is_some_and(|ext| ext == "log");
        Ok(Arc::new(FaultyFile {
            state: Arc::clone(&self.state),
            inode,
            is_log,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        for dir in path.ancestors().filter(|d| d.parent().is_some()) {
            s.dirs.insert(dir.to_path_buf());
        }
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let had = s.dirs.contains(path) || s.names.keys().any(|p| p.starts_with(path));
        if !had {
            return Err(io::ErrorKind::NotFound.into());
        }
        s.names.retain(|p, _| !p.starts_with(path));
        s.dirs.retain(|d| !d.starts_with(path));
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let s = self.lock();
        let in_dir = s.names.keys().filter(|p| p.parent() == Some(dir));
        Ok(in_dir
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let s = self.lock();
        Ok(s.names.contains_key(path) || s.dirs.contains(path))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let removed = self.lock().names.remove(path);
        removed
            .map(|_| ())
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    /// A file, or a directory: its subtree moves at once, now and in the durable image
    /// (the entries inside travel with it); its own entry becomes durable at `to` only when
    /// `to`'s parent is synced. Until then a crash finds it nowhere, which is stricter than
    /// a real filesystem (which would find it at `from`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(id) = s.names.remove(from) {
            s.names.insert(to.to_path_buf(), id);
            return Ok(());
        }
        if !s.dirs.contains(from) {
            return Err(io::ErrorKind::NotFound.into());
        }
        let moved = |p: &Path| to.join(p.strip_prefix(from).expect("under from"));
        let rekey = |map: &mut BTreeMap<PathBuf, usize>, strict: bool| {
            let under: Vec<PathBuf> = map
                .keys()
                .filter(|p| p.starts_with(from) && (!strict || *p != from))
                .cloned()
                .collect();
            for p in under {
                let id = map.remove(&p).expect("listed");
                map.insert(moved(&p), id);
            }
        };
        rekey(&mut s.names, false);
        rekey(&mut s.durable_names, true);
        let dirs: Vec<PathBuf> = s
            .dirs
            .iter()
            .filter(|d| d.starts_with(from))
            .cloned()
            .collect();
        for d in dirs {
            s.dirs.remove(&d);
            s.dirs.insert(moved(&d));
        }
        let durable: Vec<PathBuf> = s
            .durable_dirs
            .iter()
            .filter(|d| d.starts_with(from) && *d != from)
            .cloned()
            .collect();
        for d in durable {
            s.durable_dirs.remove(&d);
            s.durable_dirs.insert(moved(&d));
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if s.next_sync_fails() {
            return Err(injected("sync_dir"));
        }
        // `.` is the directory of a relative path's first component (whose parent is "").
        let dir = if dir == Path::new(".") {
            Path::new("")
        } else {
            dir
        };
        s.durable_names.retain(|p, _| p.parent() != Some(dir));
        let now: Vec<(PathBuf, usize)> = s
            .names
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, &id)| (p.clone(), id))
            .collect();
        s.durable_names.extend(now);
        // A directory whose removal is now durable takes everything under it along.
        let gone: Vec<PathBuf> = s
            .durable_dirs
            .iter()
            .filter(|d| d.parent() == Some(dir) && !s.dirs.contains(*d))
            .cloned()
            .collect();
        let under_gone = |p: &Path| gone.iter().any(|g| p.starts_with(g));
        s.durable_names.retain(|p, _| !under_gone(p));
        s.durable_dirs
            .retain(|d| d.parent() != Some(dir) && !under_gone(d));
        let now: Vec<PathBuf> = s
            .dirs
            .iter()
            .filter(|d| d.parent() == Some(dir))
            .cloned()
            .collect();
        s.durable_dirs.extend(now);
        Ok(())
    }
}
