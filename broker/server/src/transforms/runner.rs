//! One source partition of one transform: a tokio task that carries out the effects of its
//! state machine (`sluice_transform::Runner`, which decides reads, calls, bisects, appends,
//! commits, aborts and backoffs) and feeds back their answers.
//!
//! ```text
//! effect ─▶ InitProducer  ─▶ TxnHandle::init_producer_id (fences, finishes the old txn)
//!           FetchPosition ─▶ the group's committed offset and the log start offset
//!           Read          ─▶ the source log, read_committed, on the blocking pool
//!           Call          ─▶ the plugin on the blocking pool, under the calls semaphore
//!           AddPartitions ─▶ TxnHandle::add_partitions
//!           Append*       ─▶ records::encode_produced + append_one
//!           Commit        ─▶ AddOffsets, TxnOffsetCommit, durable wait, EndTxn(commit)
//!           Abort         ─▶ EndTxn(abort)
//!           Wait / Backoff / Idle ─▶ new source records, a deadline, or a command
//! ```
//!
//! Commands (pause, resume, stop) arrive on a watch channel and reach the machine between
//! effects, or at once while it waits. After every effect the task publishes the machine's
//! status for `describe` and the metrics.
//!
//! Before each Read and each Append the task asks `rights` whether the transform may go on.
//! If not, the step fails as fatal, naming why: the machine commits what it holds (read and
//! written while the rights held, as a Kafka transaction would) or, for an append, aborts,
//! and fails. A partition stopped because its owner lacks a right shows `unauthorized` and
//! resumes by itself once the right is back (checked every `BIND_RETRY` while failed).
//!
//! Backpressure: the machine reads the next chunk only after the last one's output is
//! appended, and bounds what one transaction holds, so nothing queues here; plugin calls of
//! every transform share one semaphore, so transforms take bounded CPU from produce and
//! fetch.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_plugin_host::{ColumnarBatch, Partitioner, PluginKind, PluginVersion, RegistryError};
use sluice_storage::Compression;
use sluice_transform::spec::position_is_current;
use sluice_transform::{
    CallError, CallErrorKind, DeadLetter, Effect, Finish, Position, ReadResult, Runner,
    RunnerConfig, State, Status, StepError, StepErrorKind, Target, TransformSpec,
};
use tokio::sync::{Semaphore, watch};

use crate::authz::Owner;
use crate::broker::Broker;
use crate::group::GroupHandle;
use crate::txn::TxnHandle;

use super::process::{self, OutputValidator, Plugin};
use super::producer::TxnSteps;
use super::record::Rec;
use super::rights::{self, Refusal};

/// What the operator asks of a transform's runners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Run,
    Pause,
    /// Stop: commit the open transaction (restart, broker shutdown) or abort it (delete).
    Stop(Finish),
}

/// The latest command, numbered: the same command sent twice (resume a failed partition
/// that was never paused) still reaches the runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub control: Control,
    pub seq: u64,
}

impl Command {
    pub fn first(control: Control) -> Self {
        Self { control, seq: 0 }
    }
}

/// Sends `control` as a new command.
pub fn send(sender: &watch::Sender<Command>, control: Control) {
    sender.send_modify(|c| {
        c.control = control;
        c.seq += 1;
    });
}

/// A runner's status as the service reads it (published after every effect).
#[derive(Debug)]
pub struct Shared {
    pub partition: u32,
    pub status: Mutex<Status>,
    /// sha256 of the plugin version the last call ran.
    pub plugin_sha256: Mutex<String>,
    /// The committed position read when the task started, for `describe` while the
    /// machine has not read it itself (a transform started paused).
    pub committed_at_start: Mutex<Option<i64>>,
    /// Why the owner may not run the transform now (the right it lacks), from the last
    /// check before a read or an append; `None` once a check passes.
    unauthorized: Mutex<Option<String>>,
}

impl Shared {
    pub fn new(partition: u32) -> Self {
        Self {
            partition,
            status: Mutex::new(Status::default()),
            plugin_sha256: Mutex::new(String::new()),
            committed_at_start: Mutex::new(None),
            unauthorized: Mutex::new(None),
        }
    }

    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// Why the owner may not run the transform now, if it may not.
    pub fn unauthorized(&self) -> Option<String> {
        lock(&self.unauthorized).clone()
    }
}

/// Everything one runner needs.
#[derive(Debug, Clone)]
pub struct RunnerCtx {
    pub broker: Arc<Broker>,
    pub txns: TxnHandle,
    pub groups: GroupHandle,
    pub spec: Arc<TransformSpec>,
    pub partition: u32,
    pub shared: Arc<Shared>,
    pub control: watch::Receiver<Command>,
    /// Plugin calls in flight over all transforms.
    pub calls: Arc<Semaphore>,
    /// `transaction.timeout.ms` of the runner's producer.
    pub txn_timeout_ms: i32,
}

/// Headers on a dead-lettered record.
const DLQ_REASON: &[u8] = b"sluice.dlq.reason";
const DLQ_ERROR: &[u8] = b"sluice.dlq.error";
const DLQ_TRANSFORM: &[u8] = b"sluice.dlq.transform";
const DLQ_PLUGIN: &[u8] = b"sluice.dlq.plugin";
const DLQ_TOPIC: &[u8] = b"sluice.dlq.topic";
const DLQ_PARTITION: &[u8] = b"sluice.dlq.partition";
const DLQ_OFFSET: &[u8] = b"sluice.dlq.offset";

/// Tries to read the committed position for `describe` before the runner starts.
const POSITION_HINT_TRIES: u32 = 50;

/// How often a runner whose plugin cannot be bound (not deployed, parameters refused) tries
/// again.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// The driver's state beside the machine.
struct Driver {
    ctx: RunnerCtx,
    steps: TxnSteps,
    plugin: Plugin,
    /// Per output, the partitioner plugin placing its records (`None`: the spec's rule).
    placements: Placements,
    /// The plugin version the open transaction's calls ran (a new version waits for a
    /// commit: `Stale`).
    pinned: Option<Arc<PluginVersion>>,
    /// The codec of the source batches last read (output batches use it).
    codec: Compression,
    /// Whom the transform acts for (`rights::owner`).
    owner: Result<Owner, Refusal>,
}

/// Runs until the transform is stopped.
pub async fn run(mut ctx: RunnerCtx) {
    let Some((plugin, placements)) = bind_until_bound(&mut ctx).await else {
        set_state(&ctx.shared, State::Stopped);
        return;
    };
    let spec = ctx.spec.clone();
    let counts = partition_counts(&ctx.broker, &spec).unwrap_or_else(|_| vec![1; targets(&spec)]);
    let mut runner: Runner<Rec, Rec> =
        Runner::new(RunnerConfig::from_spec(&spec, ctx.partition, counts));
    let steps = TxnSteps::new(
        ctx.broker.clone(),
        ctx.txns.clone(),
        spec.transactional_id(ctx.partition),
        ctx.txn_timeout_ms,
        spec.group_id(),
    );
    let mut driver = Driver {
        ctx,
        steps,
        plugin,
        placements,
        pinned: None,
        codec: Compression::None,
        owner: rights::owner(&spec),
    };
    let index = to_i32(driver.ctx.partition);
    // For `describe` while paused: the group coordinator may still be loading at a start.
    for _ in 0..POSITION_HINT_TRIES {
        if let Ok(position) = driver.fetch_position(&spec, index).await {
            *lock(&driver.ctx.shared.committed_at_start) = position.committed;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A command sent before the task started.
    let mut applied = *driver.ctx.control.borrow_and_update();
    let mut effect = match command(&mut runner, applied.control, now(&driver.ctx)) {
        Some(effect) => effect,
        None => runner.start(now(&driver.ctx)),
    };
    let mut logged = ErrorLog::default();
    loop {
        publish(&driver.ctx.shared, &runner);
        logged.log(&spec, driver.ctx.partition, runner.status());
        if runner.state() == State::Stopped && effect == Effect::Idle {
            break;
        }
        effect = driver.carry_out(&mut runner, effect).await;
        // The command now, compared with the last one applied (a wait that woke on the
        // change has marked it seen already).
        let gone = driver.ctx.control.has_changed().is_err();
        let asked = if gone {
            // The service dropped its side without a word: stop, committing what is open.
            Command {
                control: Control::Stop(Finish::Commit),
                seq: u64::MAX,
            }
        } else {
            *driver.ctx.control.borrow_and_update()
        };
        if asked != applied {
            applied = asked;
            if let Some(interrupt) = command(&mut runner, asked.control, now(&driver.ctx)) {
                effect = interrupt;
            }
        }
    }
    publish(&driver.ctx.shared, &runner);
    tracing::info!(transform = %spec.name, partition = driver.ctx.partition, "runner stopped");
}

/// The runner's new errors in the broker's log, at most one line per `ERROR_LOG_INTERVAL`
/// (a poison record bisected fails a dozen calls), with how many were not logged.
#[derive(Default)]
struct ErrorLog {
    last_seen: Option<(i64, &'static str)>,
    last_logged: Option<std::time::Instant>,
    unlogged: u64,
}

/// The least time between two logged errors of one runner.
const ERROR_LOG_INTERVAL: Duration = Duration::from_secs(1);

impl ErrorLog {
    fn log(&mut self, spec: &TransformSpec, partition: u32, status: &Status) {
        let Some(error) = &status.last_error else {
            return;
        };
        let seen = Some((error.at_ms, error.kind));
        if seen == self.last_seen {
            return;
        }
        self.last_seen = seen;
        if self
            .last_logged
            .is_some_and(|at| at.elapsed() < ERROR_LOG_INTERVAL)
        {
            self.unlogged += 1;
            return;
        }
        self.last_logged = Some(std::time::Instant::now());
        tracing::warn!(
            transform = %spec.name,
            partition,
            kind = error.kind,
            offset = ?error.offset,
            state = status.state.as_str(),
            skipped = status.records_skipped,
            dead_lettered = status.records_dead_lettered,
            not_logged = std::mem::take(&mut self.unlogged),
            "{}",
            error.message
        );
    }
}

/// Hands a command to the machine; `Some` replaces the effect in progress.
fn command(runner: &mut Runner<Rec, Rec>, asked: Control, now_ms: i64) -> Option<Effect<Rec, Rec>> {
    match asked {
        Control::Run => runner.resume(now_ms),
        Control::Pause => runner.pause(now_ms),
        Control::Stop(finish) => runner.stop(now_ms, finish),
    }
}

impl Driver {
    async fn carry_out(
        &mut self,
        runner: &mut Runner<Rec, Rec>,
        effect: Effect<Rec, Rec>,
    ) -> Effect<Rec, Rec> {
        let spec = self.ctx.spec.clone();
        let index = i32::try_from(self.ctx.partition).unwrap_or(i32::MAX);
        match effect {
            Effect::InitProducer => {
                let answer = self.steps.init().await;
                runner.on_producer(now(&self.ctx), answer)
            }
            Effect::FetchPosition => {
                let answer = self.fetch_position(&spec, index).await;
                runner.on_position(now(&self.ctx), answer)
            }
            Effect::Read { from } => {
                if let Err(refusal) = self.may_run(&spec) {
                    return runner.on_read(now(&self.ctx), Err(fatal(refusal.message())));
                }
                if let Ok(counts) = partition_counts(&self.ctx.broker, &spec) {
                    runner.set_partition_counts(&counts);
                }
                let answer = self.read(&spec, index, from).await;
                runner.on_read(now(&self.ctx), answer)
            }
            Effect::Call { range } => {
                match self.call(runner.inputs()[range].to_vec(), &spec).await {
                    Ok((outputs, refused)) => {
                        runner.on_called_in_part(now(&self.ctx), outputs, refused)
                    }
                    Err(e) => runner.on_called(now(&self.ctx), Err(e)),
                }
            }
            Effect::AddPartitions { partitions } => {
                let producer = runner
                    .producer()
                    .expect("a producer before adding partitions");
                let named = partitions
                    .iter()
                    .map(|tp| (topic_of(&spec, tp.target).to_owned(), to_i32(tp.partition)))
                    .collect();
                let answer = self.steps.add_partitions(producer, named).await;
                runner.on_added(now(&self.ctx), answer)
            }
            Effect::Append { .. } | Effect::AppendDeadLetters { .. } => {
                let answer = self.append(runner, effect, &spec).await;
                runner.on_appended(now(&self.ctx), answer)
            }
            Effect::Commit { position } => {
                let producer = runner.producer().expect("a producer before committing");
                let answer = self
                    .steps
                    .commit(producer, (&spec.source, index), position, spec.generation)
                    .await;
                if answer.is_ok() {
                    self.pinned = None;
                }
                runner.on_committed(now(&self.ctx), answer)
            }
            Effect::Abort => {
                let producer = runner.producer().expect("a producer before aborting");
                let answer = self.steps.abort(producer).await;
                self.pinned = None;
                runner.on_aborted(now(&self.ctx), answer)
            }
            Effect::Backoff { until_ms } => {
                self.sleep_until(Some(until_ms), false).await;
                runner.on_tick(now(&self.ctx))
            }
            Effect::Wait { until_ms } => {
                self.sleep_until(until_ms, true).await;
                runner.on_tick(now(&self.ctx))
            }
            Effect::Idle => self.idle(runner, &spec).await,
        }
    }

    /// Appends an output batch, or failed records to the dead-letter topic.
    async fn append(
        &mut self,
        runner: &Runner<Rec, Rec>,
        effect: Effect<Rec, Rec>,
        spec: &TransformSpec,
    ) -> Result<(), StepError> {
        let producer = runner.producer().expect("a producer before appending");
        // Output records are appended straight from the columns that hold them; dead
        // letters are copied once, to add their headers.
        let (target, partition, base_sequence, records, codec) = match effect {
            Effect::Append {
                output,
                partition,
                base_sequence,
                records,
            } => (
                Target::Output(output),
                partition,
                base_sequence,
                records,
                self.codec,
            ),
            Effect::AppendDeadLetters {
                partition,
                base_sequence,
                records,
            } => {
                let batch = self.dead_letters(spec, &records);
                (
                    Target::DeadLetter,
                    partition,
                    base_sequence,
                    Rec::all(batch, |_| 0, i64::MIN),
                    Compression::None,
                )
            }
            other => unreachable!("not an append: {other:?}"),
        };
        let topic = topic_of(spec, target);
        self.may_write(spec, topic)
            .map_err(|refusal| fatal(refusal.message()))?;
        // One Append may hold more than one batch should (a read's records for one output
        // partition): split by size; sequences run on across the pieces.
        let mut sequence = base_sequence;
        for piece in pieces(&records, OUTPUT_BATCH_BYTES_MAX) {
            let count = i32::try_from(piece.len()).unwrap_or(i32::MAX);
            let views: Vec<_> = piece.iter().map(Rec::view).collect();
            self.steps
                .append(
                    producer,
                    (topic, to_i32(partition)),
                    &views,
                    sequence,
                    codec,
                )
                .await?;
            sequence = sequence.wrapping_add(count);
        }
        Ok(())
    }

    /// Waits for a command; a failed partition also tries again by itself when the plugin
    /// gets a new version, or, stopped unauthorized, when its owner has the rights again.
    async fn idle(
        &mut self,
        runner: &mut Runner<Rec, Rec>,
        spec: &TransformSpec,
    ) -> Effect<Rec, Rec> {
        let failed = runner.state() == State::Failed;
        let registry = &self.ctx.broker.plugins.registry;
        let version = registry.version(&spec.plugin);
        loop {
            let wait = if failed { Some(BIND_RETRY) } else { None };
            if self.wait_for_control(wait).await {
                return Effect::Idle;
            }
            if failed && self.ctx.shared.unauthorized().is_some() && self.may_run(spec).is_ok() {
                tracing::info!(transform = %spec.name, partition = self.ctx.partition, "the owner's rights are back; resuming");
                if let Some(effect) = runner.resume(now(&self.ctx)) {
                    return effect;
                }
            }
            let now_version = self.ctx.broker.plugins.registry.version(&spec.plugin);
            let moved = match (&version, &now_version) {
                (Some(a), Some(b)) => !Arc::ptr_eq(a, b),
                (None, Some(_)) => true,
                _ => false,
            };
            if failed && moved {
                if let Ok((plugin, placements)) = bind(&self.ctx.broker, spec) {
                    self.plugin = plugin;
                    self.placements = placements;
                }
                if let Some(effect) = runner.resume(now(&self.ctx)) {
                    return effect;
                }
            }
        }
    }

    /// `rights::may_run`, noting an owner's missing right for `describe` (and clearing it
    /// once the check passes).
    fn may_run(&self, spec: &TransformSpec) -> Result<(), Refusal> {
        let checked = match &self.owner {
            Ok(owner) => rights::may_run(&self.ctx.broker, spec, owner),
            Err(refusal) => Err(refusal.clone()),
        };
        self.note(&checked);
        checked
    }

    /// `rights::may_write` for `topic`, noted as `may_run` is.
    fn may_write(&self, spec: &TransformSpec, topic: &str) -> Result<(), Refusal> {
        let checked = match &self.owner {
            Ok(owner) => rights::may_write(&self.ctx.broker, spec, owner, topic),
            Err(refusal) => Err(refusal.clone()),
        };
        self.note(&checked);
        checked
    }

    fn note(&self, checked: &Result<(), Refusal>) {
        let now_unauthorized = match checked {
            Err(Refusal::Unauthorized(why)) => Some(why.clone()),
            _ => None,
        };
        let mut noted = lock(&self.ctx.shared.unauthorized);
        if *noted != now_unauthorized {
            if let Some(why) = &now_unauthorized {
                tracing::warn!(transform = %self.ctx.spec.name, partition = self.ctx.partition, "{why}");
            }
            *noted = now_unauthorized;
        }
    }

    /// The group's committed offset of the source partition, and its log start offset.
    async fn fetch_position(
        &self,
        spec: &TransformSpec,
        index: i32,
    ) -> Result<Position, StepError> {
        // At the group's coordinator, wherever it is in a cluster.
        let fetched = super::remote::fetch_position(
            &self.ctx.broker,
            &self.ctx.groups,
            &spec.group_id(),
            (&spec.source, index),
        )
        .await
        .map_err(|e| {
            retriable(format!(
                "fetching the position of {}-{index}: {e}",
                spec.source
            ))
        })?;
        // A position an earlier generation committed (before a `restart`) is not ours.
        let committed = fetched
            .filter(|(_, metadata)| position_is_current(metadata, spec.generation))
            .map(|(offset, _)| offset);
        let log_start_offset = self
            .ctx
            .broker
            .topics
            .partition(&spec.source, index)
            .ok_or_else(|| {
                fatal(format!(
                    "source partition {}-{index} does not exist",
                    spec.source
                ))
            })?
            .with_log(|log| log.log_start_offset().value())
            .map_err(|e| retriable(e.message))?;
        Ok(Position {
            committed,
            log_start_offset,
        })
    }

    async fn read(
        &mut self,
        spec: &TransformSpec,
        index: i32,
        from: i64,
    ) -> Result<ReadResult<Rec>, StepError> {
        let partition = self
            .ctx
            .broker
            .topics
            .partition(&spec.source, index)
            .ok_or_else(|| {
                fatal(format!(
                    "source partition {}-{index} does not exist",
                    spec.source
                ))
            })?;
        let read = tokio::task::spawn_blocking(move || process::read(&partition, from))
            .await
            .map_err(|e| retriable(format!("read task: {e}")))??;
        if let (ReadResult::Records { .. }, Some(codec)) = (&read.0, read.1) {
            self.codec = codec;
        }
        Ok(read.0)
    }

    async fn call(&mut self, inputs: Vec<Rec>, spec: &TransformSpec) -> Result<Called, CallError> {
        let registry = &self.ctx.broker.plugins.registry;
        let current = registry.version(&spec.plugin);
        match (&self.pinned, &current) {
            (Some(pinned), Some(current)) if !Arc::ptr_eq(pinned, current) => {
                // A new version: the open transaction commits on the version it began with.
                return Err(CallError {
                    kind: CallErrorKind::Stale,
                    message: format!("plugin `{}` has a new version", spec.plugin),
                });
            }
            (None, Some(current)) => {
                if !lock(&self.ctx.shared.plugin_sha256).eq(&current.sha256) {
                    tracing::info!(transform = %spec.name, partition = self.ctx.partition, sha256 = %current.sha256, "plugin version in use");
                    if let Ok((plugin, placements)) = bind(&self.ctx.broker, spec) {
                        self.plugin = plugin;
                        self.placements = placements;
                    }
                }
                current
                    .sha256
                    .clone_into(&mut lock(&self.ctx.shared.plugin_sha256));
                self.pinned = Some(current.clone());
            }
            _ => {}
        }
        let permit = self
            .ctx
            .calls
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError {
                kind: CallErrorKind::Busy,
                message: "the transform service is stopping".into(),
            })?;
        let plugin = self.plugin.clone();
        let outputs = spec.outputs.clone();
        let placements = self.placements.clone();
        let counts = partition_counts(&self.ctx.broker, spec).unwrap_or_default();
        let validators = output_validators(&self.ctx.broker, spec)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let mut records = process::call(&plugin, &inputs, &outputs)?;
            process::place(&mut records, &placements, &counts)?;
            let refused = process::validate(&inputs, &mut records, &validators)?;
            Ok((records, refused))
        })
        .await
        .unwrap_or_else(|e| {
            Err(CallError {
                kind: CallErrorKind::Trap,
                message: format!("plugin call task: {e}"),
            })
        })
    }

    /// The failed input records with why, as the dead-letter topic gets them.
    fn dead_letters(&self, spec: &TransformSpec, records: &[DeadLetter<Rec>]) -> ColumnarBatch {
        let plugin = {
            let sha = lock(&self.ctx.shared.plugin_sha256);
            format!("{}@{}", spec.plugin, &sha[..sha.len().min(12)])
        };
        let partition = self.ctx.partition.to_string();
        let mut batch = ColumnarBatch::with_capacity(records.len(), 0);
        for dead in records {
            let offset = dead.record.offset.to_string();
            dead.record.push_to(
                &mut batch,
                &[
                    (DLQ_REASON, dead.reason.as_bytes()),
                    (DLQ_ERROR, dead.kind.as_str().as_bytes()),
                    (DLQ_TRANSFORM, spec.name.as_bytes()),
                    (DLQ_PLUGIN, plugin.as_bytes()),
                    (DLQ_TOPIC, spec.source.as_bytes()),
                    (DLQ_PARTITION, partition.as_bytes()),
                    (DLQ_OFFSET, offset.as_bytes()),
                ],
            );
        }
        batch
    }

    /// Sleeps until `until_ms` (or without a deadline, forever), waking early for a command
    /// or, with `records`, for new records in the source partition.
    async fn sleep_until(&mut self, until_ms: Option<i64>, records: bool) {
        let index = i32::try_from(self.ctx.partition).unwrap_or(i32::MAX);
        let mut wake = self
            .ctx
            .broker
            .topics
            .partition(&self.ctx.spec.source, index)
            .map(|p| p.subscribe());
        let sleep = until_ms.map_or(IDLE_RECHECK, |until| {
            Duration::from_millis(u64::try_from(until - now(&self.ctx)).unwrap_or(0))
                .min(IDLE_RECHECK)
        });
        let new_records = async {
            match (&mut wake, records) {
                (Some(wake), true) => {
                    let _ = wake.changed().await;
                }
                _ => std::future::pending::<()>().await,
            }
        };
        let control = self.ctx.control.changed();
        tokio::select! {
            () = new_records => {}
            _ = control => {}
            () = tokio::time::sleep(sleep) => {}
        }
    }

    /// Waits for a command (true if one came, or the service is gone), or `timeout`.
    async fn wait_for_control(&mut self, timeout: Option<Duration>) -> bool {
        if self.ctx.control.has_changed().unwrap_or(true) {
            return true;
        }
        let changed = self.ctx.control.changed();
        match timeout {
            Some(t) => tokio::time::timeout(t, changed).await.is_ok(),
            None => {
                let _ = changed.await;
                true
            }
        }
    }
}

/// Most record bytes in one output batch: below the default `message.max.bytes` (1 MiB), so
/// a transform's batches are never refused for their size (one record over the output's
/// limit fails the partition, naming it).
const OUTPUT_BATCH_BYTES_MAX: usize = 512 * 1024;

/// `records` cut into runs of at most `max_bytes` of keys, values and headers (at least one
/// record each), in order.
fn pieces(records: &[Rec], max_bytes: usize) -> Vec<&[Rec]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, r) in records.iter().enumerate() {
        let size = r.payload_bytes();
        if i > start && bytes + size > max_bytes {
            out.push(&records[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}

/// The longest a waiting runner sleeps before it looks at the source again (another
/// producer's transaction ending moves the last stable offset).
const IDLE_RECHECK: Duration = Duration::from_millis(500);

/// Binds the plugin, retrying while it is missing or refuses its parameters (the status
/// says why); `None` if the runner is stopped meanwhile.
async fn bind_until_bound(ctx: &mut RunnerCtx) -> Option<(Plugin, Placements)> {
    loop {
        match bind(&ctx.broker, &ctx.spec) {
            Ok(bound) => return Some(bound),
            Err(message) => {
                {
                    let mut status = lock(&ctx.shared.status);
                    status.state = State::Failed;
                    status.last_error = Some(sluice_transform::LastError {
                        kind: "bind",
                        message,
                        offset: None,
                        at_ms: ctx.broker.now_ms(),
                    });
                }
                let changed = tokio::time::timeout(BIND_RETRY, ctx.control.changed()).await;
                if matches!(changed, Ok(Err(_)))
                    || matches!(ctx.control.borrow().control, Control::Stop(_))
                {
                    return None;
                }
            }
        }
    }
}

/// Per output, the partitioner plugin placing its records (`None`: the spec's rule).
pub type Placements = Vec<Option<Arc<Partitioner>>>;

/// The plugin handle (a transform, or a filter: a two-way split) and, per output, the
/// partitioner plugin placing its records: the spec's `partitioner`, else the output topic's
/// own `sluice.partitioner`, else none (the spec's partitioning rule).
pub fn bind(broker: &Broker, spec: &TransformSpec) -> Result<(Plugin, Placements), String> {
    let plugin = bind_plugin(broker, spec)?;
    let registry = &broker.plugins.registry;
    let own = match &spec.partitioner {
        Some(name) => Some(Arc::new(
            registry
                .partitioner(name, &spec.partitioner_params)
                .map_err(|e| format!("partitioner `{name}`: {e}"))?,
        )),
        None => None,
    };
    let mut placements = Vec::with_capacity(spec.outputs.len());
    for output in &spec.outputs {
        let placement = match (&own, broker.topics.topic(output)) {
            (Some(own), _) => Some(own.clone()),
            (None, Some(topic)) => match &topic.plugins.partitioner {
                Some(p) => Some(p.handle(registry).map_err(|e| e.message)?),
                None => None,
            },
            (None, None) => None,
        };
        placements.push(placement);
    }
    Ok((plugin, placements))
}

/// A call's answer: the output records, and the source records an output topic's validator
/// refused (indices into the call's inputs, each with its error).
type Called = (Vec<Rec>, Vec<(usize, CallError)>);

/// The outputs' validators (`sluice.validator`), looked up for every call so a validator
/// set on an output topic while the transform runs applies from its next call. One that
/// cannot be bound (its plugin missing or refusing its parameters) is `Busy`: the call
/// waits and tries again, the error in the status, and nothing is written unvalidated.
fn output_validators(
    broker: &Broker,
    spec: &TransformSpec,
) -> Result<Vec<Option<OutputValidator>>, CallError> {
    let registry = &broker.plugins.registry;
    let mut validators = Vec::with_capacity(spec.outputs.len());
    for name in &spec.outputs {
        let topic = broker.topics.topic(name);
        let Some(validator) = topic.as_ref().and_then(|t| t.plugins.validator.as_ref()) else {
            validators.push(None);
            continue;
        };
        let handle = validator.handle(registry).map_err(|e| CallError {
            kind: CallErrorKind::Busy,
            message: format!("output topic {name:?}: {}", e.message),
        })?;
        validators.push(Some(OutputValidator {
            topic: name.clone(),
            plugin: validator.plugin().to_owned(),
            handle,
        }));
    }
    Ok(validators)
}

/// The transform (or filter) plugin.
fn bind_plugin(broker: &Broker, spec: &TransformSpec) -> Result<Plugin, String> {
    let registry = &broker.plugins.registry;
    let named = |e: RegistryError| format!("plugin `{}`: {e}", spec.plugin);
    let kind = registry
        .describe(&spec.plugin)
        .map(|info| info.kind)
        .ok_or_else(|| format!("no plugin named `{}` is deployed", spec.plugin))?;
    match kind {
        PluginKind::Transform => registry
            .transform(&spec.plugin, &spec.params)
            .map(|t| Plugin::Transform(Arc::new(t)))
            .map_err(named),
        PluginKind::Filter => registry
            .filter(&spec.plugin, &spec.params)
            .map(|f| Plugin::Filter(Arc::new(f)))
            .map_err(named),
        other => Err(format!(
            "plugin `{}` is a {}: a transform runs a transform or a filter plugin",
            spec.plugin,
            other.as_str()
        )),
    }
}

/// Partition counts of the outputs, then of the dead-letter topic (the machine's targets).
pub fn partition_counts(broker: &Broker, spec: &TransformSpec) -> Result<Vec<u32>, String> {
    let dead_letter = spec
        .dead_letter_topic
        .iter()
        .filter(|_| spec.on_error == sluice_transform::OnError::DeadLetter);
    spec.outputs
        .iter()
        .chain(dead_letter)
        .map(|name| {
            broker
                .topics
                .topic(name)
                .map(|t| u32::try_from(t.partitions.len()).unwrap_or(u32::MAX).max(1))
                .ok_or_else(|| format!("topic {name:?} does not exist"))
        })
        .collect()
}

fn targets(spec: &TransformSpec) -> usize {
    spec.outputs.len() + usize::from(spec.on_error == sluice_transform::OnError::DeadLetter)
}

fn topic_of(spec: &TransformSpec, target: Target) -> &str {
    match target {
        Target::Output(i) => &spec.outputs[i as usize],
        Target::DeadLetter => spec.dead_letter_topic.as_deref().unwrap_or_default(),
    }
}

fn to_i32(partition: u32) -> i32 {
    i32::try_from(partition).unwrap_or(i32::MAX)
}

fn now(ctx: &RunnerCtx) -> i64 {
    ctx.broker.now_ms()
}

fn publish(shared: &Shared, runner: &Runner<Rec, Rec>) {
    runner.status().clone_into(&mut lock(&shared.status));
}

fn set_state(shared: &Shared, state: State) {
    lock(&shared.status).state = state;
}

fn retriable(message: impl Into<String>) -> StepError {
    StepError {
        kind: StepErrorKind::Retriable,
        message: message.into(),
    }
}

fn fatal(message: impl Into<String>) -> StepError {
    StepError {
        kind: StepErrorKind::Fatal,
        message: message.into(),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
