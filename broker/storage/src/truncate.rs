//! `Log::truncate_to`: removing every record at or after an offset (Kafka's
//! `UnifiedLog.truncateTo`), for a follower whose log diverged from its leader's and for the
//! Raft log's `truncate_after`.
//!
//! The steps, each durable before the next, so a crash at any of them reopens the log as it
//! was before or as it is after, never with a record below the offset lost or a torn tail:
//! 1. `cleaner.checkpoint` (if the clean reached past the offset) and `partition.checkpoint`
//!    are lowered: the recovery point to the base of the segment that is cut, so recovery
//!    scans that segment and never trusts its old indexes (a trusted sealed segment takes
//!    its end from the next segment's base, which would hide the cut). (In a compacted log,
//!    a crash between this and step 2 may make recovery take a cleaner's gap at or after the
//!    offset for damage and cut there: only records the truncation removes anyway.)
//! 2. That segment's `.log` is cut at the first batch at or after the offset and fsynced:
//!    the commit point. Before it, the log is whole; after it, recovery finds the cut
//!    segment ending at the offset and deletes every later segment as a gap.
//! 3. The later segments are unlinked, last first, and the directory fsynced.
//! 4. The log is reopened from disk as a lifted fence does (`fence.rs`): recovery rebuilds
//!    the cut segment's offset and time indexes; the producer state is rebuilt from the
//!    newest producer snapshot at or below the new log end (those above it are deleted
//!    first) plus the batches after it; KIP-890 guards are dropped.
//! 5. The leader epoch cache forgets the epochs that begin at or after the new log end
//!    (Kafka's `truncateFromEnd`: the records of those epochs are gone) and is persisted. A
//!    crash between 4 and 5 leaves those epochs starting at the log end with no records, as
//!    a torn tail does (`epoch.rs`); a later epoch must still be newer.
//!
//! Any failed write or fsync fences the log, as on the append path.
//!
//! `Log::truncate_fully_and_start_at` (Kafka's name) empties the log and moves its start to
//! any offset, past the end too (a Raft follower that installed a snapshot newer than its
//! whole log): `partition.checkpoint` first (log start and recovery point = the offset), then
//! every segment and producer snapshot unlinked, the directory fsynced, and the log reopened
//! (recovery creates the one empty segment at the checkpointed start). A crash before the
//! unlinks are durable reopens the old records with the log start clamped to their end
//! (`recovery.rs`), so a caller that must not lose the call records its intent first and
//! repeats it on open, as the Raft log store does with its purge mark.

use crate::checkpoint;
use crate::error::StorageError;
use crate::log::Log;
use crate::offset::Offset;

impl Log {
    /// Removes every record at or after `offset` (a batch boundary in
    /// `[log_start_offset, log_end_offset]`), durably before returning, and returns the new
    /// log end offset: `offset`, or lower when `offset` lies in a gap the cleaner left. A
    /// segment that then starts at or after the new end is deleted; the segment holding it
    /// takes appends again. Refused when fenced, for an offset outside the log
    /// (`OffsetOutOfRange`) or inside a batch (`NotBatchBoundary`). See the module docs.
    pub fn truncate_to(&mut self, offset: Offset, now_ms: i64) -> Result<Offset, StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        let (log_start, log_end) = (self.log_start_offset, self.log_end_offset());
        if offset < log_start || offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start,
                log_end,
            });
        }
        if offset == log_end {
            return Ok(log_end);
        }
        let index = self.segment_index_of(offset);
        let (position, batch_starts_there) = self.cut_position(index, offset)?;
        tracing::warn!(dir = %self.dir.display(), %offset, %log_end, segment = %self.segments[index].base, "truncating the log");
        self.lower_checkpoints(index, offset, now_ms)?;
        let cut = self.segments[index].log_file().and_then(|log| {
            log.set_len(u64::from(position))?;
            log.sync()
        });
        cut.map_err(|e| self.fence_sync(e))?;
        self.delete_after(index)?;
        if let Err(error) = self.reload_from_disk(now_ms) {
            self.fenced = true;
            self.stale = true;
            return Err(error);
        }
        let new_end = self.log_end_offset();
        assert!(
            new_end <= offset,
            "truncation left records at or after {offset}"
        );
        assert!(
            !batch_starts_there || new_end == offset,
            "truncation at a batch boundary ends the log there"
        );
        self.epochs
            .truncate_from_end(self.fs.as_ref(), &self.dir, new_end)
            .map_err(|e| self.fence_storage(e))?;
        Ok(new_end)
    }

    /// Removes every record and starts the log at `offset` (any offset `>= 0`, below or past
    /// the current end), durably before returning; the epoch cache keeps its latest epoch,
    /// starting at `offset`. See the module docs.
    pub fn truncate_fully_and_start_at(
        &mut self,
        offset: Offset,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        if offset.value() < 0 {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end: self.log_end_offset(),
            });
        }
        tracing::warn!(dir = %self.dir.display(), %offset, log_end = %self.log_end_offset(), "truncating the whole log and starting it at a new offset");
        (self.log_start_offset, self.recovery_point) = (offset, offset);
        self.durable_offset = self.durable_offset.min(offset);
        self.write_checkpoint(now_ms)?;
        let fs = std::sync::Arc::clone(&self.fs);
        let removed = self
            .segments
            .iter()
            .rev()
            .try_for_each(|segment| segment.delete_files(fs.as_ref(), &self.dir));
        let removed =
            removed.and_then(|()| crate::producer::snapshot::remove_all(fs.as_ref(), &self.dir));
        removed.map_err(|e| self.fence(e))?;
        fs.sync_dir(&self.dir).map_err(|e| self.fence_sync(e))?;
        if let Err(error) = self.reload_from_disk(now_ms) {
            self.fenced = true;
            self.stale = true;
            return Err(error);
        }
        assert_eq!(
            (self.log_start_offset, self.log_end_offset()),
            (offset, offset),
            "an emptied log starts and ends at its new start"
        );
        Ok(())
    }

    /// The byte position in segment `index` of the first batch at or after `offset`, and
    /// whether that batch begins at `offset` (else a cleaner gap precedes it, or none is left).
    fn cut_position(&self, index: usize, offset: Offset) -> Result<(u32, bool), StorageError> {
        let segment = &self.segments[index];
        let Some((position, _)) = segment.locate(offset)? else {
            // A cleaned segment with nothing from `offset` on.
            return Ok((segment.size_bytes, false));
        };
        let mut base = None;
        segment.scan_headers(position, |_, header| {
            base = Some(header.base_offset);
            false
        })?;
        let base = Offset(base.expect("locate found a batch there"));
        if base < offset {
            return Err(StorageError::NotBatchBoundary {
                requested: offset,
                batch_base: base,
            });
        }
        Ok((position, base == offset))
    }

    /// Step 1: the cleaner's and the partition's checkpoints no longer reach past the cut.
    fn lower_checkpoints(
        &mut self,
        index: usize,
        offset: Offset,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        let cleaner = &mut self.cleaner;
        if cleaner.cleaned_to > offset || cleaner.gaps_below > offset {
            cleaner.cleaned_to = cleaner.cleaned_to.min(offset);
            cleaner.gaps_below = cleaner.gaps_below.min(offset);
            for horizon in &mut cleaner.horizons {
                horizon.0 = horizon.0.min(offset);
            }
            let written =
                checkpoint::write_cleaner_checkpoint(self.fs.as_ref(), &self.dir, &self.cleaner);
            written.map_err(|e| self.fence(e))?;
        }
        self.recovery_point = self.recovery_point.min(self.segments[index].base);
        self.durable_offset = self.durable_offset.min(offset);
        self.write_checkpoint(now_ms)
    }

    /// Step 3: unlinks the segments after `index`, last first, then fsyncs the directory.
    fn delete_after(&mut self, index: usize) -> Result<(), StorageError> {
        let fs = std::sync::Arc::clone(&self.fs);
        for segment in self.segments[index + 1..].iter().rev() {
            tracing::info!(dir = %self.dir.display(), segment = %segment.base, "deleting a segment past the truncation");
            if let Err(e) = segment.delete_files(fs.as_ref(), &self.dir) {
                return Err(self.fence(e).into());
            }
        }
        fs.sync_dir(&self.dir).map_err(|e| self.fence_sync(e))?;
        Ok(())
    }

    /// Fences on an I/O error inside a `StorageError`; other errors pass through.
    fn fence_storage(&mut self, error: StorageError) -> StorageError {
        match error {
            StorageError::Io(e) => StorageError::Io(self.fence(e)),
            other => other,
        }
    }
}
