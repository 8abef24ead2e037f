//! Materialized transforms (docs/transforms.md): a source topic read inside the broker, every
//! record run through a WebAssembly transform (or filter) plugin, and the output appended
//! to 1 to 8 output topics **exactly once**: each source partition's runner commits its
//! output and its source position in one transaction of its transactional id's coordinator.
//!
//! # Layout
//! - this file: [`TransformService`], what the admin API and the listener hold: deploy,
//!   list, describe, pause, resume, restart, delete; the spec files.
//! - `cluster.rs`: the service in a cluster: the metadata image's specs applied on every
//!   broker, and `describe` gathering every broker's runners.
//! - `placement.rs`: which runners run here (the source partitions this broker leads), and
//!   the merge of every broker's reports.
//! - `runner.rs`: one task per source partition carrying out the effects of its state
//!   machine (`sluice_transform::Runner`, which decides everything).
//! - `process.rs`: the blocking steps: reading the source read_committed, calling the plugin.
//! - `producer.rs`: the transaction steps, and `remote.rs`, where they go: the transactional
//!   id's coordinator, each output partition's leader, the group's coordinator (in-process,
//!   or another broker's by message); `peers.rs`: the other side of those messages.
//! - `record.rs`: the records the machine moves.
//! - `report.rs`: what `describe` and `/metrics` show.
//! - `rights.rs`: what a running transform may still do: its source still the topic it was
//!   deployed on, its outputs there, its owner's rights (checked before each read and append).
//!
//! Durable state: the spec, `<data.dir>/transforms/<name>.json` on a single node (written
//! through the one durable-write path, `persist`), or in a cluster a record of the metadata
//! log (`PutTransform` / `RemoveTransform`: every broker rebuilds its transforms from the
//! log); the source positions, as the committed offsets of the group
//! `__sluice_transform/<name>` at its coordinator; producer ids and open transactions in the
//! transaction log of each transactional id's coordinator. Counters are memory only.
//!
//! A transform acts for its owner (the spec's `principal`, from `principal_host`): its runners
//! stop, `unauthorized`, when the owner loses a right it needs and resume by themselves when it
//! is granted again; one whose source topic is deleted is removed (`remove_orphans`, every
//! `PARTITIONS_CHECK_INTERVAL`, and at start); one whose output is deleted fails.
//!
//! Architecture Invariant: a transform's output becomes visible to read_committed consumers
//! only together with the source position that produced it; nothing here commits an offset
//! outside a transaction of the runner's own transactional id.

mod cluster;
mod peers;
mod placement;
mod process;
mod producer;
mod record;
mod remote;
mod report;
mod rights;
mod runner;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;
use serde::Deserialize;
use sluice_transform::{Finish, FromOffset, OnError, Partitioning, State, TransformSpec, limits};
use tokio::sync::{Mutex, Semaphore, watch};
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::error::{KafkaError, ServerError};
use crate::files::{remove_file_logged, remove_stale_temps, write_durable};
use crate::group::GroupHandle;
use crate::txn::TxnHandle;

use cluster::{source_gone_from, warn_unmigrated};
pub use peers::handler;
use runner::{Command, Control, RunnerCtx, Shared};

pub use report::{ErrorReport, PartitionReport, TransformReport, WaitReport};
use report::{UNAUTHORIZED, partition_report};

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
    /// The transform's command (run, pause), which every runner is given; a runner's own
    /// stop (its source partition is led elsewhere now) goes to it alone.
    command: Control,
    /// The runners on this broker, by source partition: every partition on a single node;
    /// in a cluster, the partitions this broker leads (`placement.rs`).
    runners: BTreeMap<u32, RunnerHandle>,
}

/// One runner: its status, its commands, its task.
#[derive(Debug)]
struct RunnerHandle {
    shared: Arc<Shared>,
    control: watch::Sender<Command>,
    task: JoinHandle<()>,
}

impl Running {
    /// Sends `control` to every runner (and to the runners started later).
    fn send(&mut self, control: Control) {
        if !matches!(control, Control::Stop(_)) {
            self.command = control;
        }
        for runner in self.runners.values() {
            runner::send(&runner.control, control);
        }
    }
}

impl TransformService {
    /// Loads the transforms and starts their runners (after the coordinators, so a runner's
    /// InitProducerId finds the transaction log replayed): on a single node from the spec
    /// files; in a cluster from the metadata image, which every broker applies
    /// ([`TransformService::apply_image`]), starting the runners of the partitions it leads.
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
        let loaded = if broker.kraft().is_some() {
            warn_unmigrated(&dir)?;
            BTreeMap::new()
        } else {
            service.load(&dir)?
        };
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

    /// The spec files of a single node, each transform started.
    fn load(&self, dir: &std::path::Path) -> Result<BTreeMap<String, Running>, ServerError> {
        let broker = &self.inner.broker;
        let entries = std::fs::read_dir(dir)
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
                    let spec = record_source_id(broker, spec);
                    tracing::info!(transform = %spec.name, source = %spec.source, "loaded transform");
                    let running = self.start(Arc::new(spec));
                    loaded.insert(running.spec.name.clone(), running);
                }
                Err(e) => tracing::error!(path = %path.display(), "transform not loaded: {e}"),
            }
        }
        Ok(loaded)
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
        for running in transforms.values_mut() {
            running.send(Control::Stop(Finish::Commit));
        }
        for (_, running) in std::mem::take(&mut *transforms) {
            stop_runners(running).await;
        }
    }

    /// Deploys a transform for `principal`, who asks from `host` (the owner it acts for):
    /// checks it against the broker (topics, plugin, bounds), resolves its start offsets,
    /// records it (the spec file, or the metadata log in a cluster) and starts its runners.
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
        // In a cluster the image is the list (this broker's map may be a step behind).
        let (exists, count) = match broker.kraft().map(|k| k.image()) {
            Some(image) => (
                image.transforms().contains_key(&request.name),
                image.transforms().len(),
            ),
            None => (transforms.contains_key(&request.name), transforms.len()),
        };
        if exists {
            return Err(KafkaError::new(
                ResponseError::TopicAlreadyExists,
                format!("a transform named {:?} exists already", request.name),
            ));
        }
        if count >= limits::TRANSFORMS_MAX {
            return Err(policy(format!(
                "TRANSFORMS_MAX ({}) transforms exist already",
                limits::TRANSFORMS_MAX
            )));
        }
        let source = topic(broker, &request.source, "source")?;
        let mut spec = new_spec(request, (principal, host), &source, broker.now_ms());
        spec.start_offsets = remote::start_offsets(broker, &source, spec.from_offset).await?;
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
        if broker.kraft().is_some() {
            // Positions an earlier transform of the name may have left behind (a runner on
            // another broker committing while it was deleted) are not this one's.
            self.forget_positions(&spec).await?;
        }
        self.record(&spec).await?;
        tracing::info!(transform = %spec.name, source = %spec.source, outputs = ?spec.outputs, plugin = %spec.plugin, "deployed transform");
        let name = spec.name.clone();
        if broker.kraft().is_some() {
            self.apply_image(&mut transforms).await;
        } else {
            let running = self.start(Arc::new(spec));
            transforms.insert(name.clone(), running);
        }
        let report = transforms.get(&name).map(|r| self.report(r));
        drop(transforms);
        match report {
            Some(report) => Ok(self.everywhere(report).await),
            None => Err(unknown(&name)),
        }
    }

    /// Every transform on this broker, by name, with the partitions it runs here (all of
    /// them on a single node): what `/metrics` shows of this broker.
    pub async fn list(&self) -> Vec<TransformReport> {
        let transforms = self.inner.transforms.lock().await;
        transforms.values().map(|r| self.report(r)).collect()
    }

    /// One transform, with every partition (in a cluster, from the brokers running them).
    ///
    /// # Errors
    /// UNKNOWN_TOPIC_OR_PARTITION for an unknown name.
    pub async fn describe(&self, name: &str) -> Result<TransformReport, KafkaError> {
        let report = {
            let transforms = self.inner.transforms.lock().await;
            transforms
                .get(name)
                .map(|r| self.report(r))
                .ok_or_else(|| unknown(name))?
        };
        Ok(self.everywhere(report).await)
    }

    /// Pauses (`true`) or resumes a transform; kept across restarts.
    ///
    /// # Errors
    /// Unknown name; the spec cannot be recorded.
    pub async fn set_paused(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<TransformReport, KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let running = transforms.get(name).ok_or_else(|| unknown(name))?;
        let mut spec = (*running.spec).clone();
        spec.paused = paused;
        self.record(&spec).await?;
        if self.inner.broker.kraft().is_some() {
            self.apply_image(&mut transforms).await;
        } else if let Some(running) = transforms.get_mut(name) {
            running.spec = Arc::new(spec);
            running.send(if paused { Control::Pause } else { Control::Run });
        }
        tracing::info!(transform = name, paused, "transform paused or resumed");
        let report = transforms
            .get(name)
            .map(|r| self.report(r))
            .ok_or_else(|| unknown(name))?;
        drop(transforms);
        Ok(self.everywhere(report).await)
    }

    /// Restarts a transform from `from` (resolved per partition now): its runners commit and
    /// stop, the group's positions are dropped, and new runners start at the new offsets. The
    /// output already written stays (a replay writes the records again).
    ///
    /// # Errors
    /// Unknown name; an offset that cannot be resolved; the spec cannot be recorded.
    pub async fn restart(
        &self,
        name: &str,
        from: FromOffset,
    ) -> Result<TransformReport, KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let broker = &self.inner.broker;
        let in_cluster = broker.kraft().is_some();
        let mut spec = (*transforms.get(name).ok_or_else(|| unknown(name))?.spec).clone();
        if !in_cluster && let Some(mut running) = transforms.remove(name) {
            running.send(Control::Stop(Finish::Commit));
            stop_runners(running).await;
        }
        let result = async {
            let source = topic(broker, &spec.source, "source")?;
            spec.start_offsets = remote::start_offsets(broker, &source, from).await?;
            spec.from_offset = from;
            spec.generation += 1;
            // The recorded spec is the one commit point: once it holds the new generation,
            // the runners ignore positions committed before it (`position_is_current`), so
            // a crash before the group's offsets are dropped cannot resume the old positions.
            self.record(&spec).await?;
            if in_cluster {
                // This broker's runners stop (committing) and start again at once; the other
                // brokers' do when they apply the record.
                self.apply_image(&mut transforms).await;
            }
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
        if !in_cluster {
            let running = self.start(Arc::new(spec));
            transforms.insert(name.to_owned(), running);
        }
        let report = transforms
            .get(name)
            .map(|r| self.report(r))
            .ok_or_else(|| unknown(name))?;
        drop(transforms);
        result?;
        Ok(self.everywhere(report).await)
    }

    /// Deletes a transform: its runners abort their open transaction and stop; the spec and
    /// the group's positions are removed. Output topics stay.
    ///
    /// # Errors
    /// Unknown name; in a cluster, the controller's refusal.
    pub async fn delete(&self, name: &str) -> Result<(), KafkaError> {
        let mut transforms = self.inner.transforms.lock().await;
        let broker = &self.inner.broker;
        if let Some(kraft) = broker.kraft() {
            let spec = transforms
                .get(name)
                .map(|r| r.spec.clone())
                .ok_or_else(|| unknown(name))?;
            let op = crate::cluster::ControllerOp::RemoveTransform {
                name: name.to_owned(),
            };
            kraft
                .submit(op)
                .await
                .map_err(|e| crate::kraft::kafka_error(&e))?;
            // Runners here abort now; the other brokers' when they apply the removal.
            self.apply_image(&mut transforms).await;
            if let Err(e) = self.forget_positions(&spec).await {
                tracing::warn!(
                    transform = name,
                    "its positions stay in {} (a deploy of the name drops them): {}",
                    spec.group_id(),
                    e.message
                );
            }
            tracing::info!(transform = name, "deleted transform");
            return Ok(());
        }
        let mut running = transforms.remove(name).ok_or_else(|| unknown(name))?;
        let spec = running.spec.clone();
        running.send(Control::Stop(Finish::Abort));
        stop_runners(running).await;
        if let Err(e) = self.forget_positions(&spec).await {
            // Nothing removed: the transform runs on from its positions; delete again.
            let running = self.start(spec);
            transforms.insert(name.to_owned(), running);
            return Err(e);
        }
        remove_file_logged(&spec_file(broker, name));
        broker.topics.forget_transform_topics(name);
        tracing::info!(transform = name, "deleted transform");
        Ok(())
    }

    /// Records a spec: its file on a single node; in a cluster the metadata log
    /// (`PutTransform`), answered once this broker's image holds it.
    async fn record(&self, spec: &TransformSpec) -> Result<(), KafkaError> {
        let broker = &self.inner.broker;
        let Some(kraft) = broker.kraft() else {
            return persist(broker, spec);
        };
        let json = serde_json::to_vec(spec).map_err(|e| {
            KafkaError::new(
                ResponseError::UnknownServerError,
                format!("encoding transform {:?}: {e}", spec.name),
            )
        })?;
        let op = crate::cluster::ControllerOp::PutTransform {
            name: spec.name.clone(),
            spec: json,
        };
        kraft
            .submit(op)
            .await
            .map(|_| ())
            .map_err(|e| crate::kraft::kafka_error(&e))
    }

    /// Removes the transforms whose source topic is gone (`rights::source_gone`; in a
    /// cluster, gone from the image): their runners abort and stop, then the spec (the
    /// commit point) and the group's positions go. The deletion of the topic wrote their
    /// audit lines; this carries it out.
    async fn remove_orphans(&self, transforms: &mut BTreeMap<String, Running>) {
        let broker = &self.inner.broker;
        let image = broker.kraft().map(|k| k.image());
        let orphans: Vec<String> = transforms
            .values()
            .filter(|r| match &image {
                Some(image) => source_gone_from(image, &r.spec),
                None => rights::source_gone(broker, &r.spec),
            })
            .map(|r| r.spec.name.clone())
            .collect();
        for name in orphans {
            let Some(mut running) = transforms.remove(&name) else {
                continue;
            };
            let spec = running.spec.clone();
            running.send(Control::Stop(Finish::Abort));
            stop_runners(running).await;
            match broker.kraft() {
                None => remove_file_logged(&spec_file(broker, &name)),
                Some(kraft) => {
                    // Every broker notices; the first removal wins, the others find it gone.
                    let op = crate::cluster::ControllerOp::RemoveTransform { name: name.clone() };
                    if let Err(e) = kraft.submit(op).await {
                        tracing::debug!(transform = %name, "removing it from the cluster: {e}");
                    }
                }
            }
            broker.topics.forget_transform_topics(&name);
            if let Err(e) = self.forget_positions(&spec).await {
                tracing::warn!(transform = %name, "its positions stay in {} (never read again): {}", spec.group_id(), e.message);
            }
            tracing::info!(transform = %name, source = %spec.source, "removed transform: its source topic was deleted");
        }
    }

    /// Drops the committed positions of the transform's group (at its coordinator).
    async fn forget_positions(&self, spec: &TransformSpec) -> Result<(), KafkaError> {
        remote::delete_group(&self.inner.broker, &self.inner.groups, &spec.group_id())
            .await
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::CoordinatorNotAvailable,
                    format!("dropping the positions of {}: {e}", spec.group_id()),
                )
            })
    }

    /// Starts the transform's runners (noting the topics it uses with the broker).
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
        let command = if spec.paused {
            Control::Pause
        } else {
            Control::Run
        };
        let mut running = Running {
            spec,
            command,
            runners: BTreeMap::new(),
        };
        self.place(&mut running);
        running
    }

    /// Starts a runner for every source partition led here that has none (all of them at
    /// start on a single node; later, the partitions CreatePartitions added, which start at
    /// their log start offset, and those whose leadership came here), and stops, committing,
    /// the runners of partitions led elsewhere now (`placement.rs`).
    fn place(&self, running: &mut Running) {
        let inner = &self.inner;
        let spec = running.spec.clone();
        let partitions = inner
            .broker
            .topics
            .topic(&spec.source)
            .map_or(spec.start_offsets.len(), |t| t.partitions.len());
        let led_here: Vec<bool> = (0..partitions)
            .map(|p| placement::runs_here(&inner.broker, &spec.source, p))
            .collect();
        let has: std::collections::BTreeSet<u32> = running.runners.keys().copied().collect();
        let plan = placement::plan(&led_here, &has);
        for partition in plan.stop {
            if let Some(runner) = running.runners.remove(&partition) {
                tracing::info!(transform = %spec.name, partition, "source partition led elsewhere now: its runner commits and stops");
                runner::send(&runner.control, Control::Stop(Finish::Commit));
                let name = spec.name.clone();
                tokio::spawn(async move { stop_runner(&name, runner).await });
            }
        }
        let txn_timeout_ms = i32::try_from(limits::txn_timeout_ms(
            spec.commit_interval_ms,
            i64::try_from(inner.broker.config.plugin_call_timeout_ms).unwrap_or(i64::MAX),
        ))
        .unwrap_or(i32::MAX);
        for partition in plan.start {
            let shared = Arc::new(Shared::new(partition));
            let (control, receiver) = watch::channel(Command::first(running.command));
            let ctx = RunnerCtx {
                broker: inner.broker.clone(),
                txns: inner.txns.clone(),
                groups: inner.groups.clone(),
                spec: spec.clone(),
                partition,
                shared: shared.clone(),
                control: receiver,
                calls: inner.calls.clone(),
                txn_timeout_ms,
            };
            let task = tokio::spawn(runner::run(ctx));
            running.runners.insert(
                partition,
                RunnerHandle {
                    shared,
                    control,
                    task,
                },
            );
        }
    }

    /// Every `PARTITIONS_CHECK_INTERVAL` (and in a cluster after every image this broker
    /// applies): the image's transforms here, the transforms whose source was deleted
    /// removed, and runners placed where their source partitions are led.
    fn spawn_grower(&self) -> JoinHandle<()> {
        let service = self.clone();
        let mut published = service.inner.broker.kraft().map(|k| k.published());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PARTITIONS_CHECK_INTERVAL);
            let mut applied = None;
            loop {
                match published.as_mut() {
                    Some(published) => tokio::select! {
                        _ = tick.tick() => {}
                        changed = published.changed() => if changed.is_err() { return },
                    },
                    None => {
                        tick.tick().await;
                    }
                }
                let mut transforms = service.inner.transforms.lock().await;
                if let Some(published) = published.as_mut() {
                    let index = *published.borrow_and_update();
                    if applied != Some(index) {
                        service.apply_image(&mut transforms).await;
                        applied = Some(index);
                    }
                }
                service.remove_orphans(&mut transforms).await;
                for running in transforms.values_mut() {
                    service.place(running);
                }
            }
        })
    }

    fn report(&self, running: &Running) -> TransformReport {
        let broker = &self.inner.broker;
        let spec = &running.spec;
        let partitions: Vec<PartitionReport> = running
            .runners
            .values()
            .map(|r| partition_report(broker, spec, &r.shared))
            .collect();
        let lag = partitions.iter().map(|p| p.lag).sum();
        let failed = partitions
            .iter()
            .find(|p| p.state == State::Failed.as_str());
        let (state, reason) = if spec.paused {
            ("paused", None)
        } else if partitions.iter().any(|p| p.state == UNAUTHORIZED) {
            let why = running
                .runners
                .values()
                .find_map(|r| r.shared.unauthorized());
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
    for (_, runner) in running.runners {
        stop_runner_by(&running.spec.name, runner, deadline).await;
    }
}

/// Waits for one runner to end (it was told to stop), at most `STOP_GRACE`.
async fn stop_runner(name: &str, runner: RunnerHandle) {
    stop_runner_by(name, runner, tokio::time::Instant::now() + STOP_GRACE).await;
}

async fn stop_runner_by(name: &str, mut runner: RunnerHandle, deadline: tokio::time::Instant) {
    if tokio::time::timeout_at(deadline, &mut runner.task)
        .await
        .is_err()
    {
        tracing::warn!(transform = %name, partition = runner.shared.partition, "runner did not stop in time; abandoning it");
        runner.task.abort();
    }
}

/// The spec of a deploy `request` by `owner` (principal, host) over `source`, made `now_ms`,
/// its start offsets not resolved yet.
fn new_spec(
    request: DeployRequest,
    (principal, host): (String, String),
    source: &crate::topics::Topic,
    now_ms: i64,
) -> TransformSpec {
    TransformSpec {
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
        created_ms: now_ms,
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
