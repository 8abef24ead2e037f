//! One partition: its log behind a mutex, the watch channel that wakes long-polling
//! fetches, the group commit's sync state, and why it is offline if it is.

use kafka_protocol::ResponseError;
use sluice_storage::Log;
use std::sync::{Arc, Mutex, RwLock};
use tokio::sync::watch;

use super::group_commit::SyncCoordinator;
use super::repeated;
use crate::error::{KafkaError, ServerError};

/// One partition: the log and the fetch wake-up channel.
#[derive(Debug)]
pub struct Partition {
    /// Topic name (for logs and errors).
    pub topic: String,
    /// Partition index.
    pub index: i32,
    /// `None` once the topic is deleted or the broker is shutting down.
    log: Mutex<Option<Log>>,
    /// Log end offset after each append; fetches waiting for data subscribe to it.
    end_offset: watch::Sender<i64>,
    /// Bytes and records in and out (relaxed atomics; rendered by the admin API).
    pub metrics: crate::metrics::PartitionMetrics,
    /// Group commit for acks=all (`group_commit.rs`).
    pub(crate) sync: SyncCoordinator,
    /// Refused appends (KAFKA_STORAGE_ERROR), logged once per interval (`repeated.rs`).
    pub(crate) append_failures: repeated::RepeatedFailures,
    /// Why this partition could not be opened at start (naming the path): it has no log and
    /// answers KAFKA_STORAGE_ERROR until the topic is deleted (`quarantine.rs`).
    offline: Option<String>,
    /// The leader epoch of this leadership (begun when the log was opened; -1 offline).
    /// In a cluster the image's epoch is the one served ([`Partition::current_leader_epoch`]).
    pub leader_epoch: i32,
    /// Where the partition lives in a cluster, as the metadata image says (set by
    /// `crate::kraft`'s publisher); `None` on a single node, which leads every partition.
    placement: RwLock<Option<Arc<Placement>>>,
    /// The high watermark of a replicated partition (`crate::kraft`'s replica manager
    /// sets it), or -1: not replicated, where consumers read to the log end.
    high_watermark: std::sync::atomic::AtomicI64,
    /// Where this broker's current leadership of a replicated partition began (its epoch's
    /// start offset), or -1.
    epoch_start: std::sync::atomic::AtomicI64,
}

/// A partition's place in the cluster, from the metadata image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The leader's node id, or -1 (none: its replicas are all fenced or offline).
    pub leader: i32,
    /// The leader epoch (KIP-320's fencing).
    pub leader_epoch: i32,
    /// The replicas, in preference order.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Whether this broker is the leader.
    pub here: bool,
}

impl Partition {
    /// Opening a partition is a new leadership of it: the next leader epoch begins
    /// (`Log::begin_next_leader_epoch`). If that cannot be recorded (a full disk) the log
    /// keeps its latest epoch, which only makes truncation detection less precise.
    pub(super) fn new(topic: &str, index: i32, mut log: Log) -> Self {
        let leader_epoch = log.begin_next_leader_epoch().unwrap_or_else(|error| {
            tracing::warn!(%topic, partition = index, %error, "could not begin a new leader epoch; keeping the last");
            log.leader_epoch()
        });
        let (end_offset, _) = watch::channel(log.log_end_offset().value());
        let sync = SyncCoordinator::new(log.durable_offset().value());
        Self {
            topic: topic.to_owned(),
            index,
            log: Mutex::new(Some(log)),
            end_offset,
            metrics: crate::metrics::PartitionMetrics::default(),
            sync,
            append_failures: repeated::RepeatedFailures::default(),
            offline: None,
            leader_epoch,
            placement: RwLock::new(None),
            high_watermark: std::sync::atomic::AtomicI64::new(-1),
            epoch_start: std::sync::atomic::AtomicI64::new(-1),
        }
    }

    /// A partition whose log could not be opened: no log, only the reason.
    pub(super) fn offline(topic: &str, index: i32, reason: String) -> Self {
        let (end_offset, _) = watch::channel(0);
        Self {
            topic: topic.to_owned(),
            index,
            log: Mutex::new(None),
            end_offset,
            metrics: crate::metrics::PartitionMetrics::default(),
            sync: SyncCoordinator::new(0),
            append_failures: repeated::RepeatedFailures::default(),
            offline: Some(reason),
            leader_epoch: -1,
            placement: RwLock::new(None),
            high_watermark: std::sync::atomic::AtomicI64::new(-1),
            epoch_start: std::sync::atomic::AtomicI64::new(-1),
        }
    }

    /// KIP-320: a request naming the leader epoch it knows (-1: none) is refused when that
    /// is older (FENCED_LEADER_EPOCH) or newer (UNKNOWN_LEADER_EPOCH) than this leadership's.
    /// An offline partition passes: its answer is KAFKA_STORAGE_ERROR.
    pub fn check_leader_epoch(&self, known: i32) -> Result<(), ResponseError> {
        let current = self.current_leader_epoch();
        if known < 0 || known == current || self.offline.is_some() {
            Ok(())
        } else if known < current {
            Err(ResponseError::FencedLeaderEpoch)
        } else {
            Err(ResponseError::UnknownLeaderEpoch)
        }
    }

    /// The leader epoch clients are told: the image's in a cluster, else this log's.
    pub fn current_leader_epoch(&self) -> i32 {
        self.placement()
            .map_or(self.leader_epoch, |p| p.leader_epoch)
    }

    /// The partition's place in the cluster (`None` on a single node).
    pub fn placement(&self) -> Option<Arc<Placement>> {
        self.placement
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Records the partition's place in the cluster (the metadata publisher).
    pub fn set_placement(&self, placement: Placement) {
        let mut slot = self
            .placement
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.as_deref() != Some(&placement) {
            *slot = Some(Arc::new(placement));
        }
    }

    /// Whether this broker may serve the partition's clients: on a single node always; in
    /// a cluster only its leader (NOT_LEADER_OR_FOLLOWER, or LEADER_NOT_AVAILABLE while it
    /// has none), so a client sent elsewhere refreshes its metadata and follows.
    pub fn check_leader(&self) -> Result<(), KafkaError> {
        match self.placement() {
            None => Ok(()),
            Some(p) if p.here => Ok(()),
            Some(p) if p.leader < 0 => Err(KafkaError::new(
                ResponseError::LeaderNotAvailable,
                format!(
                    "{}-{} has no leader: its replicas {:?} are not live (replication factor 1 keeps it unavailable until its broker returns)",
                    self.topic, self.index, p.replicas
                ),
            )),
            Some(p) => Err(KafkaError::new(
                ResponseError::NotLeaderOrFollower,
                format!(
                    "{}-{} is led by broker {}, not this one",
                    self.topic, self.index, p.leader
                ),
            )),
        }
    }

    /// Why the partition is offline (quarantined at start), if it is.
    pub fn offline_reason(&self) -> Option<&str> {
        self.offline.as_deref()
    }

    /// Runs `f` on the open log; KAFKA_STORAGE_ERROR if the partition is offline,
    /// UNKNOWN_TOPIC_OR_PARTITION if it has been closed.
    pub fn with_log<T>(&self, f: impl FnOnce(&mut Log) -> T) -> Result<T, KafkaError> {
        if let Some(reason) = &self.offline {
            return Err(KafkaError::new(
                ResponseError::KafkaStorageError,
                format!("{}-{} is offline: {reason}", self.topic, self.index),
            ));
        }
        let mut guard = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let log = guard.as_mut().ok_or_else(|| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("{}-{} is closed", self.topic, self.index),
            )
        })?;
        Ok(f(log))
    }

    /// A replicated partition's high watermark (consumers read below it), or `None`: not
    /// replicated, consumers read to the log end.
    pub fn high_watermark(&self) -> Option<i64> {
        let hw = self
            .high_watermark
            .load(std::sync::atomic::Ordering::Acquire);
        (hw >= 0).then_some(hw)
    }

    /// Sets the high watermark (the replica manager; `None` when the partition is no longer
    /// replicated here), waking fetches waiting in a long poll when it moves.
    pub fn set_high_watermark(&self, hw: Option<i64>) {
        let new = hw.unwrap_or(-1).max(-1);
        let old = self
            .high_watermark
            .swap(new, std::sync::atomic::Ordering::AcqRel);
        if old != new {
            self.end_offset.send_modify(|_| {});
        }
    }

    /// Where this broker's leadership of a replicated partition began (set by the replica
    /// manager when it begins an epoch), if it leads one.
    pub fn leader_epoch_start(&self) -> Option<i64> {
        let start = self.epoch_start.load(std::sync::atomic::Ordering::Acquire);
        (start >= 0).then_some(start)
    }

    /// Records where this broker's leadership began (`None`: it no longer leads).
    pub fn set_leader_epoch_start(&self, start: Option<i64>) {
        self.epoch_start
            .store(start.unwrap_or(-1), std::sync::atomic::Ordering::Release);
    }

    /// The offset consumers read up to: the high watermark of a replicated partition, else
    /// `log_end` (at most `log_end`).
    pub fn readable_end(&self, log_end: i64) -> i64 {
        self.high_watermark().map_or(log_end, |hw| hw.min(log_end))
    }

    /// Tells waiting fetches that the log end offset moved.
    pub fn notify_appended(&self, end_offset: i64) {
        self.end_offset.send_replace(end_offset);
    }

    /// A receiver that changes when the partition gets new data.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.end_offset.subscribe()
    }

    /// Closes the log (flush + clean-shutdown marker); later calls find it closed.
    pub(super) fn close(&self) -> Result<(), ServerError> {
        let log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(log) = log else { return Ok(()) };
        if log.is_fenced() {
            // Nothing can be flushed; no clean-shutdown marker, so the next open recovers it.
            let refused = self.append_failures.take_suppressed();
            tracing::warn!(topic = %self.topic, partition = self.index, refused_appends_not_logged = refused, "closing a fenced partition without flushing; it is recovered at the next start");
            self.sync.closed(-1);
            return Ok(());
        }
        let end_offset = log.log_end_offset().value();
        let closed = log.close();
        self.sync
            .closed(if closed.is_ok() { end_offset } else { -1 });
        closed.map_err(|source| ServerError::Storage {
            context: format!("closing {}-{}", self.topic, self.index),
            source,
        })
    }
}
