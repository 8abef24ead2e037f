//! A seeded simulation of one runner against a fake source log, a fake plugin and a fake
//! transactional sink, with an oracle for exactly-once.
//!
//! The source holds keyed records with offset gaps and grows while the runner works; what
//! is not visible yet is sometimes reported held back by another producer's open
//! transaction (only a running runner may say it waits on one). The
//! plugin routes by key parity, copies some records to both outputs, drops some, and traps
//! on a poison value. The sink is the coordinator and the output logs in one: it fences
//! stale epochs, checks sequences and that partitions were added, keeps appends of the open
//! transaction apart from committed output, and aborts an open transaction on
//! InitProducerId. Every step may fail (before or after taking effect), calls may answer
//! Busy or Stale, and the runner may crash at any effect: its memory is dropped and a new
//! runner starts from the durable state only (committed output, committed position).
//!
//! Seeds cycle through the three policies and both partitionings.
//!
//! After a chaotic phase, a calm one lets the runner catch up; the oracle then checks that
//! the committed output per output partition is exactly the plugin applied once to every
//! source record below the committed position, in source order (so per-key order holds),
//! and that under `skip` / `dead-letter` exactly the poison records are missing /
//! dead-lettered, and under `stop` the position is the first poison record.

use std::collections::{BTreeMap, BTreeSet};

use sluice_kafka::rng::SplitMix64;

use super::*;
use crate::partitioning::output_partition;
use crate::spec::{OnError, Partitioning};

const SEEDS: u64 = 300;
const CHAOS_STEPS: usize = 1_500;
const CALM_STEPS_MAX: usize = 20_000;
const SOURCE_PARTITION: u32 = 4;
/// Outputs' partition counts, then the dead-letter topic's.
const COUNTS: [u32; 3] = [3, 2, 2];

#[derive(Debug, Clone, PartialEq, Eq)]
struct In {
    offset: i64,
    key: Option<Vec<u8>>,
    value: u32,
}

impl SourceRecord for In {
    fn offset(&self) -> i64 {
        self.offset
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn size_bytes(&self) -> u64 {
        16
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Out {
    output: u32,
    key: Option<Vec<u8>>,
    /// The source offset it came from (duplicates and losses show in the oracle).
    from: i64,
    value: u32,
}

impl OutputRecord for Out {
    fn output(&self) -> u32 {
        self.output
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn size_bytes(&self) -> u64 {
        24
    }
    fn source_offset(&self) -> i64 {
        self.from
    }
}

/// A record in an output or dead-letter partition.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Out(Out),
    Dead { offset: i64, kind: CallErrorKind },
}

fn is_poison(record: &In) -> bool {
    record.value.is_multiple_of(29)
}

/// A record whose outputs an output topic's validator refuses (the call names it).
fn is_refused(record: &In) -> bool {
    !is_poison(record) && record.value.is_multiple_of(31)
}

/// How a record fails, if it does.
fn failure(record: &In) -> Option<CallErrorKind> {
    if is_poison(record) {
        Some(CallErrorKind::Trap)
    } else if is_refused(record) {
        Some(CallErrorKind::Validator)
    } else {
        None
    }
}

/// The fake plugin on one record: dropped, one output by key parity, or both outputs.
fn transform(record: &In) -> Vec<Out> {
    let out = |output| Out {
        output,
        key: record.key.clone(),
        from: record.offset,
        value: record.value,
    };
    let parity = record
        .key
        .as_ref()
        .map_or(record.value, |k| u32::from(k[1]))
        % 2;
    match record.value % 7 {
        0 => vec![],
        1 => vec![out(0), out(1)],
        _ => vec![out(parity)],
    }
}

/// The fake plugin on one call: fails as a whole if any record is poison; else the outputs
/// of the records a validator accepts, and the refused records by index.
#[allow(clippy::type_complexity, reason = "the answer on_called_in_part takes")]
fn call(records: &[In]) -> Result<(Vec<Out>, Vec<(usize, CallError)>), CallError> {
    if let Some(poison) = records.iter().find(|r| is_poison(r)) {
        let message = format!("trap on the value at offset {}", poison.offset);
        return Err(CallError {
            kind: CallErrorKind::Trap,
            message,
        });
    }
    let refused = records
        .iter()
        .enumerate()
        .filter(|(_, r)| is_refused(r))
        .map(|(i, r)| {
            let message = format!("validator refused offset {}", r.offset);
            let kind = CallErrorKind::Validator;
            (i, CallError { kind, message })
        })
        .collect();
    let outputs = records
        .iter()
        .filter(|r| !is_refused(r))
        .flat_map(transform)
        .collect();
    Ok((outputs, refused))
}

/// Coordinator and output logs: only `committed` and `position` survive a crash of the
/// runner (everything here survives; the runner's memory does not).
#[derive(Debug, Default)]
struct Sink {
    epoch: i16,
    added: BTreeSet<TargetPartition>,
    pending: BTreeMap<TargetPartition, Vec<Entry>>,
    sequences: BTreeMap<TargetPartition, i32>,
    committed: BTreeMap<TargetPartition, Vec<Entry>>,
    position: Option<i64>,
}

fn fenced() -> StepError {
    StepError {
        kind: StepErrorKind::Fenced,
        message: "PRODUCER_FENCED".into(),
    }
}

impl Sink {
    fn init(&mut self) -> Producer {
        self.abort();
        self.epoch += 1;
        self.sequences.clear();
        Producer {
            producer_id: 7,
            producer_epoch: self.epoch,
        }
    }
    fn abort(&mut self) {
        self.pending.clear();
        self.added.clear();
    }
    fn add(&mut self, epoch: i16, partitions: &[TargetPartition]) -> Result<(), StepError> {
        if epoch != self.epoch {
            return Err(fenced());
        }
        assert!(
            partitions.iter().all(|tp| !self.added.contains(tp)),
            "added twice: {partitions:?}"
        );
        self.added.extend(partitions);
        Ok(())
    }
    fn append(
        &mut self,
        epoch: i16,
        tp: TargetPartition,
        base: i32,
        entries: Vec<Entry>,
    ) -> Result<(), StepError> {
        if epoch != self.epoch {
            return Err(fenced());
        }
        assert!(
            self.added.contains(&tp),
            "append to {tp:?} before AddPartitions"
        );
        let next = self.sequences.entry(tp).or_insert(0);
        assert_eq!(base, *next, "sequence of {tp:?}");
        *next += entries.len() as i32;
        self.pending.entry(tp).or_default().extend(entries);
        Ok(())
    }
    fn commit(&mut self, epoch: i16, position: i64) -> Result<(), StepError> {
        if epoch != self.epoch {
            return Err(fenced());
        }
        assert!(
            self.position.is_none_or(|p| p <= position),
            "the position moves back"
        );
        for (tp, entries) in std::mem::take(&mut self.pending) {
            self.committed.entry(tp).or_default().extend(entries);
        }
        self.added.clear();
        self.position = Some(position);
        Ok(())
    }
}

struct Sim {
    rng: SplitMix64,
    now_ms: i64,
    policy: OnError,
    partitioning: Partitioning,
    source: Vec<In>,
    visible: usize,
    sink: Sink,
    chaos: bool,
    stats: Stats,
}

/// What a run exercised, so a simulator that stopped testing anything shows.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    crashes: u64,
    commits: u64,
    aborts: u64,
    failed_calls: u64,
    dead_letters: u64,
    waits: u64,
    /// Reads held back by an open transaction.
    helds: u64,
}

fn retriable(what: &str) -> StepError {
    StepError {
        kind: StepErrorKind::Retriable,
        message: format!("{what}: injected"),
    }
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let policy = [OnError::Stop, OnError::Skip, OnError::DeadLetter][(seed % 3) as usize];
        let partitioning = [Partitioning::Key, Partitioning::Source][(seed / 3 % 2) as usize];
        let mut offset = 0;
        let mut source = Vec::new();
        for _ in 0..(150 + rng.below(150)) {
            offset += 1 + rng.below(3) as i64; // gaps: compaction, control batches
            let value = rng.next_u64() as u32;
            let key = (!rng.chance(100)).then(|| format!("k{}", value % 10).into_bytes());
            source.push(In { offset, key, value });
        }
        let visible = rng.below(20) as usize;
        Self {
            rng,
            now_ms: 1_000,
            policy,
            partitioning,
            source,
            visible,
            sink: Sink::default(),
            chaos: true,
            stats: Stats::default(),
        }
    }

    fn config(&self) -> RunnerConfig {
        let dead = usize::from(self.policy == OnError::DeadLetter);
        RunnerConfig {
            source_partition: SOURCE_PARTITION,
            outputs: 2,
            on_error: self.policy,
            partitioning: self.partitioning,
            commit_interval_ms: 50,
            start_offset: Some(0),
            paused: false,
            partition_counts: COUNTS[..2 + dead].to_vec(),
        }
    }

    fn fault(&mut self, per_mille: u64) -> bool {
        self.chaos && self.rng.chance(per_mille)
    }

    fn end_offset(&self) -> i64 {
        self.source[..self.visible]
            .last()
            .map_or(0, |r| r.offset + 1)
    }

    fn read(&mut self, from: i64) -> ReadResult<In> {
        let visible = &self.source[..self.visible];
        let first = visible.partition_point(|r| r.offset < from);
        if first == visible.len() {
            let end = self.end_offset();
            return if from < end {
                ReadResult::Records {
                    records: vec![],
                    next_offset: end,
                }
            } else if self.visible < self.source.len() && self.rng.chance(500) {
                // What is not visible yet waits behind another producer's transaction.
                self.stats.helds += 1;
                ReadResult::Held {
                    producer_id: 99,
                    first_offset: end,
                }
            } else {
                ReadResult::Nothing
            };
        }
        if visible[first].offset > from && self.rng.chance(200) {
            // Only a control batch or a gap before the next record.
            return ReadResult::Records {
                records: vec![],
                next_offset: visible[first].offset,
            };
        }
        let take = (1 + self.rng.below(12) as usize).min(visible.len() - first);
        let records = visible[first..first + take].to_vec();
        let next_offset = if first + take == visible.len() {
            self.end_offset()
        } else {
            records.last().unwrap().offset + 1
        };
        ReadResult::Records {
            records,
            next_offset,
        }
    }

    fn epoch(runner: &Runner<In, Out>) -> i16 {
        runner
            .producer()
            .expect("appends after InitProducerId")
            .producer_epoch
    }

    /// Applies a step to the sink, failing before or after it takes effect.
    fn apply(
        &mut self,
        what: &str,
        step: impl FnOnce(&mut Sink) -> Result<(), StepError>,
    ) -> Result<(), StepError> {
        if self.fault(30) {
            return Err(retriable(what));
        }
        let result = step(&mut self.sink);
        if result.is_ok() && self.fault(20) {
            return Err(retriable(what)); // done, but the answer is lost
        }
        result
    }

    /// Carries out one effect and feeds back its answer.
    /// A read, answered; only a running runner may say it waits on a transaction.
    fn read_step(&mut self, runner: &mut Runner<In, Out>, from: i64, now: i64) -> Effect<In, Out> {
        let result = if self.fault(30) {
            Err(retriable("read"))
        } else {
            Ok(self.read(from))
        };
        let effect = runner.on_read(now, result);
        let held = runner.status().held;
        assert!(
            held.is_none_or(|h| runner.state() == State::Running && h.since_ms <= now),
            "only a running runner waits on a transaction: {held:?}"
        );
        effect
    }

    fn step(&mut self, runner: &mut Runner<In, Out>, effect: Effect<In, Out>) -> Effect<In, Out> {
        self.now_ms += self.rng.below(20) as i64;
        let now = self.now_ms;
        match effect {
            Effect::InitProducer => {
                let result = if self.fault(100) {
                    Err(retriable("init"))
                } else {
                    Ok(self.sink.init())
                };
                runner.on_producer(now, result)
            }
            Effect::FetchPosition => {
                let position = Position {
                    committed: self.sink.position,
                    log_start_offset: 0,
                };
                let result = if self.fault(50) {
                    Err(retriable("fetch"))
                } else {
                    Ok(position)
                };
                runner.on_position(now, result)
            }
            Effect::Read { from } => self.read_step(runner, from, now),
            Effect::Call { range } => {
                self.stats.failed_calls +=
                    u64::from(call(&runner.inputs()[range.clone()]).is_err());
                let result = if self.fault(30) {
                    Err(CallError {
                        kind: CallErrorKind::Busy,
                        message: "busy".into(),
                    })
                } else if self.fault(10) {
                    Err(CallError {
                        kind: CallErrorKind::Stale,
                        message: "new version".into(),
                    })
                } else {
                    call(&runner.inputs()[range])
                };
                match result {
                    Ok((outputs, refused)) => runner.on_called_in_part(now, outputs, refused),
                    Err(e) => runner.on_called(now, Err(e)),
                }
            }
            effect @ (Effect::AddPartitions { .. }
            | Effect::Append { .. }
            | Effect::AppendDeadLetters { .. }
            | Effect::Commit { .. }
            | Effect::Abort) => self.sink_step(runner, effect, now),
            Effect::Backoff { until_ms } => {
                self.now_ms = self.now_ms.max(until_ms);
                runner.on_tick(self.now_ms)
            }
            Effect::Wait { until_ms } => {
                self.stats.waits += 1;
                if self.visible < self.source.len() {
                    self.visible =
                        (self.visible + 1 + self.rng.below(10) as usize).min(self.source.len());
                } else if let Some(until_ms) = until_ms {
                    self.now_ms = self.now_ms.max(until_ms);
                } else {
                    return Effect::Wait { until_ms: None };
                }
                runner.on_tick(self.now_ms)
            }
            Effect::Idle => Effect::Idle,
        }
    }

    /// The effects the sink answers.
    fn sink_step(
        &mut self,
        runner: &mut Runner<In, Out>,
        effect: Effect<In, Out>,
        now: i64,
    ) -> Effect<In, Out> {
        match effect {
            Effect::AddPartitions { partitions } => {
                let epoch = Self::epoch(runner);
                let result = self.apply("add", |sink| sink.add(epoch, &partitions));
                runner.on_added(now, result)
            }
            Effect::Append {
                output,
                partition,
                base_sequence,
                records,
            } => {
                let epoch = Self::epoch(runner);
                let tp = TargetPartition {
                    target: Target::Output(output),
                    partition,
                };
                let entries = records.into_iter().map(Entry::Out).collect();
                let result = self.apply("append", |sink| {
                    sink.append(epoch, tp, base_sequence, entries)
                });
                runner.on_appended(now, result)
            }
            Effect::AppendDeadLetters {
                partition,
                base_sequence,
                records,
            } => {
                self.stats.dead_letters += records.len() as u64;
                let epoch = Self::epoch(runner);
                let tp = TargetPartition {
                    target: Target::DeadLetter,
                    partition,
                };
                let entries = records
                    .into_iter()
                    .map(|d| Entry::Dead {
                        offset: d.record.offset,
                        kind: d.kind,
                    })
                    .collect();
                let result = self.apply("dead letters", |sink| {
                    sink.append(epoch, tp, base_sequence, entries)
                });
                runner.on_appended(now, result)
            }
            Effect::Commit { position } => {
                let epoch = Self::epoch(runner);
                let result = self.apply("commit", |sink| sink.commit(epoch, position));
                self.stats.commits += 1;
                runner.on_committed(now, result)
            }
            Effect::Abort => {
                self.stats.aborts += 1;
                let result = self.apply("abort", |sink| {
                    sink.abort();
                    Ok(())
                });
                runner.on_aborted(now, result)
            }
            other => unreachable!("not a sink effect: {other:?}"),
        }
    }

    /// A crash before `effect` is answered: it may have taken effect in the sink.
    fn crash(
        &mut self,
        runner: &Runner<In, Out>,
        effect: &Effect<In, Out>,
    ) -> (Runner<In, Out>, Effect<In, Out>) {
        if self.rng.chance(500)
            && let Effect::Commit { position } = effect
        {
            self.sink.commit(Self::epoch(runner), *position).ok();
        }
        let mut fresh = Runner::new(self.config());
        let effect = fresh.start(self.now_ms);
        (fresh, effect)
    }

    fn chaos(
        &mut self,
        runner: &mut Runner<In, Out>,
        mut effect: Effect<In, Out>,
    ) -> Effect<In, Out> {
        for _ in 0..CHAOS_STEPS {
            if self.rng.chance(15) {
                self.stats.crashes += 1;
                (*runner, effect) = self.crash(runner, &effect);
                continue;
            }
            if self.rng.chance(10) {
                if let Some(next) = runner.pause(self.now_ms) {
                    effect = next;
                }
            } else if self.rng.chance(20)
                && let Some(next) = runner.resume(self.now_ms)
            {
                effect = next;
            }
            if self.rng.chance(30) && self.visible < self.source.len() {
                self.visible += 1;
            }
            effect = self.step(runner, effect);
        }
        effect
    }

    /// No faults, everything visible: run until the runner waits with nothing to read, or
    /// is failed at a poison record under `stop`.
    fn calm(&mut self, runner: &mut Runner<In, Out>, mut effect: Effect<In, Out>) {
        self.chaos = false;
        self.visible = self.source.len();
        for _ in 0..CALM_STEPS_MAX {
            match effect {
                Effect::Wait { until_ms: None }
                    if runner.status().position == Some(self.end_offset()) =>
                {
                    return;
                }
                // A wait from before the calm phase: everything is visible now.
                Effect::Wait { until_ms: None } => effect = runner.on_tick(self.now_ms),
                Effect::Idle
                    if runner.state() == State::Failed && self.failed_at_poison(runner) =>
                {
                    return;
                }
                Effect::Idle => {
                    effect = runner
                        .resume(self.now_ms)
                        .expect("a paused or failed runner resumes")
                }
                other => effect = self.step(runner, other),
            }
        }
        panic!("the runner did not catch up: {:?}", runner.status());
    }

    fn failed_at_poison(&self, runner: &Runner<In, Out>) -> bool {
        let error = runner.status().last_error.as_ref();
        let first = self.source.iter().find(|r| failure(r).is_some());
        let kind = first.and_then(failure).map(CallErrorKind::as_str);
        error.is_some_and(|e| Some(e.kind) == kind)
            && runner.status().position == self.first_poison()
    }

    fn first_poison(&self) -> Option<i64> {
        self.source
            .iter()
            .find(|r| failure(r).is_some())
            .map(|r| r.offset)
    }

    /// The committed output a correct runner leaves, for the records below `position`.
    fn expected(&self, position: i64) -> BTreeMap<TargetPartition, Vec<Entry>> {
        let mut expected: BTreeMap<TargetPartition, Vec<Entry>> = BTreeMap::new();
        for record in self.source.iter().take_while(|r| r.offset < position) {
            if let Some(kind) = failure(record) {
                if self.policy == OnError::DeadLetter {
                    let partition = output_partition(
                        self.partitioning,
                        record.key(),
                        SOURCE_PARTITION,
                        COUNTS[2],
                    );
                    let tp = TargetPartition {
                        target: Target::DeadLetter,
                        partition,
                    };
                    let entry = Entry::Dead {
                        offset: record.offset,
                        kind,
                    };
                    expected.entry(tp).or_default().push(entry);
                }
                continue;
            }
            for out in transform(record) {
                let count = COUNTS[out.output as usize];
                let partition =
                    output_partition(self.partitioning, out.key(), SOURCE_PARTITION, count);
                let tp = TargetPartition {
                    target: Target::Output(out.output),
                    partition,
                };
                expected.entry(tp).or_default().push(Entry::Out(out));
            }
        }
        expected
    }

    fn check(&self, seed: u64, runner: &Runner<In, Out>) {
        let position = self.sink.position.unwrap_or(0);
        let end = self.end_offset();
        match (self.policy, self.first_poison()) {
            (OnError::Stop, Some(poison)) => {
                assert_eq!(
                    position, poison,
                    "seed {seed}: stop at the first poison record"
                );
                assert_eq!(runner.state(), State::Failed, "seed {seed}");
            }
            _ => assert_eq!(position, end, "seed {seed}: every record consumed"),
        }
        let committed: BTreeMap<_, _> = self
            .sink
            .committed
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let expected = self.expected(position);
        for (tp, entries) in &expected {
            assert_eq!(committed.get(tp), Some(entries), "seed {seed}: {tp:?}");
        }
        assert_eq!(
            committed.len(),
            expected.len(),
            "seed {seed}: partitions written"
        );
    }
}

fn run(seed: u64) -> Sim {
    let mut sim = Sim::new(seed);
    let mut runner = Runner::new(sim.config());
    let effect = runner.start(sim.now_ms);
    let effect = sim.chaos(&mut runner, effect);
    sim.calm(&mut runner, effect);
    sim.check(seed, &runner);
    // A stop commits nothing new and ends the runner.
    if let Some(effect) = runner.stop(sim.now_ms, Finish::Commit) {
        assert!(matches!(effect, Effect::Idle | Effect::Commit { .. }));
    }
    sim
}

#[test]
fn exactly_once_across_crashes_and_faults() {
    let mut poison_seen = [0usize; 3];
    let mut total = Stats::default();
    for seed in 0..SEEDS {
        let sim = run(seed);
        if sim.first_poison().is_some() {
            poison_seen[(seed % 3) as usize] += 1;
        }
        let s = sim.stats;
        total.crashes += s.crashes;
        total.commits += s.commits;
        total.aborts += s.aborts;
        total.failed_calls += s.failed_calls;
        total.dead_letters += s.dead_letters;
        total.waits += s.waits;
        total.helds += s.helds;
    }
    // The seeds exercise every policy with poison records, and every path.
    assert!(
        poison_seen.iter().all(|&n| n > SEEDS as usize / 6),
        "{poison_seen:?}"
    );
    let per_seed = |n: u64| n / SEEDS;
    assert!(per_seed(total.crashes) >= 5, "{total:?}");
    assert!(per_seed(total.commits) >= 20, "{total:?}");
    assert!(per_seed(total.aborts) >= 1, "{total:?}");
    assert!(per_seed(total.failed_calls) >= 3, "{total:?}");
    assert!(total.dead_letters >= SEEDS, "{total:?}");
    assert!(per_seed(total.waits) >= 5, "{total:?}");
    assert!(total.helds >= SEEDS, "{total:?}");
    eprintln!("{SEEDS} seeds: {total:?}");
}
