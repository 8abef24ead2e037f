//! Materialized transforms (docs/transforms.md): a source topic read inside the broker, every
//! record run through a WebAssembly transform (or filter) plugin, and the output appended
//! to 1 to 8 output topics **exactly once**: each source partition's runner commits its
//! output and its source position in one transaction of the broker's own transaction
//! coordinator.
//!
//! # Layout
//! - this file: [`TransformService`], what the admin API and the listener hold: deploy,
//!   list, describe, pause, resume, restart, delete; the spec files.
//! - `runner.rs`: one task per source partition carrying out the effects of its state
//!   machine (`sluice_transform::Runner`, which decides everything).
//! - `process.rs`: the blocking steps: reading the source read_committed, calling the plugin.
//! - `producer.rs`: the transaction steps against `TxnHandle` and `append_one`.
//! - `record.rs`: the records the machine moves.
//! - `rights.rs`: what a running transform may still do: its source still the topic it was
//!   deployed on, its outputs there, its owner's rights (checked before each read and append).
//!
//! Durable state: the spec, `<data.dir>/transforms/<name>.json` (written through the one
//! durable-write path; every write goes through `persist.rs`, so a replicated metadata log can
//! carry it later); the source positions, as the committed offsets of the group
//! `__sluice_transform/<name>` in the offsets log; producer ids and open transactions in the
//! transaction log. Counters are memory only.
//!
//! A transform acts for its owner (the spec's `principal`, from `principal_host`): its runners
//! stop, `unauthorized`, when the owner loses a right it needs and resume by themselves when it
//! is granted again; one whose source topic is deleted is removed (`remove_orphans`, every
//! `PARTITIONS_CHECK_INTERVAL`, and at start); one whose output is deleted fails.
//!
//! Architecture Invariant: a transform's output becomes visible to read_committed consumers
//! only together with the source position that produced it; nothing here commits an offset
//! outside a transaction of the runner's own transactional id.

mod process;
mod producer;
mod record;
mod rights;
mod runner;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use sluice_storage::Offset;
use sluice_transform::{Finish, FromOffset, OnError, Partitioning, State, TransformSpec, limits};
use tokio::sync::{Mutex, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::error::{KafkaError, ServerError};
use crate::files::{remove_file_logged, remove_stale_temps, write_durable};
use crate::group::GroupHandle;
use crate::txn::TxnHandle;

use runner::{Command, Control, RunnerCtx, Shared};

// A transform's transactions write its outputs' partitions, at most what one transaction of
// the coordinator may hold.
const _: () =
    assert!(limits::TRANSFORM_TXN_PARTITIONS_MAX <= sluice_txn::limits::TXN_PARTITIONS_MAX);

/// Directory of the transform specs, under `data.dir`.
const TRANSFORMS_DIR: &str = "transforms";

/// How often the service looks for partitions added to a transform's source.
const PARTITIONS_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How long stopping waits for runners to commit before abandoning them (their open
/// transactions are then aborted by the coordinator's timeout, or at the next start).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A deploy request, as the admin API takes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeployRequest {
    pub name: String,
    /// The source topic.
    pub source: String,
    /// A transform or filter plugin.
    pub plugin: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Output topics, in order (1 to 8).
    pub outputs: Vec<String>,
    #[serde(default)]
    pub from_offset: FromOffset,
    #[serde(default)]
    pub on_error: OnError,
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
    #[serde(default)]
    pub partitioning: Partitioning,
    /// A partitioner plugin placing every output record (instead of `partitioning`).
    #[serde(default)]
    pub partitioner: Option<String>,
    #[serde(default)]
    pub partitioner_params: BTreeMap<String, String>,
    /// Default `TRANSFORM_COMMIT_INTERVAL_MS_DEFAULT` (100 ms).
    #[serde(default)]
    pub commit_interval_ms: Option<i64>,
    /// Deploy paused.
    #[serde(default)]
    pub paused: bool,
}

/// The transform service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TransformService {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    broker: Arc<Broker>,
    txns: TxnHandle,
    groups: GroupHandle,
    /// Plugin calls in flight over every transform (`transform.calls.concurrent.max`).
    calls: Arc<Semaphore>,
    /// Running transforms; the lock also serialises operator commands.
    transforms: Mutex<BTreeMap<String, Running>>,
    /// The task starting runners for added source partitions; aborted at stop.
    grower: std::sync::Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Running {
    spec: Arc<TransformSpec>,
    control: watch::Sender<Command>,
    runners: Vec<(Arc<Shared>, JoinHandle<()>)>,
}

impl TransformService {
    /// Loads the persisted transforms and starts their runners (after the coordinators, so
    /// a runner's InitProducerId finds the transaction log replayed).
    ///
    /// # Errors
    /// The transforms directory cannot be created or read.
    pub fn spawn(
        broker: Arc<Broker>,
        txns: TxnHandle,
        groups: GroupHandle,
    ) -> Result<Self, ServerError> {
        let service = Self {
            inner: Arc::new(Inner {
                broker: broker.clone(),
                txns,
                groups,
                calls: Arc::new(Semaphore::new(broker.config.transform_calls_concurrent_max)),
                transforms: Mutex::new(BTreeMap::new()),
                grower: std::sync::Mutex::new(None),
            }),
        };
        let dir = broker.config.data_dir.join(TRANSFORMS_DIR);
        sluice_storage::io::create_dir_durable(&sluice_storage::RealFs, &dir)
            .map_err(ServerError::io(format!("creating {}", dir.display())))?;
        remove_stale_temps(&dir);
        let entries = std::fs::read_dir(&dir)
            .map_err(ServerError::io(format!("reading {}", dir.display())))?;
        let mut loaded = BTreeMap::new();
        for entry in entries {
            let path = entry
                .map_err(ServerError::io("reading the transforms dir"))?
                .path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match load(&path) {
                Ok(spec) => {
                    let spec = record_source_id(&broker, spec);
                    tracing::info!(transform = %spec.name, source = %spec.source, "loaded transform");
                    let running = service.start(Arc::new(spec));
                    loaded.insert(running.spec.name.clone(), running);
                }
                Err(e) => tracing::error!(path = %path.display(), "transform not loaded: {e}"),
            }
        }
        *service
            .inner
            .transforms
            .try_lock()
            .expect("nobody else holds it yet") = loaded;
        let grower = service.spawn_grower();
        *service
            .inner
            .grower
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(grower);
        Ok(service)
    }

    /// Stops every runner: each commits its open transaction first (bounded by `STOP_GRACE`).
    pub async fn stop(&self) {
        let grower = self
            .inner
            .grower
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(grower) = grower {
            grower.abort();
        }
        let mut transforms = self.inner.transforms.lock().await;
        for running in transforms.values() {
            runner::send(&running.control, Control::Stop(Finish::Commit));
        }
        for (_, running) in std::mem::take(&mut *transforms) {
            stop_runners(running).await;
        }
    }

    /// Deploys a transform for `principal`, who asks from `host` (the owner it acts for):
    /// checks it against the broker (topics, plugin, bounds), resolves its start offsets,
    /// persists it and starts its runners.
    ///
    /// # Errors
    /// What is wrong, as Kafka's code and a message naming it.
    pub async fn deploy(
        &self,
        request: DeployRequest,
        principal: String,
        host: String,
    ) -> Result<TransformReport, KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let broker = &self.inner.broker;
        if transforms.contains_key(&request.name) {
            return Err(KafkaError::new(
                ResponseError::TopicAlreadyExists,
                format!("a transform named {:?} exists already", request.name),
            ));
        }
        if transforms.len() >= limits::TRANSFORMS_MAX {
            return Err(policy(format!(
                "TRANSFORMS_MAX ({}) transforms exist already",
                limits::TRANSFORMS_MAX
            )));
        }
        let source = topic(broker, &request.source, "source")?;
        let mut spec = TransformSpec {
            name: request.name,
            source: request.source,
            plugin: request.plugin,
            params: request.params.into_iter().collect(),
            outputs: request.outputs,
            dead_letter_topic: request.dead_letter_topic,
            on_error: request.on_error,
            partitioning: request.partitioning,
            commit_interval_ms: request
                .commit_interval_ms
                .unwrap_or(limits::TRANSFORM_COMMIT_INTERVAL_MS_DEFAULT),
            from_offset: request.from_offset,
            start_offsets: Vec::new(),
            paused: request.paused,
            generation: 0,
            partitioner: request.partitioner,
            partitioner_params: request.partitioner_params.into_iter().collect(),
            principal,
            principal_host: Some(host),
            source_topic_id: Some(source.id.to_string()),
            created_ms: broker.now_ms(),
        };
        spec.start_offsets = start_offsets(&source, spec.from_offset)?;
        spec.check()
            .map_err(|e| KafkaError::new(ResponseError::InvalidRequest, e.to_string()))?;
        let existing: Vec<&TransformSpec> = transforms.values().map(|r| &*r.spec).collect();
        if let Some(cycle) = spec.cycle(&existing) {
            return Err(policy(format!(
                "transform {:?} would close a cycle, records looping forever through {}: each writes the source of the next",
                spec.name,
                cycle.join(" -> ")
            )));
        }
        // Binding runs the plugin's `init` (CPU, bounded by plugin.call.timeout.ms).
        let (checking, checked) = (broker.clone(), spec.clone());
        tokio::task::spawn_blocking(move || check_against_broker(&checking, &checked))
            .await
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::UnknownServerError,
                    format!("deploy check: {e}"),
                )
            })??;
        persist(broker, &spec)?;
        tracing::info!(transform = %spec.name, source = %spec.source, outputs = ?spec.outputs, plugin = %spec.plugin, "deployed transform");
        let running = self.start(Arc::new(spec));
        let report = self.report(&running);
        transforms.insert(running.spec.name.clone(), running);
        Ok(report)
    }

    /// Every transform, by name.
    pub async fn list(&self) -> Vec<TransformReport> {
        let transforms = self.inner.transforms.lock().await;
        transforms.values().map(|r| self.report(r)).collect()
    }

    /// One transform.
    ///
    /// # Errors
    /// UNKNOWN_TOPIC_OR_PARTITION for an unknown name.
    pub async fn describe(&self, name: &str) -> Result<TransformReport, KafkaError> {
        let transforms = self.inner.transforms.lock().await;
        transforms
            .get(name)
            .map(|r| self.report(r))
            .ok_or_else(|| unknown(name))
    }

    /// Pauses (`true`) or resumes a transform; kept across restarts.
    ///
    /// # Errors
    /// Unknown name; the spec cannot be written.
    pub async fn set_paused(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<TransformReport, KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let running = transforms.get_mut(name).ok_or_else(|| unknown(name))?;
        let mut spec = (*running.spec).clone();
        spec.paused = paused;
        persist(&self.inner.broker, &spec)?;
        running.spec = Arc::new(spec);
        let control = if paused { Control::Pause } else { Control::Run };
        runner::send(&running.control, control);
        tracing::info!(transform = name, paused, "transform paused or resumed");
        Ok(self.report(running))
    }

    /// Restarts a transform from `from` (resolved per partition now): its runners commit and
    /// stop, the group's positions are dropped, and new runners start at the new offsets. The
    /// output already written stays (a replay writes the records again).
    ///
    /// # Errors
    /// Unknown name; an offset that cannot be resolved; the spec cannot be written.
    pub async fn restart(
        &self,
        name: &str,
        from: FromOffset,
    ) -> Result<TransformReport, KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let running = transforms.remove(name).ok_or_else(|| unknown(name))?;
        let broker = &self.inner.broker;
        let mut spec = (*running.spec).clone();
        runner::send(&running.control, Control::Stop(Finish::Commit));
        stop_runners(running).await;
        let result = async {
            let source = topic(broker, &spec.source, "source")?;
            spec.start_offsets = start_offsets(&source, from)?;
            spec.from_offset = from;
            spec.generation += 1;
            // The spec file is the one commit point: once it holds the new generation, the
            // runners ignore positions committed before it (`position_is_current`), so a
            // crash before the group's offsets are dropped cannot resume the old positions.
            persist(broker, &spec)?;
            if let Err(e) = self.forget_positions(&spec).await {
                tracing::warn!(
                    transform = name,
                    "restart: the old positions stay in the group (ignored): {}",
                    e.message
                );
            }
            Ok(())
        }
        .await;
        tracing::info!(transform = name, from = %from, generation = spec.generation, "transform restarted");
        let running = self.start(Arc::new(spec));
        let report = self.report(&running);
        transforms.insert(name.to_owned(), running);
        result.map(|()| report)
    }

    /// Deletes a transform: its runners abort their open transaction and stop; the spec and
    /// the group's positions are removed. Output topics stay.
    ///
    /// # Errors
    /// Unknown name.
    pub async fn delete(&self, name: &str) -> Result<(), KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let running = transforms.remove(name).ok_or_else(|| unknown(name))?;
        let spec = running.spec.clone();
        runner::send(&running.control, Control::Stop(Finish::Abort));
        stop_runners(running).await;
        if let Err(e) = self.forget_positions(&spec).await {
            // Nothing removed: the transform runs on from its positions; delete again.
            let running = self.start(spec);
            transforms.insert(name.to_owned(), running);
            return Err(e);
        }
        remove_file_logged(&spec_file(&self.inner.broker, name));
        self.inner.broker.topics.forget_transform_topics(name);
        tracing::info!(transform = name, "deleted transform");
        Ok(())
    }

    /// Removes the transforms whose source topic is gone (`rights::source_gone`): their
    /// runners abort and stop, then the spec (the commit point) and the group's positions
    /// go. The deletion of the topic wrote their audit lines; this carries it out.
    async fn remove_orphans(&self, transforms: &mut BTreeMap<String, Running>) {
        let broker = &self.inner.broker;
        let orphans: Vec<String> = transforms
            .values()
            .filter(|r| rights::source_gone(broker, &r.spec))
            .map(|r| r.spec.name.clone())
            .collect();
        for name in orphans {
            let Some(running) = transforms.remove(&name) else {
                continue;
            };
            let spec = running.spec.clone();
            runner::send(&running.control, Control::Stop(Finish::Abort));
            stop_runners(running).await;
            remove_file_logged(&spec_file(broker, &name));
            broker.topics.forget_transform_topics(&name);
            if let Err(e) = self.forget_positions(&spec).await {
                tracing::warn!(transform = %name, "its positions stay in {} (never read again): {}", spec.group_id(), e.message);
            }
            tracing::info!(transform = %name, source = %spec.source, "removed transform: its source topic was deleted");
        }
    }

    /// Drops the committed positions of the transform's group.
    async fn forget_positions(&self, spec: &TransformSpec) -> Result<(), KafkaError> {
        let answer = self.inner.groups.delete_groups(vec![spec.group_id()]).await;
        match answer.as_deref() {
            Some(
                [(_, sluice_group::ErrorCode::None | sluice_group::ErrorCode::GroupIdNotFound)],
            ) => Ok(()),
            other => Err(KafkaError::new(
                ResponseError::CoordinatorNotAvailable,
                format!("dropping the positions of {}: {other:?}", spec.group_id()),
            )),
        }
    }

    /// Starts one runner per source partition (noting the topics it uses with the broker).
    fn start(&self, spec: Arc<TransformSpec>) -> Running {
        let inner = &self.inner;
        let written: Vec<&str> = spec
            .outputs
            .iter()
            .map(String::as_str)
            .chain(spec.dead_letter_topic.as_deref())
            .collect();
        inner
            .broker
            .topics
            .note_transform_topics(&spec.name, &spec.source, &written);
        let initial = if spec.paused {
            Control::Pause
        } else {
            Control::Run
        };
        let (control, _) = watch::channel(Command::first(initial));
        let mut running = Running {
            spec,
            control,
            runners: Vec::new(),
        };
        self.grow(&mut running);
        running
    }

    /// Starts a runner for every source partition that has none (all at start; later, the
    /// partitions CreatePartitions added, which start at their log start offset).
    fn grow(&self, running: &mut Running) {
        let inner = &self.inner;
        let spec = &running.spec;
        let partitions = inner
            .broker
            .topics
            .topic(&spec.source)
            .map_or(spec.start_offsets.len(), |t| t.partitions.len());
        let txn_timeout_ms = i32::try_from(limits::txn_timeout_ms(
            spec.commit_interval_ms,
            i64::try_from(inner.broker.config.plugin_call_timeout_ms).unwrap_or(i64::MAX),
        ))
        .unwrap_or(i32::MAX);
        for p in running.runners.len()..partitions {
            let partition = u32::try_from(p).unwrap_or(u32::MAX);
            let shared = Arc::new(Shared::new(partition));
            let ctx = RunnerCtx {
                broker: inner.broker.clone(),
                txns: inner.txns.clone(),
                groups: inner.groups.clone(),
                spec: spec.clone(),
                partition,
                shared: shared.clone(),
                control: running.control.subscribe(),
                calls: inner.calls.clone(),
                txn_timeout_ms,
            };
            running
                .runners
                .push((shared, tokio::spawn(runner::run(ctx))));
        }
    }

    /// Every `PARTITIONS_CHECK_INTERVAL`, removes the transforms whose source was deleted
    /// and starts runners for source partitions added since.
    fn spawn_grower(&self) -> JoinHandle<()> {
        let service = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PARTITIONS_CHECK_INTERVAL);
            loop {
                tick.tick().await;
                let mut transforms = service.inner.transforms.lock().await;
                service.remove_orphans(&mut transforms).await;
                for running in transforms.values_mut() {
                    service.grow(running);
                }
            }
        })
    }

    fn report(&self, running: &Running) -> TransformReport {
        let broker = &self.inner.broker;
        let spec = &running.spec;
        let partitions: Vec<PartitionReport> = running
            .runners
            .iter()
            .map(|(shared, _)| partition_report(broker, spec, shared))
            .collect();
        let lag = partitions.iter().map(|p| p.lag).sum();
        let failed = partitions
            .iter()
            .find(|p| p.state == State::Failed.as_str());
        let (state, reason) = if spec.paused {
            ("paused", None)
        } else if partitions.iter().any(|p| p.state == UNAUTHORIZED) {
            let why = running.runners.iter().find_map(|(s, _)| s.unauthorized());
            (UNAUTHORIZED, why)
        } else if let Some(failed) = failed {
            let why = failed.last_error.as_ref().map(|e| e.message.clone());
            ("failed", why)
        } else {
            ("running", None)
        };
        TransformReport {
            name: spec.name.clone(),
            source: spec.source.clone(),
            plugin: spec.plugin.clone(),
            params: spec.params.iter().cloned().collect(),
            outputs: spec.outputs.clone(),
            dead_letter_topic: spec.dead_letter_topic.clone(),
            on_error: spec.on_error,
            partitioning: spec.partitioning,
            partitioner: spec.partitioner.clone(),
            partitioner_params: spec.partitioner_params.iter().cloned().collect(),
            commit_interval_ms: spec.commit_interval_ms,
            from_offset: spec.from_offset.to_string(),
            start_offsets: spec.start_offsets.clone(),
            paused: spec.paused,
            generation: spec.generation,
            principal: spec.principal.clone(),
            created_ms: spec.created_ms,
            group: spec.group_id(),
            state,
            reason,
            lag,
            partitions,
        }
    }
}

/// Waits for a transform's runners to end (they were told to stop).
async fn stop_runners(running: Running) {
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    for (shared, mut task) in running.runners {
        if tokio::time::timeout_at(deadline, &mut task).await.is_err() {
            tracing::warn!(transform = %running.spec.name, partition = shared.partition, "runner did not stop in time; abandoning it");
            task.abort();
        }
    }
}

/// A transform as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TransformReport {
    pub name: String,
    pub source: String,
    pub plugin: String,
    pub params: BTreeMap<String, String>,
    pub outputs: Vec<String>,
    pub dead_letter_topic: Option<String>,
    pub on_error: OnError,
    pub partitioning: Partitioning,
    /// The partitioner plugin placing every output record, if any.
    pub partitioner: Option<String>,
    pub partitioner_params: BTreeMap<String, String>,
    pub commit_interval_ms: i64,
    pub from_offset: String,
    pub start_offsets: Vec<i64>,
    pub paused: bool,
    pub generation: u32,
    pub principal: String,
    pub created_ms: i64,
    /// The group holding the source positions (`sluice group describe` shows its lag too).
    pub group: String,
    /// `running`, `paused`, `unauthorized` (the owner lacks a right: `reason` names it) or
    /// `failed` (any partition failed).
    pub state: &'static str,
    /// Why the transform is `unauthorized` or `failed`: a partition's last error.
    pub reason: Option<String>,
    /// Records of the source not yet through the transform, over every partition.
    pub lag: i64,
    pub partitions: Vec<PartitionReport>,
}

/// One source partition of a transform.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionReport {
    pub partition: u32,
    pub state: &'static str,
    /// The committed source position, -1 before the runner read it.
    pub position: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
    /// Records below the source's last stable offset not yet committed through the
    /// transform: what a read_committed consumer of the source would call lag.
    pub lag: i64,
    pub records_in: u64,
    pub records_out: BTreeMap<String, u64>,
    pub records_skipped: u64,
    pub records_dead_lettered: u64,
    pub records_lost_to_retention: u64,
    pub transactions: u64,
    pub aborts: u64,
    pub last_commit_ms: Option<i64>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub plugin_sha256: String,
    pub last_error: Option<ErrorReport>,
    /// The open transaction in the source that the runner waits on: everything below the
    /// last stable offset is through, and records above it wait for the transaction's
    /// marker (`lag` does not count them). `None` when the runner is not held back.
    pub waiting_on_transaction: Option<WaitReport>,
}

/// An open transaction holding a runner back (`sluice_transform::Held`, while it still
/// holds the source's last stable offset).
#[derive(Debug, Clone, Serialize)]
pub struct WaitReport {
    /// The producer whose transaction is open.
    pub producer_id: i64,
    /// Its first offset: the source's last stable offset.
    pub since_offset: i64,
    /// When the runner began waiting on it, ms since the Unix epoch.
    pub since_ms: i64,
    /// How long it has waited, in milliseconds.
    pub waiting_ms: i64,
    /// Records after its first offset, held back until its marker.
    pub records_held: i64,
}

/// The last error of a partition.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorReport {
    pub kind: &'static str,
    pub message: String,
    pub offset: Option<i64>,
    pub at_ms: i64,
}

/// The state of a partition whose owner lacks a right it needs (`rights::may_run`).
const UNAUTHORIZED: &str = "unauthorized";

/// A partition's state: the machine's, or `unauthorized` while the owner lacks a right (the
/// machine then fails, or commits what it holds first).
fn partition_state(state: State, unauthorized: bool) -> &'static str {
    match state {
        State::Paused | State::Stopped => state.as_str(),
        _ if unauthorized => UNAUTHORIZED,
        _ => state.as_str(),
    }
}

/// A source partition's log start, last stable and log end offsets (-1 each if it is gone).
fn source_offsets(broker: &Broker, topic: &str, index: i32) -> (i64, i64, i64) {
    broker
        .topics
        .partition(topic, index)
        .and_then(|p| {
            p.with_log(|log| {
                (
                    log.log_start_offset().value(),
                    log.last_stable_offset().value(),
                    log.log_end_offset().value(),
                )
            })
            .ok()
        })
        .unwrap_or((-1, -1, -1))
}

fn partition_report(broker: &Broker, spec: &TransformSpec, shared: &Shared) -> PartitionReport {
    let status = shared.status();
    let unauthorized = shared.unauthorized().is_some();
    let index = i32::try_from(shared.partition).unwrap_or(i32::MAX);
    let (start, lso, end) = source_offsets(broker, &spec.source, index);
    let committed_at_start = *shared
        .committed_at_start
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let position = status.position.or(committed_at_start).unwrap_or(-1);
    let from = status
        .position
        .or(committed_at_start)
        .or_else(|| spec.start_offset(shared.partition))
        .unwrap_or(start);
    let producer = status.producer;
    let running = status.state == State::Running;
    let waiting_on_transaction = status
        .held
        .filter(|h| running && h.first_offset == lso && lso < end)
        .map(|h| WaitReport {
            producer_id: h.producer_id,
            since_offset: h.first_offset,
            since_ms: h.since_ms,
            waiting_ms: broker.now_ms().saturating_sub(h.since_ms).max(0),
            records_held: end - lso,
        });
    PartitionReport {
        partition: shared.partition,
        state: partition_state(status.state, unauthorized),
        position,
        log_start_offset: start,
        last_stable_offset: lso,
        log_end_offset: end,
        lag: (lso - from.max(start)).max(0),
        records_in: status.records_in,
        records_out: spec
            .outputs
            .iter()
            .cloned()
            .zip(
                status
                    .records_out
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(0)),
            )
            .collect(),
        records_skipped: status.records_skipped,
        records_dead_lettered: status.records_dead_lettered,
        records_lost_to_retention: status.records_lost_to_retention,
        transactions: status.transactions,
        aborts: status.aborts,
        last_commit_ms: status.last_commit_ms,
        producer_id: producer.map_or(-1, |p| p.producer_id),
        producer_epoch: producer.map_or(-1, |p| p.producer_epoch),
        plugin_sha256: shared
            .plugin_sha256
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
        last_error: status.last_error.map(|e| ErrorReport {
            kind: e.kind,
            message: e.message,
            offset: e.offset,
            at_ms: e.at_ms,
        }),
        waiting_on_transaction,
    }
}

/// Whether the report shows every partition caught up (for tests and tools).
impl TransformReport {
    pub fn running(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| p.state == State::Running.as_str())
    }
}

/// The topic `name` (a view or a missing name is refused, naming `role`).
fn topic(broker: &Broker, name: &str, role: &str) -> Result<Arc<crate::topics::Topic>, KafkaError> {
    if broker.topics.view(name).is_some() {
        return Err(policy(format!(
            "{role} {name:?} is a view: a transform reads and writes topics"
        )));
    }
    broker.topics.topic(name).ok_or_else(|| {
        KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("{role} topic {name:?} does not exist (sluice topic create {name})"),
        )
    })
}

/// The broker-side checks of a deploy: topics, the plugin and its parameters, bounds.
fn check_against_broker(broker: &Broker, spec: &TransformSpec) -> Result<(), KafkaError> {
    let mut txn_partitions = 0usize;
    let dead_letter = spec.dead_letter_topic.iter();
    for (role, name) in spec
        .outputs
        .iter()
        .map(|o| ("output", o))
        .chain(dead_letter.map(|d| ("dead-letter", d)))
    {
        let t = topic(broker, name, role)?;
        // Outputs are validated as produces are; a dead letter is the record that failed,
        // kept as it was, so a dead-letter topic may not have a validator to refuse it.
        if role == "dead-letter" && t.plugins.validator.is_some() {
            return Err(KafkaError::new(
                ResponseError::InvalidConfig,
                format!(
                    "{role} topic {name:?} has a validator plugin (sluice.validator): dead letters are written as they failed, never refused"
                ),
            ));
        }
        txn_partitions += t.partitions.len();
    }
    if txn_partitions > limits::TRANSFORM_TXN_PARTITIONS_MAX {
        return Err(policy(format!(
            "the outputs and the dead-letter topic have {txn_partitions} partitions, over TRANSFORM_TXN_PARTITIONS_MAX ({})",
            limits::TRANSFORM_TXN_PARTITIONS_MAX
        )));
    }
    let (plugin, _) = runner::bind(broker, spec).map_err(|message| {
        let registry = &broker.plugins.registry;
        let missing = |name: &str| registry.describe(name).is_none();
        let code = if missing(&spec.plugin) || spec.partitioner.as_deref().is_some_and(missing) {
            ResponseError::UnknownTopicOrPartition
        } else {
            ResponseError::InvalidConfig
        };
        KafkaError::new(code, message)
    })?;
    if matches!(plugin, process::Plugin::Filter(_)) && spec.outputs.len() > 2 {
        return Err(KafkaError::new(
            ResponseError::InvalidConfig,
            format!(
                "plugin `{}` is a filter: it sends kept records to the first output and dropped ones to the second, so at most 2 outputs ({} given)",
                spec.plugin,
                spec.outputs.len()
            ),
        ));
    }
    let timeout_ms = limits::txn_timeout_ms(
        spec.commit_interval_ms,
        i64::try_from(broker.config.plugin_call_timeout_ms).unwrap_or(i64::MAX),
    );
    if timeout_ms > broker.config.transaction_max_timeout_ms {
        return Err(KafkaError::new(
            ResponseError::InvalidConfig,
            format!(
                "the transform's transaction timeout ({timeout_ms} ms, from plugin.call.timeout.ms and commit_interval_ms) is over transaction.max.timeout.ms ({} ms)",
                broker.config.transaction_max_timeout_ms
            ),
        ));
    }
    Ok(())
}

/// Each source partition's start offset for `from`, resolved now.
fn start_offsets(source: &crate::topics::Topic, from: FromOffset) -> Result<Vec<i64>, KafkaError> {
    source
        .partitions
        .iter()
        .map(|p| {
            p.with_log(|log| {
                let start = log.log_start_offset().value();
                let end = log.log_end_offset().value();
                match from {
                    FromOffset::Earliest => Ok(start),
                    FromOffset::Latest => Ok(end),
                    FromOffset::Offset(o) => Ok(o.clamp(start, end)),
                    FromOffset::Timestamp(ms) => log
                        .offset_for_timestamp_with(
                            ms,
                            Some(&crate::codec::decompress_for_timestamp_lookup),
                        )
                        .map(|found| found.map_or(end, |(o, _): (Offset, i64)| o.value()))
                        .map_err(|e| {
                            KafkaError::new(ResponseError::KafkaStorageError, e.to_string())
                        }),
                }
            })?
        })
        .collect()
}

fn spec_file(broker: &Broker, name: &str) -> PathBuf {
    broker
        .config
        .data_dir
        .join(TRANSFORMS_DIR)
        .join(format!("{name}.json"))
}

/// Writes a spec through the durable-write path (the one place a spec is written).
fn persist(broker: &Broker, spec: &TransformSpec) -> Result<(), KafkaError> {
    let path = spec_file(broker, &spec.name);
    let text = serde_json::to_string_pretty(spec).unwrap_or_default();
    write_durable(&path, text.as_bytes()).map_err(|e| {
        KafkaError::new(
            ResponseError::KafkaStorageError,
            format!("writing {}: {e}", path.display()),
        )
    })
}

/// A spec written before source ids were recorded is bound to its source topic as it is now
/// (persisted), so a topic made later under the name is never read by it.
fn record_source_id(broker: &Broker, mut spec: TransformSpec) -> TransformSpec {
    if spec.source_topic_id.is_some() {
        return spec;
    }
    let source = broker
        .topics
        .topic(&spec.source)
        .filter(|t| t.offline.is_none());
    if let Some(source) = source {
        spec.source_topic_id = Some(source.id.to_string());
        if let Err(e) = persist(broker, &spec) {
            tracing::warn!(transform = %spec.name, "recording its source topic's id: {}", e.message);
        }
    }
    spec
}

fn load(path: &std::path::Path) -> Result<TransformSpec, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let spec: TransformSpec = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    spec.check().map_err(|e| e.to_string())?;
    Ok(spec)
}

fn unknown(name: &str) -> KafkaError {
    KafkaError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("unknown transform {name:?} (GET /v1/transforms lists them)"),
    )
}

fn policy(message: String) -> KafkaError {
    KafkaError::new(ResponseError::PolicyViolation, message)
}
