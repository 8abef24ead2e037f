//! The broker's own small files (`topic.json`, `meta.json`, view specs, transform specs)
//! on the real filesystem, through the storage crate's one durable-write path
//! (`sluice_storage::io::durable`), and the removals whose failure is logged rather than
//! returned (what they leave behind is found again at the next start).

use std::path::Path;

use sluice_storage::io::{self as storage_io, RealFs};

/// Writes a metadata file so that a crash leaves either the old or the new content
/// (`sluice_storage::io::write_durable` on the real filesystem).
pub(crate) fn write_durable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    storage_io::write_durable(&RealFs, path, bytes)
}

/// Removes a metadata file durably (the directory fsynced), logging a failure.
pub(crate) fn remove_file_logged(path: &Path) {
    if let Err(e) = storage_io::remove_file_durable(&RealFs, path) {
        tracing::warn!(path = %path.display(), error = %e, "removing a file failed");
    }
}

/// Removes a directory durably (the parent fsynced), logging a failure; a leftover is
/// removed again at the next start.
pub(crate) fn remove_dir_logged(path: &Path) {
    if let Err(e) = storage_io::remove_dir_durable(&RealFs, path) {
        tracing::warn!(path = %path.display(), error = %e, "removing a deleted topic's directory failed");
    }
}

/// Removes temp files a crash left in `dir` (`io::durable`), logging a failure: they are
/// never read, so one left behind is only a stray file.
pub(crate) fn remove_stale_temps(dir: &Path) {
    if let Err(e) = storage_io::remove_stale_temps(&RealFs, dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "removing stale temp files failed");
    }
}
