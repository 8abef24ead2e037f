//! The records of the transaction log (our `__transaction_state`) and their byte layout.
//!
//! The server appends each [`TxnRecord`] to an internal partition as a Kafka record:
//! [`TxnRecord::encode_key`] and [`TxnRecord::encode_value`] (`None` is a tombstone). On
//! start it reads them back with [`decode`] and hands them, in log order, to
//! [`crate::Coordinator::load`]; the last record per key wins.
//!
//! # Byte layout, version 0 (all integers big-endian, signed)
//!
//! A string is `i16 len` then `len` bytes of UTF-8; a nullable string uses `len = -1` for
//! null. A count is `i32`. Decoding is strict: unknown versions, kinds or states, negative
//! lengths, strings or counts over [`crate::limits`], unsorted or repeated entries and
//! trailing bytes are errors, and no count is trusted for an allocation before the bytes
//! it needs are known to be present.
//!
//! Key:
//! ```text
//! i16 version = 0
//! i16 kind    = 0 producer-id block | 1 transaction
//! kind 1 only: string transactional_id (1..=TRANSACTIONAL_ID_BYTES_MAX bytes)
//! ```
//! Value of kind 0 (never a tombstone):
//! ```text
//! i16 version = 0
//! i64 next_producer_id     (end of the reserved block: ids below it may be in use)
//! ```
//! Value of kind 1 (absent = tombstone: the transactional id expired):
//! ```text
//! i16 version = 0
//! i64 producer_id
//! i64 last_producer_id     (-1 = none)
//! i16 producer_epoch
//! i16 last_producer_epoch  (-1 = none)
//! i32 timeout_ms
//! i8  state                (Kafka's ids: Empty 0, Ongoing 1, PrepareCommit 2,
//!                           PrepareAbort 3, CompleteCommit 4, CompleteAbort 5, Dead 6)
//! i64 txn_start_ms         (-1 = no transaction started since the last epoch bump)
//! i64 last_update_ms
//! i32 partition_count (<= TXN_PARTITIONS_MAX), strictly ascending by (topic, partition):
//!     string topic (<= TOPIC_NAME_BYTES_MAX), i32 partition
//! i32 group_count (<= TXN_GROUPS_MAX), strictly ascending by group id:
//!     string group_id (<= GROUP_ID_BYTES_MAX)
//!     i32 offset_count (all groups together <= PENDING_OFFSETS_MAX), strictly ascending:
//!         string topic, i32 partition, i64 committed_offset, i32 leader_epoch,
//!         nullable string metadata (<= OFFSET_METADATA_BYTES_MAX)
//! ```

use sluice_kafka::bytes::{Limit, Reader, Writer};

use crate::error::DecodeError;
use crate::limits;
use crate::state::TxnState;

/// A producer id; `-1` ([`ProducerId::NONE`]) means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
    pub const NONE: ProducerId = ProducerId(-1);
}

/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A topic-partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

/// One offset a transaction will commit for a group when it commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    /// The partition.
    pub tp: TopicPartition,
    /// Next offset to consume.
    pub committed_offset: i64,
    /// Leader epoch, -1 if unknown.
    pub leader_epoch: i32,
    /// Client metadata string.
    pub metadata: Option<String>,
}

/// The offsets a transaction holds for one consumer group (sorted by partition, one per
/// partition). Empty right after AddOffsetsToTxn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffsets {
    /// Consumer group id.
    pub group_id: String,
    /// The offsets, strictly ascending by partition.
    pub offsets: Vec<PendingOffset>,
}

/// Everything the coordinator knows about one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// The current producer id.
    pub producer_id: ProducerId,
    /// The producer id before the last rotation ([`ProducerId::NONE`] if none).
    pub last_producer_id: ProducerId,
    /// The current epoch.
    pub producer_epoch: i16,
    /// The epoch before the last KIP-360 bump (-1 if none): a retried InitProducerId
    /// with it gets the current epoch back instead of being fenced.
    pub last_producer_epoch: i16,
    /// The producer's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// Partitions in the transaction, strictly ascending.
    pub partitions: Vec<TopicPartition>,
    /// Offsets to commit with the transaction, strictly ascending by group id.
    pub pending_offsets: Vec<PendingOffsets>,
    /// When the transaction became Ongoing, in ms since the Unix epoch (-1 if none).
    pub txn_start_ms: i64,
    /// When the metadata last changed, in ms since the Unix epoch.
    pub last_update_ms: i64,
}

/// One record of the transaction log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnRecord {
    /// The producer-id allocator's high-water mark: ids below it may have been handed out.
    ProducerIdBlock {
        /// The end of the reserved block (the first id not reserved).
        next_producer_id: i64,
    },
    /// A transactional id's metadata.
    Metadata(TxnMetadata),
    /// A transactional id expired.
    Tombstone {
        /// The expired id.
        transactional_id: String,
    },
}

const VERSION: i16 = 0;
const KIND_BLOCK: i16 = 0;
const KIND_TXN: i16 = 1;

impl TxnRecord {
    /// The transactional id the record is about (`None` for the producer-id block).
    pub fn transactional_id(&self) -> Option<&str> {
        match self {
            TxnRecord::ProducerIdBlock { .. } => None,
            TxnRecord::Metadata(m) => Some(&m.transactional_id),
            TxnRecord::Tombstone { transactional_id } => Some(transactional_id),
        }
    }

    /// The record's key bytes (layout in the module docs).
    pub fn encode_key(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.i16(VERSION);
        match self.transactional_id() {
            None => w.i16(KIND_BLOCK),
            Some(id) => w.i16(KIND_TXN).str_i16(id),
        };
        w.into_bytes()
    }

    /// The record's value bytes, `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let mut w = Writer::new();
        w.i16(VERSION);
        match self {
            TxnRecord::ProducerIdBlock { next_producer_id } => {
                w.i64(*next_producer_id);
            }
            TxnRecord::Metadata(m) => encode_metadata(&mut w, m),
            TxnRecord::Tombstone { .. } => return None,
        }
        Some(w.into_bytes())
    }

    /// Decodes a key and optional value written by `encode_key`/`encode_value`.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, DecodeError> {
        decode(key, value)
    }
}

/// Decodes a record from its key and value (`None` = tombstone). Never panics; see the
/// module docs for what is rejected.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, DecodeError> {
    let mut r = Reader::new(key);
    version(&mut r)?;
    let kind = r.i16("key kind")?;
    match kind {
        KIND_BLOCK => {
            r.finish()?;
            let value = value.ok_or(DecodeError::BlockTombstone)?;
            let mut v = Reader::new(value);
            version(&mut v)?;
            let next_producer_id = v.i64("next producer id")?;
            v.finish()?;
            Ok(TxnRecord::ProducerIdBlock { next_producer_id })
        }
        KIND_TXN => {
            let transactional_id = r.str_i16("transactional id", TRANSACTIONAL_ID)?;
            if transactional_id.is_empty() {
                return Err(DecodeError::EmptyTransactionalId);
            }
            r.finish()?;
            match value {
                None => Ok(TxnRecord::Tombstone { transactional_id }),
                Some(value) => decode_metadata(transactional_id, value).map(TxnRecord::Metadata),
            }
        }
        other => Err(DecodeError::UnknownKeyKind(other)),
    }
}

fn put_tp(w: &mut Writer, tp: &TopicPartition) {
    w.str_i16(&tp.topic).i32(tp.partition);
}

fn encode_metadata(w: &mut Writer, m: &TxnMetadata) {
    w.i64(m.producer_id.0).i64(m.last_producer_id.0);
    w.i16(m.producer_epoch).i16(m.last_producer_epoch);
    w.i32(m.timeout_ms).i8(m.state.id());
    w.i64(m.txn_start_ms).i64(m.last_update_ms);
    w.count_i32(m.partitions.len());
    for tp in &m.partitions {
        put_tp(w, tp);
    }
    w.count_i32(m.pending_offsets.len());
    for group in &m.pending_offsets {
        w.str_i16(&group.group_id).count_i32(group.offsets.len());
        for o in &group.offsets {
            put_tp(w, &o.tp);
            w.i64(o.committed_offset).i32(o.leader_epoch);
            w.nullable_str_i16(o.metadata.as_deref());
        }
    }
}

/// The limits every string and count of a record is read under (the coordinator's own).
const TRANSACTIONAL_ID: Limit = Limit::new(
    "TRANSACTIONAL_ID_BYTES_MAX",
    limits::TRANSACTIONAL_ID_BYTES_MAX,
);
const TOPIC: Limit = Limit::new("TOPIC_NAME_BYTES_MAX", limits::TOPIC_NAME_BYTES_MAX);
const GROUP_ID: Limit = Limit::new("GROUP_ID_BYTES_MAX", limits::GROUP_ID_BYTES_MAX);
const METADATA: Limit = Limit::new(
    "OFFSET_METADATA_BYTES_MAX",
    limits::OFFSET_METADATA_BYTES_MAX,
);
const PARTITIONS: Limit = Limit::new("TXN_PARTITIONS_MAX", limits::TXN_PARTITIONS_MAX);
const GROUPS: Limit = Limit::new("TXN_GROUPS_MAX", limits::TXN_GROUPS_MAX);

/// Smallest encoding of one partition entry: an empty topic and the partition.
const TP_BYTES_MIN: usize = 2 + 4;
/// Smallest encoding of one group entry: an empty id and the offset count.
const GROUP_BYTES_MIN: usize = 2 + 4;
/// Smallest encoding of one offset entry: partition, offset, epoch, null metadata.
const OFFSET_BYTES_MIN: usize = TP_BYTES_MIN + 8 + 4 + 2;

fn decode_metadata(transactional_id: String, value: &[u8]) -> Result<TxnMetadata, DecodeError> {
    let mut r = Reader::new(value);
    version(&mut r)?;
    let producer_id = ProducerId(r.i64("producer id")?);
    let last_producer_id = ProducerId(r.i64("last producer id")?);
    let producer_epoch = r.i16("producer epoch")?;
    let last_producer_epoch = r.i16("last producer epoch")?;
    let timeout_ms = r.i32("timeout")?;
    let state_id = r.i8("state")?;
    let state = TxnState::from_id(state_id).ok_or(DecodeError::UnknownState(state_id))?;
    let txn_start_ms = r.i64("transaction start")?;
    let last_update_ms = r.i64("last update")?;
    let count = r.count_i32("partitions", PARTITIONS, TP_BYTES_MIN)?;
    let mut partitions: Vec<TopicPartition> = Vec::with_capacity(count);
    for _ in 0..count {
        let tp = tp(&mut r)?;
        if partitions.last().is_some_and(|last| *last >= tp) {
            return Err(DecodeError::NotSorted("partitions"));
        }
        partitions.push(tp);
    }
    let pending_offsets = decode_pending(&mut r)?;
    r.finish()?;
    Ok(TxnMetadata {
        transactional_id,
        producer_id,
        last_producer_id,
        producer_epoch,
        last_producer_epoch,
        timeout_ms,
        state,
        partitions,
        pending_offsets,
        txn_start_ms,
        last_update_ms,
    })
}

fn decode_pending(r: &mut Reader<'_>) -> Result<Vec<PendingOffsets>, DecodeError> {
    let groups = r.count_i32("groups", GROUPS, GROUP_BYTES_MIN)?;
    let mut out: Vec<PendingOffsets> = Vec::with_capacity(groups);
    let mut total = 0;
    for _ in 0..groups {
        let group_id = r.str_i16("group id", GROUP_ID)?;
        if out.last().is_some_and(|last| last.group_id >= group_id) {
            return Err(DecodeError::NotSorted("groups"));
        }
        let left = Limit::new("PENDING_OFFSETS_MAX", limits::PENDING_OFFSETS_MAX - total);
        let count = r.count_i32("pending offsets", left, OFFSET_BYTES_MIN)?;
        total += count;
        let mut offsets: Vec<PendingOffset> = Vec::with_capacity(count);
        for _ in 0..count {
            let tp = tp(r)?;
            if offsets.last().is_some_and(|last| last.tp >= tp) {
                return Err(DecodeError::NotSorted("offsets"));
            }
            offsets.push(PendingOffset {
                tp,
                committed_offset: r.i64("committed offset")?,
                leader_epoch: r.i32("leader epoch")?,
                metadata: r.nullable_str_i16("metadata", METADATA)?,
            });
        }
        out.push(PendingOffsets { group_id, offsets });
    }
    Ok(out)
}

fn version(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    match r.i16("version")? {
        VERSION => Ok(()),
        other => Err(DecodeError::UnknownVersion(other)),
    }
}

fn tp(r: &mut Reader<'_>) -> Result<TopicPartition, DecodeError> {
    let topic = r.str_i16("topic", TOPIC)?;
    let partition = r.i32("partition")?;
    Ok(TopicPartition { topic, partition })
}

#[cfg(test)]
mod tests;
