//! Group commit for acks=all, one coordinator per partition.
//!
//! A produce with acks=all appends under the partition's lock without fsync, then waits for
//! the partition's durable offset to pass its last record. At most one sync task runs per
//! partition, on tokio's blocking pool: it captures a sync under the lock
//! (`Log::begin_sync`), fsyncs without the lock (`PendingSync::run`), publishes the result
//! (`Log::complete_sync`) on a watch channel every waiter listens to, and begins the next
//! sync at once if anything was appended meanwhile. So fsyncs never overlap, appends and
//! fetches never wait for one, and under load one fsync answers every request that arrived
//! while the previous one ran. After a failed fsync the log is fenced and every waiter past
//! the last durable offset gets KAFKA_STORAGE_ERROR; the storage engine never retries it.

use std::sync::{Arc, Mutex, PoisonError};

use kafka_protocol::ResponseError;
use tokio::sync::watch;

use super::Partition;
use crate::error::KafkaError;

/// What waiters see: the durable offset, and whether no sync will move it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durable {
    /// Everything below this offset is on disk.
    pub offset: i64,
    /// The log is fenced (a write or fsync failed) or closed: waiters above `offset` fail.
    pub stopped: bool,
}

/// One partition's sync state.
#[derive(Debug)]
pub struct SyncCoordinator {
    /// True while a sync task runs. Checked and cleared under this lock together with
    /// `begin_sync`, so an append's request can never find a task that is about to stop
    /// without seeing that append.
    running: Mutex<bool>,
    /// The latest `Durable`; produce requests wait on it.
    durable: watch::Sender<Durable>,
}

impl SyncCoordinator {
    /// A coordinator for a log whose durable offset is `offset`.
    pub fn new(offset: i64) -> Self {
        let (durable, _) = watch::channel(Durable {
            offset,
            stopped: false,
        });
        Self {
            running: Mutex::new(false),
            durable,
        }
    }

    /// Tells waiters the log closed; `end_offset` is durable if it closed cleanly (else -1).
    pub fn closed(&self, end_offset: i64) {
        self.durable.send_modify(|d| {
            d.offset = d.offset.max(end_offset);
            d.stopped = true;
        });
    }
}

/// Starts a sync task for `partition` unless one is running (it will cover our append).
pub fn request_sync(partition: &Arc<Partition>) {
    let mut running = lock(&partition.sync.running);
    if *running {
        return;
    }
    *running = true;
    drop(running);
    let partition = Arc::clone(partition);
    tokio::task::spawn_blocking(move || sync_until_idle(&partition));
}

/// Runs `f` (under the partition's sync lock) unless a sync task is running; `None` if one
/// is. The fence prober reopens a log only this way, so no fsync is in flight meanwhile.
pub(crate) fn when_no_sync_runs<T>(partition: &Partition, f: impl FnOnce() -> T) -> Option<T> {
    let running = lock(&partition.sync.running);
    (!*running).then(f)
}

/// Tells waiters a fenced log was reopened: syncs work again from `durable_offset`.
pub(crate) fn reopened(partition: &Partition, durable_offset: i64) {
    publish(
        partition,
        Some(Durable {
            offset: durable_offset,
            stopped: false,
        }),
    );
}

/// Tells waiters a log was truncated (a follower's divergence, run under
/// [`when_no_sync_runs`]): its durable offset is now `durable_offset`, lower than before, so
/// a later wait for an offset above it waits for a new fsync.
pub(crate) fn truncated(partition: &Partition, durable_offset: i64) {
    partition.sync.durable.send_modify(|d| {
        d.offset = durable_offset;
        d.stopped = false;
    });
}

/// Waits until every offset below `end_offset` is durable.
pub async fn wait_durable(partition: &Arc<Partition>, end_offset: i64) -> Result<(), KafkaError> {
    let mut durable = partition.sync.durable.subscribe();
    if durable.borrow().offset >= end_offset {
        return Ok(());
    }
    request_sync(partition);
    let reached = durable
        .wait_for(|d| d.offset >= end_offset || d.stopped)
        .await
        .map(|d| d.offset >= end_offset)
        .unwrap_or(false);
    if reached {
        return Ok(());
    }
    Err(KafkaError::new(
        ResponseError::KafkaStorageError,
        format!(
            "{}-{}: the log could not be made durable up to offset {end_offset} (fsync failed or partition closed)",
            partition.topic, partition.index
        ),
    ))
}

/// The sync task: syncs until nothing is left to sync, then clears `running`.
fn sync_until_idle(partition: &Partition) {
    loop {
        let pending = {
            let mut running = lock(&partition.sync.running);
            let (pending, durable) = partition
                .with_log(|log| (log.begin_sync(), durable_of(log)))
                .unwrap_or((None, None));
            let Some(pending) = pending else {
                publish(partition, durable);
                *running = false;
                return;
            };
            pending
        };
        // The fsync, without the partition lock: appends and fetches go on meanwhile.
        let result = pending.run();
        let done = partition.with_log(|log| {
            if let Err(error) = log.complete_sync(pending, result) {
                tracing::error!(topic = %partition.topic, partition = partition.index, %error, "group fsync failed; partition fenced");
            }
            durable_of(log)
        });
        publish(partition, done.unwrap_or(None));
    }
}

fn durable_of(log: &sluice_storage::Log) -> Option<Durable> {
    Some(Durable {
        offset: log.durable_offset().value(),
        stopped: log.is_fenced(),
    })
}

/// Publishes `durable`, or "stopped" (keeping the offset) when the log is gone.
fn publish(partition: &Partition, durable: Option<Durable>) {
    partition.sync.durable.send_modify(|d| match durable {
        Some(new) => {
            *d = Durable {
                offset: d.offset.max(new.offset),
                stopped: new.stopped,
            }
        }
        None => d.stopped = true,
    });
}

fn lock(running: &Mutex<bool>) -> std::sync::MutexGuard<'_, bool> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}
