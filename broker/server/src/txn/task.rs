//! The coordinator task: replays the transaction log, finishes what it left prepared, then
//! serves one command at a time (persist its records, then its markers, then answer), runs
//! the coordinator's timer, retries markers that could not be written, and compacts the log.

use std::sync::Arc;
use std::time::Duration;

use sluice_txn::{
    Coordinator, EndOutcome, ErrorCode, InitOutcome, ProducerId, TxnConfig, TxnProtocol, TxnRecord,
    WriteMarkers,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Command, EndAnswer, InitRequest, TxnLog, TxnProducer, markers};
use crate::broker::Broker;
use crate::group::GroupHandle;
use crate::limits;

/// The coordinator task's state.
struct Task {
    coordinator: Coordinator,
    /// `None` only while an append or compaction has it on the blocking pool.
    log: Option<TxnLog>,
    broker: Arc<Broker>,
    groups: GroupHandle,
    /// When markers that failed are next written again (ms since the Unix epoch); `None`
    /// when none are owed.
    markers_retry_at: Option<i64>,
}

/// Starts the task on the current runtime.
pub(super) fn spawn(
    config: TxnConfig,
    broker: Arc<Broker>,
    groups: GroupHandle,
    log: TxnLog,
    records: Vec<TxnRecord>,
    commands: mpsc::Receiver<Command>,
) -> JoinHandle<()> {
    let mut coordinator = Coordinator::new(config);
    let loaded = records.len();
    coordinator.load(records);
    tracing::info!(
        records = loaded,
        transactional_ids = coordinator.list(&[], &[]).len(),
        "loaded the transaction coordinator"
    );
    let task = Task {
        coordinator,
        log: Some(log),
        broker,
        groups,
        markers_retry_at: None,
    };
    tokio::spawn(task.run(commands))
}

impl Task {
    fn now_ms(&self) -> i64 {
        self.broker.now_ms()
    }

    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        // Transactions the log left prepared: their decision is durable, finish them.
        self.retry_markers().await;
        loop {
            let sleep = self.sleep_duration();
            tokio::select! {
                command = commands.recv() => match command {
                    None | Some(Command::Shutdown) => break,
                    Some(command) => self.on_command(command).await,
                },
                () = tokio::time::sleep(sleep) => self.on_timer().await,
            }
            self.maybe_compact().await;
        }
        if let Some(log) = self.log.take()
            && let Err(e) = tokio::task::spawn_blocking(move || log.close())
                .await
                .unwrap_or(Ok(()))
        {
            tracing::error!(error = %e, "closing the transaction log failed");
        }
    }

    fn sleep_duration(&self) -> Duration {
        let now = self.now_ms();
        let next = self
            .markers_retry_at
            .map_or(self.coordinator.next_deadline_ms(), |at| {
                at.min(self.coordinator.next_deadline_ms())
            });
        let wait_ms = next
            .saturating_sub(now)
            .clamp(0, limits::TXN_TIMER_SLEEP_MAX_MS);
        Duration::from_millis(u64::try_from(wait_ms).unwrap_or(0))
    }

    async fn on_command(&mut self, command: Command) {
        match command {
            Command::InitProducerId { request, reply } => {
                reply.send(self.init_producer_id(request).await).ok();
            }
            Command::AddPartitions {
                txn,
                partitions,
                reply,
            } => {
                let (now, (id, pid, epoch)) = (self.now_ms(), parts(&txn));
                let records = self
                    .coordinator
                    .add_partitions(now, id, pid, epoch, &partitions);
                reply.send(self.persist_result(records).await).ok();
            }
            Command::VerifyPartitions {
                txn,
                partitions,
                reply,
            } => {
                let (id, pid, epoch) = parts(&txn);
                let verified = self
                    .coordinator
                    .verify_partitions(id, pid, epoch, &partitions);
                reply.send(verified).ok();
            }
            Command::AddOffsets {
                txn,
                group_id,
                reply,
            } => {
                let (now, (id, pid, epoch)) = (self.now_ms(), parts(&txn));
                let records = self.coordinator.add_offsets(now, id, pid, epoch, &group_id);
                reply.send(self.persist_result(records).await).ok();
            }
            Command::CommitOffsets {
                txn,
                group_id,
                offsets,
                protocol,
                reply,
            } => {
                let (now, (id, pid, epoch)) = (self.now_ms(), parts(&txn));
                let records = self
                    .coordinator
                    .txn_offset_commit(now, id, pid, epoch, &group_id, &offsets, protocol);
                reply.send(self.persist_result(records).await).ok();
            }
            Command::EndTxn {
                txn,
                commit,
                protocol,
                reply,
            } => {
                let answer = self.end_txn(&txn, commit, protocol).await;
                reply.send(answer).ok();
            }
            Command::Describe {
                transactional_ids,
                reply,
            } => {
                let described = transactional_ids
                    .iter()
                    .map(|id| self.coordinator.describe(id))
                    .collect();
                reply.send(described).ok();
            }
            Command::List {
                states,
                producer_ids,
                reply,
            } => {
                reply
                    .send(self.coordinator.list(&states, &producer_ids))
                    .ok();
            }
            Command::Shutdown => {}
        }
    }

    /// InitProducerId. An open transaction of the id is aborted first (fencing its
    /// producer), and once its markers are written the request is served again, so the
    /// client gets its new epoch at once.
    async fn init_producer_id(&mut self, request: InitRequest) -> Result<(i64, i16), ErrorCode> {
        let InitRequest {
            transactional_id,
            timeout_ms,
            expected,
        } = request;
        let expected = expected.map(|(pid, epoch)| (sluice_txn::ProducerId(pid), epoch));
        for _ in 0..2 {
            let now = self.now_ms();
            let outcome = self.coordinator.init_producer_id(
                now,
                transactional_id.as_deref(),
                timeout_ms,
                expected,
            );
            match outcome {
                InitOutcome::Done {
                    producer_id,
                    producer_epoch,
                    records,
                } => {
                    return match self.persist(&records).await {
                        true => Ok((producer_id.0, producer_epoch)),
                        false => Err(ErrorCode::CoordinatorNotAvailable),
                    };
                }
                InitOutcome::AbortFirst { records, markers } => {
                    if !self.persist(&records).await {
                        return Err(ErrorCode::CoordinatorNotAvailable);
                    }
                    self.finish(&markers).await;
                }
                InitOutcome::Error(code) => return Err(code),
            }
        }
        // The abort's markers are not all written yet: the client retries.
        Err(ErrorCode::ConcurrentTransactions)
    }

    /// EndTxn: answered after the decision is durable and the markers are written (or owed:
    /// the decision stands, the markers follow). With protocol v2 the answer carries the
    /// producer id and epoch the transactional id has then.
    async fn end_txn(
        &mut self,
        txn: &TxnProducer,
        commit: bool,
        protocol: TxnProtocol,
    ) -> EndAnswer {
        let (now, (id, pid, epoch)) = (self.now_ms(), parts(txn));
        match self
            .coordinator
            .end_txn(now, id, pid, epoch, commit, protocol)
        {
            EndOutcome::Prepared { records, markers } => {
                if !self.persist(&records).await {
                    return EndAnswer::error(ErrorCode::CoordinatorNotAvailable);
                }
                self.finish(&markers).await;
                self.ended(id)
            }
            EndOutcome::AlreadyDone {
                producer_id,
                producer_epoch,
            } => EndAnswer {
                error: ErrorCode::None,
                producer_id: producer_id.0,
                producer_epoch,
            },
            EndOutcome::Error(code) => EndAnswer::error(code),
        }
    }

    /// The answer to an EndTxn whose decision is durable: the pair the id has now. While
    /// markers that move the id to a new producer id are owed, that id is not known yet:
    /// CONCURRENT_TRANSACTIONS, and the client's retry gets it once they are written.
    fn ended(&self, transactional_id: &str) -> EndAnswer {
        match self.coordinator.txn(transactional_id) {
            Some(m) if !(m.state.is_prepare() && m.producer_epoch == i16::MAX) => EndAnswer {
                error: ErrorCode::None,
                producer_id: m.producer_id.0,
                producer_epoch: m.producer_epoch,
            },
            _ => EndAnswer::error(ErrorCode::ConcurrentTransactions),
        }
    }

    /// The coordinator's timer: aborts of timed-out transactions, expired ids, and markers
    /// owed from earlier failures.
    async fn on_timer(&mut self) {
        let now = self.now_ms();
        if now >= self.coordinator.next_deadline_ms() {
            let tick = self.coordinator.on_tick(now);
            if !tick.markers.is_empty() {
                tracing::info!(
                    transactions = tick.markers.len(),
                    "aborting transactions open past their timeout"
                );
            }
            if self.persist(&tick.records).await {
                for markers in &tick.markers {
                    self.finish(markers).await;
                }
            }
        }
        if self.markers_retry_at.is_some_and(|at| now >= at) {
            self.retry_markers().await;
        }
    }

    /// Writes the markers of every prepared transaction (at start, and after a failure).
    async fn retry_markers(&mut self) {
        self.markers_retry_at = None;
        for markers in self.coordinator.recovery_effects() {
            self.finish(&markers).await;
        }
    }

    /// Writes a prepared transaction's markers, then persists its completion; on a failure
    /// the transaction stays prepared and is retried after `TXN_MARKER_RETRY_MS`.
    async fn finish(&mut self, markers: &WriteMarkers) {
        if markers::write(&self.broker, &self.groups, markers).await {
            let records = self
                .coordinator
                .markers_written(self.now_ms(), &markers.transactional_id);
            if self.persist(&records).await {
                return;
            }
        }
        self.markers_retry_at = Some(self.now_ms().saturating_add(limits::TXN_MARKER_RETRY_MS));
    }

    /// Persists a call's records and answers with the outcome.
    async fn persist_result(&mut self, records: Result<Vec<TxnRecord>, ErrorCode>) -> ErrorCode {
        match records {
            Ok(records) if self.persist(&records).await => ErrorCode::None,
            Ok(_) => ErrorCode::CoordinatorNotAvailable,
            Err(code) => code,
        }
    }

    /// Appends `records` to the transaction log (fsynced under `sluice.acks.all.fsync`)
    /// and then applies them; on failure the coordinator forgets them. Empty: nothing to do.
    async fn persist(&mut self, records: &[TxnRecord]) -> bool {
        if records.is_empty() {
            return true;
        }
        let Some(mut log) = self.log.take() else {
            self.coordinator.persist_failed(records);
            return false;
        };
        let owned = records.to_vec();
        let worked = tokio::task::spawn_blocking(move || {
            let refs: Vec<&TxnRecord> = owned.iter().collect();
            let result = log.append(&refs);
            (log, result)
        })
        .await;
        let Ok((log, result)) = worked else {
            tracing::error!("the transaction-log append panicked; transactions now fail");
            self.coordinator.persist_failed(records);
            return false;
        };
        self.log = Some(log);
        match result {
            Ok(()) => {
                self.coordinator.apply(records);
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "appending to the transaction log failed");
                self.coordinator.persist_failed(records);
                false
            }
        }
    }

    /// Cleans the log in place when the cleaner finds it due (`CompactedLog::clean_if_due`:
    /// at most once per check interval), on the blocking pool.
    async fn maybe_compact(&mut self) {
        if !self.log.as_ref().is_some_and(TxnLog::clean_check_due) {
            return;
        }
        let Some(mut log) = self.log.take() else {
            return;
        };
        let worked = tokio::task::spawn_blocking(move || {
            let result = log.clean_if_due();
            (log, result)
        })
        .await;
        let Ok((log, result)) = worked else {
            tracing::error!("cleaning the transaction log panicked");
            return;
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "cleaning the transaction log failed; it is unchanged");
        }
        self.log = Some(log);
    }
}

/// A request's producer as the coordinator's calls take it.
fn parts(txn: &TxnProducer) -> (&str, ProducerId, i16) {
    (
        txn.transactional_id.as_str(),
        ProducerId(txn.producer_id),
        txn.producer_epoch,
    )
}
