//! The two small files beside the segments, both written with `io::write_durable` (temp
//! file, fsync, rename, fsync directory) and both ending in a CRC-32C of the bytes before it:
//!
//! - `partition.checkpoint` (28 bytes): `"SLCK" | version u16 = 1 | reserved u16 = 0 |
//!   log_start_offset i64 | recovery_point i64 | crc u32`.
//! - `clean-shutdown` (20 bytes): `"SLCS" | version u16 = 1 | reserved u16 = 0 |
//!   log_end_offset i64 | crc u32`. Present only between a clean close and the next open.
//!
//! And the two files of the cleaner (compacted topics, `cleaner.rs`), same framing:
//! - `cleaner.checkpoint`: `"SLCL" | version u16 = 1 | reserved u16 = 0 | cleaned_to i64 |
//!   gaps_below i64 | horizons i64 |` per horizon `end_offset i64 | cleaned_at_ms i64` `| crc u32`.
//! - `cleaner.swap` (present only while cleaned segments replace old ones): `"SLSW" |
//!   version u16 = 1 | reserved u16 = 0 | new_base i64 | old_segments i64 |` per old segment
//!   `base i64` `| crc u32`.

use crate::error::StorageError;
use crate::io::{self, Fs};
use crate::offset::Offset;
use std::path::Path;

pub(crate) const CHECKPOINT_FILE: &str = "partition.checkpoint";
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
pub(crate) const CLEANER_CHECKPOINT_FILE: &str = "cleaner.checkpoint";
pub(crate) const CLEANER_SWAP_FILE: &str = "cleaner.swap";
const CLEANER_MAGIC: &[u8; 4] = b"SLCL";
const SWAP_MAGIC: &[u8; 4] = b"SLSW";
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

/// What the cleaner has done to a partition (`cleaner.checkpoint`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CleanerCheckpoint {
    /// The dirty section starts here: every offset below was in some clean's offset map.
    pub cleaned_to: Offset,
    /// Segments below this offset may have gaps (written before a clean swaps anything in,
    /// so recovery accepts the gaps a swap leaves even if the clean never finished).
    pub gaps_below: Offset,
    /// `(end offset, time)` of recent cleans, ascending, at most
    /// `limits::CLEANER_HORIZONS_MAX`: a tombstone below `end` was first cleaned at `time`
    /// (the oldest entry forgotten first, which only keeps tombstones longer).
    pub horizons: Vec<(Offset, i64)>,
}

impl CleanerCheckpoint {
    /// When the clean that first covered `offset` ran (`None`: not cleaned yet).
    pub fn first_cleaned_ms(&self, offset: Offset) -> Option<i64> {
        self.horizons
            .iter()
            .find(|(end, _)| offset < *end)
            .map(|&(_, at)| at)
    }

    /// Records a finished clean up to `end` at `now_ms`.
    pub fn record_clean(&mut self, end: Offset, now_ms: i64) {
        self.cleaned_to = self.cleaned_to.max(end);
        self.gaps_below = self.gaps_below.max(end);
        if self.horizons.last().is_none_or(|&(last, _)| end > last) {
            self.horizons.push((end, now_ms));
        }
        let excess = self
            .horizons
            .len()
            .saturating_sub(crate::limits::CLEANER_HORIZONS_MAX);
        self.horizons.drain(..excess);
    }
}

/// Reads `cleaner.checkpoint`; absent = nothing cleaned yet.
pub(crate) fn read_cleaner_checkpoint(
    fs: &dyn Fs,
    dir: &Path,
) -> Result<CleanerCheckpoint, StorageError> {
    let Some(bytes) = read_optional(fs, &dir.join(CLEANER_CHECKPOINT_FILE))? else {
        return Ok(CleanerCheckpoint::default());
    };
    let fields = unframe_variable(CLEANER_CHECKPOINT_FILE, CLEANER_MAGIC, &bytes, 3)?;
    let count = usize::try_from(fields[2]).unwrap_or(usize::MAX);
    if count > crate::limits::CLEANER_HORIZONS_MAX || fields.len() != 3 + 2 * count {
        return Err(StorageError::Corrupt {
            what: CLEANER_CHECKPOINT_FILE.to_owned(),
            reason: format!("{count} horizons in {} fields", fields.len()),
        });
    }
    Ok(CleanerCheckpoint {
        cleaned_to: Offset(fields[0]),
        gaps_below: Offset(fields[1]),
        horizons: fields[3..]
            .chunks_exact(2)
            .map(|p| (Offset(p[0]), p[1]))
            .collect(),
    })
}

pub(crate) fn write_cleaner_checkpoint(
    fs: &dyn Fs,
    dir: &Path,
    checkpoint: &CleanerCheckpoint,
) -> std::io::Result<()> {
    let mut fields = vec![
        checkpoint.cleaned_to.value(),
        checkpoint.gaps_below.value(),
        checkpoint.horizons.len() as i64,
    ];
    for &(end, at) in &checkpoint.horizons {
        fields.extend([end.value(), at]);
    }
    let bytes = frame(CLEANER_MAGIC, &fields);
    io::write_durable(fs, &dir.join(CLEANER_CHECKPOINT_FILE), &bytes)
}

/// A swap in flight (`cleaner.swap`): the cleaned segment at `new_base` replaces `old`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SwapManifest {
    pub new_base: Offset,
    pub old: Vec<Offset>,
}

/// Reads `cleaner.swap`. Written with `write_durable`, it is whole or absent; one that does
/// not decode is an error (recovery cannot tell which files to keep).
pub(crate) fn read_swap(fs: &dyn Fs, dir: &Path) -> Result<Option<SwapManifest>, StorageError> {
    let Some(bytes) = read_optional(fs, &dir.join(CLEANER_SWAP_FILE))? else {
        return Ok(None);
    };
    let fields = unframe_variable(CLEANER_SWAP_FILE, SWAP_MAGIC, &bytes, 2)?;
    if usize::try_from(fields[1]).ok() != Some(fields.len() - 2) {
        return Err(StorageError::Corrupt {
            what: CLEANER_SWAP_FILE.to_owned(),
            reason: format!("{} old segments in {} fields", fields[1], fields.len()),
        });
    }
    Ok(Some(SwapManifest {
        new_base: Offset(fields[0]),
        old: fields[2..].iter().copied().map(Offset).collect(),
    }))
}

pub(crate) fn write_swap(fs: &dyn Fs, dir: &Path, swap: &SwapManifest) -> std::io::Result<()> {
    let mut fields = vec![swap.new_base.value(), swap.old.len() as i64];
    fields.extend(swap.old.iter().map(|o| o.value()));
    io::write_durable(
        fs,
        &dir.join(CLEANER_SWAP_FILE),
        &frame(SWAP_MAGIC, &fields),
    )
}

pub(crate) fn remove_swap(fs: &dyn Fs, dir: &Path) -> std::io::Result<()> {
    io::remove_file_durable(fs, &dir.join(CLEANER_SWAP_FILE))
}

/// `unframe` of a file with at least `min_fields` fields and any number after them.
fn unframe_variable(
    what: &str,
    magic: &[u8; 4],
    bytes: &[u8],
    min_fields: usize,
) -> Result<Vec<i64>, StorageError> {
    let fixed = 8 + 4;
    if bytes.len() < fixed + 8 * min_fields || !(bytes.len() - fixed).is_multiple_of(8) {
        return Err(StorageError::Corrupt {
            what: what.to_owned(),
            reason: format!("{} bytes", bytes.len()),
        });
    }
    unframe(what, magic, bytes, bytes.len())
}
