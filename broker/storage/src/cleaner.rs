//! Log compaction (`cleanup.policy=compact`), Kafka's LogCleaner for one partition. The
//! caller (the server's cleaner task) picks the dirtiest log by [`Log::dirtiness`] and runs
//! a clean in three steps, so the partition lock is held only at both ends:
//!
//! 1. [`Log::begin_clean`] (under the lock): the cleanable end `E` (the active segment's
//!    base, the last stable offset, the recovery point and `min.compaction.lag.ms`
//!    bound it) and the segments below it, their files shared, not copied.
//! 2. [`CleanPlan::run`] (without the lock, `cleaner/rewrite.rs`): pass 1 maps each key of
//!    the dirty section `[cleaned_to, E)` to its latest offset, within the dedupe buffer
//!    (a dirty section with more keys is cleaned a prefix at a time); pass 2 rewrites the
//!    segments below `E`, grouped so small ones merge, into `<base>.log.cleaned` files,
//!    fsynced.
//! 3. [`Log::complete_clean`] (under the lock): if the log still holds those segments,
//!    each group is swapped in (`cleaner.swap` written durably, old files removed,
//!    `.cleaned` renamed; recovery finishes a swap a crash interrupted), then
//!    `cleaner.checkpoint` records the clean.
//!
//! What is kept: a record whose offset is the latest of its key (or at or past `E`);
//! tombstones until `delete.retention.ms` after the clean that first covered them;
//! control batches (transaction markers) always; records of aborted transactions are
//! removed. Offsets never change: retained records keep their batch's base offset, last
//! offset delta, producer fields and offset deltas (gaps are allowed, as in Kafka).

mod rewrite;

use std::path::PathBuf;
use std::sync::Arc;

use crate::checkpoint::{self, CleanerCheckpoint, SwapManifest};
use crate::config::{LogConfig, RATIO_PPM_ONE};
use crate::error::StorageError;
use crate::io::{Fs, StorageFile};
use crate::log::Log;
use crate::offset::Offset;
use crate::producer::AbortedTxn;
use crate::recovery;
use crate::segment::{Decompress, Segment};

/// How dirty a compacted log is (for picking the dirtiest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dirtiness {
    /// Bytes of segments in the dirty section (not yet in an offset map).
    pub dirty_bytes: u64,
    /// Bytes of every segment below the cleanable end.
    pub cleanable_bytes: u64,
    /// `dirty_bytes / cleanable_bytes` in parts per million.
    pub ratio_ppm: u32,
    /// Due whatever the ratio: `max.compaction.lag.ms` passed, or retained tombstones
    /// reached `delete.retention.ms`.
    pub forced: bool,
}

/// What a clean did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CleanOutcome {
    /// Bytes of the segments rewritten.
    pub bytes_read: u64,
    /// Bytes of the cleaned segments that replaced them.
    pub bytes_written: u64,
    pub records_kept: u64,
    pub records_removed: u64,
    pub segments_before: u32,
    pub segments_after: u32,
    /// The dirty section now starts here.
    pub cleaned_to: Offset,
    /// The log changed while the clean ran (a reopen, retention); nothing was swapped.
    pub abandoned: bool,
}

/// A sealed segment a clean reads: its files are shared, so retention may unlink it
/// meanwhile (`complete_clean` then abandons the clean).
#[derive(Debug, Clone)]
pub(crate) struct SegmentRef {
    pub base: Offset,
    pub end_offset: Offset,
    pub size_bytes: u32,
    pub index_entries: usize,
    /// The segment file's id (`SegmentLog::id`), to find it again at the swap.
    pub id: u64,
    pub log: Arc<dyn StorageFile>,
}

/// Everything `run` needs, taken under the lock by `begin_clean`.
pub struct CleanPlan {
    fs: Arc<dyn Fs>,
    cache: Arc<crate::FileCache>,
    dir: PathBuf,
    config: LogConfig,
    generation: u64,
    /// Every segment with a base below `end`, oldest first.
    segments: Vec<SegmentRef>,
    dirty_start: Offset,
    end: Offset,
    /// Aborted transactions ending below `end`, by marker offset.
    aborted: Vec<AbortedTxn>,
    cleaner: CleanerCheckpoint,
    now_ms: i64,
}

/// One group of old segments and the cleaned segment that replaces it.
pub(crate) struct CleanedGroup {
    pub old: Vec<SegmentRef>,
    pub segment: Segment,
}

/// The fsynced `.cleaned` segments of a run, waiting for `complete_clean`.
pub struct Cleaned {
    generation: u64,
    groups: Vec<CleanedGroup>,
    /// The map covered `[dirty_start, end)`; the next clean starts at `end`.
    end: Offset,
    /// When the earliest tombstone kept only for `delete.retention.ms` may go.
    tombstones_due_ms: Option<i64>,
    outcome: CleanOutcome,
}

impl std::fmt::Debug for CleanPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CleanPlan")
            .field("dir", &self.dir)
            .field("dirty_start", &self.dirty_start)
            .field("end", &self.end)
            .field("segments", &self.segments.len())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Cleaned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cleaned")
            .field("end", &self.end)
            .field("groups", &self.groups.len())
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl Log {
    /// The cleanable end: below the active segment, the last stable offset (no open
    /// transaction is cleaned), the recovery point (only fsynced segments are rewritten)
    /// and the first segment with a record newer than `min.compaction.lag.ms`.
    fn cleanable_end(&self, now_ms: i64) -> Offset {
        let mut end = self
            .active()
            .base
            .min(self.producers.last_stable_offset(self.log_end_offset()))
            .min(self.recovery_point);
        let lag = self.config.min_compaction_lag_ms;
        if lag > 0
            && let Some(young) = self.segments.iter().find(|s| {
                s.max_timestamp_ms >= 0 && now_ms.saturating_sub(s.max_timestamp_ms) < lag
            })
        {
            end = end.min(young.base);
        }
        end
    }

    /// How dirty the log is, if it is compacted and due for a clean: its dirty ratio
    /// reached `min.cleanable.dirty.ratio`, or it is forced (see [`Dirtiness`]).
    #[must_use]
    pub fn dirtiness(&self, now_ms: i64) -> Option<Dirtiness> {
        if !self.config.cleanup_policy.compacts() || self.fenced || self.stale {
            return None;
        }
        let end = self.cleanable_end(now_ms);
        let dirty_start = self.cleaner.cleaned_to.max(self.segments[0].base);
        let below_end = self.segments.iter().filter(|s| s.base < end);
        let cleanable_bytes: u64 = below_end.clone().map(|s| u64::from(s.size_bytes)).sum();
        let mut dirty = below_end.filter(|s| s.end_offset > dirty_start).peekable();
        let oldest_dirty_ms = dirty.peek().map(|s| s.max_timestamp_ms);
        let dirty_bytes: u64 = dirty.map(|s| u64::from(s.size_bytes)).sum();
        let ratio_ppm = if cleanable_bytes == 0 {
            0
        } else {
            (u128::from(dirty_bytes) * u128::from(RATIO_PPM_ONE) / u128::from(cleanable_bytes))
                as u32
        };
        let lagging = oldest_dirty_ms.is_some_and(|ts| {
            ts >= 0 && now_ms.saturating_sub(ts) > self.config.max_compaction_lag_ms
        });
        let tombstones_due = self.tombstones_due_ms.is_some_and(|due| now_ms >= due);
        let forced = (dirty_bytes > 0 && lagging) || (cleanable_bytes > 0 && tombstones_due);
        let due = dirty_bytes > 0 && ratio_ppm >= self.config.min_cleanable_dirty_ratio_ppm;
        (due || forced).then_some(Dirtiness {
            dirty_bytes,
            cleanable_bytes,
            ratio_ppm,
            forced,
        })
    }

    /// Step 1 of a clean: `None` when there is nothing to clean.
    #[must_use]
    pub fn begin_clean(&self, now_ms: i64) -> Option<CleanPlan> {
        self.dirtiness(now_ms)?;
        let end = self.cleanable_end(now_ms);
        let segments: std::io::Result<Vec<SegmentRef>> = self.segments[..self.segments.len() - 1]
            .iter()
            .filter(|s| s.base < end)
            .map(|s| {
                Ok(SegmentRef {
                    base: s.base,
                    end_offset: s.end_offset,
                    size_bytes: s.size_bytes,
                    index_entries: s.index.len().max(s.time_index.len()),
                    id: s.log.id(),
                    log: s.log_file()?,
                })
            })
            .collect();
        // Held for the clean, as a reader holds its slice; a file that cannot be opened
        // now (out of descriptors) leaves the clean to the next tick.
        let segments = segments
            .inspect_err(|error| tracing::warn!(dir = %self.dir.display(), %error, "cannot open segments to clean; retrying later"))
            .ok()?;
        if segments.is_empty() {
            return None;
        }
        let aborted = self
            .producers
            .aborted
            .iter()
            .filter(|t| t.first_offset < end.value())
            .copied()
            .collect();
        Some(CleanPlan {
            fs: Arc::clone(&self.fs),
            cache: Arc::clone(&self.cache),
            dir: self.dir.clone(),
            config: self.config.clone(),
            generation: self.generation,
            dirty_start: self.cleaner.cleaned_to.max(segments[0].base).min(end),
            end,
            segments,
            aborted,
            cleaner: self.cleaner.clone(),
            now_ms,
        })
    }

    /// Step 3 of a clean: swaps the cleaned segments in (under the lock) if the log still
    /// holds the segments they replace; otherwise removes them and reports `abandoned`.
    /// A failed write fences the log (its reopen finishes or undoes the swap from disk).
    pub fn complete_clean(
        &mut self,
        cleaned: Cleaned,
        now_ms: i64,
    ) -> Result<CleanOutcome, StorageError> {
        let mut outcome = cleaned.outcome;
        let positions: Option<Vec<usize>> = cleaned
            .groups
            .iter()
            .map(|g| self.position_of(&g.old))
            .collect();
        let (Some(positions), false) = (
            positions,
            self.fenced || cleaned.generation != self.generation,
        ) else {
            let bases = cleaned.groups.iter().map(|g| g.segment.base);
            discard(self.fs.as_ref(), &self.dir, bases);
            outcome.abandoned = true;
            return Ok(outcome);
        };
        let mut gaps = self.cleaner.clone();
        gaps.gaps_below = gaps.gaps_below.max(cleaned.end);
        checkpoint::write_cleaner_checkpoint(self.fs.as_ref(), &self.dir, &gaps)
            .map_err(|e| self.fence(e))?;
        self.cleaner = gaps;
        // Back to front, so the earlier positions stay valid as groups shrink to one.
        for (group, at) in cleaned.groups.into_iter().zip(positions).rev() {
            self.swap_group(group, at).map_err(|e| self.fence(e))?;
        }
        let mut done = self.cleaner.clone();
        done.record_clean(cleaned.end, now_ms);
        checkpoint::write_cleaner_checkpoint(self.fs.as_ref(), &self.dir, &done)
            .map_err(|e| self.fence(e))?;
        self.cleaner = done;
        self.tombstones_due_ms = cleaned.tombstones_due_ms;
        outcome.cleaned_to = cleaned.end;
        outcome.segments_after = self.segments.len() as u32;
        tracing::info!(dir = %self.dir.display(), cleaned_to = %cleaned.end, read = outcome.bytes_read, written = outcome.bytes_written, removed = outcome.records_removed, "cleaned log");
        Ok(outcome)
    }

    /// All three steps in one call (tests, and logs the caller cleans in place).
    pub fn clean(
        &mut self,
        now_ms: i64,
        dedupe_buffer_bytes: u64,
        decompress: Option<Decompress<'_>>,
    ) -> Result<Option<CleanOutcome>, StorageError> {
        let Some(plan) = self.begin_clean(now_ms) else {
            return Ok(None);
        };
        let cleaned = plan.run(dedupe_buffer_bytes, decompress)?;
        self.complete_clean(cleaned, now_ms).map(Some)
    }

    /// Index in `segments` of the first of `old`, if the log still holds exactly them.
    fn position_of(&self, old: &[SegmentRef]) -> Option<usize> {
        let at = self.segments.iter().position(|s| s.base == old[0].base)?;
        let same = self
            .segments
            .get(at..at + old.len())?
            .iter()
            .zip(old)
            .all(|(s, o)| s.log.id() == o.id && s.size_bytes == o.size_bytes);
        (same && at + old.len() < self.segments.len()).then_some(at)
    }

    /// Swaps one cleaned group in: the manifest is the commit point.
    fn swap_group(&mut self, group: CleanedGroup, at: usize) -> std::io::Result<()> {
        let manifest = SwapManifest {
            new_base: group.segment.base,
            old: group.old.iter().map(|s| s.base).collect(),
        };
        checkpoint::write_swap(self.fs.as_ref(), &self.dir, &manifest)?;
        recovery::swap_in(
            self.fs.as_ref(),
            &self.dir,
            manifest.new_base,
            &manifest.old,
        )?;
        checkpoint::remove_swap(self.fs.as_ref(), &self.dir)?;
        let mut segment = group.segment.renamed(&self.files(), &self.dir);
        let end = group.old.last().expect("a group is never empty").end_offset;
        assert!(
            segment.end_offset <= end,
            "a cleaned segment ends within its group"
        );
        segment.end_offset = end;
        // Readers holding the old files keep them (unlinked) until they drop them.
        self.segments.splice(at..at + group.old.len(), [segment]);
        Ok(())
    }
}

/// Removes the `.cleaned` files of an abandoned clean (the cleaned segments at `bases`).
fn discard(fs: &dyn Fs, dir: &std::path::Path, bases: impl Iterator<Item = Offset>) {
    for base in bases {
        for ext in [
            crate::segment::LOG_EXT,
            crate::segment::INDEX_EXT,
            crate::segment::TIME_INDEX_EXT,
        ] {
            let name = format!("{ext}{}", recovery::CLEANED_SUFFIX);
            let path = crate::segment::segment_path(dir, base, &name);
            if let Err(error) = fs.remove(&path)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), %error, "cannot remove an abandoned cleaned segment");
            }
        }
    }
}
