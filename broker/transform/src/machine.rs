//! The runner of one source partition as a deterministic state machine
//! (docs/design/materialized-transforms.md, "The runner", "The exactly-once protocol",
//! "Recovery after kill -9"). The server's task carries out one [`Effect`] at a time and
//! feeds back its answer; the runner decides everything else.
//!
//! ```text
//! start ─▶ InitProducer ─▶ FetchPosition ─▶ Read ─▶ Call (bisect on failure) ─▶ AddPartitions
//!             ▲   (retry)                    ▲  │                                    │
//!             │                              │  └─ nothing: Wait ─▶ on_tick          ▼
//!          Backoff ◀── Abort ◀── append failed  ◀──────────────────────────────── Append ...
//!                                            │                                        │
//!                                            └──── Commit (interval, bytes, pause, ◀──┘
//!                                                  stop, reload, a stop failure)
//! ```
//!
//! The server's loop:
//!
//! ```text
//! let mut effect = runner.start(now);
//! loop {
//!     effect = match effect {
//!         InitProducer           => runner.on_producer(now, txns.init_producer_id(..)),
//!         FetchPosition          => runner.on_position(now, groups.fetch_offsets(..) + log start),
//!         Read { from }          => runner.on_read(now, read_committed from `from`),
//!         Call { range }         => runner.on_called(now, plugin on &runner.inputs()[range]),
//!         AddPartitions { .. }   => runner.on_added(now, txns.add_partitions(..)),
//!         Append { .. } | AppendDeadLetters { .. } => runner.on_appended(now, append_one(..)),
//!         Commit { position }    => runner.on_committed(now, add_offsets + commit_offsets
//!                                     + durable wait + end_txn(commit)),
//!         Abort                  => runner.on_aborted(now, end_txn(abort)),
//!         Backoff { until_ms }   => { sleep until until_ms; runner.on_tick(now) }
//!         Wait { until_ms }      => { wait for new records or until_ms; runner.on_tick(now) }
//!         Idle                   => wait for a command,
//!     };
//!     // a command meanwhile: runner.pause(now) / resume(now) / stop(now, finish); if it
//!     // answers Some(e), drop the Wait/Backoff/Idle in progress and carry out e instead.
//! }
//! ```
//!
//! Every answer must answer the effect the runner returned last; anything else is the
//! server's bug and panics. Record counters move only when a transaction commits.

mod api;
mod steps;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;

pub use api::{
    CallError, CallErrorKind, DeadLetter, Effect, Finish, Held, LastError, OutputRecord, Position,
    Producer, ReadResult, RunnerConfig, SourceRecord, State, Status, StepError, StepErrorKind,
    Target, TargetPartition,
};

use crate::limits::{
    TRANSFORM_OUTPUTS_MAX, TRANSFORM_RETRY_BACKOFF_MS, TRANSFORM_RETRY_BACKOFF_MS_MAX,
};
use crate::policy::Bisect;

/// The effect the runner waits on (what the next answer must be).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Created,
    InitProducer,
    FetchPosition,
    Read,
    Call(Range<usize>),
    AddPartitions,
    Append,
    Commit,
    Abort,
    Backoff { until_ms: i64, then: Then },
    Wait,
    Idle,
}

/// What follows a backoff.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Then {
    InitProducer,
    FetchPosition,
    Boundary,
    Call(Range<usize>),
}

/// What follows an abort.
#[derive(Debug, Clone, PartialEq, Eq)]
enum AfterAbort {
    Restart,
    Fail(LastError),
    Stop,
}

/// The open transaction: what it touched and what it will count when it commits.
#[derive(Debug, Clone)]
struct Txn {
    opened_ms: i64,
    /// When records were last read into it (`opened_ms` until then).
    read_ms: i64,
    /// Partition counts of the targets, taken when it opened.
    counts: Vec<u32>,
    partitions: BTreeSet<TargetPartition>,
    bytes: u64,
    records_in: u64,
    records_out: Vec<u64>,
    skipped: u64,
    dead_lettered: u64,
}

/// The records of one read being called, bisected, routed and appended.
#[derive(Debug, Clone)]
struct Chunk<I, O> {
    inputs: Vec<I>,
    bisect: Bisect,
    /// Outputs of the succeeded calls, in input order.
    outputs: Vec<O>,
    /// The error of the last failed call starting at each index.
    errors: BTreeMap<usize, CallError>,
    /// The source position once the chunk's appends are done.
    end: i64,
}

/// Commands waiting for a transaction boundary.
#[derive(Debug, Clone, Copy, Default)]
struct Asked {
    pause: bool,
    stop: Option<Finish>,
    reload: bool,
}

/// The runner of one source partition of one transform.
#[derive(Debug, Clone)]
pub struct Runner<I, O> {
    config: RunnerConfig,
    status: Status,
    phase: Phase,
    /// The committed source position (meaningful once `position_known`).
    committed: i64,
    /// The next source offset to read: `committed` plus the open transaction's reads.
    position: i64,
    position_known: bool,
    producer: Option<Producer>,
    /// The next sequence per target partition, from 0 after each InitProducerId.
    sequences: BTreeMap<TargetPartition, i32>,
    txn: Option<Txn>,
    chunk: Option<Chunk<I, O>>,
    /// Partitions to add before the chunk's appends.
    to_add: Vec<TargetPartition>,
    /// The chunk's appends not yet handed out.
    appends: VecDeque<Effect<I, O>>,
    asked: Asked,
    /// A failure under `stop`: commit what precedes it, then fail.
    failure: Option<LastError>,
    after_abort: AfterAbort,
    /// The next backoff after a transaction or start-up step fails.
    backoff_ms: i64,
    /// The next backoff after a Busy call.
    call_backoff_ms: i64,
}

impl<I: SourceRecord, O: OutputRecord> Runner<I, O> {
    /// A runner for `config`; [`Runner::start`] hands out its first effect.
    ///
    /// # Panics
    /// If the config breaks what `TransformSpec::check` guarantees (the server's bug).
    #[must_use]
    pub fn new(config: RunnerConfig) -> Self {
        assert!((1..=TRANSFORM_OUTPUTS_MAX as u32).contains(&config.outputs));
        assert!(config.commit_interval_ms > 0);
        check_counts(&config, &config.partition_counts);
        let status = Status {
            records_out: vec![0; config.outputs as usize],
            ..Status::default()
        };
        Self {
            config,
            status,
            phase: Phase::Created,
            committed: 0,
            position: 0,
            position_known: false,
            producer: None,
            sequences: BTreeMap::new(),
            txn: None,
            chunk: None,
            to_add: Vec::new(),
            appends: VecDeque::new(),
            asked: Asked::default(),
            failure: None,
            after_abort: AfterAbort::Restart,
            backoff_ms: TRANSFORM_RETRY_BACKOFF_MS,
            call_backoff_ms: TRANSFORM_RETRY_BACKOFF_MS,
        }
    }

    /// The first effect: InitProducer, or Idle when the spec is paused (or a pause or stop
    /// came before the start).
    pub fn start(&mut self, _now_ms: i64) -> Effect<I, O> {
        if self.phase == Phase::Idle && self.status.state == State::Stopped {
            return Effect::Idle;
        }
        assert_eq!(self.phase, Phase::Created, "start is called once");
        if self.config.paused || self.asked.pause {
            self.asked.pause = true;
            return self.idle(State::Paused);
        }
        self.go(Phase::InitProducer)
    }

    /// The counters and state.
    #[must_use]
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The state.
    #[must_use]
    pub fn state(&self) -> State {
        self.status.state
    }

    /// The producer to append and commit with, once InitProducerId answered.
    #[must_use]
    pub fn producer(&self) -> Option<Producer> {
        self.producer
    }

    /// The records of the current read: [`Effect::Call`]'s range indexes them.
    #[must_use]
    pub fn inputs(&self) -> &[I] {
        self.chunk.as_ref().map_or(&[], |c| &c.inputs)
    }

    /// The runner's config.
    #[must_use]
    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    /// New partition counts (outputs in order, then the dead-letter topic), used from the
    /// next transaction on. Call it whenever the topics' shapes change, or before each read.
    ///
    /// # Panics
    /// If the count of counts is wrong or one is 0.
    pub fn set_partition_counts(&mut self, counts: &[u32]) {
        check_counts(&self.config, counts);
        counts.clone_into(&mut self.config.partition_counts);
    }

    /// InitProducerId answered.
    pub fn on_producer(
        &mut self,
        now_ms: i64,
        result: Result<Producer, StepError>,
    ) -> Effect<I, O> {
        self.expect(&Phase::InitProducer, "on_producer");
        match result {
            Ok(producer) => {
                self.producer = Some(producer);
                self.status.producer = Some(producer);
                self.sequences.clear();
                if self.asked.stop.is_some() {
                    return self.idle(State::Stopped);
                }
                self.go(Phase::FetchPosition)
            }
            Err(e) if e.kind == StepErrorKind::Fatal => {
                let error = self.note(now_ms, "producer", e.message, None);
                self.fail(error)
            }
            Err(e) => {
                self.note(now_ms, "producer", e.message, None);
                self.backoff(now_ms, Then::InitProducer)
            }
        }
    }

    /// The committed position and the log start offset.
    pub fn on_position(
        &mut self,
        now_ms: i64,
        result: Result<Position, StepError>,
    ) -> Effect<I, O> {
        self.expect(&Phase::FetchPosition, "on_position");
        let position = match result {
            Ok(position) => position,
            Err(e) if e.kind == StepErrorKind::Fatal => {
                let error = self.note(now_ms, "position", e.message, None);
                return self.fail(error);
            }
            Err(e) => {
                self.note(now_ms, "position", e.message, None);
                return self.backoff(now_ms, Then::FetchPosition);
            }
        };
        let log_start = position.log_start_offset;
        let mut start = position
            .committed
            .or(self.config.start_offset)
            .unwrap_or(log_start);
        if start < log_start {
            self.status.records_lost_to_retention += (log_start - start) as u64;
            start = log_start;
        }
        self.committed = start;
        self.position = start;
        self.position_known = true;
        self.status.position = Some(start);
        self.status.open_position = Some(start);
        self.status.state = State::Running;
        self.boundary(now_ms, false)
    }

    /// The source read answered.
    pub fn on_read(
        &mut self,
        now_ms: i64,
        result: Result<ReadResult<I>, StepError>,
    ) -> Effect<I, O> {
        self.expect(&Phase::Read, "on_read");
        if result.is_ok() {
            self.note_held(now_ms, result.as_ref().ok());
        }
        match result {
            Ok(ReadResult::Records {
                records,
                next_offset,
            }) => {
                self.check_read(&records, next_offset);
                if records.is_empty() {
                    let moved = next_offset > self.position;
                    self.advance(now_ms, next_offset);
                    return self.boundary(now_ms, !moved);
                }
                self.open_txn(now_ms);
                self.txn_mut().read_ms = now_ms;
                let bisect = Bisect::new(records.len());
                self.chunk = Some(Chunk {
                    inputs: records,
                    bisect,
                    outputs: Vec::new(),
                    errors: BTreeMap::new(),
                    end: next_offset,
                });
                self.call_next(now_ms)
            }
            Ok(ReadResult::Nothing | ReadResult::Held { .. }) => self.boundary(now_ms, true),
            Ok(ReadResult::OutOfRange { log_start_offset }) => {
                assert!(
                    log_start_offset > self.position,
                    "out of range below the log start"
                );
                self.status.records_lost_to_retention += (log_start_offset - self.position) as u64;
                self.advance(now_ms, log_start_offset);
                self.boundary(now_ms, false)
            }
            Err(e) => {
                let error = self.note(now_ms, "read", e.message, Some(self.position));
                if e.kind == StepErrorKind::Fatal {
                    self.failure = Some(error);
                    return self.boundary(now_ms, false);
                }
                self.backoff(now_ms, Then::Boundary)
            }
        }
    }

    /// The plugin call on `inputs()[range]` answered.
    pub fn on_called(&mut self, now_ms: i64, result: Result<Vec<O>, CallError>) -> Effect<I, O> {
        let Phase::Call(range) = self.phase.clone() else {
            panic!("on_called answers a Call, not {:?}", self.phase);
        };
        match result.and_then(|outputs| self.check_outputs(outputs)) {
            Ok(outputs) => {
                self.call_backoff_ms = TRANSFORM_RETRY_BACKOFF_MS;
                let chunk = self.chunk_mut();
                chunk.outputs.extend(outputs);
                chunk.bisect.on_result(range, true);
                self.call_next(now_ms)
            }
            Err(e) if e.kind == CallErrorKind::Busy => {
                // Shown in the status (a plugin version that cannot start says why here).
                self.note(now_ms, e.kind.as_str(), e.message, None);
                let until_ms = now_ms + self.call_backoff_ms;
                self.call_backoff_ms = next_backoff(self.call_backoff_ms);
                self.phase = Phase::Backoff {
                    until_ms,
                    then: Then::Call(range),
                };
                Effect::Backoff { until_ms }
            }
            Err(e) if e.kind == CallErrorKind::Stale => {
                // Commit what the old version produced; read this chunk again on the new one.
                self.chunk = None;
                self.asked.reload = true;
                self.boundary(now_ms, false)
            }
            Err(e) => self.call_failed(now_ms, range, e),
        }
    }

    /// A call answered in part: `outputs`, those of the records that passed, and `refused`,
    /// the records that did not (indices into the call's range, increasing, each with its
    /// error): an output topic's validator refusing what the plugin made of them. As if the
    /// call had been bisected down to exactly those records, without the calls: the policy
    /// applies to each refused record, and under `stop` the outputs of the records after
    /// the first are dropped.
    pub fn on_called_in_part(
        &mut self,
        now_ms: i64,
        outputs: Vec<O>,
        refused: Vec<(usize, CallError)>,
    ) -> Effect<I, O> {
        if refused.is_empty() {
            return self.on_called(now_ms, Ok(outputs));
        }
        let Phase::Call(range) = self.phase.clone() else {
            panic!("on_called_in_part answers a Call, not {:?}", self.phase);
        };
        let outputs = match self.check_outputs(outputs) {
            Ok(outputs) => outputs,
            Err(e) => return self.call_failed(now_ms, range, e),
        };
        self.call_backoff_ms = TRANSFORM_RETRY_BACKOFF_MS;
        let stop = self.config.on_error == crate::spec::OnError::Stop;
        let chunk = self.chunk_mut();
        let first_refused = chunk.inputs[range.start + refused[0].0].offset();
        chunk.outputs.extend(
            outputs
                .into_iter()
                .filter(|o| !stop || o.source_offset() < first_refused),
        );
        let failed: Vec<usize> = refused.iter().map(|(i, _)| *i).collect();
        for (i, error) in refused {
            chunk.errors.insert(range.start + i, error);
        }
        chunk.bisect.on_partial(range, &failed);
        if stop {
            return self.finish_chunk(now_ms);
        }
        self.call_next(now_ms)
    }

    /// AddPartitionsToTxn answered.
    pub fn on_added(&mut self, now_ms: i64, result: Result<(), StepError>) -> Effect<I, O> {
        self.expect(&Phase::AddPartitions, "on_added");
        match result {
            Ok(()) => {
                let added = std::mem::take(&mut self.to_add);
                self.txn_mut().partitions.extend(added);
                self.next_append(now_ms)
            }
            Err(e) => self.append_failed(now_ms, "add-partitions", e),
        }
    }

    /// An append (to an output or the dead-letter topic) answered.
    pub fn on_appended(&mut self, now_ms: i64, result: Result<(), StepError>) -> Effect<I, O> {
        self.expect(&Phase::Append, "on_appended");
        match result {
            Ok(()) => self.next_append(now_ms),
            Err(e) => self.append_failed(now_ms, "append", e),
        }
    }

    /// The commit answered. An error leaves the outcome unknown: the runner starts over
    /// from InitProducerId, which finishes the transaction either way, and re-fetches the
    /// committed position.
    pub fn on_committed(&mut self, now_ms: i64, result: Result<(), StepError>) -> Effect<I, O> {
        self.expect(&Phase::Commit, "on_committed");
        let txn = self.txn.take().expect("a commit has a transaction");
        match result {
            Ok(()) => {
                self.count_commit(now_ms, &txn);
                self.backoff_ms = TRANSFORM_RETRY_BACKOFF_MS;
                self.asked.reload = false;
                self.boundary(now_ms, false)
            }
            Err(e) if e.kind == StepErrorKind::Fenced => {
                self.note(now_ms, "fenced", e.message, None);
                self.idle(State::Stopped)
            }
            Err(e) => {
                self.note(now_ms, "commit", e.message, None);
                self.forget_position();
                self.backoff(now_ms, Then::InitProducer)
            }
        }
    }

    /// The abort answered (an error is only noted: the next InitProducerId aborts anyway).
    pub fn on_aborted(&mut self, now_ms: i64, result: Result<(), StepError>) -> Effect<I, O> {
        self.expect(&Phase::Abort, "on_aborted");
        match result {
            Ok(()) => self.status.aborts += 1,
            Err(e) => {
                self.note(now_ms, "abort", e.message, None);
            }
        }
        self.txn = None;
        self.forget_position();
        match std::mem::replace(&mut self.after_abort, AfterAbort::Restart) {
            AfterAbort::Restart => self.backoff(now_ms, Then::InitProducer),
            AfterAbort::Fail(error) => self.fail(error),
            AfterAbort::Stop => self.idle(State::Stopped),
        }
    }

    /// A [`Effect::Backoff`] or [`Effect::Wait`] ended (time passed, or records arrived).
    pub fn on_tick(&mut self, now_ms: i64) -> Effect<I, O> {
        match self.phase.clone() {
            Phase::Backoff { until_ms, .. } if now_ms < until_ms => Effect::Backoff { until_ms },
            Phase::Backoff { then, .. } => match then {
                Then::InitProducer => self.go(Phase::InitProducer),
                Then::FetchPosition => self.go(Phase::FetchPosition),
                Then::Boundary => self.boundary(now_ms, false),
                Then::Call(range) => self.go(Phase::Call(range)),
            },
            Phase::Wait => self.boundary(now_ms, false),
            phase => panic!("on_tick answers a Backoff or a Wait, not {phase:?}"),
        }
    }

    /// Pause at the next transaction boundary (committing first). `Some(effect)`: drop the
    /// Wait, Backoff or Idle in progress and carry out `effect` instead.
    pub fn pause(&mut self, now_ms: i64) -> Option<Effect<I, O>> {
        self.asked.pause = true;
        match self.phase {
            Phase::Idle if self.status.state == State::Failed => Some(self.idle(State::Paused)),
            Phase::Wait | Phase::Backoff { .. } => Some(self.interrupt(now_ms)),
            _ => None,
        }
    }

    /// Resume a paused or failed runner (a failed one also on a new plugin version);
    /// otherwise only cancels a pause not yet reached.
    pub fn resume(&mut self, _now_ms: i64) -> Option<Effect<I, O>> {
        self.asked.pause = false;
        let stopped_here = matches!(self.status.state, State::Paused | State::Failed);
        if self.phase != Phase::Idle || !stopped_here || self.asked.stop.is_some() {
            return None;
        }
        self.failure = None;
        Some(self.restart())
    }

    /// Stop at the next transaction boundary, committing or aborting the open transaction.
    /// `Some(effect)`: as for [`Runner::pause`].
    pub fn stop(&mut self, now_ms: i64, finish: Finish) -> Option<Effect<I, O>> {
        self.asked.stop = Some(finish);
        match self.phase {
            Phase::Created | Phase::Idle if self.status.state != State::Stopped => {
                Some(self.idle(State::Stopped))
            }
            Phase::Wait | Phase::Backoff { .. } => Some(self.interrupt(now_ms)),
            _ => None,
        }
    }
}

fn check_counts(config: &RunnerConfig, counts: &[u32]) {
    assert_eq!(
        counts.len(),
        config.targets(),
        "a partition count per output and dead-letter topic"
    );
    assert!(
        counts.iter().all(|&c| c > 0),
        "a topic has at least one partition"
    );
}

fn next_backoff(ms: i64) -> i64 {
    (ms * 2).min(TRANSFORM_RETRY_BACKOFF_MS_MAX)
}

/// `seq + n`, wrapping to 0 past `i32::MAX` as Kafka's producer sequences do.
fn add_sequence(seq: i32, n: usize) -> i32 {
    ((i64::from(seq) + n as i64) % (i64::from(i32::MAX) + 1)) as i32
}

#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;
