//! A follower's side of replication on the log: the leader's batches appended byte for byte
//! (Kafka's `appendAsFollower`), and the leader epochs that the cluster assigns.
//!
//! `Log::append_replicated` keeps every batch as the leader wrote it: its offsets, its
//! `partitionLeaderEpoch`, its timestamps (no LogAppendTime rewrite), its producer fields.
//! Each batch is checked (its CRC, and that it starts where the log or the batch before it
//! ends, a follower's log being the leader's prefix); a batch of another epoch than the
//! cache's latest assigns that epoch at its base offset first (`EpochCache::assign`, Kafka's
//! rules: newer entries it contradicts go; persisted before the batch is written). Producer state is rebuilt from the batches as
//! recovery rebuilds it: sequences and epochs from data batches, transactions ended by the
//! control batches' markers. Nothing is fsynced here: the replica fsyncs (`Log::flush`)
//! before it reports the offsets to its leader.
//!
//! `Log::assign_leader_epoch` is a leader's new epoch at its log end (the epoch the
//! controller gave it, stamped into every batch it appends from then on).

use crate::batch;
use crate::error::{AppendError, StorageError};
use crate::log::{Apply, Log};
use crate::offset::Offset;

/// What a replicated append wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicatedAppend {
    /// Batches written.
    pub batches: usize,
    /// Records written.
    pub records: u64,
    /// The log end offset after it.
    pub log_end_offset: Offset,
}

impl Log {
    /// Appends a leader's batches as they are (module docs); an empty `batches` writes
    /// nothing. Refused, with nothing written, for a batch that fails its CRC or does not
    /// continue the log (`AppendError::NotContiguous`), or a batch larger than the
    /// segment (`AppendError::TooLarge`).
    pub fn append_replicated(
        &mut self,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<ReplicatedAppend, AppendError> {
        if self.fenced {
            return Err(AppendError::Fenced);
        }
        let mut expected = self.log_end_offset().value();
        let mut epochs: Vec<(i32, i64)> = Vec::new();
        let (mut count, mut records) = (0usize, 0u64);
        let limit = self.config.segment_bytes;
        for item in batch::iter_batches(batches) {
            let (header, bytes) = item?;
            batch::validate(bytes)?;
            let batch_bytes = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            if batch_bytes > limit {
                return Err(AppendError::TooLarge { batch_bytes, limit });
            }
            if header.base_offset != expected || header.last_offset() < header.base_offset {
                return Err(AppendError::NotContiguous {
                    base_offset: header.base_offset,
                    log_end_offset: expected,
                });
            }
            // Kafka's `maybeAssignEpochStartOffset`: every batch of another epoch than the
            // latest assigns it; `EpochCache::assign` drops newer entries it contradicts (an
            // epoch this broker began on its own at its log end, or a leadership that
            // appended nothing), which would otherwise answer OffsetForLeaderEpoch wrongly.
            let latest = epochs.last().map_or(self.epochs.current(), |e| e.0);
            if header.partition_leader_epoch != latest {
                epochs.push((header.partition_leader_epoch, header.base_offset));
            }
            expected = header.last_offset() + 1;
            count += 1;
            records += u64::try_from(header.records_count).unwrap_or(0);
        }
        if count == 0 {
            return Ok(ReplicatedAppend {
                batches: 0,
                records: 0,
                log_end_offset: self.log_end_offset(),
            });
        }
        for (epoch, start) in epochs {
            self.epochs
                .assign(self.fs.as_ref(), &self.dir, epoch, Offset(start))
                .map_err(|e| AppendError::Io(std::io::Error::other(e.to_string())))?;
        }
        self.write(batches, now_ms, Apply::Replicated)
            .map_err(|e| AppendError::Io(self.fence(e)))?;
        assert_eq!(
            self.log_end_offset().value(),
            expected,
            "a replicated append ends the log after its last batch"
        );
        self.unflushed_records += records;
        self.first_unflushed_ms.get_or_insert(now_ms);
        Ok(ReplicatedAppend {
            batches: count,
            records,
            log_end_offset: self.log_end_offset(),
        })
    }

    /// A leader's epoch `epoch`, given by the controller, begins at the log end (module
    /// docs): persisted before any batch carries it. No change when it is already the
    /// latest epoch.
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<(), StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        let end = self.log_end_offset();
        self.epochs.assign(self.fs.as_ref(), &self.dir, epoch, end)
    }

    /// The leader epoch cache, oldest first: each epoch and the offset it began at.
    #[must_use]
    pub fn leader_epochs(&self) -> Vec<(i32, i64)> {
        self.epochs
            .entries()
            .iter()
            .map(|e| (e.epoch, e.start_offset.value()))
            .collect()
    }

    /// The header of the last batch, if the log holds one.
    pub fn last_batch_header(&self) -> Result<Option<batch::BatchHeader>, StorageError> {
        let Some(segment) = self.segments.iter().rev().find(|s| s.size_bytes > 0) else {
            return Ok(None);
        };
        let last_offset = Offset(segment.end_offset.value() - 1);
        let Some((position, _)) = segment.locate(last_offset)? else {
            return Ok(None);
        };
        let mut last = None;
        segment.scan_headers(position, |_, header| {
            last = Some(*header);
            true
        })?;
        Ok(last)
    }
}
