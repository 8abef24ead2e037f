//! KIP-890's check that a client's transactional batch belongs to a transaction the
//! transaction coordinator knows: the partition's side of it (Kafka's
//! `VerificationStateEntry` and `VerificationGuard`, kept beside its
//! `ProducerStateManager`). In memory only: a restart or a reopen forgets it, and the next
//! transactional batch is verified again.
//!
//! ```text
//! Produce (txn id T, producer P, epoch E)
//!   Log::start_txn_verification(T, P, E) ─▶ Open          (P's transaction here was verified
//!                                        │                  under T at E: append)
//!                                        └▶ Verify(guard) ─▶ the coordinator: is this
//!                                                             partition in T's ongoing
//!                                                             transaction of P at E?
//!   Log::append_produced(.., TxnAppend { T, P, E, guard })   yes: append
//!   a marker of P (COMMIT or ABORT) ─▶ P's guard and binding are dropped
//! ```
//!
//! A guard is handed out before the coordinator is asked, and a marker of the producer
//! drops it: a transaction that ends between the coordinator's answer and the append (a
//! timeout's abort) leaves the append without its guard, so it is refused instead of
//! opening a transaction no coordinator will ever end (a hanging transaction).
//!
//! Where Sluice is stricter than Kafka: Kafka skips the coordinator whenever the partition
//! has an open transaction of the producer at that epoch, so a request naming any
//! transactional id its sender may write can add batches to another producer's open
//! transaction. Here the open transaction is bound to the transactional id it was verified
//! under, and a request under another id is verified (and refused) by the coordinator.

use std::collections::HashMap;

use crate::error::AppendError;
use crate::limits::TXN_VERIFICATIONS_PER_PARTITION_MAX;
use crate::producer::ProducerStateMap;

/// What [`crate::Log::start_txn_verification`] hands out: the append must carry it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnGuard(u64);

/// What a transactional produce must do before its append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The producer's transaction is open here, verified under this transactional id at
    /// this epoch: append without asking the coordinator.
    Open,
    /// Ask the coordinator whether the partition is in the producer's ongoing transaction;
    /// if so, append with this guard.
    Verify(TxnGuard),
}

/// The transaction a client's append claims its transactional batches belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnAppend<'a> {
    /// The request's transactional id (authorized by the server).
    pub transactional_id: &'a str,
    /// The producer id of its transactional batches.
    pub producer_id: i64,
    /// Their epoch.
    pub producer_epoch: i16,
    /// The guard of a verification the coordinator confirmed (`None` after `Open`).
    pub guard: Option<TxnGuard>,
}

/// A guard handed out and not yet used or dropped.
#[derive(Debug, Clone, Copy)]
struct Pending {
    guard: u64,
    epoch: i16,
}

/// The transactional id an open transaction was verified under.
#[derive(Debug, Clone)]
struct Bound {
    transactional_id: Box<str>,
    epoch: i16,
}

/// The verification state of one partition.
#[derive(Debug, Default)]
pub(crate) struct Verifications {
    next_guard: u64,
    /// By producer id; at most `TXN_VERIFICATIONS_PER_PARTITION_MAX`.
    pending: HashMap<i64, Pending>,
    /// By producer id; at most `TXN_VERIFICATIONS_PER_PARTITION_MAX`.
    bound: HashMap<i64, Bound>,
}

impl Verifications {
    /// Kafka's `maybeStartTransactionVerification`: an epoch older than the producer's
    /// here is refused at once (INVALID_PRODUCER_EPOCH); a transaction open here at this
    /// epoch and bound to this transactional id needs no verification; otherwise the
    /// producer's guard (one per producer: concurrent verifications share it, as Kafka's
    /// do), made if absent.
    pub(crate) fn start(
        &mut self,
        producers: &ProducerStateMap,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<Admission, AppendError> {
        if let Some(entry) = producers.producer(producer_id)
            && producer_epoch < entry.epoch
        {
            return Err(AppendError::InvalidProducerEpoch {
                producer_id,
                epoch: producer_epoch,
                current: entry.epoch,
            });
        }
        if self.is_bound(producers, transactional_id, producer_id, producer_epoch) {
            return Ok(Admission::Open);
        }
        if !self.pending.contains_key(&producer_id)
            && self.pending.len() >= TXN_VERIFICATIONS_PER_PARTITION_MAX
        {
            self.drop_oldest_pending();
        }
        let next = &mut self.next_guard;
        let pending = self.pending.entry(producer_id).or_insert_with(|| {
            *next += 1;
            Pending {
                guard: *next,
                epoch: producer_epoch,
            }
        });
        pending.epoch = pending.epoch.max(producer_epoch);
        Ok(Admission::Verify(TxnGuard(pending.guard)))
    }

    /// Whether a client's transactional data batch of `producer_id` at `producer_epoch`
    /// may be appended under `txn` (Kafka's `batchMissingRequiredVerification`, with the
    /// binding above).
    pub(crate) fn admits(
        &self,
        producers: &ProducerStateMap,
        txn: &TxnAppend<'_>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), AppendError> {
        let refused = |reason| AppendError::InvalidTxnState {
            producer_id,
            reason,
        };
        if producer_id != txn.producer_id || producer_epoch != txn.producer_epoch {
            return Err(refused(
                "a transactional batch of another producer or epoch than the one verified",
            ));
        }
        if self.is_bound(producers, txn.transactional_id, producer_id, producer_epoch) {
            return Ok(());
        }
        let guarded = txn
            .guard
            .zip(self.pending.get(&producer_id))
            .is_some_and(|(TxnGuard(guard), pending)| guard == pending.guard);
        if guarded {
            Ok(())
        } else {
            Err(refused("Record was not part of an ongoing transaction"))
        }
    }

    /// A verified transactional batch was appended: its transaction is open here, bound to
    /// the transactional id, and the guard is used up.
    pub(crate) fn appended(&mut self, txn: &TxnAppend<'_>) {
        self.pending.remove(&txn.producer_id);
        if !self.bound.contains_key(&txn.producer_id)
            && self.bound.len() >= TXN_VERIFICATIONS_PER_PARTITION_MAX
        {
            // Unbound, the next batch is verified again: slower, never wrong.
            return;
        }
        self.bound.insert(
            txn.producer_id,
            Bound {
                transactional_id: txn.transactional_id.into(),
                epoch: txn.producer_epoch,
            },
        );
    }

    /// A marker of `producer_id` was written: its transaction here ended, and so does
    /// any verification in flight.
    pub(crate) fn marker_written(&mut self, producer_id: i64) {
        self.pending.remove(&producer_id);
        self.bound.remove(&producer_id);
    }

    fn is_bound(
        &self,
        producers: &ProducerStateMap,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> bool {
        let open = producers
            .producer(producer_id)
            .is_some_and(|e| e.txn_first_offset.is_some() && e.epoch == producer_epoch);
        open && self
            .bound
            .get(&producer_id)
            .is_some_and(|b| b.epoch == producer_epoch && &*b.transactional_id == transactional_id)
    }

    /// At the cap, the guard handed out longest ago goes (its append, if it ever comes, is
    /// refused and retried by the client).
    fn drop_oldest_pending(&mut self) {
        let oldest = self
            .pending
            .iter()
            .min_by_key(|(_, p)| p.guard)
            .map(|(&id, _)| id);
        if let Some(producer_id) = oldest {
            tracing::warn!(
                producer_id,
                limit = TXN_VERIFICATIONS_PER_PARTITION_MAX,
                "transaction verifications full; dropping the oldest"
            );
            self.pending.remove(&producer_id);
        }
    }
}
