//! The positional-I/O seam. Everything the log writes or reads goes through `Fs` and
//! `StorageFile`, so tests can swap the real filesystem for `FaultyFs` (feature `testing`:
//! compiled for tests only), which keeps written and durable images apart and injects
//! failures. [`durable`] is the one way any
//! Sluice crate changes a metadata file or directory durably (through `Fs`, so `RealFs` for
//! callers off the seam).

pub mod durable;
#[cfg(any(test, feature = "testing"))]
mod faulty;
mod real;

pub use durable::{
    create_dir_durable, is_temp_name, remove_dir_durable, remove_file_durable, remove_stale_temps,
    rename_durable, write_durable,
};
#[cfg(any(test, feature = "testing"))]
pub use faulty::{CrashMode, FaultyFs, WriteFault};
pub use real::RealFs;

use std::fmt::Debug;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// One open file, addressed by position. Shared (`Arc`) so a reader keeps a deleted
/// segment's bytes alive.
pub trait StorageFile: Send + Sync + Debug {
    /// Fills `buf` from `pos`; `UnexpectedEof` if the file is shorter.
    fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()>;
    /// Writes all of `buf` at `pos`, growing the file if needed.
    fn write_at(&self, buf: &[u8], pos: u64) -> io::Result<()>;
    /// Truncates or extends (with zeros) to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file has no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Makes the written bytes (and length) durable (fdatasync).
    fn sync(&self) -> io::Result<()>;
    /// Reserves the blocks under `[pos, pos + len)` (`posix_fallocate`), growing the file to
    /// `pos + len` if it is shorter (with zeros), so later writes inside the range (through
    /// a memory map too) cannot fail for space: on a full disk this call returns ENOSPC
    /// instead of a write to the map raising SIGBUS. Blocks outside the range are left as
    /// they are (a sparse file stays sparse). The default only grows the length.
    fn allocate(&self, pos: u64, len: u64) -> io::Result<()> {
        let end = pos
            .checked_add(len)
            .ok_or_else(|| io::Error::other("allocate past u64"))?;
        if self.len()? < end {
            self.set_len(end)?;
        }
        Ok(())
    }
    /// The real file, for memory-mapping and `sendfile`; `None` for in-memory twins.
    fn std_file(&self) -> Option<&std::fs::File> {
        None
    }
}

/// Directory-level operations.
pub trait Fs: Send + Sync + Debug {
    /// Opens a file read-write; creates it (empty) if `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn StorageFile>>;
    /// Creates `path` and any missing ancestors (not durably: see [`create_dir_durable`]).
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Removes the directory `path` and everything under it; `NotFound` if it is absent.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// File names (not paths) in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    fn exists(&self, path: &Path) -> io::Result<bool>;
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Atomically replaces `to` with `from` (a file, or a directory onto an absent `to`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes creations, deletions and renames in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// Reads a whole (small) file.
pub(crate) fn read_all(file: &dyn StorageFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(io::Error::other)?;
    let mut buf = vec![0u8; len];
    file.read_at(&mut buf, 0)?;
    Ok(buf)
}
