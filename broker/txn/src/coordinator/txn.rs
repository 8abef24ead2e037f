//! The transaction APIs after InitProducerId: AddPartitionsToTxn (and its verify-only
//! form), AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and completing a transaction once its
//! markers are written (Kafka's `TransactionCoordinator.handleAddPartitionsToTransaction`,
//! `handleEndTransaction` and the group coordinator's transactional offset commit).

use std::collections::BTreeMap;

use super::{Coordinator, markers_of};
use crate::api::{EndOutcome, PartitionVerification, TxnProtocol};
use crate::error::ErrorCode;
use crate::limits;
use crate::records::{
    NO_PRODUCER_EPOCH, PendingOffset, PendingOffsets, ProducerId, TopicPartition, TxnMetadata,
    TxnRecord,
};
use crate::state::TxnState;

impl Coordinator {
    /// The checks every transactional request shares, in Kafka's order: a known id,
    /// the same producer id, exactly the current epoch, no change in flight.
    fn producer_txn(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, ErrorCode> {
        if transactional_id.is_empty()
            || transactional_id.len() > limits::TRANSACTIONAL_ID_BYTES_MAX
        {
            return Err(ErrorCode::InvalidRequest);
        }
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if m.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if self.pending.contains(transactional_id) {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        Ok(m)
    }

    /// [`Coordinator::producer_txn`], then the transaction must not be completing; an
    /// idle one starts (Ongoing, `txn_start_ms = now_ms`). Returns a copy to change.
    fn txn_to_extend(
        &self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
    ) -> Result<TxnMetadata, ErrorCode> {
        let m = self.producer_txn(transactional_id, producer_id, producer_epoch)?;
        if m.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let mut m = m.clone();
        if m.state != TxnState::Ongoing {
            m.state = TxnState::Ongoing;
            m.txn_start_ms = now_ms;
            m.partitions.clear();
            m.pending_offsets.clear();
        }
        m.last_update_ms = now_ms;
        Ok(m)
    }

    /// AddPartitionsToTxn. Success with no records when every partition is already in the
    /// Ongoing transaction. Beyond [`limits::TXN_PARTITIONS_MAX`]: `INVALID_REQUEST`.
    pub fn add_partitions(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<TxnRecord>, ErrorCode> {
        if partitions
            .iter()
            .any(|tp| tp.topic.is_empty() || tp.topic.len() > limits::TOPIC_NAME_BYTES_MAX)
        {
            return Err(ErrorCode::InvalidRequest);
        }
        let current = self.producer_txn(transactional_id, producer_id, producer_epoch)?;
        if current.state == TxnState::Ongoing
            && partitions
                .iter()
                .all(|tp| current.partitions.binary_search(tp).is_ok())
        {
            return Ok(Vec::new());
        }
        let mut m = self.txn_to_extend(now_ms, transactional_id, producer_id, producer_epoch)?;
        m.partitions.extend(partitions.iter().cloned());
        m.partitions.sort();
        m.partitions.dedup();
        if m.partitions.len() > limits::TXN_PARTITIONS_MAX {
            return Err(ErrorCode::InvalidRequest);
        }
        Ok(vec![self.stage(m)])
    }

    /// AddPartitionsToTxn v4 `verifyOnly`: a partition about to take a transactional
    /// produce asks whether it is in the producer's transaction (KIP-890; Kafka's
    /// `handleVerifyPartitionsInTransaction`). As Kafka: an unknown transactional id or
    /// another producer id is `INVALID_PRODUCER_ID_MAPPING`, another epoch
    /// `PRODUCER_FENCED`, a completing transaction `CONCURRENT_TRANSACTIONS`; then per
    /// partition `NONE` if it is in the transaction, else `TRANSACTION_ABORTABLE`. A change
    /// being persisted is not waited for: the partition's guard (dropped by the markers)
    /// closes that race at the append. Nothing to persist.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<PartitionVerification>, ErrorCode> {
        if transactional_id.is_empty()
            || transactional_id.len() > limits::TRANSACTIONAL_ID_BYTES_MAX
        {
            return Err(ErrorCode::InvalidRequest);
        }
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(ErrorCode::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(ErrorCode::InvalidProducerIdMapping);
        }
        if m.producer_epoch != producer_epoch {
            return Err(ErrorCode::ProducerFenced);
        }
        if m.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        // Only an Ongoing transaction has partitions (completing one clears them).
        Ok(partitions
            .iter()
            .map(|tp| PartitionVerification {
                tp: tp.clone(),
                error: if m.partitions.binary_search(tp).is_ok() {
                    ErrorCode::None
                } else {
                    ErrorCode::TransactionAbortable
                },
            })
            .collect())
    }

    /// AddOffsetsToTxn: the group joins the transaction (Kafka adds the group's offsets
    /// partition; we keep the group among the pending offsets, so its TxnOffsetCommits
    /// are accepted and committed with the transaction).
    pub fn add_offsets(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        group_id: &str,
    ) -> Result<Vec<TxnRecord>, ErrorCode> {
        check_group_id(group_id)?;
        let current = self.producer_txn(transactional_id, producer_id, producer_epoch)?;
        if current.state == TxnState::Ongoing && group_index(current, group_id).is_ok() {
            return Ok(Vec::new());
        }
        let mut m = self.txn_to_extend(now_ms, transactional_id, producer_id, producer_epoch)?;
        if let Err(at) = group_index(&m, group_id) {
            if m.pending_offsets.len() >= limits::TXN_GROUPS_MAX {
                return Err(ErrorCode::InvalidRequest);
            }
            let group = PendingOffsets {
                group_id: group_id.to_owned(),
                offsets: Vec::new(),
            };
            m.pending_offsets.insert(at, group);
        }
        Ok(vec![self.stage(m)])
    }

    /// TxnOffsetCommit: offsets to commit with the transaction (the latest per partition
    /// wins). [`TxnProtocol::V1`]: the transaction must be Ongoing with the group added by
    /// AddOffsetsToTxn, else `INVALID_TXN_STATE`. [`TxnProtocol::V2`] (v5+, KIP-890): the
    /// commit adds the group itself, starting the transaction if none is open.
    #[allow(clippy::too_many_arguments)]
    pub fn txn_offset_commit(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        group_id: &str,
        offsets: &[PendingOffset],
        protocol: TxnProtocol,
    ) -> Result<Vec<TxnRecord>, ErrorCode> {
        check_group_id(group_id)?;
        check_offsets(offsets)?;
        let m = self.producer_txn(transactional_id, producer_id, producer_epoch)?;
        if m.state.is_prepare() {
            return Err(ErrorCode::ConcurrentTransactions);
        }
        let (mut m, at) = match (m.state, group_index(m, group_id), protocol) {
            (TxnState::Ongoing, Ok(at), _) => (m.clone(), at),
            (_, _, TxnProtocol::V2) => {
                let mut m =
                    self.txn_to_extend(now_ms, transactional_id, producer_id, producer_epoch)?;
                let at = match group_index(&m, group_id) {
                    Ok(at) => at,
                    Err(at) => {
                        if m.pending_offsets.len() >= limits::TXN_GROUPS_MAX {
                            return Err(ErrorCode::InvalidRequest);
                        }
                        let group = PendingOffsets {
                            group_id: group_id.to_owned(),
                            offsets: Vec::new(),
                        };
                        m.pending_offsets.insert(at, group);
                        at
                    }
                };
                (m, at)
            }
            _ => return Err(ErrorCode::InvalidTxnState),
        };
        let total_before: usize = m.pending_offsets.iter().map(|g| g.offsets.len()).sum();
        let group = &mut m.pending_offsets[at];
        let before = group.offsets.len();
        let mut merged: BTreeMap<TopicPartition, PendingOffset> =
            group.offsets.drain(..).map(|o| (o.tp.clone(), o)).collect();
        for o in offsets {
            merged.insert(o.tp.clone(), o.clone());
        }
        if total_before - before + merged.len() > limits::PENDING_OFFSETS_MAX {
            return Err(ErrorCode::InvalidCommitOffsetSize);
        }
        group.offsets = merged.into_values().collect();
        m.last_update_ms = now_ms;
        Ok(vec![self.stage(m)])
    }

    /// EndTxn (Kafka's `handleEndTransaction` from a client), in either protocol.
    pub fn end_txn(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        commit: bool,
        protocol: TxnProtocol,
    ) -> EndOutcome {
        if protocol == TxnProtocol::V2 {
            return self.end_txn_v2(
                now_ms,
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
            );
        }
        let m = match self.producer_txn(transactional_id, producer_id, producer_epoch) {
            Ok(m) => m,
            Err(code) => return EndOutcome::Error(code),
        };
        match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut m = m.clone();
                m.state = prepare_state(commit);
                m.last_update_ms = now_ms;
                let markers = markers_of(&m, commit);
                EndOutcome::Prepared {
                    records: vec![self.stage(m)],
                    markers,
                }
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                EndOutcome::AlreadyDone {
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                }
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                EndOutcome::Error(ErrorCode::ConcurrentTransactions)
            }
            _ => EndOutcome::Error(ErrorCode::InvalidTxnState),
        }
    }

    /// EndTxn v5+ (KIP-890 part 2, Kafka's `endTransaction` with `TV_2`): the epoch is
    /// bumped with every transaction's end and the markers carry the new one. A retry whose
    /// answer was lost comes with the epoch before that bump (or, after a rotation, the
    /// previous producer id): it is answered with the current pair if the transaction ended
    /// the same way. Abort with nothing added (Empty, or a completed transaction) is allowed.
    fn end_txn_v2(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: ProducerId,
        producer_epoch: i16,
        commit: bool,
    ) -> EndOutcome {
        if transactional_id.is_empty()
            || transactional_id.len() > limits::TRANSACTIONAL_ID_BYTES_MAX
        {
            return EndOutcome::Error(ErrorCode::InvalidRequest);
        }
        let Some(m) = self.txns.get(transactional_id) else {
            return EndOutcome::Error(ErrorCode::InvalidProducerIdMapping);
        };
        let retry = m.last_producer_epoch != NO_PRODUCER_EPOCH
            && producer_epoch == m.last_producer_epoch
            && (producer_id == m.producer_id
                || (producer_id == m.last_producer_id && m.last_producer_id != ProducerId::NONE));
        if producer_id != m.producer_id && !retry {
            return EndOutcome::Error(ErrorCode::InvalidProducerIdMapping);
        }
        if producer_epoch != m.producer_epoch && !retry {
            return EndOutcome::Error(ErrorCode::ProducerFenced);
        }
        if self.pending.contains(transactional_id) {
            return EndOutcome::Error(ErrorCode::ConcurrentTransactions);
        }
        let done = EndOutcome::AlreadyDone {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
        };
        match (m.state, commit, retry) {
            // An older epoch cannot end the transaction the newer one is in.
            (TxnState::Ongoing, _, true) => EndOutcome::Error(ErrorCode::ProducerFenced),
            (TxnState::Ongoing, _, false)
            | (
                TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort,
                false,
                false,
            ) => {
                let m = m.clone();
                self.prepare_with_bump(now_ms, m, commit)
            }
            (TxnState::CompleteCommit, true, true) | (TxnState::CompleteAbort, false, true) => done,
            (TxnState::PrepareCommit, true, _) | (TxnState::PrepareAbort, false, _) => {
                EndOutcome::Error(ErrorCode::ConcurrentTransactions)
            }
            _ => EndOutcome::Error(ErrorCode::InvalidTxnState),
        }
    }

    /// PrepareCommit or PrepareAbort with the epoch bumped (Kafka's `prepareAbortOrCommit`
    /// with `TV_2`). An epoch bumped to `i16::MAX` moves the id to a new producer id when
    /// the markers are written ([`Coordinator::markers_written`]).
    fn prepare_with_bump(&mut self, now_ms: i64, mut m: TxnMetadata, commit: bool) -> EndOutcome {
        if m.producer_epoch == i16::MAX {
            // Never handed to a client (see `epoch_exhausted`): a fenced producer's epoch.
            return EndOutcome::Error(ErrorCode::ProducerFenced);
        }
        if m.state != TxnState::Ongoing {
            // An abort with nothing added: its start is now.
            m.partitions.clear();
            m.pending_offsets.clear();
            m.txn_start_ms = now_ms;
        }
        m.last_producer_epoch = m.producer_epoch;
        m.producer_epoch += 1;
        m.state = prepare_state(commit);
        m.last_update_ms = now_ms;
        let markers = markers_of(&m, commit);
        EndOutcome::Prepared {
            records: vec![self.stage(m)],
            markers,
        }
    }

    /// Every marker of a [`crate::WriteMarkers`] effect is written (and, for a commit,
    /// its offsets applied): the record that completes the transaction, clearing its
    /// partitions and offsets. Empty when the id is not in PrepareCommit/PrepareAbort or
    /// has records in flight (a duplicate call).
    #[must_use]
    pub fn markers_written(&mut self, now_ms: i64, transactional_id: &str) -> Vec<TxnRecord> {
        let Some(m) = self.txns.get(transactional_id) else {
            return Vec::new();
        };
        if !m.state.is_prepare() || self.pending.contains(transactional_id) {
            return Vec::new();
        }
        let mut m = m.clone();
        m.state = if m.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        m.partitions.clear();
        m.pending_offsets.clear();
        m.last_update_ms = now_ms;
        let mut records = Vec::new();
        if m.producer_epoch == i16::MAX {
            // The epoch cannot be bumped again: the next transaction gets a new producer id
            // at epoch 0 (Kafka's `nextProducerId` after an exhausted TV_2 epoch). The pair
            // before the bump stays recognisable for a retried EndTxn. Without an id left
            // the epoch stays, and the next InitProducerId rotates.
            if let Some(next) = self.allocate_producer_id(&mut records) {
                m.last_producer_id = m.producer_id;
                m.last_producer_epoch = i16::MAX - 1;
                m.producer_id = next;
                m.producer_epoch = 0;
            }
        }
        records.push(self.stage(m));
        records
    }
}

/// The state an EndTxn moves an Ongoing transaction to.
const fn prepare_state(commit: bool) -> TxnState {
    if commit {
        TxnState::PrepareCommit
    } else {
        TxnState::PrepareAbort
    }
}

fn check_group_id(group_id: &str) -> Result<(), ErrorCode> {
    if group_id.is_empty() || group_id.len() > limits::GROUP_ID_BYTES_MAX {
        return Err(ErrorCode::InvalidGroupId);
    }
    Ok(())
}

fn check_offsets(offsets: &[PendingOffset]) -> Result<(), ErrorCode> {
    for o in offsets {
        if o.tp.topic.is_empty() || o.tp.topic.len() > limits::TOPIC_NAME_BYTES_MAX {
            return Err(ErrorCode::InvalidRequest);
        }
        if o.metadata
            .as_ref()
            .is_some_and(|s| s.len() > limits::OFFSET_METADATA_BYTES_MAX)
        {
            return Err(ErrorCode::OffsetMetadataTooLarge);
        }
    }
    if offsets.len() > limits::PENDING_OFFSETS_MAX {
        return Err(ErrorCode::InvalidCommitOffsetSize);
    }
    Ok(())
}

/// Where the group is (or would go) in the transaction's sorted pending offsets.
fn group_index(m: &TxnMetadata, group_id: &str) -> Result<usize, usize> {
    m.pending_offsets
        .binary_search_by(|g| g.group_id.as_str().cmp(group_id))
}
