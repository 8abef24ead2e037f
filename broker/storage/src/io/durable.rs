//! Durable metadata changes: the one way Sluice replaces a small file, creates or removes a
//! directory, or renames one, so that a crash leaves the old state or the new one, never a
//! missing or partial file.
//!
//! Everything goes through [`Fs`], so `FaultyFs` can crash between any two steps;
//! code that is not on the seam (the server's topic and view files, the plugin host's
//! directory) passes `&RealFs`.
//!
//! - [`write_durable`]: a temp file in the same directory, written and fsynced, renamed over
//!   the target, then the directory fsynced. The rename is the commit point.
//! - [`create_dir_durable`]: creates the directory (and any missing ancestors), then fsyncs
//!   the parent of every directory it created, deepest first, so the whole chain survives.
//! - [`remove_dir_durable`], [`remove_file_durable`]: removes, then fsyncs the parent.
//! - [`rename_durable`]: renames (a file or a directory), then fsyncs both parents.
//!
//! Temp files are named `.<target>.<pid>-<seq>.sluice-tmp` ([`is_temp_name`]): hidden, unique
//! per process and call (two writers of one file never share a temp), and with a suffix no
//! real file of Sluice has, so [`remove_stale_temps`] may delete them at start.
//!
//! Every step's error is returned as it happened and nothing is retried: after a failed fsync
//! the caller must treat the change as not made (the 2018 fsync-gate lesson). A failed write
//! removes its temp file (best effort) and leaves the target as it was.

use super::Fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The suffix of every temp file [`write_durable`] makes.
pub const TEMP_SUFFIX: &str = ".sluice-tmp";

/// Whether a file name is one of [`write_durable`]'s temp files (a leftover after a crash).
#[must_use]
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(TEMP_SUFFIX)
}

fn temp_path(dir: &Path, name: &str) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    dir.join(format!(".{name}.{pid}-{seq}{TEMP_SUFFIX}"))
}

/// The directory and file name of `path`; `InvalidInput` if it has no file name.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    Ok((dir.unwrap_or(Path::new(".")), name))
}

/// Replaces `path` with `bytes` durably: temp file, fsync, rename, fsync the directory.
/// When it returns `Ok` the new content survives a crash; when it returns an error a crash
/// leaves the old content or the new one (the new one only if the rename happened).
///
/// # Errors
/// The first failing step, unretried.
pub fn write_durable(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let tmp = temp_path(dir, name);
    let written = fs.open(&tmp, true).and_then(|file| {
        file.set_len(0)?;
        file.write_at(bytes, 0)?;
        file.sync()
    });
    if let Err(e) = written.and_then(|()| fs.rename(&tmp, path)) {
        let _ = fs.remove(&tmp);
        return Err(e);
    }
    fs.sync_dir(dir)
}

/// Creates `path` and any missing ancestors, then fsyncs the parent of each directory it
/// created (deepest first), so the chain survives a crash once this returns `Ok`. An
/// existing `path` is left as it is. If an fsync fails, the directories created are
/// removed (best effort) so a retry creates and fsyncs them again instead of finding them
/// and taking them as durable.
///
/// # Errors
/// Creating or fsyncing failed.
pub fn create_dir_durable(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    let mut missing: Vec<&Path> = Vec::new();
    let mut at = path;
    while !fs.exists(at)? {
        let Some(parent) = at.parent() else { break }; // the root is always there
        missing.push(at);
        if parent.as_os_str().is_empty() {
            break; // a relative path's first component: its parent is the working directory
        }
        at = parent;
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(path)?;
    for dir in &missing {
        if let Err(e) = fs.sync_dir(split(dir)?.0) {
            if let Some(top) = missing.last() {
                let _ = fs.remove_dir_all(top);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Removes the directory `path` and everything in it, then fsyncs its parent. A `path`
/// that is already gone only gets the parent fsynced.
///
/// # Errors
/// Removing or fsyncing failed.
pub fn remove_dir_durable(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    match fs.remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs.sync_dir(split(path)?.0)
}

/// Removes the file `path`, then fsyncs its directory. A file already gone only gets the
/// directory fsynced.
///
/// # Errors
/// Removing or fsyncing failed.
pub fn remove_file_durable(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    match fs.remove(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs.sync_dir(split(path)?.0)
}

/// Renames `from` to `to` (a file or a directory), then fsyncs the new parent and, if it
/// differs, the old one.
///
/// # Errors
/// Renaming or fsyncing failed.
pub fn rename_durable(fs: &dyn Fs, from: &Path, to: &Path) -> io::Result<()> {
    fs.rename(from, to)?;
    let (new_dir, old_dir) = (split(to)?.0, split(from)?.0);
    fs.sync_dir(new_dir)?;
    if old_dir != new_dir {
        fs.sync_dir(old_dir)?;
    }
    Ok(())
}

/// Deletes the temp files a crash left in `dir` ([`is_temp_name`]), logging each, and
/// fsyncs `dir` if it removed any. Returns how many it removed. A missing `dir` has none.
///
/// # Errors
/// Listing, removing or fsyncing failed.
pub fn remove_stale_temps(fs: &dyn Fs, dir: &Path) -> io::Result<usize> {
    let names = match fs.list(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for name in names.iter().filter(|n| is_temp_name(n)) {
        tracing::info!(dir = %dir.display(), file = %name, "removing a temp file left by a crash");
        fs.remove(&dir.join(name))?;
        removed += 1;
    }
    if removed > 0 {
        fs.sync_dir(dir)?;
    }
    Ok(removed)
}
