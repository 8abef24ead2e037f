//! [`Coordinator`]: the transactional ids, the producer-id allocator, the persist round
//! trip ([`Coordinator::apply`] / [`Coordinator::persist_failed`]), timers, recovery and
//! the admin views. The transaction APIs are in `coordinator/init.rs` (InitProducerId)
//! and `coordinator/txn.rs` (AddPartitions, AddOffsets, TxnOffsetCommit, EndTxn, markers).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{ListedTxn, Tick, TxnDescription, WriteMarkers};
use crate::config::TxnConfig;
use crate::limits;
use crate::records::{ProducerId, TxnMetadata, TxnRecord};
use crate::state::TxnState;

mod init;
mod txn;

/// The transaction coordinator: a deterministic state machine over the transaction log.
///
/// Its durable state (every transactional id's [`TxnMetadata`] and the producer-id block)
/// changes only through [`Coordinator::load`] and [`Coordinator::apply`], so it is always
/// exactly the replay of the records the server confirmed.
#[derive(Debug)]
pub struct Coordinator {
    config: TxnConfig,
    /// Durable metadata by transactional id.
    txns: BTreeMap<String, TxnMetadata>,
    /// Transactional ids with records handed out and neither applied nor failed yet:
    /// every call on them answers `CONCURRENT_TRANSACTIONS` (Kafka's pending transition).
    pending: BTreeSet<String>,
    /// The next producer id to hand out (never reused, even if its records fail).
    next_producer_id: i64,
    /// End of the durable reserved block: ids below it are covered by an applied record.
    block_end_durable: i64,
    /// The largest block end handed out in a record, applied or not.
    block_end_emitted: i64,
    /// When on_tick next looks for timed-out transactions, ms since the Unix epoch.
    next_abort_check_ms: i64,
    /// When on_tick next looks for expired transactional ids, ms since the Unix epoch.
    next_expire_check_ms: i64,
}

impl Coordinator {
    /// A coordinator with no transactions; both timer checks are due at once.
    pub fn new(config: TxnConfig) -> Self {
        let first_producer_id = config.producer_id_start.max(0);
        Self {
            config,
            txns: BTreeMap::new(),
            pending: BTreeSet::new(),
            next_producer_id: first_producer_id,
            block_end_durable: 0,
            block_end_emitted: 0,
            next_abort_check_ms: 0,
            next_expire_check_ms: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// Replays the transaction log in log order (the last record per key wins). Call once,
    /// after [`Coordinator::new`]; then carry out [`Coordinator::recovery_effects`].
    pub fn load(&mut self, records: impl IntoIterator<Item = TxnRecord>) {
        for record in records {
            self.apply_one(record);
        }
        let mut next = self
            .block_end_durable
            .max(self.next_producer_id)
            .max(self.config.producer_id_start)
            .max(0);
        for m in self.txns.values() {
            next = next.max(m.producer_id.0.saturating_add(1));
            next = next.max(m.last_producer_id.0.saturating_add(1));
        }
        self.next_producer_id = next;
        self.block_end_emitted = self.block_end_emitted.max(self.block_end_durable);
    }

    /// The server appended `records` (as returned by one call, in order) durably: make
    /// them the coordinator's state.
    pub fn apply(&mut self, records: &[TxnRecord]) {
        for record in records {
            if let Some(id) = record.transactional_id() {
                self.pending.remove(id);
            }
            self.apply_one(record.clone());
        }
    }

    /// The server could not append `records`: forget them (the coordinator stays as it
    /// was; answer the request `COORDINATOR_NOT_AVAILABLE`). Producer ids they handed out
    /// are not reused.
    pub fn persist_failed(&mut self, records: &[TxnRecord]) {
        for id in records.iter().filter_map(TxnRecord::transactional_id) {
            self.pending.remove(id);
        }
    }

    fn apply_one(&mut self, record: TxnRecord) {
        match record {
            TxnRecord::ProducerIdBlock { next_producer_id } => {
                self.block_end_durable = self.block_end_durable.max(next_producer_id);
            }
            TxnRecord::Metadata(m) if m.state == TxnState::Dead => {
                self.txns.remove(&m.transactional_id);
            }
            TxnRecord::Metadata(m) => {
                self.txns.insert(m.transactional_id.clone(), m);
            }
            TxnRecord::Tombstone { transactional_id } => {
                self.txns.remove(&transactional_id);
            }
        }
    }

    /// A fresh producer id; pushes a `ProducerIdBlock` record when the id is not covered
    /// by a durable block. `None` when the id space is exhausted.
    fn allocate_producer_id(&mut self, records: &mut Vec<TxnRecord>) -> Option<ProducerId> {
        let id = self.next_producer_id;
        if id > i64::MAX - limits::PRODUCER_ID_BLOCK_SIZE || id >= self.config.producer_id_end {
            return None;
        }
        self.next_producer_id = id + 1;
        if id >= self.block_end_durable {
            // A block already handed out may still fail to persist: every id outside the
            // durable block travels with a record that covers it.
            let end = if self.block_end_emitted > id {
                self.block_end_emitted
            } else {
                (id + limits::PRODUCER_ID_BLOCK_SIZE).min(self.config.producer_id_end)
            };
            self.block_end_emitted = end;
            records.push(TxnRecord::ProducerIdBlock {
                next_producer_id: end,
            });
        }
        Some(ProducerId(id))
    }

    /// Marks the id as having records in flight and wraps the new metadata as a record.
    fn stage(&mut self, m: TxnMetadata) -> TxnRecord {
        self.pending.insert(m.transactional_id.clone());
        TxnRecord::Metadata(m)
    }

    /// The durable metadata of one transactional id.
    pub fn txn(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Number of transactional ids held.
    pub fn len(&self) -> usize {
        self.txns.len()
    }

    /// True when no transactional id is held.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// When the server should next call [`Coordinator::on_tick`], ms since the Unix epoch
    /// (the earlier of the two cleanup intervals' next runs).
    pub fn next_deadline_ms(&self) -> i64 {
        self.next_abort_check_ms.min(self.next_expire_check_ms)
    }

    /// Runs the due cleanups: aborts every Ongoing transaction older than its timeout
    /// (bumping the epoch, which fences the zombie producer), and tombstones every idle
    /// transactional id not updated for `transactional.id.expiration.ms`.
    pub fn on_tick(&mut self, now_ms: i64) -> Tick {
        let mut tick = Tick::default();
        if now_ms >= self.next_abort_check_ms {
            self.abort_timed_out(now_ms, &mut tick);
            self.next_abort_check_ms =
                now_ms.saturating_add(self.config.abort_timed_out_transaction_cleanup_interval_ms);
        }
        if now_ms >= self.next_expire_check_ms {
            self.expire_ids(now_ms, &mut tick);
            self.next_expire_check_ms = now_ms.saturating_add(
                self.config
                    .remove_expired_transactional_id_cleanup_interval_ms,
            );
        }
        tick
    }

    fn abort_timed_out(&mut self, now_ms: i64, tick: &mut Tick) {
        let timed_out: Vec<TxnMetadata> = self
            .txns
            .values()
            .filter(|m| m.state == TxnState::Ongoing && !self.pending.contains(&m.transactional_id))
            .filter(|m| now_ms > m.txn_start_ms.saturating_add(i64::from(m.timeout_ms)))
            .cloned()
            .collect();
        for m in timed_out {
            let (aborting, markers) = fence_and_abort(m, now_ms);
            tick.records.push(self.stage(aborting));
            tick.markers.push(markers);
        }
    }

    fn expire_ids(&mut self, now_ms: i64, tick: &mut Tick) {
        let expiration_ms = self.config.transactional_id_expiration_ms;
        let expired: Vec<String> = self
            .txns
            .values()
            .filter(|m| m.state.is_idle() && !self.pending.contains(&m.transactional_id))
            .filter(|m| m.last_update_ms.saturating_add(expiration_ms) < now_ms)
            .map(|m| m.transactional_id.clone())
            .collect();
        for transactional_id in expired {
            self.pending.insert(transactional_id.clone());
            tick.records.push(TxnRecord::Tombstone { transactional_id });
        }
    }

    /// After [`Coordinator::load`]: the markers of every transaction found in
    /// PrepareCommit or PrepareAbort, to write again before calling
    /// [`Coordinator::markers_written`] for each. Also usable later to retry markers
    /// whose completion record failed to persist.
    #[must_use]
    pub fn recovery_effects(&self) -> Vec<WriteMarkers> {
        self.txns
            .values()
            .filter(|m| m.state.is_prepare() && !self.pending.contains(&m.transactional_id))
            .map(|m| markers_of(m, m.state == TxnState::PrepareCommit))
            .collect()
    }

    /// DescribeTransactions: `None` answers `TRANSACTIONAL_ID_NOT_FOUND`.
    pub fn describe(&self, transactional_id: &str) -> Option<TxnDescription> {
        let m = self.txns.get(transactional_id)?;
        Some(TxnDescription {
            transactional_id: m.transactional_id.clone(),
            state: m.state.name(),
            timeout_ms: m.timeout_ms,
            txn_start_ms: m.txn_start_ms,
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            partitions: m.partitions.clone(),
        })
    }

    /// ListTransactions: ids whose state is in `state_filters` and whose producer id is
    /// in `producer_id_filters` (an empty filter matches all), in id order. Dead ids (being
    /// expired) are never listed, as Kafka's `listTransactionStates`.
    pub fn list(&self, state_filters: &[TxnState], producer_id_filters: &[i64]) -> Vec<ListedTxn> {
        self.txns
            .values()
            .filter(|m| m.state != TxnState::Dead)
            .filter(|m| state_filters.is_empty() || state_filters.contains(&m.state))
            .filter(|m| {
                producer_id_filters.is_empty() || producer_id_filters.contains(&m.producer_id.0)
            })
            .map(|m| ListedTxn {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state.name(),
                txn_start_ms: m.txn_start_ms,
            })
            .collect()
    }

    /// One record per live key (the producer-id block, then every transactional id): the
    /// content of a compacted transaction log. Write it with no records in flight.
    #[must_use]
    pub fn snapshot(&self) -> Vec<TxnRecord> {
        let mut out = Vec::with_capacity(self.txns.len() + 1);
        if self.block_end_durable > 0 {
            out.push(TxnRecord::ProducerIdBlock {
                next_producer_id: self.block_end_durable,
            });
        }
        out.extend(self.txns.values().cloned().map(TxnRecord::Metadata));
        out
    }
}

/// The markers that complete `m`'s transaction.
fn markers_of(m: &TxnMetadata, commit: bool) -> WriteMarkers {
    WriteMarkers {
        transactional_id: m.transactional_id.clone(),
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        commit,
        partitions: m.partitions.clone(),
        offsets_to_commit: if commit {
            m.pending_offsets.clone()
        } else {
            Vec::new()
        },
    }
}

/// Kafka's `prepareFenceProducerEpoch` then PrepareAbort: the epoch is bumped so the
/// producer that owned the transaction is fenced, and the abort markers carry the new
/// epoch. (Kafka cannot bump past `i16::MAX`; neither do we: at the maximum the epoch
/// stays, and the next InitProducerId rotates the producer id.)
fn fence_and_abort(mut m: TxnMetadata, now_ms: i64) -> (TxnMetadata, WriteMarkers) {
    m.producer_epoch = m.producer_epoch.saturating_add(1);
    m.last_producer_epoch = crate::records::NO_PRODUCER_EPOCH;
    m.state = TxnState::PrepareAbort;
    m.last_update_ms = now_ms;
    let markers = markers_of(&m, false);
    (m, markers)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod sim_tests;
