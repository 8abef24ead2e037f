//! OffsetCommit, a committed transaction's offsets, their persistence round trip, and offset
//! retention.
//!
//! A commit that passes validation becomes [`Effect::PersistOffsets`]; the offsets are
//! applied to the in-memory store and the commit is answered only when the server reports
//! the append with [`Coordinator::persisted`], so OffsetFetch never shows an offset the
//! log could lose (Kafka's pending offset commits). A transaction's offsets take the same
//! path with the group-level checks left out (`commit_txn_offsets`).

use std::collections::{BTreeSet, HashMap};

use super::Coordinator;
use crate::api::{
    CommitPartition, Effect, OffsetCommitRequest, OffsetCommitResponse, PartitionResult, PersistId,
    RequestId, Response, TxnCommitRequest,
};
use crate::error::ErrorCode;
use crate::group::{Group, respond};
use crate::limits;
use crate::offsets::{CommittedOffset, OffsetRecord, RecordKey, TopicPartition};
use crate::state::GroupState;
use crate::subscription::CONSUMER_PROTOCOL_TYPE;

/// A commit waiting for its records to be persisted.
#[derive(Debug, Clone)]
pub(crate) struct PendingCommit {
    request_id: RequestId,
    group_id: String,
    /// The group's incarnation when the commit was accepted; a deleted and re-created
    /// group must not receive it.
    incarnation: u64,
    /// Per-partition results in request order; `None` entries are decided by the persist.
    results: Vec<(crate::api::TopicPartition, Option<ErrorCode>)>,
    records: Vec<OffsetRecord>,
}

impl Coordinator {
    /// Whether a commit waiting for its persist writes `key` (or, for a group key, any
    /// offset of that group).
    pub(crate) fn commit_in_flight(&self, key: &RecordKey) -> bool {
        self.pending.values().any(|p| match key {
            RecordKey::Group { group } => p.group_id == *group,
            RecordKey::Offset { .. } => p.records.iter().any(|r| r.key == *key),
        })
    }

    /// OffsetCommit (Kafka's `handleCommitOffsets`).
    pub(crate) fn offset_commit(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: OffsetCommitRequest,
        out: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.check_commit(now_ms, &req) {
            return respond(out, rid, all_failed(&req.partitions, e));
        }
        self.stage_commit(now_ms, rid, req.group_id, req.partitions, out);
    }

    /// A committed transaction's offsets (Kafka's `handleTxnCompletion` with COMMIT): no
    /// member, generation or state check (the TxnOffsetCommit was checked when it arrived);
    /// a missing group is created.
    pub(crate) fn commit_txn_offsets(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: TxnCommitRequest,
        out: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.check_txn_commit(now_ms, &req) {
            return respond(out, rid, all_failed(&req.partitions, e));
        }
        self.stage_commit(now_ms, rid, req.group_id, req.partitions, out);
    }

    /// The per-partition checks (metadata size, the group's offset cap) of a commit whose
    /// group exists and passed its group-level checks; the records go out to be persisted.
    fn stage_commit(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        group_id: String,
        partitions: Vec<CommitPartition>,
        out: &mut Vec<Effect>,
    ) {
        let group = self.groups.get_mut(&group_id).expect("checked group");
        group.pending_commits += 1;
        let incarnation = group.incarnation;
        let known = self.offsets.group(&group_id);
        let mut room = limits::GROUP_OFFSETS_MAX.saturating_sub(self.offsets.len(&group_id));
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for p in partitions {
            let is_new = known.is_none_or(|k| !k.contains_key(&p.tp));
            let error = if p
                .metadata
                .as_ref()
                .is_some_and(|m| m.len() > self.config.offset_metadata_max_bytes)
            {
                Some(ErrorCode::OffsetMetadataTooLarge)
            } else if is_new && room == 0 {
                Some(ErrorCode::InvalidCommitOffsetSize)
            } else {
                room -= usize::from(is_new);
                records.push(commit_record(&group_id, now_ms, &p));
                None
            };
            results.push((p.tp, error));
        }
        let pending = PendingCommit {
            request_id: rid,
            group_id,
            incarnation,
            results,
            records,
        };
        if pending.records.is_empty() {
            let group = self
                .groups
                .get_mut(&pending.group_id)
                .expect("checked group");
            group.pending_commits -= 1;
            return self.finish_commit(pending, ErrorCode::None, out);
        }
        let id = self.persist_id();
        out.push(Effect::PersistOffsets {
            id,
            records: pending.records.clone(),
        });
        self.pending.insert(id, pending);
    }

    /// Request-level checks of a transaction's offsets; creates a missing group.
    fn check_txn_commit(&mut self, now_ms: u64, req: &TxnCommitRequest) -> Result<(), ErrorCode> {
        if req.group_id.is_empty() || req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        if req.partitions.len() > limits::COMMIT_PARTITIONS_MAX {
            return Err(ErrorCode::InvalidRequest);
        }
        if self.pending.len() >= limits::PENDING_PERSISTS_MAX {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if !self.groups.contains_key(&req.group_id) {
            self.create_group(now_ms, &req.group_id)?;
            self.reindex(&req.group_id);
        }
        Ok(())
    }

    /// Group-level checks of a commit; creates the group for a simple consumer.
    fn check_commit(&mut self, now_ms: u64, req: &OffsetCommitRequest) -> Result<(), ErrorCode> {
        if req.group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidGroupId);
        }
        if req.partitions.len() > limits::COMMIT_PARTITIONS_MAX {
            return Err(ErrorCode::InvalidRequest);
        }
        if !self.groups.contains_key(&req.group_id) {
            if req.generation_id >= 0 {
                // A commit from an older incarnation of a group that no longer exists.
                return Err(ErrorCode::IllegalGeneration);
            }
            self.create_group(now_ms, &req.group_id)?;
        }
        let group = self.groups.get_mut(&req.group_id).expect("group exists");
        let valid = group.validate_commit(
            now_ms,
            req.generation_id,
            &req.member_id,
            req.group_instance_id.as_deref(),
            &req.partitions,
        );
        self.reindex(&req.group_id); // a valid commit counts as a heartbeat
        valid?;
        if self.pending.len() >= limits::PENDING_PERSISTS_MAX {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        Ok(())
    }

    /// Reports the outcome of appending a [`Effect::PersistOffsets`] batch. On `Ok` the
    /// commit's offsets become visible; on `Err(code)` its partitions are answered with
    /// `code` (e.g. `UNKNOWN_SERVER_ERROR`). Batches that carried only tombstones
    /// (deletes, expiry) need no report but may be reported; unknown ids are ignored.
    pub fn persisted(&mut self, id: PersistId, result: Result<(), ErrorCode>) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.tombstones_persisted(id, result.is_ok()) {
            return out;
        }
        let Some(pending) = self.pending.remove(&id) else {
            return out;
        };
        let group = self
            .groups
            .get_mut(&pending.group_id)
            .filter(|g| g.incarnation == pending.incarnation);
        if let Some(group) = group {
            group.pending_commits -= 1;
            if result.is_ok() {
                for record in pending.records.iter().cloned() {
                    self.offsets.apply(record);
                }
            }
        }
        let error = result.err().unwrap_or(ErrorCode::None);
        self.finish_commit(pending, error, &mut out);
        self.debug_check();
        out
    }

    /// Drops every committed offset of a deleted topic (Kafka's
    /// `handleDeletedPartitions`); the tombstones come back as an effect. Commits of that
    /// topic still waiting for persistence will not be applied: their records precede the
    /// tombstones in the log, so a replay agrees.
    pub fn delete_topic_offsets(&mut self, topic: &str) -> Vec<Effect> {
        let of_topic =
            |r: &OffsetRecord| matches!(&r.key, RecordKey::Offset { tp, .. } if tp.topic == topic);
        // In-flight commits of the topic are logged before these tombstones: cover them.
        let mut keys: BTreeSet<RecordKey> = BTreeSet::new();
        for pending in self.pending.values_mut() {
            keys.extend(
                pending
                    .records
                    .iter()
                    .filter(|r| of_topic(r))
                    .map(|r| r.key.clone()),
            );
            pending.records.retain(|r| !of_topic(r));
        }
        keys.extend(self.offsets.delete_topic(topic).into_iter().map(|r| r.key));
        let records: Vec<OffsetRecord> = keys
            .into_iter()
            .map(|key| OffsetRecord { key, value: None })
            .collect();
        let mut out = Vec::new();
        self.persist_tombstones(records, &mut out);
        self.debug_check();
        out
    }

    /// OffsetDelete (KIP-496): drops the group's committed offsets of `partitions`, as
    /// Kafka does: GROUP_ID_NOT_FOUND for a group that does not exist; NON_EMPTY_GROUP for
    /// a group with members that is not a consumer group (its subscriptions are opaque);
    /// in a consumer group with members, GROUP_SUBSCRIBED_TO_TOPIC for the partitions of
    /// topics a member subscribes to, the rest deleted. Returns the per-partition results
    /// (request order) and the tombstones to persist; answer once they are appended.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> (OffsetDeleteResult, Vec<Effect>) {
        let group = self.groups.get(group_id);
        let exists = group.is_some_and(|g| g.state != GroupState::Dead)
            || self.offsets.has_offsets(group_id);
        if group_id.len() > limits::GROUP_ID_BYTES_MAX {
            return (Err(ErrorCode::InvalidGroupId), Vec::new());
        }
        if !exists {
            return (Err(ErrorCode::GroupIdNotFound), Vec::new());
        }
        let modern_topics = group
            .and_then(|g| g.modern.as_deref())
            .filter(|m| !m.members().is_empty())
            .map(crate::consumer::ConsumerGroup::subscribed_topic_names);
        let subscribed = |topic: &str| -> Result<bool, ErrorCode> {
            if let Some(topics) = &modern_topics {
                return Ok(topics.contains(topic));
            }
            let Some(group) =
                group.filter(|g| !matches!(g.state, GroupState::Empty | GroupState::Dead))
            else {
                return Ok(false);
            };
            if group.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
                return Err(ErrorCode::NonEmptyGroup);
            }
            // Subscriptions not known yet (mid-rebalance): as if subscribed, as Kafka keeps
            // the offsets of a group it cannot read.
            Ok(group
                .subscribed_topics
                .as_ref()
                .is_none_or(|s| s.contains(topic)))
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut deletable = Vec::new();
        for tp in partitions {
            match subscribed(&tp.topic) {
                Err(code) => return (Err(code), Vec::new()),
                Ok(true) => results.push((tp.clone(), ErrorCode::GroupSubscribedToTopic)),
                Ok(false) => {
                    deletable.push(tp.clone());
                    results.push((tp.clone(), ErrorCode::None));
                }
            }
        }
        // Commits of these partitions still waiting for persistence are logged before the
        // tombstones: drop them, and cover their keys (as `delete_topic_offsets` does).
        let mut keys: BTreeSet<TopicPartition> = BTreeSet::new();
        for pending in self.pending.values_mut().filter(|p| p.group_id == group_id) {
            pending.records.retain(|r| match &r.key {
                RecordKey::Offset { tp, .. } if deletable.contains(tp) => {
                    keys.insert(tp.clone());
                    false
                }
                _ => true,
            });
        }
        let mut records = self.offsets.delete_partitions(group_id, &deletable);
        for tp in keys {
            if !records
                .iter()
                .any(|r| matches!(&r.key, RecordKey::Offset { tp: t, .. } if *t == tp))
            {
                records.push(OffsetRecord::offset_tombstone(group_id, tp));
            }
        }
        let mut out = Vec::new();
        self.persist_tombstones(records, &mut out);
        self.debug_check();
        (Ok(results), out)
    }

    /// Commits waiting for persistence, by (group id, incarnation).
    pub(crate) fn pending_commit_counts(&self) -> HashMap<(&str, u64), usize> {
        let mut counts = HashMap::new();
        for p in self.pending.values() {
            *counts
                .entry((p.group_id.as_str(), p.incarnation))
                .or_default() += 1;
        }
        counts
    }

    fn finish_commit(
        &mut self,
        pending: PendingCommit,
        persist_error: ErrorCode,
        out: &mut Vec<Effect>,
    ) {
        let partitions = pending
            .results
            .into_iter()
            .map(|(tp, error)| PartitionResult {
                tp,
                error: error.unwrap_or(persist_error),
            })
            .collect();
        respond(
            out,
            pending.request_id,
            Response::OffsetCommit(OffsetCommitResponse { partitions }),
        );
    }

    /// The `offsets.retention.check.interval.ms` pass: expire offsets per [`expiry_rule`]
    /// (`offsets.retention.minutes`), then drop Empty groups left without offsets.
    pub(crate) fn expire_offsets(&mut self, now_ms: u64, out: &mut Vec<Effect>) {
        let retention_ms = i64::try_from(self.config.offsets_retention_ms).unwrap_or(i64::MAX);
        let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let mut records = Vec::new();
        let mut dead = Vec::new();
        for group in self.groups.values() {
            let Some((base_ms, subscribed)) = expiry_rule(group) else {
                continue;
            };
            let base = i64::try_from(base_ms).unwrap_or(i64::MAX);
            records.extend(
                self.offsets
                    .expire(&group.id, now, base, retention_ms, subscribed),
            );
            let empty = group.overall_state() == GroupState::Empty;
            if empty && !self.offsets.has_offsets(&group.id) && group.pending_members.is_empty() {
                dead.push(group.id.clone());
            }
        }
        for id in dead {
            self.remove_group(&id);
        }
        self.persist_tombstones(records, out);
    }
}

/// OffsetDelete's outcome: per-partition results in request order, or the group's error.
pub type OffsetDeleteResult = Result<Vec<(TopicPartition, ErrorCode)>, ErrorCode>;

/// Kafka's `removeExpiredOffsets` cases: which offsets of `group` may expire, as (time
/// retention counts from, topics that never expire). `None`: none may.
/// - Empty with a protocol type: retention counts from when it became Empty.
/// - Empty without (offsets only, simple consumers): from each commit.
/// - Stable `consumer` group with readable subscriptions: offsets of topics nobody
///   subscribes to, from each commit.
fn expiry_rule(group: &Group) -> Option<(u64, Option<&BTreeSet<String>>)> {
    if group.pending_commits > 0 || group.id.starts_with(limits::NEVER_EXPIRING_GROUP_PREFIX) {
        return None;
    }
    match group.overall_state() {
        GroupState::Empty if group.protocol_type.is_some() => Some((group.state_since_ms, None)),
        GroupState::Empty => Some((0, None)),
        // A consumer-protocol group with members keeps all its offsets.
        GroupState::Stable if group.modern.is_some() => None,
        GroupState::Stable if group.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE) => {
            group.subscribed_topics.as_ref().map(|s| (0, Some(s)))
        }
        _ => None,
    }
}

fn commit_record(group_id: &str, now_ms: u64, p: &CommitPartition) -> OffsetRecord {
    let value = CommittedOffset {
        offset: p.offset,
        leader_epoch: p.leader_epoch,
        metadata: p.metadata.clone().unwrap_or_default(),
        commit_timestamp_ms: i64::try_from(now_ms).unwrap_or(i64::MAX),
    };
    let key = RecordKey::Offset {
        group: group_id.to_owned(),
        tp: p.tp.clone(),
    };
    OffsetRecord {
        key,
        value: Some(value),
    }
}

fn all_failed(partitions: &[CommitPartition], error: ErrorCode) -> Response {
    let partitions = partitions
        .iter()
        .map(|p| PartitionResult {
            tp: p.tp.clone(),
            error,
        })
        .collect();
    Response::OffsetCommit(OffsetCommitResponse { partitions })
}
