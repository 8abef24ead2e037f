//! The fence prober: one task per broker that lifts the fences of partitions whose log saw
//! a failed write or fsync (see `sluice_storage`'s `fence.rs`).
//!
//! Every `FENCE_PROBE_INTERVAL_MS` it takes up to `FENCE_PROBES_PER_TICK_MAX` fenced
//! partitions (round robin, so every one gets its turn) and calls `Log::try_unfence` on the
//! blocking pool: a probe write and fsync in the partition directory, then a reopen from
//! disk. A partition whose group sync is running is skipped this tick. When a fence lifts,
//! acks=all waiters see a live durable offset again, long polls see the reopened log end,
//! `sluice_storage_fence_lifted_total` counts it and a log line says so. While fenced,
//! producers get KAFKA_STORAGE_ERROR; fetches and retention go on.
//!
//! The offsets log is not probed here: its writer task owns it and probes it before the
//! next append (`group/offsets_log.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::limits;
use crate::metrics::FenceMetrics;
use crate::topics::Partition;
use crate::topics::TopicRegistry;
use crate::topics::group_commit;

/// Starts the prober on the current runtime; it stops when `shutdown` turns true.
pub fn spawn(
    topics: &Arc<TopicRegistry>,
    fences: &Arc<FenceMetrics>,
    shutdown: &watch::Sender<bool>,
) -> JoinHandle<()> {
    let probed = Probed {
        topics: Arc::clone(topics),
        fences: Arc::clone(fences),
    };
    tokio::spawn(probe_fenced(probed, shutdown.subscribe()))
}

/// What the prober reads and counts: the partitions, and the fences lifted.
#[derive(Debug, Clone)]
struct Probed {
    topics: Arc<TopicRegistry>,
    fences: Arc<FenceMetrics>,
}

/// Probes fenced partitions until shutdown.
async fn probe_fenced(probed: Probed, mut shutdown: watch::Receiver<bool>) {
    let every = Duration::from_millis(limits::FENCE_PROBE_INTERVAL_MS);
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cursor = 0usize;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let probed = probed.clone();
        let worked = tokio::task::spawn_blocking(move || probe_some(&probed, cursor)).await;
        cursor = worked.unwrap_or(cursor);
    }
}

/// Probes up to `FENCE_PROBES_PER_TICK_MAX` fenced partitions from `cursor` on; returns the
/// cursor for the next tick.
fn probe_some(probed: &Probed, cursor: usize) -> usize {
    let fenced: Vec<Arc<Partition>> = probed
        .topics
        .partitions()
        .into_iter()
        .filter(|p| p.with_log(|log| log.is_fenced()).unwrap_or(false))
        .collect();
    if fenced.is_empty() {
        return 0;
    }
    let start = cursor % fenced.len();
    let turn = fenced.len().min(limits::FENCE_PROBES_PER_TICK_MAX);
    for partition in fenced.iter().cycle().skip(start).take(turn) {
        probe(probed, partition);
    }
    start + turn
}

fn probe(probed: &Probed, partition: &Partition) {
    let tried = group_commit::when_no_sync_runs(partition, || {
        partition.with_log(|log| {
            let lifted = log.try_unfence(probed.topics.now_ms());
            if matches!(lifted, Ok(true)) {
                // Under the log lock: no append can wait on the old "stopped" state, and
                // whoever sees the log unfenced sees the lift counted.
                group_commit::reopened(partition, log.durable_offset().value());
                probed.fences.lifted_total.fetch_add(1, Relaxed);
            }
            (lifted, log.log_end_offset().value())
        })
    });
    let Some(Ok((lifted, end))) = tried else {
        return;
    };
    match lifted {
        Ok(true) => {
            partition.notify_appended(end);
            let refused = partition.append_failures.take_suppressed();
            tracing::warn!(topic = %partition.topic, partition = partition.index, log_end = end, refused_appends_not_logged = refused, "fence lifted: the probe write and fsync succeeded, the log was reopened from disk");
        }
        Ok(false) => {}
        Err(error) => {
            tracing::debug!(topic = %partition.topic, partition = partition.index, %error, "partition stays fenced: probe failed");
        }
    }
}
