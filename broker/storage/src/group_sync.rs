//! Group commit: one fsync answers every acks=all append written before it started.
//!
//! The server appends with `Durability::OsCache` under the partition's lock, then waits
//! for the durable offset to pass its last offset. A sync runs in three steps so that the
//! fsync itself holds no lock and appends keep landing while it runs:
//!
//! 1. [`Log::begin_sync`] (under the lock) captures shared handles of the segment files
//!    written since their last fsync and the log end offset they cover;
//! 2. [`PendingSync::run`] (no lock) fsyncs those files;
//! 3. [`Log::complete_sync`] (under the lock) advances the durable offset to the captured
//!    end, or fences the log if an fsync failed. An fsync is never retried: after a failure
//!    the page cache may have dropped the dirty pages, so a second fsync could succeed
//!    without the bytes being on disk.
//!
//! The next sync is begun when the previous one completes and covers everything appended
//! meanwhile, so under load one fsync answers many requests. Segment creation needs no
//! directory fsync here: `roll` already fsyncs the directory before the new segment takes
//! its first byte. The recovery point is not moved: it also promises fsynced indexes,
//! which only `flush` gives (recovery rebuilds indexes above it).

use crate::error::StorageError;
use crate::io::StorageFile;
use crate::log::Log;
use crate::offset::Offset;
use std::io;
use std::sync::Arc;

/// A group fsync captured by [`Log::begin_sync`], to be run without the log's lock.
#[derive(Debug)]
pub struct PendingSync {
    /// Segment log files written since their last fsync, with the segment's base offset and
    /// its size when captured (to tell whether it was written again meanwhile).
    files: Vec<(Offset, u32, Arc<dyn StorageFile>)>,
    /// Every offset below this is durable once the files are synced.
    target: Offset,
    /// The log's generation when captured: a reopen since makes this sync meaningless.
    generation: u64,
}

impl PendingSync {
    /// The durable offset this sync establishes when it succeeds.
    #[must_use]
    pub fn target(&self) -> Offset {
        self.target
    }

    /// fsyncs the captured files (fdatasync), stopping at the first failure.
    pub fn run(&self) -> io::Result<()> {
        self.files.iter().try_for_each(|(_, _, file)| file.sync())
    }
}

impl Log {
    /// Everything below this offset is fsynced: acks=all may be answered up to here.
    #[must_use]
    pub fn durable_offset(&self) -> Offset {
        self.durable_offset
    }

    /// Captures a group fsync of everything appended and not yet durable; `None` if there is
    /// nothing to sync or the log is fenced (check [`Log::is_fenced`]).
    pub fn begin_sync(&mut self) -> Option<PendingSync> {
        let target = self.log_end_offset();
        if self.fenced || self.durable_offset >= target {
            return None;
        }
        let files = self
            .segments
            .iter()
            .filter(|s| s.needs_sync)
            .map(|s| {
                let file = s.log.pinned_file();
                (
                    s.base,
                    s.size_bytes,
                    file.expect("unsynced bytes are held open"),
                )
            })
            .collect();
        Some(PendingSync {
            files,
            target,
            generation: self.generation,
        })
    }

    /// Ends a sync with `result` of [`PendingSync::run`]: on success the durable offset
    /// moves to the sync's target (also when the log was fenced meanwhile: those bytes are
    /// on disk) and is returned; on failure the log is fenced. A sync begun before the log
    /// was reopened moves nothing (the reopened log is durable up to its end already); if it
    /// failed, the log is fenced again, since the failure may have lost reopened bytes.
    pub fn complete_sync(
        &mut self,
        pending: PendingSync,
        result: io::Result<()>,
    ) -> Result<Offset, StorageError> {
        if let Err(error) = result {
            return Err(StorageError::Io(self.fence_sync(error)));
        }
        if pending.generation != self.generation {
            return Ok(self.durable_offset);
        }
        for (base, size_bytes, _) in &pending.files {
            // Not written since the capture: nothing left for `flush` to fsync in its log.
            if let Some(segment) = self.segments.iter_mut().find(|s| s.base == *base)
                && segment.size_bytes == *size_bytes
            {
                segment.mark_synced();
            }
        }
        assert!(
            pending.target <= self.log_end_offset(),
            "a sync never covers offsets that were not appended"
        );
        self.durable_offset = self.durable_offset.max(pending.target);
        Ok(self.durable_offset)
    }
}
