//! Fencing: what a log does after a failed write or fsync, and how the fence lifts.
//!
//! Any failed write or fsync fences the log: appends are refused (KAFKA_STORAGE_ERROR in
//! the server), no sync is begun, and the in-memory state is never trusted again. A failed
//! fsync also marks everything at or above the durable offset as possibly lost: after an
//! fsync error Linux may mark the dirty pages clean without writing them (the 2018
//! "fsync-gate"), so reads would still see bytes the disk does not hold and a second fsync
//! would succeed without them. The fsync is therefore never retried.
//!
//! [`Log::try_unfence`] lifts the fence: it writes and fsyncs a probe file of
//! `FENCE_PROBE_BYTES` in the partition directory and reserves in it the index blocks the
//! reopen will need beyond those it frees (removed afterwards; a disk with room for a page
//! but not for the indexes fails the probe, not the reopen): recovery rebuilds the indexes
//! of every segment past the checkpointed recovery point (the active one at least), each
//! truncated first and then reserved again up to at most one `INDEX_ALLOCATION_STEP_BYTES`
//! more than its entries (capped by `segment.index.bytes`); if that works, it
//! cuts the log files back to the durable offset when an fsync had failed (the bytes above
//! it are not known to be on disk), then reopens the log from disk with full recovery, so
//! the log end, the durable offset and the indexes come from what the files hold.
//! Retention keeps running while fenced (`retention.rs`).

use crate::batch::{self, HEADER_BYTES};
use crate::error::StorageError;
use crate::io::Fs;
use crate::limits;
use crate::log::Log;
use crate::offset::Offset;
use crate::recovery;
use crate::segment::{INDEX_EXT, LOG_EXT, TIME_INDEX_EXT, segment_path};
use std::io;
use std::path::Path;

/// The probe's file name; `.tmp`, so recovery removes one a crash left behind.
const PROBE_FILE: &str = "fence-probe.tmp";

impl Log {
    /// Remembers a failed write: appends are refused until [`Log::try_unfence`] succeeds.
    pub(crate) fn fence(&mut self, error: io::Error) -> io::Error {
        tracing::error!(dir = %self.dir.display(), %error, "storage write failed; fencing the log until a probe write and fsync succeed");
        self.fenced = true;
        error
    }

    /// Remembers a failed fsync: fenced, and the bytes above the durable offset are treated
    /// as lost (cut off when the fence lifts), never fsynced again.
    pub(crate) fn fence_sync(&mut self, error: io::Error) -> io::Error {
        tracing::error!(dir = %self.dir.display(), %error, durable_offset = %self.durable_offset, "fsync failed; fencing the log, bytes above the durable offset are not durable");
        self.fenced = true;
        self.discard_pending = true;
        error
    }

    /// Lifts the fence if the disk takes a probe write and fsync again: cuts the log back to
    /// the durable offset after a failed fsync, then reopens it from disk. `Ok(false)` if the
    /// log was not fenced, `Ok(true)` if the fence lifted; on an error it stays fenced (and
    /// a failed reopen also discards above the durable offset next time, since it may have
    /// failed an fsync).
    pub fn try_unfence(&mut self, now_ms: i64) -> Result<bool, StorageError> {
        if !self.fenced {
            return Ok(false);
        }
        probe(self.fs.as_ref(), &self.dir, self.reopen_index_bytes())?;
        let reopened = self.reopen_from_disk(now_ms);
        if let Err(error) = &reopened {
            tracing::warn!(dir = %self.dir.display(), %error, "the probe succeeded but reopening the fenced log failed; it stays fenced");
            self.stale = true;
            self.discard_pending = true;
        }
        reopened.map(|()| true)
    }

    /// Index bytes a reopen may reserve beyond what it frees: one allocation step (at most
    /// `segment.index.bytes`) for each of the two indexes of every segment recovery scans.
    fn reopen_index_bytes(&self) -> u64 {
        let last = self.segments.len() - 1;
        let scanned = self
            .segments
            .iter()
            .enumerate()
            .filter(|(i, s)| *i == last || s.end_offset > self.checkpointed_recovery_point)
            .count();
        let step = limits::INDEX_ALLOCATION_STEP_BYTES.min(self.config.segment_index_bytes);
        scanned as u64 * 2 * u64::from(step)
    }

    /// Discards what is not known durable (if an fsync failed) and recovers the directory.
    fn reopen_from_disk(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let durable = self.durable_offset;
        let cut = self.discard_pending && durable < self.log_end_offset();
        if cut {
            discard_from(self.fs.as_ref(), &self.dir, durable)?;
        }
        self.discard_pending = false;
        let old_end = self.log_end_offset();
        let log_end = self.reload_from_disk(now_ms)?;
        assert!(
            !cut || log_end <= durable,
            "a log cut back to its durable offset recovers no further"
        );
        tracing::warn!(dir = %self.dir.display(), %old_end, %log_end, discarded_above = cut.then_some(durable.value()), "fence lifted: probe write and fsync succeeded; log reopened from disk");
        Ok(())
    }

    /// Recovers the directory and replaces every piece of in-memory state with what the
    /// files hold (segments, producer state, epochs, cleaner checkpoint); unfences. Returns
    /// the log end. Shared by lifting a fence and by `truncate_to`.
    pub(crate) fn reload_from_disk(&mut self, now_ms: i64) -> Result<Offset, StorageError> {
        let recovered = recovery::recover(&self.files(), &self.dir, &self.config)?;
        let log_end = recovered
            .segments
            .last()
            .expect("recovery leaves a segment")
            .end_offset;
        self.producers = crate::producer::rebuild(
            self.fs.as_ref(),
            &self.dir,
            &recovered.segments,
            recovered.log_start_offset,
        )?;
        // Guards handed out before the reopen may name batches the cut removed.
        self.verifications = crate::txn_guard::Verifications::default();
        self.epochs = crate::epoch::EpochCache::load(
            self.fs.as_ref(),
            &self.dir,
            &recovered.segments,
            recovered.log_start_offset,
            log_end,
            false,
        )?;
        self.segments = recovered.segments;
        self.log_start_offset = recovered.log_start_offset;
        self.cleaner = recovered.cleaner;
        self.recovery_point = log_end;
        self.checkpointed_recovery_point = log_end;
        self.last_checkpoint_ms = now_ms;
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        self.durable_offset = log_end;
        self.fenced = false;
        self.stale = false;
        self.generation += 1;
        Ok(log_end)
    }
}

/// Writes and fsyncs `PROBE_FILE` in `dir`, reserves `reserve_bytes` more in it, removes
/// it, then fsyncs `dir`.
fn probe(fs: &dyn Fs, dir: &Path, reserve_bytes: u64) -> io::Result<()> {
    let path = dir.join(PROBE_FILE);
    let file = fs.open(&path, true)?;
    let page = limits::FENCE_PROBE_BYTES as u64;
    let written = file
        .set_len(0)
        .and_then(|()| file.write_at(&[0x5a; limits::FENCE_PROBE_BYTES], 0))
        .and_then(|()| file.sync())
        .and_then(|()| file.allocate(page, reserve_bytes));
    drop(file);
    let removed = fs.remove(&path);
    written?;
    removed?;
    fs.sync_dir(dir)
}

/// Cuts the partition's files back to `durable` (a batch boundary): the segment holding it
/// is truncated at the batch that starts there, later segments are deleted. Works on the
/// files alone (headers read one at a time), never on the fenced log's in-memory view.
fn discard_from(fs: &dyn Fs, dir: &Path, durable: Offset) -> io::Result<()> {
    let bases = recovery::list_segments(fs, dir)?;
    for &base in bases.iter().filter(|&&b| b >= durable) {
        tracing::warn!(dir = %dir.display(), segment = %base, "deleting a segment above the durable offset");
        for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
            match fs.remove(&segment_path(dir, base, ext)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    if let Some(&base) = bases.iter().rev().find(|&&b| b < durable) {
        let file = fs.open(&segment_path(dir, base, LOG_EXT), false)?;
        let (len, mut position) = (file.len()?, 0u64);
        let mut header = [0u8; HEADER_BYTES];
        while position + HEADER_BYTES as u64 <= len {
            file.read_at(&mut header, position)?;
            match batch::parse_header(&header) {
                Ok(h) if h.base_offset < durable.value() => position += h.total_bytes() as u64,
                _ => break,
            }
        }
        if position < len {
            tracing::warn!(dir = %dir.display(), segment = %base, position, bytes = len - position, "cutting the log back to the durable offset");
            file.set_len(position)?;
            file.sync()?;
        }
    }
    fs.sync_dir(dir)
}
