//! Partition replication on this broker (Kafka's `ReplicaManager`): one
//! [`sluice_replica::Replica`] state machine per replica this broker holds of a partition
//! with more than one replica, driven by the metadata image, the produce path, followers'
//! fetches, the fetch answers of the leaders it follows, fsyncs and a timer; the effects it
//! returns carried out here on the partition's storage log, the fetchers
//! (`replica_fetcher.rs`) and the controller.
//!
//! - **Images** (the publisher, after it made the topics what the image says): a slot is
//!   made for each replicated partition whose replicas name this broker, over the
//!   partition's log as it is ([`ReplicaLog::tail`]: end, epoch cache, last batch's epoch);
//!   each changed partition state goes to it with this broker's epoch, once the image holds
//!   this process's registration (before, the replica stays offline: what the image says
//!   this node leads was its previous incarnation's). A slot no longer needed is dropped.
//! - **Produce** (leader): [`ReplicaManager::check_produce`] before the append
//!   (NOT_ENOUGH_REPLICAS while the ISR is below the topic's `min.insync.replicas`), then
//!   [`ReplicaManager::appended`]: acks=1 is answered at once, acks=all once the high
//!   watermark passes the batch (REQUEST_TIMED_OUT at the request's timeout).
//! - **Follower fetches** (leader, `handler/produce_fetch/replica_fetch.rs`):
//!   [`ReplicaManager::serve_fetch`] records the follower's offset (its ISR membership and
//!   the high watermark follow) and answers the high watermark or a diverging epoch; the
//!   handler reads the bytes from the log.
//! - **Effects**: `BeginEpoch` assigns the controller's epoch at the log end
//!   (`Log::assign_leader_epoch`: every batch appended from then on carries it); `Append`
//!   appends the fetched bytes as they are (`Log::append_replicated`); `Truncate` cuts the
//!   log where it diverged (`Log::truncate_to`, with no group fsync running); `Fsync` is the
//!   partition's group commit, fed back as `Fsynced`; `SendFetch` goes to the fetcher of the
//!   leader's broker; `SendAlterPartition` is submitted to the controller
//!   (`ControllerOp::AlterPartition`) and its answer fed back; `ProduceAnswer` wakes the
//!   produce that waits for it.
//! - A leader's log also grows by appends the state machine is not told of one by one
//!   (transaction markers, forwarded records): its end is shown to it before every event
//!   (`Replica::observe_log_end`).
//! - When an effect fails on the real log (a full disk, a fenced log, a truncation that
//!   ended elsewhere) the slot's state machine is made again from the log as it is, its
//!   waiting produces answered NOT_LEADER_OR_FOLLOWER, and the last image state fed again.
//! - The high watermark is published on the partition after each event
//!   (`Partition::set_high_watermark`): consumers, ListOffsets and read_committed read below
//!   it.
//!
//! A timer ticks every slot every [`REPLICA_TICK_MS`] (fetch timeouts and backoffs, ISR
//! shrink after `replica.lag.time.max.ms`, acks=all deadlines).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use sluice_cluster::MetadataImage;
use sluice_cluster::image::PartitionState;
use sluice_cluster::records::{ConfigResource, ConfigResourceType, TopicId};
use sluice_kafka::ErrorCode;
use sluice_replica::log::EpochEntry;
use sluice_replica::{
    Acks, Appended, Batch, Effect, Event, FetchData, FetchRequest, FetchResponse, ProduceAck,
    Replica, ReplicaConfig, ReplicaLog,
};
use sluice_storage::Offset;
use tokio::sync::oneshot;

use super::Kraft;
use super::replica_fetcher::Fetchers;
use crate::cluster::{ControllerOp, ControllerReply};
use crate::error::KafkaError;
use crate::topics::{Partition, TopicRegistry, group_commit};

/// How often every replica's timer runs, in milliseconds.
pub const REPLICA_TICK_MS: u64 = 200;
/// How many times a truncation waits for a running group fsync to end (each
/// [`TRUNCATE_WAIT_STEP_MS`]) before the slot is made again from the log.
const TRUNCATE_WAITS_MAX: u32 = 200;
const TRUNCATE_WAIT_STEP_MS: u64 = 5;

/// The broker keys replication reads (`replica.*`, `sluice.acks.all.fsync`).
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSettings {
    pub node_id: i32,
    pub lag_time_max_ms: i64,
    pub fetch_wait_max_ms: i64,
    pub fetch_max_bytes: u32,
    pub fetch_backoff_ms: i64,
    pub acks_all_fsync: bool,
    /// The broker's `min.insync.replicas` (a topic's overrides it).
    pub min_insync_replicas: usize,
}

impl ReplicaSettings {
    pub fn from_config(config: &crate::config::BrokerConfig) -> Self {
        Self {
            node_id: config.node_id,
            lag_time_max_ms: config.replica_lag_time_max_ms,
            fetch_wait_max_ms: config.replica_fetch_wait_max_ms,
            fetch_max_bytes: config.replica_fetch_max_bytes,
            fetch_backoff_ms: config.replica_fetch_backoff_ms,
            acks_all_fsync: config.acks_all_fsync,
            min_insync_replicas: config.min_insync_replicas as usize,
        }
    }

    fn replica_config(&self, min_insync_replicas: usize) -> ReplicaConfig {
        ReplicaConfig {
            min_insync_replicas,
            replica_lag_time_max_ms: self.lag_time_max_ms,
            acks_all_fsync: self.acks_all_fsync,
            // The leader holds a fetch that finds nothing (`replica.fetch.wait.max.ms`), so
            // the follower asks again at once.
            fetch_idle_ms: 0,
            fetch_backoff_ms: self.fetch_backoff_ms,
            // A fetch is answered within the leader's wait plus a request's own deadline.
            fetch_timeout_ms: self.fetch_wait_max_ms + super::peers::PEER_REQUEST_TIMEOUT_MS as i64,
            ..ReplicaConfig::new(self.node_id)
        }
    }
}

/// A partition by topic name and index.
type Key = (String, i32);

/// This broker's replicas (module docs).
pub struct ReplicaManager {
    settings: ReplicaSettings,
    topics: Arc<TopicRegistry>,
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    pub(super) fetchers: Fetchers,
    kraft: std::sync::OnceLock<Weak<Kraft>>,
    started: Instant,
}

impl std::fmt::Debug for ReplicaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaManager")
            .field("replicas", &lock(&self.slots).len())
            .finish_non_exhaustive()
    }
}

/// One replica: the partition, its state machine, and what waits on it.
#[derive(Debug)]
pub struct Slot {
    pub partition: Arc<Partition>,
    topic_id: TopicId,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    replica: Replica,
    /// The last state the image gave, and this broker's epoch then (fed again after a
    /// remake).
    last: Option<(Option<i64>, PartitionState)>,
    /// Produces waiting for their answer, by request id (at most
    /// `sluice_replica::limits::PENDING_PRODUCES_MAX`: the state machine refuses more).
    waiters: HashMap<u64, oneshot::Sender<Result<ProduceAck, ErrorCode>>>,
    next_request_id: u64,
    /// The bytes of the fetch answer being handled (a follower's `Append` writes them).
    fetched: Option<bytes::Bytes>,
    /// The answer to the follower fetch being served (a leader's `SendFetchResponse`).
    served: Option<FetchResponse>,
    /// An effect failed on the real log: make the state machine again after this event.
    remake: bool,
}

impl ReplicaManager {
    pub fn new(settings: ReplicaSettings, topics: Arc<TopicRegistry>) -> Arc<Self> {
        Arc::new(Self {
            settings,
            topics,
            slots: Mutex::new(HashMap::new()),
            fetchers: Fetchers::default(),
            kraft: std::sync::OnceLock::new(),
            started: Instant::now(),
        })
    }

    /// Starts the timer; `kraft` is where fetches, AlterPartition and the broker epoch go.
    pub fn start(self: &Arc<Self>, kraft: &Arc<Kraft>) {
        let _ = self.kraft.set(Arc::downgrade(kraft));
        let me = Arc::downgrade(self);
        let (first, image) = (Arc::clone(self), kraft.image());
        tokio::task::spawn_blocking(move || first.apply(&image));
        tokio::spawn(async move {
            let mut timer = tokio::time::interval(Duration::from_millis(REPLICA_TICK_MS));
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                timer.tick().await;
                let Some(manager) = me.upgrade() else { return };
                if manager.kraft().is_none() {
                    return;
                }
                let ticking = Arc::clone(&manager);
                let _ = tokio::task::spawn_blocking(move || ticking.tick_all()).await;
            }
        });
    }

    pub(super) fn kraft(&self) -> Option<Arc<Kraft>> {
        self.kraft.get().and_then(Weak::upgrade)
    }

    pub(super) const fn settings(&self) -> &ReplicaSettings {
        &self.settings
    }

    /// Milliseconds since the manager started (the state machines' clock).
    pub(super) fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The slot of `topic`-`index`, if this broker holds a replica of it that replicates.
    pub fn slot(&self, topic: &str, index: i32) -> Option<Arc<Slot>> {
        lock(&self.slots).get(&(topic.to_owned(), index)).cloned()
    }

    fn tick_all(self: &Arc<Self>) {
        let slots: Vec<Arc<Slot>> = lock(&self.slots).values().cloned().collect();
        for slot in slots {
            slot.handle(self, Event::Tick);
        }
    }

    /// Makes the slots what `image` says (module docs); runs on the blocking pool, after
    /// the publisher applied the image to the topic registry.
    pub(super) fn apply(self: &Arc<Self>, image: &MetadataImage) {
        let me = self.settings.node_id;
        let broker_epoch = self.kraft().and_then(|k| k.broker_epoch(image));
        let mut wanted: HashMap<Key, (TopicId, PartitionState, usize)> = HashMap::new();
        for (id, topic) in image.topics() {
            if super::publisher::is_internal(&topic.name) {
                continue;
            }
            let min_isr =
                min_insync_replicas(image, &topic.name, self.settings.min_insync_replicas);
            for (&index, state) in &topic.partitions {
                if state.replicas.len() > 1 && state.replicas.contains(&me) {
                    wanted.insert((topic.name.clone(), index), (*id, state.clone(), min_isr));
                }
            }
        }
        let gone: Vec<(Key, Arc<Slot>)> = {
            let mut slots = lock(&self.slots);
            let keys: Vec<Key> = slots
                .keys()
                .filter(|k| !wanted.contains_key(*k))
                .cloned()
                .collect();
            keys.into_iter()
                .filter_map(|k| slots.remove(&k).map(|s| (k, s)))
                .collect()
        };
        for (_, slot) in gone {
            slot.drop_replica();
        }
        for (key, (topic_id, state, min_isr)) in wanted {
            let Some(partition) = self.topics.partition(&key.0, key.1) else {
                continue;
            };
            let existing = self
                .slot(&key.0, key.1)
                .filter(|s| Arc::ptr_eq(&s.partition, &partition) && s.topic_id == topic_id);
            let slot = match existing {
                Some(slot) => slot,
                None => match Slot::open(&self.settings, topic_id, &partition, min_isr) {
                    Ok(slot) => {
                        let slot = Arc::new(slot);
                        if let Some(old) = lock(&self.slots).insert(key.clone(), Arc::clone(&slot))
                        {
                            old.drop_replica();
                        }
                        slot
                    }
                    Err(e) => {
                        tracing::warn!(topic = %key.0, partition = key.1, error = %e.message, "cannot replicate this partition now; retried at the next image");
                        continue;
                    }
                },
            };
            slot.metadata(self, broker_epoch, state, min_isr);
        }
    }

    /// Before a produce's append: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS or
    /// REQUEST_TIMED_OUT from the partition's replica (`Ok` for a partition that does not
    /// replicate).
    pub fn check_produce(&self, topic: &str, index: i32, acks: i16) -> Result<(), KafkaError> {
        let Some(slot) = self.slot(topic, index) else {
            return Ok(());
        };
        let inner = lock(&slot.inner);
        inner.replica.check_produce(acks_of(acks)).map_err(|code| {
            let isr = inner.replica.isr().to_vec();
            let min = inner.replica.config().min_insync_replicas;
            refusal(code, topic, index, &isr, min)
        })
    }

    /// After a produce's append to a replicated partition's log (`duplicate`: the log found
    /// it a repeat of the batch at those offsets): the receiver answers when the produce
    /// may be acknowledged. `None` for a partition that does not replicate.
    pub fn appended(
        self: &Arc<Self>,
        topic: &str,
        index: i32,
        acks: i16,
        (base_offset, last_offset): (i64, i64),
        duplicate: bool,
        timeout_ms: i64,
    ) -> Option<oneshot::Receiver<Result<ProduceAck, ErrorCode>>> {
        let slot = self.slot(topic, index)?;
        let (tx, rx) = oneshot::channel();
        let request_id = {
            let mut inner = lock(&slot.inner);
            inner.next_request_id += 1;
            let id = inner.next_request_id;
            inner.waiters.insert(id, tx);
            id
        };
        let epoch = slot.leading_epoch().unwrap_or(-1);
        let event = Event::Appended(Appended {
            request_id,
            acks: acks_of(acks),
            batch: Batch {
                base_offset,
                last_offset,
                leader_epoch: epoch,
                producer_id: -1,
                base_sequence: -1,
                payload: 0,
            },
            duplicate,
            deadline_ms: self.now_ms().saturating_add(timeout_ms.max(0)),
        });
        slot.handle(self, event);
        Some(rx)
    }

    /// A follower's fetch of `topic`-`index` at this leader: its answer (the high
    /// watermark, or a diverging epoch), or the error to answer the partition with.
    pub fn serve_fetch(
        self: &Arc<Self>,
        topic: &str,
        index: i32,
        request: FetchRequest,
    ) -> Result<FetchData, ErrorCode> {
        let slot = self
            .slot(topic, index)
            .ok_or(ErrorCode::NotLeaderOrFollower)?;
        slot.handle(self, Event::Fetch(request));
        let served = lock(&slot.inner).served.take();
        served.map_or(Err(ErrorCode::NotLeaderOrFollower), |r| r.result)
    }
}

impl Slot {
    /// A slot over `partition`'s log as it is now.
    fn open(
        settings: &ReplicaSettings,
        topic_id: TopicId,
        partition: &Arc<Partition>,
        min_isr: usize,
    ) -> Result<Self, KafkaError> {
        let log = partition.with_log(|log| tail_of(log))?;
        let replica = Replica::new(
            settings.replica_config(min_isr),
            topic_id,
            partition.index,
            log,
        );
        Ok(Self {
            partition: Arc::clone(partition),
            topic_id,
            inner: Mutex::new(Inner {
                replica,
                last: None,
                waiters: HashMap::new(),
                next_request_id: 0,
                fetched: None,
                served: None,
                remake: false,
            }),
        })
    }

    /// The epoch this replica leads at, if it leads.
    pub fn leading_epoch(&self) -> Option<i32> {
        lock(&self.inner).replica.leading_epoch()
    }

    /// The image's state of the partition.
    fn metadata(
        &self,
        manager: &Arc<ReplicaManager>,
        broker_epoch: Option<i64>,
        state: PartitionState,
        min_isr: usize,
    ) {
        {
            let mut inner = lock(&self.inner);
            inner.replica.set_min_insync_replicas(min_isr);
            if inner.last.as_ref() == Some(&(broker_epoch, state.clone())) {
                return;
            }
            inner.last = Some((broker_epoch, state.clone()));
        }
        self.handle(
            manager,
            Event::Metadata {
                broker_epoch,
                partition: state,
            },
        );
    }

    /// A fetch answer from the leader, with its records' bytes.
    pub(super) fn fetched(
        &self,
        manager: &Arc<ReplicaManager>,
        response: FetchResponse,
        bytes: Option<bytes::Bytes>,
    ) {
        lock(&self.inner).fetched = bytes;
        self.handle(manager, Event::FetchResponse(response));
        lock(&self.inner).fetched = None;
    }

    /// Feeds `event` and carries out its effects (module docs). Runs where blocking is
    /// allowed: an effect may write the log.
    pub(super) fn handle(&self, manager: &Arc<ReplicaManager>, event: Event) {
        let mut inner = lock(&self.inner);
        // A tick needs no fresh log end (it only checks time), so it takes no log lock.
        if inner.replica.leading_epoch().is_some() && event != Event::Tick {
            let seen = self.partition.with_log(|log| {
                let end = log.log_end_offset().value();
                let epoch = (end > log.log_start_offset().value())
                    .then(|| log.leader_epoch_at(Offset(end - 1)));
                (end, epoch)
            });
            if let Ok((end, epoch)) = seen {
                inner.replica.observe_log_end(end, epoch);
            }
        }
        let now = manager.now_ms();
        let effects = inner.replica.handle(now, event);
        for effect in effects {
            self.carry_out(manager, &mut inner, effect);
        }
        if inner.remake {
            self.remake(manager, &mut inner);
        }
        self.partition
            .set_high_watermark(Some(inner.replica.high_watermark()));
        if inner.replica.leading_epoch().is_none() {
            self.partition.set_leader_epoch_start(None);
        }
    }

    fn carry_out(&self, manager: &Arc<ReplicaManager>, inner: &mut Inner, effect: Effect) {
        let p = &self.partition;
        let now_ms = manager.topics.now_ms();
        match effect {
            Effect::Append(batches) => self.append(inner, &batches, now_ms),
            Effect::BeginEpoch {
                epoch,
                start_offset,
            } => {
                p.set_leader_epoch_start(Some(start_offset));
                match p.with_log(|log| log.assign_leader_epoch(epoch)) {
                    Ok(Ok(())) => {
                        tracing::info!(topic = %p.topic, partition = p.index, epoch, "leading")
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(topic = %p.topic, partition = p.index, epoch, error = %e, "could not record the leader epoch");
                    }
                    Err(e) => {
                        tracing::warn!(topic = %p.topic, partition = p.index, epoch, error = %e.message, "could not record the leader epoch");
                    }
                }
            }
            Effect::Truncate { offset } => {
                if !truncate(p, offset, now_ms) {
                    inner.remake = true;
                }
            }
            Effect::Fsync { token, up_to } => self.fsync(manager, token, up_to),
            Effect::SendFetch { to, request } => {
                manager.fetchers.send(manager, to, &self.key(), request);
            }
            Effect::SendFetchResponse { response, .. } => inner.served = Some(response),
            Effect::SendAlterPartition(alter) => {
                let manager = Arc::clone(manager);
                let key = self.key();
                tokio::spawn(async move { alter_partition(manager, key, alter).await });
            }
            Effect::ProduceAnswer { request_id, result } => {
                if let Some(waiter) = inner.waiters.remove(&request_id) {
                    let _ = waiter.send(result);
                }
            }
        }
    }

    /// A follower's `Append`: the fetched bytes of `batches` as they are.
    fn append(&self, inner: &mut Inner, batches: &[Batch], now_ms: i64) {
        let p = &self.partition;
        let (Some(bytes), Some(last)) = (inner.fetched.as_ref(), batches.last()) else {
            inner.remake = true;
            return;
        };
        let end = prefix_through(bytes, last.last_offset);
        let appended = p.with_log(|log| {
            log.append_replicated(&bytes[..end], now_ms)
                .map(|a| a.log_end_offset.value())
        });
        match appended {
            Ok(Ok(end)) => p.notify_appended(end),
            Ok(Err(e)) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "appending the leader's batches failed");
                inner.remake = true;
            }
            Err(e) => {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e.message, "appending the leader's batches failed");
                inner.remake = true;
            }
        }
    }

    /// `Fsync`: the partition's group commit up to `up_to`, then `Fsynced`.
    fn fsync(&self, manager: &Arc<ReplicaManager>, token: u64, up_to: i64) {
        let (slot_partition, manager) = (Arc::clone(&self.partition), Arc::clone(manager));
        let key = self.key();
        tokio::spawn(async move {
            let done = group_commit::wait_durable(&slot_partition, up_to).await;
            let Some(slot) = manager.slot(&key.0, key.1) else {
                return;
            };
            if !Arc::ptr_eq(&slot.partition, &slot_partition) {
                return;
            }
            match done {
                Ok(()) => {
                    let _ = tokio::task::spawn_blocking(move || {
                        slot.handle(&manager, Event::Fsynced { token });
                    })
                    .await;
                }
                Err(e) => {
                    tracing::warn!(topic = %key.0, partition = key.1, error = %e.message, "a replica's fsync failed");
                }
            }
        });
    }

    fn key(&self) -> Key {
        (self.partition.topic.clone(), self.partition.index)
    }

    /// The state machine made again from the real log (module docs).
    fn remake(&self, manager: &Arc<ReplicaManager>, inner: &mut Inner) {
        inner.remake = false;
        for (_, waiter) in inner.waiters.drain() {
            let _ = waiter.send(Err(ErrorCode::NotLeaderOrFollower));
        }
        let Ok(log) = self.partition.with_log(|log| tail_of(log)) else {
            return;
        };
        let min_isr = inner.replica.config().min_insync_replicas;
        inner.replica = Replica::new(
            manager.settings.replica_config(min_isr),
            self.topic_id,
            self.partition.index,
            log,
        );
        tracing::warn!(topic = %self.partition.topic, partition = self.partition.index, "replica state made again from the log");
        if let Some((broker_epoch, state)) = inner.last.clone() {
            let effects = inner.replica.handle(
                manager.now_ms(),
                Event::Metadata {
                    broker_epoch,
                    partition: state,
                },
            );
            for effect in effects {
                // A second failure waits for the next image or tick.
                self.carry_out(manager, inner, effect);
            }
            inner.remake = false;
        }
    }

    /// The partition no longer replicates here: its waiting produces are answered.
    fn drop_replica(&self) {
        let mut inner = lock(&self.inner);
        for (_, waiter) in inner.waiters.drain() {
            let _ = waiter.send(Err(ErrorCode::NotLeaderOrFollower));
        }
        self.partition.set_high_watermark(None);
        self.partition.set_leader_epoch_start(None);
    }
}

/// The end of the longest run of whole batches of `bytes` whose last ends at or before
/// `last_offset`.
fn prefix_through(bytes: &[u8], last_offset: i64) -> usize {
    let mut end = 0;
    for (header, batch) in sluice_storage::batch::iter_batches(bytes).map_while(Result::ok) {
        if header.last_offset() > last_offset {
            break;
        }
        end += batch.len();
    }
    end
}

/// Cuts `p`'s log at `offset` once no group fsync runs; false when it could not (the slot
/// is then made again from the log).
fn truncate(p: &Arc<Partition>, offset: i64, now_ms: i64) -> bool {
    for _ in 0..TRUNCATE_WAITS_MAX {
        let cut = group_commit::when_no_sync_runs(p, || {
            p.with_log(|log| {
                let cut = log.truncate_to(Offset(offset), now_ms);
                (
                    cut,
                    log.durable_offset().value(),
                    log.log_end_offset().value(),
                )
            })
        });
        match cut {
            None => std::thread::sleep(Duration::from_millis(TRUNCATE_WAIT_STEP_MS)),
            Some(Ok((Ok(end), durable, leo))) => {
                group_commit::truncated(p, durable);
                p.notify_appended(leo);
                return end.value() == offset;
            }
            Some(Ok((Err(e), _, _))) => {
                tracing::warn!(topic = %p.topic, partition = p.index, offset, error = %e, "truncating a diverged replica failed");
                return false;
            }
            Some(Err(e)) => {
                tracing::warn!(topic = %p.topic, partition = p.index, offset, error = %e.message, "truncating a diverged replica failed");
                return false;
            }
        }
    }
    false
}

/// The state machine's view of a real log (`ReplicaLog::tail`).
fn tail_of(log: &sluice_storage::Log) -> ReplicaLog {
    let end = log.log_end_offset().value();
    let epochs: Vec<EpochEntry> = log
        .leader_epochs()
        .into_iter()
        .map(|(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        })
        .collect();
    let last = (end > log.log_start_offset().value()).then(|| log.leader_epoch_at(Offset(end - 1)));
    ReplicaLog::tail(end, &epochs, last.filter(|&e| e >= 0))
}

/// Submits a leader's AlterPartition and feeds the answer back.
async fn alter_partition(
    manager: Arc<ReplicaManager>,
    key: Key,
    alter: sluice_cluster::controller::AlterPartition,
) {
    let Some(kraft) = manager.kraft() else { return };
    let op = ControllerOp::AlterPartition {
        broker_id: alter.broker_id,
        broker_epoch: alter.broker_epoch,
        topic_id: alter.topic_id.0,
        partition: alter.partition,
        leader_epoch: alter.leader_epoch,
        partition_epoch: alter.partition_epoch,
        new_isr: alter
            .new_isr
            .iter()
            .map(|m| (m.broker_id, m.broker_epoch))
            .collect(),
    };
    let isr: Vec<i32> = alter.new_isr.iter().map(|m| m.broker_id).collect();
    let result = match kraft.submit(op).await {
        Ok(ControllerReply::Partition {
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch,
        }) => Ok(PartitionState {
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch,
        }),
        Ok(other) => {
            tracing::warn!(
                ?other,
                "the controller answered AlterPartition with something else"
            );
            Err(ErrorCode::UnknownServerError)
        }
        Err(e) => {
            let error = super::kafka_error(&e);
            tracing::info!(topic = %key.0, partition = key.1, ?isr, error = %error.message, "AlterPartition refused; waiting for the metadata");
            Err(ErrorCode::from_code(error.code.code()).unwrap_or(ErrorCode::UnknownServerError))
        }
    };
    if let Ok(state) = &result {
        tracing::info!(topic = %key.0, partition = key.1, isr = ?state.isr, partition_epoch = state.partition_epoch, "ISR changed");
    }
    let Some(slot) = manager.slot(&key.0, key.1) else {
        return;
    };
    let _ = tokio::task::spawn_blocking(move || {
        slot.handle(&manager, Event::AlterPartitionResponse(result));
    })
    .await;
}

/// The topic's `min.insync.replicas` (1 when not set).
fn min_insync_replicas(image: &MetadataImage, topic: &str, default: usize) -> usize {
    let resource = ConfigResource {
        resource_type: ConfigResourceType::Topic,
        name: topic.to_owned(),
    };
    image
        .configs()
        .get(&resource)
        .and_then(|c| c.get(crate::topic_config::MIN_INSYNC_REPLICAS_KEY))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(default)
        .clamp(1, sluice_replica::limits::REPLICAS_MAX)
}

const fn acks_of(acks: i16) -> Acks {
    if acks == -1 { Acks::All } else { Acks::Leader }
}

/// A produce refused by the replica, as the client's error.
fn refusal(code: ErrorCode, topic: &str, index: i32, isr: &[i32], min: usize) -> KafkaError {
    let error =
        ResponseError::try_from_code(code.code()).unwrap_or(ResponseError::UnknownServerError);
    let message = match code {
        ErrorCode::NotEnoughReplicas => format!(
            "{topic}-{index}: the in-sync replicas {isr:?} are fewer than min.insync.replicas = {min}"
        ),
        ErrorCode::NotLeaderOrFollower => {
            format!("{topic}-{index}: this broker does not lead it (yet)")
        }
        ErrorCode::RequestTimedOut => format!(
            "{topic}-{index}: PENDING_PRODUCES_MAX ({}) produces already wait for replication",
            sluice_replica::limits::PENDING_PRODUCES_MAX
        ),
        other => format!("{topic}-{index}: {}", other.name()),
    };
    KafkaError::new(error, message)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
