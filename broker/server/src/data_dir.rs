//! The data dir's lock: one process at a time owns `<data.dir>` (a running broker, or an
//! offline command such as `sluice user create --data-dir`).

use std::path::Path;

use crate::error::ServerError;

/// The lock file, under `data.dir`.
const LOCK_FILE: &str = ".lock";

/// Takes an exclusive lock on `<data.dir>/.lock` (held while the file stays open), or fails
/// naming the data dir.
pub fn lock(dir: &Path) -> Result<std::fs::File, ServerError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(ServerError::io(format!("opening {}", path.display())))?;
    // SAFETY: flock on a descriptor we own and keep open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(ServerError::Io {
            context: format!(
                "data dir {} is in use by another sluice broker (locking {})",
                dir.display(),
                path.display()
            ),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(file)
}
