//! The runner's steps between events: the transaction boundary, the chunk's calls, routing
//! and appends, failures.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{
    AfterAbort, CallError, CallErrorKind, Chunk, DeadLetter, Effect, Finish, Held, LastError,
    OutputRecord, Phase, ReadResult, Runner, SourceRecord, State, StepError, StepErrorKind, Target,
    TargetPartition, Then, Txn, add_sequence, next_backoff,
};
use crate::limits::{
    TRANSFORM_IDLE_COMMIT_MS, TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX, TRANSFORM_TXN_OUTPUT_BYTES_MAX,
};
use crate::partitioning::output_partition;
use crate::spec::OnError;

impl<I: SourceRecord, O: OutputRecord> Runner<I, O> {
    pub(super) fn expect(&self, phase: &Phase, event: &str) {
        assert_eq!(&self.phase, phase, "{event} answers the effect in progress");
    }

    /// Enters `phase` and returns its effect.
    pub(super) fn go(&mut self, phase: Phase) -> Effect<I, O> {
        let effect = match &phase {
            Phase::InitProducer => Effect::InitProducer,
            Phase::FetchPosition => Effect::FetchPosition,
            Phase::Read => Effect::Read {
                from: self.position,
            },
            Phase::Call(range) => Effect::Call {
                range: range.clone(),
            },
            Phase::Commit => Effect::Commit {
                position: self.position,
            },
            Phase::Abort => Effect::Abort,
            other => unreachable!("{other:?} has its own entry"),
        };
        if matches!(phase, Phase::InitProducer | Phase::FetchPosition) {
            self.status.state = State::Starting;
        }
        self.phase = phase;
        effect
    }

    pub(super) fn idle(&mut self, state: State) -> Effect<I, O> {
        debug_assert!(self.txn.is_none() && self.chunk.is_none());
        self.phase = Phase::Idle;
        self.status.state = state;
        self.status.held = None; // not reading: not waiting on anyone
        Effect::Idle
    }

    /// Keeps [`Status::held`] true to the last read: set (with when it began) while reads
    /// find the same open transaction holding the source, cleared by anything else.
    pub(super) fn note_held(&mut self, now_ms: i64, read: Option<&ReadResult<I>>) {
        self.status.held = match read {
            Some(&ReadResult::Held {
                producer_id,
                first_offset,
            }) => {
                let same = self
                    .status
                    .held
                    .filter(|h| h.producer_id == producer_id && h.first_offset == first_offset);
                Some(same.unwrap_or(Held {
                    producer_id,
                    first_offset,
                    since_ms: now_ms,
                }))
            }
            _ => None,
        };
    }

    /// Records the last error and returns it.
    pub(super) fn note(
        &mut self,
        now_ms: i64,
        kind: &'static str,
        message: String,
        offset: Option<i64>,
    ) -> LastError {
        let error = LastError {
            kind,
            message,
            offset,
            at_ms: now_ms,
        };
        self.status.last_error = Some(error.clone());
        error
    }

    pub(super) fn fail(&mut self, error: LastError) -> Effect<I, O> {
        self.status.last_error = Some(error);
        self.failure = None;
        if self.asked.stop.is_some() {
            return self.idle(State::Stopped);
        }
        self.idle(State::Failed)
    }

    pub(super) fn backoff(&mut self, now_ms: i64, then: Then) -> Effect<I, O> {
        let until_ms = now_ms + self.backoff_ms;
        self.backoff_ms = next_backoff(self.backoff_ms);
        if matches!(then, Then::InitProducer | Then::FetchPosition) {
            self.status.state = State::Starting;
        }
        self.phase = Phase::Backoff { until_ms, then };
        Effect::Backoff { until_ms }
    }

    /// Between chunks: commit, abort, stop, pause, fail, wait or read.
    pub(super) fn boundary(&mut self, now_ms: i64, nothing_to_read: bool) -> Effect<I, O> {
        debug_assert!(self.chunk.is_none() && self.appends.is_empty());
        if self.txn.as_ref().is_some_and(|t| t.partitions.is_empty())
            && self.position == self.committed
        {
            self.txn = None; // nothing read, nothing written: nothing to commit
        }
        if let Some(txn) = &self.txn {
            let deadline_ms = txn.opened_ms + self.config.commit_interval_ms;
            // Caught up and nothing new for a while: the burst is over, commit it now.
            let idle_ms = txn.read_ms + TRANSFORM_IDLE_COMMIT_MS;
            let due = now_ms >= deadline_ms
                || (nothing_to_read && now_ms >= idle_ms)
                || txn.bytes >= TRANSFORM_TXN_OUTPUT_BYTES_MAX
                || self.failure.is_some()
                || self.asked.pause
                || self.asked.stop.is_some()
                || self.asked.reload;
            return match (due, self.asked.stop) {
                (true, Some(Finish::Abort)) => self.abort(AfterAbort::Stop),
                (true, _) => self.go(Phase::Commit),
                (false, _) if nothing_to_read => self.wait(Some(deadline_ms.min(idle_ms))),
                (false, _) => self.go(Phase::Read),
            };
        }
        self.asked.reload = false;
        if let Some(error) = self.failure.take() {
            return self.fail(error);
        }
        if self.asked.stop.is_some() {
            return self.idle(State::Stopped);
        }
        if self.asked.pause {
            return self.idle(State::Paused);
        }
        self.status.state = State::Running;
        if nothing_to_read {
            return self.wait(None);
        }
        self.go(Phase::Read)
    }

    fn wait(&mut self, until_ms: Option<i64>) -> Effect<I, O> {
        self.phase = Phase::Wait;
        Effect::Wait { until_ms }
    }

    pub(super) fn abort(&mut self, after: AfterAbort) -> Effect<I, O> {
        self.after_abort = after;
        self.go(Phase::Abort)
    }

    /// A command arrived during a Wait or a Backoff: act on it now.
    pub(super) fn interrupt(&mut self, now_ms: i64) -> Effect<I, O> {
        let starting = matches!(
            self.phase,
            Phase::Backoff {
                then: Then::InitProducer | Then::FetchPosition,
                ..
            }
        );
        if starting {
            let state = if self.asked.stop.is_some() {
                State::Stopped
            } else {
                State::Paused
            };
            return self.idle(state);
        }
        self.chunk = None; // a Busy call's chunk: read again after the boundary
        self.boundary(now_ms, false)
    }

    /// Leaves Paused or Failed: from InitProducerId if the producer or the position is not
    /// known for sure, else from the committed position.
    pub(super) fn restart(&mut self) -> Effect<I, O> {
        if self.producer.is_none() {
            return self.go(Phase::InitProducer);
        }
        if !self.position_known {
            return self.go(Phase::FetchPosition);
        }
        self.status.state = State::Running;
        self.go(Phase::Read)
    }

    /// After an abort or a commit of unknown outcome: the producer's sequences and the
    /// committed position are found again from InitProducerId on.
    pub(super) fn forget_position(&mut self) {
        self.producer = None;
        self.position_known = false;
        self.position = self.committed;
        self.status.open_position = self.status.position;
        self.status.txn_opened_ms = None;
        self.chunk = None;
        self.appends.clear();
        self.to_add.clear();
        self.failure = None;
        self.asked.reload = false;
    }

    pub(super) fn open_txn(&mut self, now_ms: i64) {
        if self.txn.is_none() {
            self.txn = Some(Txn {
                opened_ms: now_ms,
                read_ms: now_ms,
                counts: self.config.partition_counts.clone(),
                partitions: std::collections::BTreeSet::new(),
                bytes: 0,
                records_in: 0,
                records_out: vec![0; self.config.outputs as usize],
                skipped: 0,
                dead_lettered: 0,
            });
            self.status.txn_opened_ms = Some(now_ms);
        }
    }

    /// Moves the read position (past records, gaps, control batches or removed records).
    pub(super) fn advance(&mut self, now_ms: i64, to: i64) {
        if to > self.position {
            self.open_txn(now_ms);
            self.position = to;
            self.status.open_position = Some(to);
        }
    }

    pub(super) fn check_read(&self, records: &[I], next_offset: i64) {
        assert!(next_offset >= self.position, "a read never moves back");
        let mut last = self.position - 1;
        for record in records {
            assert!(
                record.offset() > last,
                "records ascend from the read position"
            );
            last = record.offset();
        }
        assert!(next_offset > last, "next_offset is past the last record");
    }

    pub(super) fn count_commit(&mut self, now_ms: i64, txn: &Txn) {
        self.committed = self.position;
        let status = &mut self.status;
        status.position = Some(self.position);
        status.open_position = Some(self.position);
        status.records_in += txn.records_in;
        for (total, n) in status.records_out.iter_mut().zip(&txn.records_out) {
            *total += n;
        }
        status.records_skipped += txn.skipped;
        status.records_dead_lettered += txn.dead_lettered;
        status.transactions += 1;
        status.last_commit_ms = Some(now_ms);
        status.txn_opened_ms = None;
    }

    pub(super) fn chunk_mut(&mut self) -> &mut Chunk<I, O> {
        self.chunk.as_mut().expect("a chunk is being called")
    }

    pub(super) fn txn_mut(&mut self) -> &mut Txn {
        self.txn.as_mut().expect("a chunk has a transaction")
    }

    pub(super) fn call_next(&mut self, now_ms: i64) -> Effect<I, O> {
        match self.chunk_mut().bisect.next_call() {
            Some(range) => self.go(Phase::Call(range)),
            None => self.finish_chunk(now_ms),
        }
    }

    /// Output indices and the call's bytes, checked before anything is kept.
    pub(super) fn check_outputs(&self, outputs: Vec<O>) -> Result<Vec<O>, CallError> {
        if let Some(bad) = outputs.iter().find(|o| o.output() >= self.config.outputs) {
            let message = format!(
                "a record routed to output {} of {} outputs",
                bad.output(),
                self.config.outputs
            );
            return Err(CallError {
                kind: CallErrorKind::Contract,
                message,
            });
        }
        let bytes: u64 = outputs.iter().map(OutputRecord::size_bytes).sum();
        if bytes > TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX {
            let message = format!(
                "the call's output is {bytes} bytes, over TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX ({TRANSFORM_OUTPUT_BYTES_PER_CALL_MAX})"
            );
            return Err(CallError {
                kind: CallErrorKind::TooLarge,
                message,
            });
        }
        Ok(outputs)
    }

    pub(super) fn call_failed(
        &mut self,
        now_ms: i64,
        range: Range<usize>,
        error: CallError,
    ) -> Effect<I, O> {
        let stop = self.config.on_error == OnError::Stop;
        let chunk = self.chunk_mut();
        let failed_before = chunk.bisect.failed_ranges().len();
        chunk.errors.insert(range.start, error);
        chunk.bisect.on_result(range, false);
        // Under stop nothing after the first failed record is kept: no need to look further.
        if stop && chunk.bisect.failed_ranges().len() > failed_before {
            return self.finish_chunk(now_ms);
        }
        self.call_next(now_ms)
    }

    /// Every call of the chunk answered: apply the policy, route, queue the appends.
    pub(super) fn finish_chunk(&mut self, now_ms: i64) -> Effect<I, O> {
        let mut chunk = self.chunk.take().expect("a chunk is being called");
        let failed = chunk.bisect.failed_ranges().to_vec();
        let mut consumed = chunk.inputs.len();
        let mut dead = Vec::new();
        let mut skipped = 0u64;
        for range in &failed {
            let error = &chunk.errors[&range.start];
            let offset = chunk.inputs[range.start].offset();
            let noted = self.note(
                now_ms,
                error.kind.as_str(),
                error.message.clone(),
                Some(offset),
            );
            match self.config.on_error {
                OnError::Stop => {
                    consumed = range.start;
                    chunk.end = offset;
                    self.failure = Some(noted);
                    break;
                }
                OnError::Skip => skipped += range.len() as u64,
                OnError::DeadLetter => {
                    let records = &chunk.inputs[range.clone()];
                    dead.extend(records.iter().map(|r| DeadLetter::new(r.clone(), error)));
                }
            }
        }
        let outputs = std::mem::take(&mut chunk.outputs);
        let txn = self.txn_mut();
        txn.records_in += consumed as u64;
        txn.skipped += skipped;
        txn.dead_lettered += dead.len() as u64;
        self.queue_appends(outputs, dead);
        self.chunk = Some(chunk);
        if self.to_add.is_empty() {
            return self.next_append(now_ms);
        }
        self.phase = Phase::AddPartitions;
        Effect::AddPartitions {
            partitions: self.to_add.clone(),
        }
    }

    /// Groups the records by target partition (input order kept within each), assigns
    /// sequences and lists the partitions the transaction has not touched yet.
    fn queue_appends(&mut self, outputs: Vec<O>, dead: Vec<DeadLetter<I>>) {
        let partitioning = self.config.partitioning;
        let source = self.config.source_partition;
        let txn = self.txn.as_mut().expect("a chunk has a transaction");
        let mut routed: BTreeMap<TargetPartition, Vec<O>> = BTreeMap::new();
        for record in outputs {
            let output = record.output();
            let count = txn.counts[output as usize];
            let partition = record.partition().map_or_else(
                || output_partition(partitioning, record.key(), source, count),
                |chosen| chosen % count,
            );
            txn.bytes += record.size_bytes();
            txn.records_out[output as usize] += 1;
            let tp = TargetPartition {
                target: Target::Output(output),
                partition,
            };
            routed.entry(tp).or_default().push(record);
        }
        let mut letters: BTreeMap<u32, Vec<DeadLetter<I>>> = BTreeMap::new();
        for letter in dead {
            // Dead letters exist only under `dead-letter`, whose topic's count follows the outputs'.
            let count = txn.counts[self.config.outputs as usize];
            let partition = output_partition(partitioning, letter.record.key(), source, count);
            txn.bytes += letter.record.size_bytes();
            letters.entry(partition).or_default().push(letter);
        }
        let dead_tps = letters.keys().map(|&partition| TargetPartition {
            target: Target::DeadLetter,
            partition,
        });
        self.to_add = routed
            .keys()
            .copied()
            .chain(dead_tps)
            .filter(|tp| !txn.partitions.contains(tp))
            .collect();
        for (tp, records) in routed {
            let base_sequence = self.next_sequence(tp, records.len());
            let Target::Output(output) = tp.target else {
                unreachable!()
            };
            let partition = tp.partition;
            self.appends.push_back(Effect::Append {
                output,
                partition,
                base_sequence,
                records,
            });
        }
        for (partition, records) in letters {
            let tp = TargetPartition {
                target: Target::DeadLetter,
                partition,
            };
            let base_sequence = self.next_sequence(tp, records.len());
            self.appends.push_back(Effect::AppendDeadLetters {
                partition,
                base_sequence,
                records,
            });
        }
    }

    fn next_sequence(&mut self, tp: TargetPartition, records: usize) -> i32 {
        let next = self.sequences.entry(tp).or_insert(0);
        let base = *next;
        *next = add_sequence(base, records);
        base
    }

    pub(super) fn next_append(&mut self, now_ms: i64) -> Effect<I, O> {
        if let Some(effect) = self.appends.pop_front() {
            self.phase = Phase::Append;
            return effect;
        }
        let chunk = self.chunk.take().expect("appends belong to a chunk");
        self.advance(now_ms, chunk.end);
        self.boundary(now_ms, false)
    }

    pub(super) fn append_failed(
        &mut self,
        now_ms: i64,
        kind: &'static str,
        e: StepError,
    ) -> Effect<I, O> {
        let error = self.note(now_ms, kind, e.message, None);
        self.chunk = None;
        self.appends.clear();
        self.to_add.clear();
        match e.kind {
            StepErrorKind::Fenced => {
                self.txn = None;
                self.forget_position();
                self.status.last_error = Some(LastError {
                    kind: "fenced",
                    ..error
                });
                self.idle(State::Stopped)
            }
            StepErrorKind::Fatal => self.abort(AfterAbort::Fail(error)),
            StepErrorKind::Retriable if self.asked.stop.is_some() => self.abort(AfterAbort::Stop),
            StepErrorKind::Retriable => self.abort(AfterAbort::Restart),
        }
    }
}
