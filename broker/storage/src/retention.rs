//! Periodic work off the append path. `Log::tick_without_retention`: `segment.ms` rolls,
//! `flush.ms` and rolled-segment flushes, persisting the recovery point.
//! `Log::enforce_retention`: retention by time and size (whole segments only, advancing
//! the log start offset). `Log::tick` does both. Also `advance_log_start_offset`.

use crate::error::StorageError;
use crate::limits;
use crate::log::Log;
use crate::offset::Offset;
use crate::segment::Segment;

/// What `tick` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TickOutcome {
    /// The active segment rolled (`segment.ms`, or it had expired by `retention.ms`).
    pub rolled: bool,
    /// A `flush.ms` flush ran.
    pub flushed: bool,
    /// Segments deleted by retention.
    pub deleted_segments: u32,
    pub log_start_offset: Offset,
}

/// A segment as retention sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentStat {
    pub size_bytes: u64,
    /// Largest batch timestamp, `-1` if none (such a segment never expires by time).
    pub max_timestamp_ms: i64,
}

/// How many of the oldest segments retention deletes. The last (active) segment is never
/// counted. Time: a prefix of segments whose newest timestamp is older than `retention_ms`.
/// Size: oldest first while the log stays at or above `retention_bytes` without them.
pub(crate) fn segments_to_delete(
    stats: &[SegmentStat],
    retention_ms: i64,
    retention_bytes: i64,
    now_ms: i64,
) -> usize {
    let sealed = &stats[..stats.len().saturating_sub(1)];
    let by_time = if retention_ms < 0 {
        0
    } else {
        let expired = |s: &&SegmentStat| {
            s.max_timestamp_ms >= 0 && now_ms.saturating_sub(s.max_timestamp_ms) > retention_ms
        };
        sealed.iter().take_while(expired).count()
    };
    let by_size = if retention_bytes < 0 {
        0
    } else {
        let total: u64 = stats.iter().map(|s| s.size_bytes).sum();
        let mut excess = total.saturating_sub(retention_bytes as u64);
        sealed
            .iter()
            .take_while(|s| {
                let deletable = s.size_bytes <= excess;
                excess = excess.saturating_sub(s.size_bytes);
                deletable && total > retention_bytes as u64
            })
            .count()
    };
    by_time.max(by_size)
}

impl Log {
    /// All periodic work: [`Log::tick_without_retention`] then [`Log::enforce_retention`].
    /// Refused when fenced.
    pub fn tick(&mut self, now_ms: i64) -> Result<TickOutcome, StorageError> {
        let mut outcome = self.tick_without_retention(now_ms)?;
        let (rolled, deleted_segments) = self.retention(now_ms)?;
        outcome.rolled |= rolled;
        outcome.deleted_segments = deleted_segments;
        outcome.log_start_offset = self.log_start_offset;
        Ok(outcome)
    }

    /// Frequent periodic work (every ~100 ms - 1 s): `segment.ms` rolls, `flush.ms`
    /// flushes, fsync of rolled segments, persisting the recovery point. No retention.
    pub fn tick_without_retention(&mut self, now_ms: i64) -> Result<TickOutcome, StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        let mut outcome = TickOutcome::default();
        if self.active().is_due_to_roll(&self.config, now_ms) {
            self.roll().map_err(|e| self.fence(e))?;
            outcome.rolled = true;
        }
        let flush_due = self.config.flush_ms != u64::MAX
            && self
                .first_unflushed_ms
                .is_some_and(|t| now_ms.saturating_sub(t) >= self.config.flush_ms as i64);
        if flush_due {
            self.flush()?;
            outcome.flushed = true;
        } else {
            self.flush_sealed()?;
        }
        let checkpoint_due = now_ms.saturating_sub(self.last_checkpoint_ms)
            >= limits::RECOVERY_POINT_CHECKPOINT_INTERVAL_MS;
        if self.recovery_point != self.checkpointed_recovery_point && checkpoint_due {
            self.write_checkpoint(now_ms)?;
            // The producer state as of the log end, so a crash replays only what follows.
            self.snapshot_producers().map_err(|e| self.fence(e))?;
        }
        if checkpoint_due {
            let expired = self
                .producers
                .expire(now_ms, self.config.producer_id_expiration_ms);
            if expired > 0 {
                tracing::debug!(dir = %self.dir.display(), expired, "expired idle producers");
            }
        }
        outcome.log_start_offset = self.log_start_offset;
        Ok(outcome)
    }

    /// Retention by `retention.ms` and `retention.bytes` (Kafka runs it every
    /// `log.retention.check.interval.ms`): rolls an active segment whose data all expired,
    /// deletes whole segments, advances and persists the log start offset. Returns the
    /// number of segments deleted. A fenced log still deletes whole sealed segments (that
    /// needs no write to the active segment), so a full disk can free itself; it neither
    /// rolls nor insists on the checkpoint (see `delete_oldest`).
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<u32, StorageError> {
        Ok(self.retention(now_ms)?.1)
    }

    /// Whether the active segment rolled, and how many segments were deleted.
    fn retention(&mut self, now_ms: i64) -> Result<(bool, u32), StorageError> {
        if self.fenced {
            return Ok((false, self.apply_retention(now_ms)?));
        }
        let rolled = self.active_expired(now_ms);
        if rolled {
            self.roll().map_err(|e| self.fence(e))?;
        }
        Ok((rolled, self.apply_retention(now_ms)?))
    }

    /// The active segment holds data and all of it is past `retention.ms`.
    fn active_expired(&self, now_ms: i64) -> bool {
        let active = self.active();
        self.config.cleanup_policy.deletes()
            && self.config.retention_ms >= 0
            && active.size_bytes > 0
            && active.max_timestamp_ms >= 0
            && now_ms.saturating_sub(active.max_timestamp_ms) > self.config.retention_ms
    }

    /// fsyncs rolled segments not yet synced (Kafka flushes a segment after it rolls);
    /// the recovery point advances to the active segment's base.
    fn flush_sealed(&mut self) -> Result<(), StorageError> {
        let sealed = self.segments.len() - 1;
        let result = self.segments[..sealed]
            .iter_mut()
            .filter(|s| s.needs_sync)
            .try_for_each(Segment::flush);
        result.map_err(|e| self.fence_sync(e))?;
        self.recovery_point = self.recovery_point.max(self.active().base);
        Ok(())
    }

    fn apply_retention(&mut self, now_ms: i64) -> Result<u32, StorageError> {
        let stats: Vec<SegmentStat> = self
            .segments
            .iter()
            .map(|s| SegmentStat {
                size_bytes: u64::from(s.size_bytes),
                max_timestamp_ms: s.max_timestamp_ms,
            })
            .collect();
        // `cleanup.policy=compact` alone: the cleaner, not retention, shrinks the log.
        let by_config = if self.config.cleanup_policy.deletes() {
            segments_to_delete(
                &stats,
                self.config.retention_ms,
                self.config.retention_bytes,
                now_ms,
            )
        } else {
            0
        };
        // Segments wholly below the log start offset (a crash between persisting a new log
        // start offset and unlinking the segments below it leaves them behind).
        let sealed = &self.segments[..self.segments.len() - 1];
        let below_start = sealed
            .iter()
            .take_while(|s| s.end_offset <= self.log_start_offset)
            .count();
        let count = by_config.max(below_start);
        if count > 0 {
            let new_start = self.segments[count].base;
            self.delete_oldest(count, new_start, now_ms)?;
        }
        Ok(count as u32)
    }

    /// Raises the log start offset to `new_start`, persists it, then unlinks the `count`
    /// oldest segments (readers holding them keep their open files). A fenced log unlinks
    /// first and writes the checkpoint only if it can: on a full disk the checkpoint may
    /// not fit before the segments are gone, and a crash in between is safe because
    /// recovery takes the log start offset from the first segment left.
    fn delete_oldest(
        &mut self,
        count: usize,
        new_start: Offset,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        assert!(
            count < self.segments.len(),
            "never delete the active segment"
        );
        self.log_start_offset = self.log_start_offset.max(new_start);
        self.producers.truncate_head(self.log_start_offset);
        self.epochs.truncate_head(self.log_start_offset);
        if self.fenced {
            return self.delete_oldest_fenced(count, now_ms);
        }
        self.write_checkpoint(now_ms)?;
        let removed: Vec<Segment> = self.segments.drain(..count).collect();
        for segment in &removed {
            tracing::info!(dir = %self.dir.display(), segment = %segment.base, bytes = segment.size_bytes, "deleting segment");
            segment
                .delete_files(self.fs.as_ref(), &self.dir)
                .map_err(|e| self.fence(e))?;
        }
        self.fs.sync_dir(&self.dir).map_err(|e| self.fence(e))?;
        Ok(())
    }

    /// `delete_oldest` on a fenced log: errors are returned, never fence again.
    fn delete_oldest_fenced(&mut self, count: usize, now_ms: i64) -> Result<(), StorageError> {
        let removed: Vec<Segment> = self.segments.drain(..count).collect();
        for segment in &removed {
            tracing::info!(dir = %self.dir.display(), segment = %segment.base, bytes = segment.size_bytes, "deleting segment of a fenced log");
            segment.delete_files(self.fs.as_ref(), &self.dir)?;
        }
        self.fs.sync_dir(&self.dir)?;
        if let Err(error) = self.write_checkpoint(now_ms) {
            tracing::debug!(dir = %self.dir.display(), %error, "checkpoint of a fenced log not written");
        }
        Ok(())
    }

    /// Moves the log start offset forward (DeleteRecords) and deletes segments wholly
    /// below it; persisted before returning. Returns the new log start offset.
    pub fn advance_log_start_offset(
        &mut self,
        offset: Offset,
        now_ms: i64,
    ) -> Result<Offset, StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        let log_end = self.log_end_offset();
        if offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                requested: offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        let below = self.segments[..self.segments.len() - 1]
            .iter()
            .take_while(|s| s.end_offset <= offset)
            .count();
        if below > 0 {
            self.delete_oldest(below, offset, now_ms)?;
        } else {
            self.log_start_offset = offset;
            self.epochs.truncate_head(offset);
            self.write_checkpoint(now_ms)?;
        }
        Ok(self.log_start_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size_bytes: u64, max_timestamp_ms: i64) -> SegmentStat {
        SegmentStat {
            size_bytes,
            max_timestamp_ms,
        }
    }

    #[test]
    fn time_retention_deletes_an_expired_prefix_never_the_active() {
        let stats = [stat(10, 100), stat(10, 200), stat(10, 900), stat(10, 150)];
        assert_eq!(segments_to_delete(&stats, 500, -1, 1000), 2);
        assert_eq!(segments_to_delete(&stats, 500, -1, 100_000), 3);
        assert_eq!(segments_to_delete(&stats, -1, -1, 100_000), 0);
        assert_eq!(segments_to_delete(&[stat(10, 1)], 0, -1, 100), 0);
        assert_eq!(
            segments_to_delete(&[stat(10, -1), stat(1, 5)], 0, -1, 100),
            0
        );
    }

    #[test]
    fn size_retention_keeps_at_least_retention_bytes() {
        let stats = [stat(100, 0), stat(100, 0), stat(100, 0), stat(50, 0)];
        assert_eq!(segments_to_delete(&stats, -1, 350, 0), 0);
        assert_eq!(segments_to_delete(&stats, -1, 250, 0), 1);
        assert_eq!(segments_to_delete(&stats, -1, 150, 0), 2);
        assert_eq!(segments_to_delete(&stats, -1, 0, 0), 3);
    }
}
