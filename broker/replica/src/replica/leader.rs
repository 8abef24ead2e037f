//! The leader's side (Kafka's `Partition` as leader): produce, follower fetches, the high
//! watermark, and ISR changes through AlterPartition.
//!
//! - Each follower's log end offset is its last fetch offset; it is caught up when that
//!   reached the leader's log end (or the log end the leader had at its previous fetch:
//!   Kafka's `lastCaughtUpTimeMs`). An ISR follower not caught up for
//!   `replica.lag.time.max.ms` is proposed out; a follower outside the ISR whose offset
//!   reached the high watermark and this epoch's start is proposed in. One AlterPartition
//!   is in flight at a time; the ISR changes only when the controller's answer (or the
//!   metadata) says it did.
//! - The high watermark is the minimum log end offset over the maximal ISR (the committed
//!   ISR and a pending addition, KIP-497), with the leader's own durable offset standing in
//!   for its log end under `sluice.acks.all.fsync`. It does not advance while the committed
//!   ISR is smaller than `min.insync.replicas` (KIP-966), nor before every ISR member has
//!   fetched in this epoch, and never goes back.
//! - acks=all is refused NOT_ENOUGH_REPLICAS before the append when the ISR is too small,
//!   and answered once the high watermark passes the batch (an idempotent duplicate waits
//!   for its original's). acks=1 is answered after the append.

use std::collections::BTreeMap;

use sluice_cluster::controller::{AlterPartition, IsrMember};
use sluice_cluster::image::PartitionState;
use sluice_kafka::ErrorCode;

use super::{Acks, Effect, EpochEndOffset, FetchData, FetchRequest, FetchResponse, Replica, Role};
use super::{Appended, ProduceAck, ProduceRequest};
use crate::limits;
use crate::log::Batch;
use crate::mutants::{Mutant, mutant};

/// What the leader knows of one follower (Kafka's `ReplicaState`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Progress {
    /// Its last fetch offset in this epoch; `None` before its first fetch.
    log_end_offset: Option<i64>,
    /// The broker epoch its fetches carry (KIP-903), or -1.
    broker_epoch: i64,
    last_caught_up_ms: i64,
    /// The leader's log end at this follower's previous fetch, and when.
    last_fetch_leader_leo: i64,
    last_fetch_ms: i64,
}

/// An AlterPartition in flight.
#[derive(Debug, Clone)]
pub(super) struct PendingIsr {
    isr: Vec<i32>,
    sent_ms: i64,
}

/// A leader's state for one epoch.
#[derive(Debug)]
pub(super) struct LeaderState {
    pub(super) epoch: i32,
    /// The committed ISR.
    pub(super) isr: Vec<i32>,
    pub(super) partition_epoch: i32,
    pub(super) pending_isr: Option<PendingIsr>,
    /// No AlterPartition before this time (after a refusal).
    retry_after_ms: i64,
    /// Every other replica the metadata names (at most `REPLICAS_MAX`).
    followers: BTreeMap<i32, Progress>,
    /// This epoch's first offset.
    epoch_start_offset: i64,
    /// acks=all produces waiting for the high watermark: request id -> (last offset,
    /// deadline, answer). At most `PENDING_PRODUCES_MAX`.
    pub(super) waiting: BTreeMap<u64, (i64, i64, ProduceAck)>,
}

impl Replica {
    pub(super) fn become_leader(&mut self, now_ms: i64, p: &PartitionState) {
        self.step_down(ErrorCode::NotLeaderOrFollower);
        self.log.begin_epoch(p.leader_epoch);
        let leo = self.log.log_end_offset();
        self.effects.push(Effect::BeginEpoch {
            epoch: p.leader_epoch,
            start_offset: leo,
        });
        let me = self.config.node_id;
        let followers = p
            .replicas
            .iter()
            .filter(|&&id| id != me)
            .take(limits::REPLICAS_MAX)
            .map(|&id| {
                let progress = Progress {
                    log_end_offset: None,
                    broker_epoch: -1,
                    last_caught_up_ms: if p.isr.contains(&id) { now_ms } else { 0 },
                    last_fetch_leader_leo: leo,
                    last_fetch_ms: now_ms,
                };
                (id, progress)
            })
            .collect();
        self.high_watermark = self.high_watermark.min(leo);
        self.role = Role::Leader(LeaderState {
            epoch: p.leader_epoch,
            isr: p.isr.clone(),
            partition_epoch: p.partition_epoch,
            pending_isr: None,
            retry_after_ms: now_ms,
            followers,
            epoch_start_offset: leo,
            waiting: BTreeMap::new(),
        });
        self.maybe_advance_high_watermark();
    }

    pub(super) fn on_produce(&mut self, now_ms: i64, req: &ProduceRequest) {
        let answer = match self.append_produce(now_ms, req) {
            Ok(None) => return,
            Ok(Some(ack)) => Ok(ack),
            Err(code) => Err(code),
        };
        self.effects.push(Effect::ProduceAnswer {
            request_id: req.request_id,
            result: answer,
        });
    }

    /// Appends (or finds the duplicate of) `req`; `Some` when it is answered now.
    fn append_produce(
        &mut self,
        now_ms: i64,
        req: &ProduceRequest,
    ) -> Result<Option<ProduceAck>, ErrorCode> {
        self.check_produce(req.acks)?;
        if req.records < 1 || req.records > i64::from(i32::MAX) {
            return Err(ErrorCode::CorruptMessage);
        }
        let Role::Leader(l) = &self.role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        let epoch = l.epoch;
        let batch = match self.check_sequence(req)? {
            Some(dup) => dup,
            None => {
                let base = self.log.log_end_offset();
                let batch = Batch {
                    base_offset: base,
                    last_offset: base + req.records - 1,
                    leader_epoch: epoch,
                    producer_id: req.producer_id,
                    base_sequence: req.base_sequence,
                    payload: req.payload,
                };
                self.log
                    .append(batch)
                    .map_err(|_| ErrorCode::KafkaStorageError)?;
                self.effects.push(Effect::Append(vec![batch]));
                batch
            }
        };
        Ok(self.wait_for(now_ms, req.request_id, req.acks, &batch, req.deadline_ms))
    }

    /// Before a produce's append (the server's, whose storage log appends): refused when
    /// this replica does not lead (NOT_LEADER_OR_FOLLOWER), for acks=all while the ISR is
    /// smaller than `min.insync.replicas` (NOT_ENOUGH_REPLICAS), or when
    /// `PENDING_PRODUCES_MAX` produces already wait (REQUEST_TIMED_OUT).
    ///
    /// # Errors
    /// The code to answer the produce with.
    pub fn check_produce(&self, acks: Acks) -> Result<(), ErrorCode> {
        let Role::Leader(l) = &self.role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        if acks == Acks::All && l.isr.len() < self.config.min_insync_replicas {
            return Err(ErrorCode::NotEnoughReplicas);
        }
        if l.waiting.len() >= limits::PENDING_PRODUCES_MAX {
            return Err(ErrorCode::RequestTimedOut);
        }
        Ok(())
    }

    /// The server's produce after its storage log appended `batch` (or found it a
    /// duplicate of the batch at those offsets: then `duplicate`): the mirror takes a new
    /// batch, and the answer is now (acks=1, or the high watermark passed it) or later.
    pub(super) fn on_appended(&mut self, now_ms: i64, appended: &Appended) {
        let answer = match self.take_appended(now_ms, appended) {
            Ok(None) => return,
            Ok(Some(ack)) => Ok(ack),
            Err(code) => Err(code),
        };
        self.effects.push(Effect::ProduceAnswer {
            request_id: appended.request_id,
            result: answer,
        });
    }

    fn take_appended(
        &mut self,
        now_ms: i64,
        a: &Appended,
    ) -> Result<Option<ProduceAck>, ErrorCode> {
        let Role::Leader(l) = &self.role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        if l.waiting.len() >= limits::PENDING_PRODUCES_MAX {
            return Err(ErrorCode::RequestTimedOut);
        }
        // The server may have shown the mirror this append already
        // (`Replica::observe_log_end`): then it is below the log end and not appended again.
        if !a.duplicate && a.batch.base_offset >= self.log.log_end_offset() {
            self.log
                .append(a.batch)
                .map_err(|_| ErrorCode::KafkaStorageError)?;
        }
        Ok(self.wait_for(now_ms, a.request_id, a.acks, &a.batch, a.deadline_ms))
    }

    /// The answer to a produce whose batch is `batch`: now for acks=1 or once the high
    /// watermark passed it; else it waits (`Some` answers now).
    fn wait_for(
        &mut self,
        _now_ms: i64,
        request_id: u64,
        acks: Acks,
        batch: &Batch,
        deadline_ms: i64,
    ) -> Option<ProduceAck> {
        let Role::Leader(l) = &mut self.role else {
            unreachable!("checked by the caller")
        };
        let ack = ProduceAck {
            base_offset: batch.base_offset,
            leader_epoch: l.epoch,
        };
        if acks == Acks::Leader || batch.last_offset < self.high_watermark {
            return Some(ack);
        }
        l.waiting
            .insert(request_id, (batch.last_offset, deadline_ms, ack));
        self.maybe_advance_high_watermark();
        None
    }

    /// An idempotent batch's sequence against the producer's last batches: the duplicate
    /// it repeats, none (it is the next), or OUT_OF_ORDER_SEQUENCE_NUMBER.
    fn check_sequence(&self, req: &ProduceRequest) -> Result<Option<Batch>, ErrorCode> {
        if req.producer_id < 0 {
            return Ok(None);
        }
        let mut last_sequence = -1;
        for (i, b) in self.log.producer_batches(req.producer_id).enumerate() {
            if i == 0 {
                last_sequence = b.last_sequence();
            }
            if b.base_sequence == req.base_sequence && b.record_count() == req.records {
                return Ok(Some(*b));
            }
        }
        if req.base_sequence != last_sequence.wrapping_add(1) {
            return Err(ErrorCode::OutOfOrderSequenceNumber);
        }
        Ok(None)
    }

    pub(super) fn on_fetch(&mut self, now_ms: i64, req: &FetchRequest) {
        let result = self.serve_fetch(now_ms, req);
        self.effects.push(Effect::SendFetchResponse {
            to: req.replica_id,
            response: FetchResponse {
                leader_id: self.config.node_id,
                leader_epoch: req.leader_epoch,
                correlation_id: req.correlation_id,
                result,
            },
        });
    }

    fn serve_fetch(&mut self, now_ms: i64, req: &FetchRequest) -> Result<FetchData, ErrorCode> {
        let Role::Leader(l) = &self.role else {
            return Err(ErrorCode::NotLeaderOrFollower);
        };
        if req.leader_epoch < l.epoch {
            return Err(ErrorCode::FencedLeaderEpoch);
        }
        if req.leader_epoch > l.epoch {
            return Err(ErrorCode::UnknownLeaderEpoch);
        }
        if !l.followers.contains_key(&req.replica_id) {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        if let Some(diverging) = self.diverging(req)? {
            return Ok(FetchData {
                high_watermark: self.high_watermark,
                diverging_epoch: Some(diverging),
                batches: Vec::new(),
            });
        }
        self.record_fetch(now_ms, req);
        self.maybe_expand_isr(now_ms, req.replica_id);
        self.maybe_advance_high_watermark();
        Ok(FetchData {
            high_watermark: self.high_watermark,
            diverging_epoch: None,
            batches: self
                .log
                .read(req.fetch_offset, limits::FETCH_BATCHES_MAX)
                .to_vec(),
        })
    }

    /// Fetch v12's divergence check: the follower's last fetched epoch ends here before its
    /// fetch offset, or this log has no such epoch.
    fn diverging(&self, req: &FetchRequest) -> Result<Option<EpochEndOffset>, ErrorCode> {
        let leo = self.log.log_end_offset();
        let Some(last_epoch) = req.last_fetched_epoch else {
            if req.fetch_offset > leo {
                return Err(ErrorCode::OffsetOutOfRange);
            }
            return Ok(None);
        };
        let (epoch, end_offset) = self
            .log
            .end_offset_for_epoch(last_epoch)
            .ok_or(ErrorCode::UnknownLeaderEpoch)?;
        if epoch < last_epoch || end_offset < req.fetch_offset {
            return Ok(Some(EpochEndOffset { epoch, end_offset }));
        }
        Ok(None)
    }

    /// Kafka's `updateFollowerFetchState`.
    fn record_fetch(&mut self, now_ms: i64, req: &FetchRequest) {
        let leo = self.log.log_end_offset();
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let Some(f) = l.followers.get_mut(&req.replica_id) else {
            return;
        };
        if req.fetch_offset >= leo {
            f.last_caught_up_ms = f.last_caught_up_ms.max(now_ms);
        } else if req.fetch_offset >= f.last_fetch_leader_leo {
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.last_fetch_leader_leo = leo;
        f.last_fetch_ms = now_ms;
        f.log_end_offset = Some(req.fetch_offset);
        f.broker_epoch = req.replica_epoch;
    }

    fn maybe_expand_isr(&mut self, now_ms: i64, id: i32) {
        let hw = self.high_watermark;
        let Role::Leader(l) = &self.role else {
            return;
        };
        if l.isr.contains(&id) || l.pending_isr.is_some() || now_ms < l.retry_after_ms {
            return;
        }
        let caught_up = l.followers[&id]
            .log_end_offset
            .is_some_and(|o| o >= hw && o >= l.epoch_start_offset);
        if caught_up {
            let mut isr = l.isr.clone();
            isr.push(id);
            self.propose_isr(now_ms, isr);
        }
    }

    pub(super) fn leader_tick(&mut self, now_ms: i64) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let expired: Vec<u64> = l
            .waiting
            .iter()
            .filter(|(_, (_, deadline, _))| *deadline <= now_ms)
            .map(|(&id, _)| id)
            .collect();
        for request_id in expired {
            l.waiting.remove(&request_id);
            self.effects.push(Effect::ProduceAnswer {
                request_id,
                result: Err(ErrorCode::RequestTimedOut),
            });
        }
        if let Some(p) = &l.pending_isr
            && now_ms - p.sent_ms >= self.config.alter_partition_retry_ms
        {
            l.pending_isr = None;
        }
        self.maybe_shrink_isr(now_ms);
    }

    fn maybe_shrink_isr(&mut self, now_ms: i64) {
        let lag_max = self.config.replica_lag_time_max_ms;
        let me = self.config.node_id;
        let Role::Leader(l) = &self.role else {
            return;
        };
        if l.pending_isr.is_some() || now_ms < l.retry_after_ms {
            return;
        }
        let in_sync = |id: &i32| {
            *id == me
                || l.followers
                    .get(id)
                    .is_some_and(|f| now_ms - f.last_caught_up_ms <= lag_max)
        };
        if l.isr.iter().all(in_sync) {
            return;
        }
        let isr = l.isr.iter().copied().filter(in_sync).collect();
        self.propose_isr(now_ms, isr);
    }

    fn propose_isr(&mut self, now_ms: i64, isr: Vec<i32>) {
        let me = self.config.node_id;
        let broker_epoch = self.broker_epoch;
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let new_isr = isr
            .iter()
            .map(|&id| IsrMember {
                broker_id: id,
                broker_epoch: if id == me {
                    broker_epoch
                } else {
                    l.followers.get(&id).map_or(-1, |f| f.broker_epoch)
                },
            })
            .collect();
        self.effects
            .push(Effect::SendAlterPartition(AlterPartition {
                broker_id: me,
                broker_epoch,
                topic_id: self.topic_id,
                partition: self.partition,
                leader_epoch: l.epoch,
                partition_epoch: l.partition_epoch,
                new_isr,
            }));
        l.pending_isr = Some(PendingIsr {
            isr,
            sent_ms: now_ms,
        });
    }

    pub(super) fn on_alter_partition_response(
        &mut self,
        result: Result<PartitionState, ErrorCode>,
    ) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        match result {
            Ok(p) if p.leader_epoch == l.epoch && p.partition_epoch >= l.partition_epoch => {
                l.isr = p.isr;
                l.partition_epoch = p.partition_epoch;
                l.pending_isr = None;
            }
            Ok(_) => {}
            Err(_) => {
                // Refused (a stale partition epoch, an ineligible follower): wait for the
                // metadata, then decide again.
                if let Some(p) = l.pending_isr.take() {
                    l.retry_after_ms = p.sent_ms + self.config.alter_partition_retry_ms;
                }
            }
        }
        self.maybe_advance_high_watermark();
    }

    /// Raises the high watermark to what the maximal ISR has (module docs), and answers the
    /// acks=all produces it now covers.
    pub(super) fn maybe_advance_high_watermark(&mut self) {
        let own = if self.config.acks_all_fsync {
            self.log.durable_offset()
        } else {
            self.log.log_end_offset()
        };
        let min_isr = self.config.min_insync_replicas;
        let me = self.config.node_id;
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let new_hw = if mutant(Mutant::HighWatermarkIsLogEnd) {
            Some(self.log.log_end_offset())
        } else if l.isr.len() < min_isr {
            None
        } else {
            let pending = l.pending_isr.iter().flat_map(|p| p.isr.iter());
            l.isr
                .iter()
                .chain(pending)
                .filter(|&&id| id != me)
                .map(|id| l.followers.get(id).and_then(|f| f.log_end_offset))
                .try_fold(own, |hw, offset| offset.map(|o| hw.min(o)))
        };
        let Some(new_hw) = new_hw.filter(|&hw| hw > self.high_watermark) else {
            return;
        };
        self.high_watermark = new_hw;
        let done: Vec<u64> = l
            .waiting
            .iter()
            .filter(|(_, (last, _, _))| *last < new_hw)
            .map(|(&id, _)| id)
            .collect();
        for request_id in done {
            let (_, _, ack) = l.waiting.remove(&request_id).expect("listed above");
            self.effects.push(Effect::ProduceAnswer {
                request_id,
                result: Ok(ack),
            });
        }
    }
}
