//! The two small files beside the segments, both written with `io::write_durable` (temp
//! file, fsync, rename, fsync directory) and both ending in a CRC-32C of the bytes before it:
//!
//! - `partition.checkpoint` (28 bytes): `"SLCK" | version u16 = 1 | reserved u16 = 0 |
//!   log_start_offset i64 | recovery_point i64 | crc u32`.
//! - `clean-shutdown` (20 bytes): `"SLCS" | version u16 = 1 | reserved u16 = 0 |
//!   log_end_offset i64 | crc u32`. Present only between a clean close and the next open.

use crate::error::StorageError;
use crate::io::{self, Fs};
use crate::offset::Offset;
use std::path::Path;

pub(crate) const CHECKPOINT_FILE: &str = "partition.checkpoint";
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
const CHECKPOINT_MAGIC: &[u8; 4] = b"SLCK";
const CLEAN_SHUTDOWN_MAGIC: &[u8; 4] = b"SLCS";
const VERSION: u16 = 1;
const CHECKPOINT_BYTES: usize = 28;
const CLEAN_SHUTDOWN_BYTES: usize = 20;

/// The persisted offsets of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub log_start_offset: Offset,
    /// Every batch below this offset was fsynced (segments and indexes).
    pub recovery_point: Offset,
}

fn frame(magic: &[u8; 4], fields: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 8 * fields.len() + 4);
    out.extend_from_slice(magic);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    for field in fields {
        out.extend_from_slice(&field.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Checks magic, version, length and CRC; returns the i64 fields.
fn unframe(
    what: &str,
    magic: &[u8; 4],
    bytes: &[u8],
    len: usize,
) -> Result<Vec<i64>, StorageError> {
    let bad = |reason: &str| StorageError::Corrupt {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    if bytes.len() != len {
        return Err(bad(&format!("{} bytes, expected {len}", bytes.len())));
    }
    let (body, crc) = bytes.split_at(len - 4);
    if crc32c::crc32c(body).to_be_bytes() != crc {
        return Err(bad("CRC mismatch"));
    }
    if &body[..4] != magic || body[4..6] != VERSION.to_be_bytes() {
        return Err(bad("bad magic or version"));
    }
    Ok(body[8..]
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

pub(crate) fn read_optional(fs: &dyn Fs, path: &Path) -> Result<Option<Vec<u8>>, StorageError> {
    if !fs.exists(path)? {
        return Ok(None);
    }
    Ok(Some(io::read_all(fs.open(path, false)?.as_ref())?))
}

/// Reads `partition.checkpoint`; `None` if absent.
pub(crate) fn read_checkpoint(fs: &dyn Fs, dir: &Path) -> Result<Option<Checkpoint>, StorageError> {
    let Some(bytes) = read_optional(fs, &dir.join(CHECKPOINT_FILE))? else {
        return Ok(None);
    };
    let fields = unframe(CHECKPOINT_FILE, CHECKPOINT_MAGIC, &bytes, CHECKPOINT_BYTES)?;
    Ok(Some(Checkpoint {
        log_start_offset: Offset(fields[0]),
        recovery_point: Offset(fields[1]),
    }))
}

pub(crate) fn write_checkpoint(
    fs: &dyn Fs,
    dir: &Path,
    checkpoint: Checkpoint,
) -> std::io::Result<()> {
    let bytes = frame(
        CHECKPOINT_MAGIC,
        &[
            checkpoint.log_start_offset.value(),
            checkpoint.recovery_point.value(),
        ],
    );
    debug_assert_eq!(bytes.len(), CHECKPOINT_BYTES);
    io::write_durable(fs, &dir.join(CHECKPOINT_FILE), &bytes)
}

/// Reads the clean-shutdown marker: the log end offset it vouches for. A marker that does
/// not decode counts as absent (the log is then recovered, which is always safe).
pub(crate) fn read_clean_shutdown(fs: &dyn Fs, dir: &Path) -> Result<Option<Offset>, StorageError> {
    let Some(bytes) = read_optional(fs, &dir.join(CLEAN_SHUTDOWN_FILE))? else {
        return Ok(None);
    };
    match unframe(
        CLEAN_SHUTDOWN_FILE,
        CLEAN_SHUTDOWN_MAGIC,
        &bytes,
        CLEAN_SHUTDOWN_BYTES,
    ) {
        Ok(fields) => Ok(Some(Offset(fields[0]))),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "ignoring unreadable clean-shutdown marker");
            Ok(None)
        }
    }
}

pub(crate) fn write_clean_shutdown(
    fs: &dyn Fs,
    dir: &Path,
    log_end: Offset,
) -> std::io::Result<()> {
    let bytes = frame(CLEAN_SHUTDOWN_MAGIC, &[log_end.value()]);
    debug_assert_eq!(bytes.len(), CLEAN_SHUTDOWN_BYTES);
    io::write_durable(fs, &dir.join(CLEAN_SHUTDOWN_FILE), &bytes)
}

/// Removes the marker (durably) so a crash after this open is not mistaken for clean.
pub(crate) fn remove_clean_shutdown(fs: &dyn Fs, dir: &Path) -> std::io::Result<()> {
    let path = dir.join(CLEAN_SHUTDOWN_FILE);
    if fs.exists(&path)? {
        io::remove_file_durable(fs, &path)?;
    }
    Ok(())
}
