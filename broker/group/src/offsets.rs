//! Committed offsets: the in-memory map and the records of the internal offsets log.
//!
//! The server appends [`OffsetRecord`]s to an internal, compacted-by-key partition (our
//! `__consumer_offsets`) as Kafka record key/value pairs: [`OffsetRecord::encode_key`]
//! and [`OffsetRecord::encode_value`] (a `None` value is a tombstone). On start it reads
//! them back with [`OffsetRecord::decode`] and hands them, in log order, to
//! [`crate::Coordinator::load`]; the latest record per key wins. [`OffsetStore::snapshot`]
//! re-emits only the live values, which the server may write as a fresh, compacted log.
//!
//! # Byte layout, version 0 (all integers big-endian)
//!
//! Key:
//! ```text
//! u8  version = 0
//! u8  kind    = 0 offset commit | 1 group
//! u16 group_len, group_len bytes of UTF-8 group id
//! kind 0 only: u16 topic_len, topic_len bytes of UTF-8 topic; i32 partition
//! ```
//! Value (offset commit; absent = tombstone; group records are always tombstones in v0,
//! deleting every offset of the group written before them):
//! ```text
//! u8  version = 0
//! i64 offset
//! i32 leader_epoch           (-1 = unknown)
//! i64 commit_timestamp_ms    (coordinator clock when the commit was accepted)
//! u32 metadata_len, metadata_len bytes of UTF-8 metadata (<= limits::OFFSET_METADATA_BYTES_MAX)
//! ```

use std::collections::{BTreeMap, BTreeSet};

use sluice_kafka::bytes::{Limit, Reader, Writer};

use crate::error::DecodeError;
use crate::limits;

/// A topic-partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

const VERSION: u8 = 0;
const KIND_OFFSET: u8 = 0;
const KIND_GROUP: u8 = 1;

/// The key of a record in the offsets log.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    /// A committed offset of one group for one partition.
    Offset {
        /// Group id.
        group: String,
        /// The partition.
        tp: TopicPartition,
    },
    /// A whole group (tombstone: the group was deleted).
    Group {
        /// Group id.
        group: String,
    },
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Next offset to consume.
    pub offset: i64,
    /// Leader epoch, -1 if unknown.
    pub leader_epoch: i32,
    /// Client metadata string.
    pub metadata: String,
    /// When the coordinator accepted the commit, in ms since the Unix epoch.
    pub commit_timestamp_ms: i64,
}

/// One record of the offsets log: a value, or a tombstone (`value == None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetRecord {
    /// Key.
    pub key: RecordKey,
    /// Value; `None` deletes the key (and, for a group key, all of the group's offsets).
    pub value: Option<CommittedOffset>,
}

impl OffsetRecord {
    /// The record's key bytes (layout in the module docs).
    pub fn encode_key(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(VERSION);
        match &self.key {
            RecordKey::Offset { group, tp } => {
                w.u8(KIND_OFFSET).str_u16(group).str_u16(&tp.topic);
                w.i32(tp.partition);
            }
            RecordKey::Group { group } => {
                w.u8(KIND_GROUP).str_u16(group);
            }
        }
        w.into_bytes()
    }

    /// The record's value bytes, `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let v = self.value.as_ref()?;
        let mut w = Writer::with_capacity(25 + v.metadata.len());
        w.u8(VERSION).i64(v.offset).i32(v.leader_epoch);
        w.i64(v.commit_timestamp_ms).str_u32(&v.metadata);
        Some(w.into_bytes())
    }

    /// Decodes a key and optional value written by `encode_key`/`encode_value`.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, DecodeError> {
        let key = decode_key(key)?;
        let value = value.map(decode_value).transpose()?;
        if matches!(key, RecordKey::Group { .. }) && value.is_some() {
            return Err(DecodeError::GroupValue);
        }
        Ok(Self { key, value })
    }

    /// A tombstone for one partition's offset.
    pub fn offset_tombstone(group: &str, tp: TopicPartition) -> Self {
        let key = RecordKey::Offset {
            group: group.to_owned(),
            tp,
        };
        Self { key, value: None }
    }
}

/// Group ids and topics are read back as they were written: bounded by their u16 length
/// only (what the coordinator accepts it bounds before it writes, and a record it wrote
/// must always read back).
const NAME: Limit = Limit::new("a u16 length", u16::MAX as usize);
/// Commit metadata: a u32 length, bounded before the bytes are read.
const METADATA: Limit = Limit::new(
    "OFFSET_METADATA_BYTES_MAX",
    limits::OFFSET_METADATA_BYTES_MAX,
);

fn decode_key(bytes: &[u8]) -> Result<RecordKey, DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let kind = r.u8("key kind")?;
    let group = r.str_u16("group id", NAME)?;
    let key = match kind {
        KIND_OFFSET => {
            let topic = r.str_u16("topic", NAME)?;
            let partition = r.i32("partition")?;
            RecordKey::Offset {
                group,
                tp: TopicPartition { topic, partition },
            }
        }
        KIND_GROUP => RecordKey::Group { group },
        other => return Err(DecodeError::UnknownKeyKind(other)),
    };
    r.finish()?;
    Ok(key)
}

fn decode_value(bytes: &[u8]) -> Result<CommittedOffset, DecodeError> {
    let mut r = Reader::new(bytes);
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(DecodeError::UnknownVersion(version));
    }
    let offset = r.i64("offset")?;
    let leader_epoch = r.i32("leader epoch")?;
    let commit_timestamp_ms = r.i64("commit timestamp")?;
    let metadata = r.str_u32("metadata", METADATA)?;
    r.finish()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

/// Offsets of one group, by partition.
pub type GroupOffsets = BTreeMap<TopicPartition, CommittedOffset>;

/// Committed offsets of all groups (the applied state of the offsets log).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OffsetStore {
    groups: BTreeMap<String, GroupOffsets>,
}

impl OffsetStore {
    /// Replays records in log order; the latest per key wins, tombstones delete, and a
    /// group tombstone deletes every offset of that group written before it.
    pub fn load(records: impl IntoIterator<Item = OffsetRecord>) -> Self {
        let mut store = Self::default();
        for record in records {
            store.apply(record);
        }
        store
    }

    /// Applies one record.
    pub fn apply(&mut self, record: OffsetRecord) {
        match (record.key, record.value) {
            (RecordKey::Offset { group, tp }, Some(value)) => {
                self.groups.entry(group).or_default().insert(tp, value);
            }
            (RecordKey::Offset { group, tp }, None) => {
                if let Some(offsets) = self.groups.get_mut(&group) {
                    offsets.remove(&tp);
                    if offsets.is_empty() {
                        self.groups.remove(&group);
                    }
                }
            }
            (RecordKey::Group { group }, _) => {
                self.groups.remove(&group);
            }
        }
    }

    /// One group's offsets.
    pub fn group(&self, group: &str) -> Option<&GroupOffsets> {
        self.groups.get(group)
    }

    /// Whether the group has any committed offset.
    pub fn has_offsets(&self, group: &str) -> bool {
        self.groups.contains_key(group)
    }

    /// Number of offsets the group holds.
    pub fn len(&self, group: &str) -> usize {
        self.groups.get(group).map_or(0, BTreeMap::len)
    }

    /// Groups that have offsets, in id order.
    pub fn group_ids(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// The live value of every key: what a compacted log must keep.
    pub fn snapshot(&self) -> Vec<OffsetRecord> {
        let mut out = Vec::new();
        for (group, offsets) in &self.groups {
            for (tp, value) in offsets {
                let key = RecordKey::Offset {
                    group: group.clone(),
                    tp: tp.clone(),
                };
                out.push(OffsetRecord {
                    key,
                    value: Some(value.clone()),
                });
            }
        }
        out
    }

    /// Deletes every group's offsets for `topic` (the topic was deleted); returns the
    /// tombstones to persist.
    pub fn delete_topic(&mut self, topic: &str) -> Vec<OffsetRecord> {
        let mut out = Vec::new();
        for (group, offsets) in &mut self.groups {
            let gone: Vec<TopicPartition> = offsets
                .keys()
                .filter(|tp| tp.topic == topic)
                .cloned()
                .collect();
            for tp in gone {
                offsets.remove(&tp);
                out.push(OffsetRecord::offset_tombstone(group, tp));
            }
        }
        self.groups.retain(|_, offsets| !offsets.is_empty());
        out
    }

    /// Deletes the group's offsets of `partitions` (those it has); returns their tombstones.
    pub fn delete_partitions(
        &mut self,
        group: &str,
        partitions: &[TopicPartition],
    ) -> Vec<OffsetRecord> {
        let Some(offsets) = self.groups.get_mut(group) else {
            return Vec::new();
        };
        let out: Vec<OffsetRecord> = partitions
            .iter()
            .filter(|tp| offsets.remove(*tp).is_some())
            .map(|tp| OffsetRecord::offset_tombstone(group, tp.clone()))
            .collect();
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        out
    }

    /// Deletes a group's offsets; returns the tombstones to persist (per partition, then
    /// the group tombstone, so any compaction by key keeps the deletion).
    pub fn delete_group(&mut self, group: &str) -> Vec<OffsetRecord> {
        let offsets = self.groups.remove(group).unwrap_or_default();
        let mut out: Vec<OffsetRecord> = offsets
            .into_keys()
            .map(|tp| OffsetRecord::offset_tombstone(group, tp))
            .collect();
        out.push(OffsetRecord {
            key: RecordKey::Group {
                group: group.to_owned(),
            },
            value: None,
        });
        out
    }

    /// Removes the group's offsets whose retention has passed: an offset expires once
    /// `now_ms - max(commit_timestamp_ms, base_ms) >= retention_ms`, unless its topic is in
    /// `subscribed`. Returns tombstones.
    pub fn expire(
        &mut self,
        group: &str,
        now_ms: i64,
        base_ms: i64,
        retention_ms: i64,
        subscribed: Option<&BTreeSet<String>>,
    ) -> Vec<OffsetRecord> {
        let Some(offsets) = self.groups.get_mut(group) else {
            return Vec::new();
        };
        let expired: Vec<TopicPartition> = offsets
            .iter()
            .filter(|(tp, _)| subscribed.is_none_or(|s| !s.contains(&tp.topic)))
            .filter(|(_, v)| {
                now_ms.saturating_sub(v.commit_timestamp_ms.max(base_ms)) >= retention_ms
            })
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in &expired {
            offsets.remove(tp);
        }
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        expired
            .into_iter()
            .map(|tp| OffsetRecord::offset_tombstone(group, tp))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_kafka::bytes::ReadError;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.to_owned(),
            partition,
        }
    }

    fn commit(group: &str, t: TopicPartition, offset: i64) -> OffsetRecord {
        let value = CommittedOffset {
            offset,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 9,
        };
        OffsetRecord {
            key: RecordKey::Offset {
                group: group.into(),
                tp: t,
            },
            value: Some(value),
        }
    }

    fn roundtrip(r: &OffsetRecord) -> OffsetRecord {
        let value = r.encode_value();
        OffsetRecord::decode(&r.encode_key(), value.as_deref()).unwrap()
    }

    #[test]
    fn key_layout_is_as_documented() {
        let r = commit("g", tp("t", 258), 1);
        assert_eq!(r.encode_key(), [0, 0, 0, 1, b'g', 0, 1, b't', 0, 0, 1, 2]);
        let g = OffsetRecord {
            key: RecordKey::Group { group: "g".into() },
            value: None,
        };
        assert_eq!(g.encode_key(), [0, 1, 0, 1, b'g']);
    }

    #[test]
    fn value_layout_is_as_documented() {
        let v = commit("g", tp("t", 0), 0x0102).encode_value().unwrap();
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 3];
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, b'm']);
        assert_eq!(v, want);
    }

    #[test]
    fn records_roundtrip() {
        let r = commit("group-1", tp("topic", 7), 42);
        assert_eq!(roundtrip(&r), r);
        let t = OffsetRecord::offset_tombstone("group-1", tp("topic", 7));
        assert_eq!(roundtrip(&t), t);
        let g = OffsetRecord {
            key: RecordKey::Group { group: "g".into() },
            value: None,
        };
        assert_eq!(roundtrip(&g), g);
    }

    #[test]
    fn decode_rejects_bad_bytes() {
        let r = commit("g", tp("t", 1), 1);
        let key = r.encode_key();
        let value = r.encode_value().unwrap();
        assert!(matches!(
            OffsetRecord::decode(&key[..4], None),
            Err(DecodeError::Read(ReadError::Truncated { .. }))
        ));
        assert_eq!(
            OffsetRecord::decode(&[1, 0], None),
            Err(DecodeError::UnknownVersion(1))
        );
        assert_eq!(
            OffsetRecord::decode(&[0, 7, 0, 0], None),
            Err(DecodeError::UnknownKeyKind(7))
        );
        let mut long = key.clone();
        long.push(0);
        assert_eq!(
            OffsetRecord::decode(&long, None),
            Err(DecodeError::Read(ReadError::TrailingBytes(1)))
        );
        let bad_utf8 = [0, 1, 0, 1, 0xFF];
        assert_eq!(
            OffsetRecord::decode(&bad_utf8, None),
            Err(DecodeError::Read(ReadError::InvalidUtf8 {
                what: "group id"
            }))
        );
        let group_key = [0, 1, 0, 1, b'g'];
        assert_eq!(
            OffsetRecord::decode(&group_key, Some(&value)),
            Err(DecodeError::GroupValue)
        );
        let mut huge = value[..21].to_vec();
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            OffsetRecord::decode(&key, Some(&huge)),
            Err(DecodeError::Read(ReadError::TooLong { .. }))
        ));
    }

    #[test]
    fn load_keeps_latest_per_key_and_applies_tombstones() {
        let records = vec![
            commit("a", tp("t", 0), 1),
            commit("a", tp("t", 1), 5),
            commit("a", tp("t", 0), 2),
            OffsetRecord::offset_tombstone("a", tp("t", 1)),
            commit("b", tp("t", 0), 7),
            OffsetRecord {
                key: RecordKey::Group { group: "b".into() },
                value: None,
            },
            commit("c", tp("t", 0), 1),
            OffsetRecord {
                key: RecordKey::Group { group: "c".into() },
                value: None,
            },
            commit("c", tp("t", 0), 3),
        ];
        let store = OffsetStore::load(records);
        assert_eq!(store.group_ids().collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(store.group("a").unwrap()[&tp("t", 0)].offset, 2);
        assert_eq!(store.len("a"), 1);
        assert_eq!(store.group("c").unwrap()[&tp("t", 0)].offset, 3);
        assert_eq!(OffsetStore::load(store.snapshot()), store);
    }

    #[test]
    fn delete_group_emits_partition_then_group_tombstones() {
        let mut store =
            OffsetStore::load(vec![commit("a", tp("t", 0), 1), commit("a", tp("t", 1), 1)]);
        let tombstones = store.delete_group("a");
        assert_eq!(tombstones.len(), 3);
        assert!(tombstones.iter().all(|r| r.value.is_none()));
        assert_eq!(tombstones[2].key, RecordKey::Group { group: "a".into() });
        assert!(!store.has_offsets("a"));
    }

    #[test]
    fn expire_removes_only_old_offsets() {
        let mut fresh = commit("a", tp("t", 1), 1);
        fresh.value.as_mut().unwrap().commit_timestamp_ms = 100;
        let mut store = OffsetStore::load(vec![commit("a", tp("t", 0), 1), fresh]);
        assert!(store.expire("a", 50, 0, 100, None).is_empty());
        let gone = store.expire("a", 109, 0, 100, None);
        assert_eq!(gone, vec![OffsetRecord::offset_tombstone("a", tp("t", 0))]);
        assert!(
            store.expire("a", 150, 60, 100, None).is_empty(),
            "base time holds back expiry"
        );
        assert_eq!(store.expire("a", 200, 60, 100, None).len(), 1);
        assert!(!store.has_offsets("a"));
    }
}
