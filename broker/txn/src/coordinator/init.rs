//! InitProducerId: fresh producer ids, epoch bumps, KIP-360 recovery, fencing, producer-id
//! rotation (Kafka's `TransactionCoordinator.handleInitProducerId`).

use super::{Coordinator, fence_and_abort};
use crate::api::InitOutcome;
use crate::error::ErrorCode;
use crate::limits;
use crate::records::{NO_PRODUCER_EPOCH, ProducerId, TxnMetadata, TxnRecord};
use crate::state::TxnState;

/// Kafka's `TransactionMetadata.isEpochExhausted`: one epoch is kept back so fencing an
/// Ongoing transaction can always bump once more.
pub(crate) const fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

impl Coordinator {
    /// InitProducerId. `transactional_id: None` is an idempotent producer: a fresh id with
    /// epoch 0. `expected` is the producer id and epoch of a KIP-360 request (v3+), `None`
    /// for a new producer. See [`InitOutcome`] for what the server does with the answer.
    pub fn init_producer_id(
        &mut self,
        now_ms: i64,
        transactional_id: Option<&str>,
        timeout_ms: i32,
        expected: Option<(ProducerId, i16)>,
    ) -> InitOutcome {
        let Some(id) = transactional_id else {
            let mut records = Vec::new();
            return match self.allocate_producer_id(&mut records) {
                Some(producer_id) => InitOutcome::Done {
                    producer_id,
                    producer_epoch: 0,
                    records,
                },
                None => InitOutcome::Error(ErrorCode::UnknownServerError),
            };
        };
        if id.is_empty() || id.len() > limits::TRANSACTIONAL_ID_BYTES_MAX {
            return InitOutcome::Error(ErrorCode::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return InitOutcome::Error(ErrorCode::InvalidTransactionTimeout);
        }
        if self.pending.contains(id) {
            return InitOutcome::Error(ErrorCode::ConcurrentTransactions);
        }
        match self.txns.get(id).cloned() {
            None => self.init_new(now_ms, id, timeout_ms),
            Some(m) => self.init_existing(now_ms, m, timeout_ms, expected),
        }
    }

    /// A transactional id seen for the first time: a fresh producer id, epoch 0, Empty.
    fn init_new(&mut self, now_ms: i64, id: &str, timeout_ms: i32) -> InitOutcome {
        // Ids with records in flight may be new ones: count them too.
        if self.txns.len() + self.pending.len() >= limits::TXNS_MAX {
            return InitOutcome::Error(ErrorCode::CoordinatorNotAvailable);
        }
        let mut records = Vec::new();
        let Some(producer_id) = self.allocate_producer_id(&mut records) else {
            return InitOutcome::Error(ErrorCode::UnknownServerError);
        };
        let m = TxnMetadata {
            transactional_id: id.to_owned(),
            producer_id,
            last_producer_id: ProducerId::NONE,
            producer_epoch: 0,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: Vec::new(),
            pending_offsets: Vec::new(),
            txn_start_ms: -1,
            last_update_ms: now_ms,
        };
        records.push(self.stage(m));
        InitOutcome::Done {
            producer_id,
            producer_epoch: 0,
            records,
        }
    }

    fn init_existing(
        &mut self,
        now_ms: i64,
        mut m: TxnMetadata,
        timeout_ms: i32,
        expected: Option<(ProducerId, i16)>,
    ) -> InitOutcome {
        if let Some((pid, epoch)) = expected {
            // Kafka's isValidProducerId: the expected id is the current one (its epoch is
            // checked below), or the previous one with an exhausted epoch (a retry after a
            // rotation whose answer was lost).
            let valid = m.producer_epoch == NO_PRODUCER_EPOCH
                || pid == m.producer_id
                || (pid == m.last_producer_id && epoch_exhausted(epoch));
            if !valid {
                return InitOutcome::Error(ErrorCode::ProducerFenced);
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                InitOutcome::Error(ErrorCode::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // Abort first with a bumped epoch (never returned to the client); the
                // client retries after CONCURRENT_TRANSACTIONS and the epoch is bumped again.
                let (aborting, markers) = fence_and_abort(m, now_ms);
                InitOutcome::AbortFirst {
                    records: vec![self.stage(aborting)],
                    markers,
                }
            }
            TxnState::Empty
            | TxnState::CompleteCommit
            | TxnState::CompleteAbort
            | TxnState::Dead => {
                let mut records = Vec::new();
                let exhausted = epoch_exhausted(m.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == m.producer_epoch);
                let moved = if exhausted {
                    self.rotate(&mut m, expected.is_some(), &mut records)
                } else {
                    bump_epoch(&mut m, expected.map(|(_, epoch)| epoch))
                };
                if let Err(code) = moved {
                    return InitOutcome::Error(code);
                }
                m.timeout_ms = timeout_ms;
                m.state = TxnState::Empty;
                m.partitions.clear();
                m.pending_offsets.clear();
                m.txn_start_ms = -1;
                m.last_update_ms = now_ms;
                let (producer_id, producer_epoch) = (m.producer_id, m.producer_epoch);
                records.push(self.stage(m));
                InitOutcome::Done {
                    producer_id,
                    producer_epoch,
                    records,
                }
            }
        }
    }

    /// Kafka's `prepareProducerIdRotation`: a new producer id with epoch 0; the last epoch
    /// is kept only for a KIP-360 request, so its retry is recognised.
    fn rotate(
        &mut self,
        m: &mut TxnMetadata,
        record_last_epoch: bool,
        records: &mut Vec<TxnRecord>,
    ) -> Result<(), ErrorCode> {
        let producer_id = self
            .allocate_producer_id(records)
            .ok_or(ErrorCode::UnknownServerError)?;
        m.last_producer_id = m.producer_id;
        m.last_producer_epoch = if record_last_epoch {
            m.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        m.producer_id = producer_id;
        m.producer_epoch = 0;
        Ok(())
    }
}

/// Kafka's `prepareIncrementProducerEpoch`: sets the new epoch and last epoch, or fences.
fn bump_epoch(m: &mut TxnMetadata, expected_epoch: Option<i16>) -> Result<(), ErrorCode> {
    if epoch_exhausted(m.producer_epoch) {
        // Reached only with an expected epoch that is not the current one.
        return Err(ErrorCode::ProducerFenced);
    }
    let bumped = m.producer_epoch + 1;
    let (epoch, last_epoch) = match expected_epoch {
        // A new producer instance: bump, forget the last epoch.
        None => (bumped, NO_PRODUCER_EPOCH),
        // The producer recovers from an error and nobody else took over: bump.
        Some(e) if m.producer_epoch == NO_PRODUCER_EPOCH || e == m.producer_epoch => {
            (bumped, m.producer_epoch)
        }
        // A retry of a bump whose answer was lost: the current epoch again.
        Some(e) if e == m.last_producer_epoch => (m.producer_epoch, m.last_producer_epoch),
        Some(_) => return Err(ErrorCode::ProducerFenced),
    };
    m.producer_epoch = epoch;
    m.last_producer_epoch = last_epoch;
    Ok(())
}
