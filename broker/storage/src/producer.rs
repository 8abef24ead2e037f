//! Producer state of one partition: for each idempotent or transactional producer its
//! epoch, the sequence numbers and offsets of its last batches, and its open transaction;
//! the partition's open and aborted transactions. Kafka's `ProducerStateManager`.
//!
//! Everything here is derived from the partition's own batches: `apply` is fed every batch
//! as it is appended, and `producer/rebuild.rs` feeds it the batches of the log tail when the
//! log opens, starting from the newest snapshot (`producer/snapshot.rs`). A replicated log
//! that carries the same batches therefore carries this state unchanged.
//!
//! The rules are Kafka's (`ProducerStateManager`, `ProducerAppendInfo`, since KIP-360):
//! - a batch whose producer, epoch and sequence range equal one of the producer's last
//!   [`limits::PRODUCER_BATCHES_RETAINED`] batches is a duplicate: answered with that
//!   batch's offsets, nothing appended;
//! - an epoch older than the producer's is refused (INVALID_PRODUCER_EPOCH);
//! - a newer epoch must start at sequence 0; the same epoch must continue the sequence
//!   (`last + 1`, wrapping at `i32::MAX`), else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - a producer the partition does not know (new, or expired) may start at any sequence,
//!   so the broker never answers UNKNOWN_PRODUCER_ID;
//! - a non-transactional batch from a producer with an open transaction is refused
//!   (INVALID_TXN_STATE); a transactional one opens a transaction at its base offset,
//!   which a COMMIT or ABORT marker closes.

mod rebuild;
pub(crate) use rebuild::rebuild;
pub(crate) mod snapshot;

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::batch::BatchHeader;
use crate::error::AppendError;
use crate::limits;
use crate::offset::Offset;

/// `producerId` of a batch from a producer that is neither idempotent nor transactional.
pub const NO_PRODUCER_ID: i64 = -1;

/// What a control batch's record says (its key's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Abort,
    Commit,
}

impl Marker {
    /// The control record key's type field: ABORT = 0, COMMIT = 1.
    #[must_use]
    pub fn type_code(self) -> i16 {
        match self {
            Marker::Abort => 0,
            Marker::Commit => 1,
        }
    }

    #[must_use]
    pub fn from_type_code(code: i16) -> Option<Marker> {
        match code {
            0 => Some(Marker::Abort),
            1 => Some(Marker::Commit),
            _ => None,
        }
    }
}

/// One of a producer's last batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp_ms: i64,
}

/// One producer, as this partition knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Oldest first, at most `PRODUCER_BATCHES_RETAINED`, all of `epoch`.
    pub batches: VecDeque<BatchMeta>,
    /// The first offset of its open transaction in this partition.
    pub txn_first_offset: Option<i64>,
    /// The coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// The newest batch or marker timestamp (`producer.id.expiration.ms` counts from it).
    pub last_timestamp_ms: i64,
}

impl ProducerEntry {
    fn new(producer_id: i64, epoch: i16) -> Self {
        ProducerEntry {
            producer_id,
            epoch,
            batches: VecDeque::new(),
            txn_first_offset: None,
            coordinator_epoch: -1,
            last_timestamp_ms: -1,
        }
    }

    /// The last sequence number of its newest batch (-1: none).
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }

    fn duplicate_of(&self, header: &BatchHeader) -> Option<BatchMeta> {
        if header.producer_epoch != self.epoch {
            return None;
        }
        let last_seq = last_sequence(header);
        self.batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last_seq)
            .copied()
    }
}

/// An aborted transaction in this partition: Kafka's `AbortedTxn`, what read_committed
/// fetches return so consumers drop the transaction's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of the ABORT marker.
    pub last_offset: i64,
}

/// What `check` found for an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Append,
    /// The batch was appended before: its offsets.
    Duplicate(BatchMeta),
}

/// The producer state of one partition.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProducerStateMap {
    pub(crate) producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset -> producer id (the LSO is the smallest key).
    pub(crate) ongoing: BTreeMap<i64, i64>,
    /// By marker offset, oldest first.
    pub(crate) aborted: VecDeque<AbortedTxn>,
}

/// `baseSequence + lastOffsetDelta`, wrapping past `i32::MAX` as Kafka's sequences do.
fn last_sequence(header: &BatchHeader) -> i32 {
    let base = i64::from(header.base_sequence);
    let last = base + i64::from(header.last_offset_delta);
    if last > i64::from(i32::MAX) {
        (last - i64::from(i32::MAX) - 1) as i32
    } else {
        last as i32
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq == last_seq.wrapping_add(1) || (next_seq == 0 && last_seq == i32::MAX)
}

impl ProducerStateMap {
    #[must_use]
    pub fn new() -> Self {
        ProducerStateMap::default()
    }

    /// Checks the producer fields of the batches of one append (in order) against the
    /// state: a duplicate, a refusal, or go ahead. Changes nothing.
    pub fn check(&self, headers: &[BatchHeader]) -> Result<Check, AppendError> {
        // Later batches of one append see the earlier ones' effect (rare: clients send one
        // batch per partition per request).
        let mut scratch: Vec<ProducerEntry> = Vec::new();
        for header in headers.iter().filter(|h| h.producer_id != NO_PRODUCER_ID) {
            let entry = scratch
                .iter()
                .find(|e| e.producer_id == header.producer_id)
                .or_else(|| self.producers.get(&header.producer_id));
            if let Some(found) = check_one(entry, header)? {
                return Ok(Check::Duplicate(found));
            }
            if headers.len() > 1 {
                let mut next = entry.cloned().unwrap_or_else(|| {
                    ProducerEntry::new(header.producer_id, header.producer_epoch)
                });
                next.record(header);
                scratch.retain(|e| e.producer_id != header.producer_id);
                scratch.push(next);
            }
        }
        Ok(Check::Append)
    }

    /// Checks a marker of `producer_id` at `epoch`: refused if the producer is at a newer
    /// epoch (the coordinator fenced it meanwhile; a zombie coordinator's marker).
    pub fn check_marker(&self, producer_id: i64, epoch: i16) -> Result<(), AppendError> {
        match self.producers.get(&producer_id) {
            Some(entry) if epoch < entry.epoch => Err(AppendError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current: entry.epoch,
            }),
            _ => Ok(()),
        }
    }

    /// Records an appended batch (with its final offsets); `marker` for control batches.
    pub fn apply(&mut self, header: &BatchHeader, marker: Option<(Marker, i32)>) {
        if header.producer_id == NO_PRODUCER_ID {
            return;
        }
        if !self.producers.contains_key(&header.producer_id) {
            self.make_room();
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry::new(header.producer_id, header.producer_epoch));
        match marker {
            Some((marker, coordinator_epoch)) => {
                entry.set_epoch(header.producer_epoch);
                entry.coordinator_epoch = coordinator_epoch;
                entry.last_timestamp_ms = entry.last_timestamp_ms.max(header.max_timestamp);
                if let Some(first_offset) = entry.txn_first_offset.take() {
                    self.ongoing.remove(&first_offset);
                    if marker == Marker::Abort {
                        self.aborted.push_back(AbortedTxn {
                            producer_id: header.producer_id,
                            first_offset,
                            last_offset: header.base_offset,
                        });
                    }
                }
            }
            None => {
                let opened = header.is_transactional() && entry.txn_first_offset.is_none();
                entry.record(header);
                if opened {
                    entry.txn_first_offset = Some(header.base_offset);
                    self.ongoing.insert(header.base_offset, header.producer_id);
                }
            }
        }
    }

    /// At [`limits::PRODUCERS_PER_PARTITION_MAX`], forgets the producer idle the longest
    /// that has no open transaction (it may then start at any sequence, as an expired one).
    fn make_room(&mut self) {
        if self.producers.len() < limits::PRODUCERS_PER_PARTITION_MAX {
            return;
        }
        let idlest = self
            .producers
            .values()
            .filter(|e| e.txn_first_offset.is_none())
            .min_by_key(|e| e.last_timestamp_ms)
            .map(|e| e.producer_id);
        if let Some(producer_id) = idlest {
            tracing::warn!(
                producer_id,
                limit = limits::PRODUCERS_PER_PARTITION_MAX,
                "producer state full; forgetting the idlest producer"
            );
            self.producers.remove(&producer_id);
        }
    }

    /// The last stable offset: the first offset of the oldest open transaction, else
    /// `high_watermark`.
    #[must_use]
    pub fn last_stable_offset(&self, high_watermark: Offset) -> Offset {
        self.ongoing.keys().next().map_or(high_watermark, |&first| {
            Offset(first.min(high_watermark.value()))
        })
    }

    /// The oldest open transaction: (first offset, producer id).
    #[must_use]
    pub fn first_open_transaction(&self) -> Option<(i64, i64)> {
        self.ongoing
            .first_key_value()
            .map(|(&first, &producer_id)| (first, producer_id))
    }

    /// Aborted transactions a read_committed fetch of `[from, upper)` must report: those
    /// ending at or after `from` and starting before `upper`.
    #[must_use]
    pub fn aborted_between(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        let start = self
            .aborted
            .partition_point(|t| t.last_offset < from.value());
        self.aborted
            .range(start..)
            .filter(|t| t.first_offset < upper.value())
            .take(limits::ABORTED_TXNS_PER_READ_MAX)
            .copied()
            .collect()
    }

    /// No producer and no aborted transaction is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.aborted.is_empty()
    }

    /// Every producer, for DescribeProducers.
    pub fn producers(&self) -> impl Iterator<Item = &ProducerEntry> {
        self.producers.values()
    }

    #[must_use]
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Forgets producers without an open transaction whose newest batch is older than
    /// `expiration_ms` (`producer.id.expiration.ms`). Returns how many.
    pub fn expire(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp_ms) <= expiration_ms
        });
        before - self.producers.len()
    }

    /// Drops aborted transactions wholly below the log start offset.
    pub fn truncate_head(&mut self, log_start: Offset) {
        while self
            .aborted
            .front()
            .is_some_and(|t| t.last_offset < log_start.value())
        {
            self.aborted.pop_front();
        }
    }
}

impl ProducerEntry {
    /// Records a data batch of this producer (epoch, sequence, offsets, timestamp).
    fn record(&mut self, header: &BatchHeader) {
        self.set_epoch(header.producer_epoch);
        self.last_timestamp_ms = self.last_timestamp_ms.max(header.max_timestamp);
        if header.base_sequence < 0 {
            return;
        }
        if self.batches.len() == limits::PRODUCER_BATCHES_RETAINED {
            self.batches.pop_front();
        }
        self.batches.push_back(BatchMeta {
            first_seq: header.base_sequence,
            last_seq: last_sequence(header),
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp_ms: header.max_timestamp,
        });
    }
}

/// Kafka's `ProducerAppendInfo.append` checks of one batch against its producer's entry:
/// `Some` when it is a duplicate.
fn check_one(
    entry: Option<&ProducerEntry>,
    header: &BatchHeader,
) -> Result<Option<BatchMeta>, AppendError> {
    let Some(entry) = entry else {
        return Ok(None); // unknown producer: any sequence (KIP-360)
    };
    let (producer_id, epoch, seq) = (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
    );
    if epoch < entry.epoch {
        return Err(AppendError::InvalidProducerEpoch {
            producer_id,
            epoch,
            current: entry.epoch,
        });
    }
    if let Some(found) = entry.duplicate_of(header) {
        return Ok(Some(found));
    }
    if epoch > entry.epoch {
        if seq != 0 {
            return Err(AppendError::OutOfOrderSequence {
                producer_id,
                epoch,
                sequence: seq,
                expected: 0,
            });
        }
    } else if !in_sequence(entry.last_seq(), seq) {
        // (with no batch at this epoch, only markers, `last_seq` is -1: it must start at 0)
        return Err(AppendError::OutOfOrderSequence {
            producer_id,
            epoch,
            sequence: seq,
            expected: entry.last_seq().wrapping_add(1),
        });
    }
    if entry.txn_first_offset.is_some() && !header.is_transactional() {
        return Err(AppendError::InvalidTxnState {
            producer_id,
            reason: "a non-transactional batch from a producer with an open transaction",
        });
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
