//! [`ReplicaLog`]: what replication needs to know of one partition replica's log. Batch
//! headers (offsets, the leader epoch that appended them, the producer id and sequence, an
//! opaque payload), the leader-epoch cache (epoch -> start offset, Kafka's
//! `LeaderEpochFileCache`) and the durable offset (below it the bytes are fsynced).
//!
//! In the simulator this is the whole log, and [`CrashImage`] says what of it a crash
//! leaves, as `sluice_storage`'s `FaultyFs` does for real files: only what was fsynced,
//! everything written, or everything written but the last unsynced write torn (recovery
//! drops a torn batch: its CRC fails). In the server the state machine's log mirrors
//! `sluice_storage::Log`: every change here is also an [`crate::Effect`] the server carries
//! out on the real log.
//!
//! The epoch cache follows Kafka's rules: an entry is assigned when a batch of a newer
//! epoch is appended (a follower) or when a replica becomes leader at its log end; assigning
//! drops the entries at or after the new start offset; truncation drops the entries that
//! start at or after the new log end.

use crate::limits;

/// One record batch, as replication sees it (its records' bytes stay in storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Batch {
    /// Its first offset.
    pub base_offset: i64,
    /// Its last offset (`base_offset + records - 1`).
    pub last_offset: i64,
    /// The leader epoch of the leader that appended it (`partitionLeaderEpoch`).
    pub leader_epoch: i32,
    /// Its idempotent producer's id, or -1.
    pub producer_id: i64,
    /// Its first record's sequence, or -1.
    pub base_sequence: i32,
    /// What it carries, opaque here (the simulator's record identity; the server's CRC).
    pub payload: u64,
}

impl Batch {
    /// How many records it holds.
    #[must_use]
    pub const fn record_count(&self) -> i64 {
        self.last_offset - self.base_offset + 1
    }

    /// Its last record's sequence (idempotent batches).
    #[must_use]
    pub const fn last_sequence(&self) -> i32 {
        self.base_sequence + (self.record_count() as i32) - 1
    }
}

/// One leader-epoch cache entry: `epoch` began at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// Its first offset.
    pub start_offset: i64,
}

/// Which bytes of a log survive a crash (`sluice_storage::io::faulty::CrashMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashImage {
    /// Only what was fsynced (power loss).
    DurableOnly,
    /// Everything written (a process crash: the page cache survives).
    AllWritten,
    /// Everything written, but the last unsynced batch lands half and recovery drops it.
    TornLastWrite,
}

/// A change the log refuses: always a caller's (or a peer's) mistake, never applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// A batch whose base offset is not the log end offset, or whose offsets go backwards.
    #[error("batch at {base_offset} does not start at the log end offset {log_end_offset}")]
    NotContiguous {
        /// The batch's base offset.
        base_offset: i64,
        /// The log's end.
        log_end_offset: i64,
    },
    /// A batch whose leader epoch is below the log's latest.
    #[error("batch of leader epoch {epoch} after leader epoch {latest}")]
    EpochBackwards {
        /// The batch's epoch.
        epoch: i32,
        /// The log's latest epoch.
        latest: i32,
    },
    /// The model holds [`limits::LOG_BATCHES_MAX`] batches.
    #[error("the log holds LOG_BATCHES_MAX ({}) batches", limits::LOG_BATCHES_MAX)]
    Full,
}

/// One replica's log (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaLog {
    batches: Vec<Batch>,
    epochs: Vec<EpochEntry>,
    durable_offset: i64,
    /// The log end below the first batch kept: 0 for a whole log (the simulator); in the
    /// server, which keeps only the newest batches ([`ReplicaLog::tail`]), what lies below
    /// is known by its end offset and its last batch's epoch only.
    floor: i64,
    /// The epoch of the last batch below `floor`, if there is one.
    floor_epoch: Option<i32>,
    /// At most this many batches are kept (`None`: every one, the simulator's whole log).
    keep: Option<usize>,
}

impl ReplicaLog {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The log recovery rebuilds from `batches` (a crash image): every batch checked, the
    /// epoch cache rebuilt from their headers, everything durable (recovery fsyncs).
    ///
    /// # Errors
    /// The first batch that does not follow the one before.
    pub fn recover(batches: &[Batch]) -> Result<Self, LogError> {
        let mut log = Self::new();
        for batch in batches {
            log.append(*batch)?;
        }
        log.durable_offset = log.log_end_offset();
        Ok(log)
    }

    /// The server's view of a real log (module docs): its end, durable offset (recovery
    /// fsynced it), leader-epoch cache and last batch, keeping from now on only the newest
    /// [`limits::TAIL_BATCHES_KEPT`] batch headers (the bytes, and the producer state, are
    /// the storage log's).
    #[must_use]
    pub fn tail(log_end_offset: i64, epochs: &[EpochEntry], last_batch_epoch: Option<i32>) -> Self {
        let log_end_offset = log_end_offset.max(0);
        Self {
            batches: Vec::new(),
            epochs: epochs
                .iter()
                .filter(|e| e.start_offset <= log_end_offset)
                .copied()
                .collect(),
            durable_offset: log_end_offset,
            floor: log_end_offset,
            floor_epoch: last_batch_epoch,
            keep: Some(limits::TAIL_BATCHES_KEPT),
        }
    }

    /// The batches a crash now would leave, per `image`.
    #[must_use]
    pub fn crash_image(&self, image: CrashImage) -> Vec<Batch> {
        let durable = self
            .batches
            .partition_point(|b| b.last_offset < self.durable_offset);
        match image {
            CrashImage::DurableOnly => self.batches[..durable].to_vec(),
            CrashImage::AllWritten => self.batches.clone(),
            CrashImage::TornLastWrite => {
                let keep = if self.batches.len() > durable {
                    self.batches.len() - 1
                } else {
                    self.batches.len()
                };
                self.batches[..keep].to_vec()
            }
        }
    }

    /// The next offset to assign (LEO).
    #[must_use]
    pub fn log_end_offset(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.floor, |b| b.last_offset + 1)
    }

    /// Below this offset the log is fsynced.
    #[must_use]
    pub const fn durable_offset(&self) -> i64 {
        self.durable_offset
    }

    /// Every batch, in offset order.
    #[must_use]
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    /// The leader-epoch cache, in epoch order.
    #[must_use]
    pub fn epochs(&self) -> &[EpochEntry] {
        &self.epochs
    }

    /// The latest epoch in the cache (Kafka's `latestEpoch`).
    #[must_use]
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.last().map(|e| e.epoch)
    }

    /// The leader epoch of the last batch: a follower's `LastFetchedEpoch`.
    #[must_use]
    pub fn last_batch_epoch(&self) -> Option<i32> {
        self.batches
            .last()
            .map(|b| b.leader_epoch)
            .or(self.floor_epoch)
    }

    /// The batch holding `offset`.
    #[must_use]
    pub fn batch_at(&self, offset: i64) -> Option<&Batch> {
        let i = self.batches.partition_point(|b| b.last_offset < offset);
        self.batches.get(i).filter(|b| b.base_offset <= offset)
    }

    /// Up to `max` batches from the one holding `offset`.
    #[must_use]
    pub fn read(&self, offset: i64, max: usize) -> &[Batch] {
        let i = self.batches.partition_point(|b| b.last_offset < offset);
        &self.batches[i..self.batches.len().min(i.saturating_add(max))]
    }

    /// Kafka's `endOffsetFor(epoch)`: the largest epoch not above `epoch` this log knows and
    /// where it ends (the next epoch's start, or the log end for the latest). `None` when
    /// `epoch` is above the latest (the asker knows an epoch this log never saw). An epoch
    /// below the earliest gives `(epoch, first start)`.
    #[must_use]
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        let latest = self.latest_epoch()?;
        if epoch == latest {
            return Some((epoch, self.log_end_offset()));
        }
        let higher = self.epochs.iter().find(|e| e.epoch > epoch)?;
        let floor = self.epochs.iter().rev().find(|e| e.epoch <= epoch);
        Some((floor.map_or(epoch, |f| f.epoch), higher.start_offset))
    }

    /// The last [`limits::PRODUCER_BATCHES_KEPT`] batches of `producer_id`, newest first
    /// (the model scans; the server's log keeps producer state).
    pub fn producer_batches(&self, producer_id: i64) -> impl Iterator<Item = &Batch> {
        self.batches
            .iter()
            .rev()
            .filter(move |b| b.producer_id == producer_id)
            .take(limits::PRODUCER_BATCHES_KEPT)
    }

    /// Appends `batch` (at the log end, its epoch not below the latest) and assigns its
    /// epoch in the cache if it is new.
    pub(crate) fn append(&mut self, batch: Batch) -> Result<(), LogError> {
        let leo = self.log_end_offset();
        if batch.base_offset != leo || batch.last_offset < batch.base_offset {
            return Err(LogError::NotContiguous {
                base_offset: batch.base_offset,
                log_end_offset: leo,
            });
        }
        // Newer epochs that hold no records (a leadership that appended nothing, or a
        // broker's own epoch begun at its log end when it opened the log) give way to an
        // older epoch's batches at this end, as Kafka's `assign` truncates them; an older
        // epoch after records of a newer one is refused.
        if let Some(latest) = self.latest_epoch()
            && batch.leader_epoch < latest
        {
            let newer_hold_records = self
                .epochs
                .iter()
                .any(|e| e.epoch > batch.leader_epoch && e.start_offset < batch.base_offset);
            if newer_hold_records {
                return Err(LogError::EpochBackwards {
                    epoch: batch.leader_epoch,
                    latest,
                });
            }
        }
        if self.keep.is_none() && self.batches.len() >= limits::LOG_BATCHES_MAX {
            return Err(LogError::Full);
        }
        if self.latest_epoch() != Some(batch.leader_epoch) {
            self.assign(batch.leader_epoch, batch.base_offset);
        }
        self.batches.push(batch);
        if let Some(keep) = self.keep
            && self.batches.len() > keep
        {
            let dropped = self.batches.len() - keep;
            let last_dropped = self.batches[dropped - 1];
            self.floor = last_dropped.last_offset + 1;
            self.floor_epoch = Some(last_dropped.leader_epoch);
            self.batches.drain(..dropped);
        }
        Ok(())
    }

    /// A tail-only log (the server's) learns that its real log now ends at
    /// `log_end_offset`, its last batch of `last_batch_epoch`: the batches kept are dropped
    /// (the storage log has them). No change for a whole log, or an end not past this one.
    pub(crate) fn observe(&mut self, log_end_offset: i64, last_batch_epoch: Option<i32>) {
        if self.keep.is_none() || log_end_offset <= self.log_end_offset() {
            return;
        }
        self.batches.clear();
        self.floor = log_end_offset;
        self.floor_epoch = last_batch_epoch;
    }

    /// A new leader's epoch begins at its log end (Kafka's `maybeAssignEpochStartOffset`).
    pub(crate) fn begin_epoch(&mut self, epoch: i32) {
        if self.latest_epoch().is_none_or(|latest| epoch > latest) {
            self.assign(epoch, self.log_end_offset());
        }
    }

    /// The storage log's rule (`sluice_storage`'s `EpochCache::assign`): newer entries, or
    /// ones starting at or after `start_offset`, give way; `epoch` begins there unless the
    /// latest entry left is `epoch` itself.
    fn assign(&mut self, epoch: i32, start_offset: i64) {
        while self
            .epochs
            .last()
            .is_some_and(|e| e.epoch > epoch || e.start_offset >= start_offset)
        {
            self.epochs.pop();
        }
        if self.epochs.last().map(|e| e.epoch) != Some(epoch) {
            self.epochs.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
    }

    /// Removes every batch at or above `offset` (a batch holding it goes whole), the epoch
    /// entries that start at or after the new end, and lowers the durable offset to it.
    /// Returns the new log end offset.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> i64 {
        let keep = self.batches.partition_point(|b| b.last_offset < offset);
        self.batches.truncate(keep);
        if self.batches.is_empty() && offset < self.floor {
            // Below the batches kept (the server's tail): the caller truncates at a batch
            // boundary (an epoch's start) and the storage log says where it really ended.
            self.floor = offset.max(0);
            self.floor_epoch = self
                .epochs
                .iter()
                .rev()
                .find(|e| e.start_offset < self.floor)
                .map(|e| e.epoch);
        }
        let leo = self.log_end_offset();
        while self.epochs.last().is_some_and(|e| e.start_offset >= leo) {
            self.epochs.pop();
        }
        self.durable_offset = self.durable_offset.min(leo);
        leo
    }

    /// The log is fsynced below `offset` (at most its end).
    pub(crate) fn mark_durable(&mut self, offset: i64) {
        let offset = offset.min(self.log_end_offset());
        self.durable_offset = self.durable_offset.max(offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, records: i64, epoch: i32) -> Batch {
        Batch {
            base_offset: base,
            last_offset: base + records - 1,
            leader_epoch: epoch,
            producer_id: -1,
            base_sequence: -1,
            payload: base as u64,
        }
    }

    fn log(batches: &[Batch]) -> ReplicaLog {
        ReplicaLog::recover(batches).unwrap()
    }

    #[test]
    fn end_offset_for_epoch_is_kafkas() {
        let l = log(&[
            batch(0, 2, 1),
            batch(2, 3, 1),
            batch(5, 1, 3),
            batch(6, 4, 4),
        ]);
        assert_eq!(l.end_offset_for_epoch(4), Some((4, 10)));
        assert_eq!(l.end_offset_for_epoch(3), Some((3, 6)));
        // Epoch 2 never led here: the floor is 1, which ended where 3 began.
        assert_eq!(l.end_offset_for_epoch(2), Some((1, 5)));
        assert_eq!(l.end_offset_for_epoch(0), Some((0, 0)));
        assert_eq!(l.end_offset_for_epoch(5), None);
    }

    #[test]
    fn a_leader_epoch_begins_at_the_log_end_and_truncation_cuts_the_cache() {
        let mut l = log(&[batch(0, 2, 1), batch(2, 3, 2)]);
        l.begin_epoch(5);
        assert_eq!(l.latest_epoch(), Some(5));
        assert_eq!(l.end_offset_for_epoch(2), Some((2, 5)));
        assert_eq!(l.truncate_to(3), 2, "the batch holding 3 goes whole");
        assert_eq!(
            l.epochs(),
            &[EpochEntry {
                epoch: 1,
                start_offset: 0
            }]
        );
        assert!(l.append(batch(1, 1, 1)).is_err());
        assert!(l.append(batch(2, 1, 0)).is_err());
        l.append(batch(2, 1, 6)).unwrap();
        assert_eq!(l.end_offset_for_epoch(1), Some((1, 2)));
    }

    #[test]
    fn crash_images_keep_what_each_promises() {
        let mut l = log(&[batch(0, 2, 1)]);
        l.append(batch(2, 1, 1)).unwrap();
        l.append(batch(3, 1, 1)).unwrap();
        l.mark_durable(3);
        assert_eq!(l.crash_image(CrashImage::DurableOnly).len(), 2);
        assert_eq!(l.crash_image(CrashImage::TornLastWrite).len(), 2);
        assert_eq!(l.crash_image(CrashImage::AllWritten).len(), 3);
        l.mark_durable(4);
        assert_eq!(l.crash_image(CrashImage::TornLastWrite).len(), 3);
    }
}
