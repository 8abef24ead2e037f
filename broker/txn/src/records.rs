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
        let mut out = VERSION.to_be_bytes().to_vec();
        match self.transactional_id() {
            None => out.extend_from_slice(&KIND_BLOCK.to_be_bytes()),
            Some(id) => {
                out.extend_from_slice(&KIND_TXN.to_be_bytes());
                put_str(&mut out, id);
            }
        }
        out
    }

    /// The record's value bytes, `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let mut out = VERSION.to_be_bytes().to_vec();
        match self {
            TxnRecord::ProducerIdBlock { next_producer_id } => {
                out.extend_from_slice(&next_producer_id.to_be_bytes());
            }
            TxnRecord::Metadata(m) => encode_metadata(&mut out, m),
            TxnRecord::Tombstone { .. } => return None,
        }
        Some(out)
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
    r.version()?;
    let kind = r.i16()?;
    match kind {
        KIND_BLOCK => {
            r.finish()?;
            let value = value.ok_or(DecodeError::BlockTombstone)?;
            let mut v = Reader::new(value);
            v.version()?;
            let next_producer_id = v.i64()?;
            v.finish()?;
            Ok(TxnRecord::ProducerIdBlock { next_producer_id })
        }
        KIND_TXN => {
            let transactional_id = r.str(limits::TRANSACTIONAL_ID_BYTES_MAX)?;
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

fn put_str(out: &mut Vec<u8>, s: &str) {
    assert!(
        s.len() <= i16::MAX as usize,
        "string over i16 length reached the transaction log"
    );
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    let n = i32::try_from(n).expect("count over i32 reached the transaction log");
    out.extend_from_slice(&n.to_be_bytes());
}

fn put_tp(out: &mut Vec<u8>, tp: &TopicPartition) {
    put_str(out, &tp.topic);
    out.extend_from_slice(&tp.partition.to_be_bytes());
}

fn encode_metadata(out: &mut Vec<u8>, m: &TxnMetadata) {
    out.extend_from_slice(&m.producer_id.0.to_be_bytes());
    out.extend_from_slice(&m.last_producer_id.0.to_be_bytes());
    out.extend_from_slice(&m.producer_epoch.to_be_bytes());
    out.extend_from_slice(&m.last_producer_epoch.to_be_bytes());
    out.extend_from_slice(&m.timeout_ms.to_be_bytes());
    out.extend_from_slice(&m.state.id().to_be_bytes());
    out.extend_from_slice(&m.txn_start_ms.to_be_bytes());
    out.extend_from_slice(&m.last_update_ms.to_be_bytes());
    put_count(out, m.partitions.len());
    for tp in &m.partitions {
        put_tp(out, tp);
    }
    put_count(out, m.pending_offsets.len());
    for group in &m.pending_offsets {
        put_str(out, &group.group_id);
        put_count(out, group.offsets.len());
        for o in &group.offsets {
            put_tp(out, &o.tp);
            out.extend_from_slice(&o.committed_offset.to_be_bytes());
            out.extend_from_slice(&o.leader_epoch.to_be_bytes());
            match &o.metadata {
                None => out.extend_from_slice(&(-1i16).to_be_bytes()),
                Some(s) => put_str(out, s),
            }
        }
    }
}

/// Smallest encoding of one partition entry: an empty topic and the partition.
const TP_BYTES_MIN: usize = 2 + 4;
/// Smallest encoding of one group entry: an empty id and the offset count.
const GROUP_BYTES_MIN: usize = 2 + 4;
/// Smallest encoding of one offset entry: partition, offset, epoch, null metadata.
const OFFSET_BYTES_MIN: usize = TP_BYTES_MIN + 8 + 4 + 2;

fn decode_metadata(transactional_id: String, value: &[u8]) -> Result<TxnMetadata, DecodeError> {
    let mut r = Reader::new(value);
    r.version()?;
    let producer_id = ProducerId(r.i64()?);
    let last_producer_id = ProducerId(r.i64()?);
    let producer_epoch = r.i16()?;
    let last_producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state_id = r.i8()?;
    let state = TxnState::from_id(state_id).ok_or(DecodeError::UnknownState(state_id))?;
    let txn_start_ms = r.i64()?;
    let last_update_ms = r.i64()?;
    let count = r.count(limits::TXN_PARTITIONS_MAX, TP_BYTES_MIN)?;
    let mut partitions: Vec<TopicPartition> = Vec::with_capacity(count);
    for _ in 0..count {
        let tp = r.tp()?;
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
    let groups = r.count(limits::TXN_GROUPS_MAX, GROUP_BYTES_MIN)?;
    let mut out: Vec<PendingOffsets> = Vec::with_capacity(groups);
    let mut total = 0;
    for _ in 0..groups {
        let group_id = r.str(limits::GROUP_ID_BYTES_MAX)?;
        if out.last().is_some_and(|last| last.group_id >= group_id) {
            return Err(DecodeError::NotSorted("groups"));
        }
        let count = r.count(limits::PENDING_OFFSETS_MAX - total, OFFSET_BYTES_MIN)?;
        total += count;
        let mut offsets: Vec<PendingOffset> = Vec::with_capacity(count);
        for _ in 0..count {
            let tp = r.tp()?;
            if offsets.last().is_some_and(|last| last.tp >= tp) {
                return Err(DecodeError::NotSorted("offsets"));
            }
            offsets.push(PendingOffset {
                tp,
                committed_offset: r.i64()?,
                leader_epoch: r.i32()?,
                metadata: r.nullable_str(limits::OFFSET_METADATA_BYTES_MAX)?,
            });
        }
        out.push(PendingOffsets { group_id, offsets });
    }
    Ok(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(DecodeError::Truncated {
                at: self.at,
                needed: n,
                len: self.bytes.len(),
            });
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn version(&mut self) -> Result<(), DecodeError> {
        match self.i16()? {
            VERSION => Ok(()),
            other => Err(DecodeError::UnknownVersion(other)),
        }
    }

    /// A count of entries of at least `entry_bytes_min` bytes each, at most `max`, and
    /// no more than the remaining bytes can hold.
    fn count(&mut self, max: usize, entry_bytes_min: usize) -> Result<usize, DecodeError> {
        let raw = self.i32()?;
        let count = usize::try_from(raw).map_err(|_| DecodeError::Negative(raw))?;
        if count > max {
            return Err(DecodeError::TooMany { count, max });
        }
        let needed = count.saturating_mul(entry_bytes_min);
        if needed > self.bytes.len() - self.at {
            return Err(DecodeError::Truncated {
                at: self.at,
                needed,
                len: self.bytes.len(),
            });
        }
        Ok(count)
    }

    fn string_of(&mut self, len: i16, max: usize) -> Result<String, DecodeError> {
        let len = usize::try_from(len).map_err(|_| DecodeError::Negative(i32::from(len)))?;
        if len > max {
            return Err(DecodeError::TooLong { len, max });
        }
        let raw = self.take(len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8)
    }

    fn str(&mut self, max: usize) -> Result<String, DecodeError> {
        let len = self.i16()?;
        self.string_of(len, max)
    }

    fn nullable_str(&mut self, max: usize) -> Result<Option<String>, DecodeError> {
        match self.i16()? {
            -1 => Ok(None),
            len => self.string_of(len, max).map(Some),
        }
    }

    fn tp(&mut self) -> Result<TopicPartition, DecodeError> {
        let topic = self.str(limits::TOPIC_NAME_BYTES_MAX)?;
        let partition = self.i32()?;
        Ok(TopicPartition { topic, partition })
    }

    fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() - self.at {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests;
