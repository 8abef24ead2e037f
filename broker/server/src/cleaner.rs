//! The log cleaner task: compacts the partitions of `cleanup.policy=compact` (and
//! `compact,delete`) topics with the storage engine's cleaner (`sluice_storage`'s
//! `cleaner.rs`), one log at a time, the dirtiest first.
//!
//! Each round runs on tokio's blocking pool: every partition's `Log::dirtiness` (under its
//! lock, cheap), then for the dirtiest `begin_clean` under the lock, `CleanPlan::run`
//! without it (the reading and writing; produce and fetch go on), and `complete_clean`
//! under the lock (the swap). When no log is due the task sleeps `log.cleaner.backoff.ms`.
//! Compressed batches are opened with the produce path's codecs under
//! `PRODUCE_DECOMPRESSED_BYTES_MAX`; cleaned batches are written uncompressed. Counters:
//! `CleanerMetrics`, rendered by the admin API.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::limits;
use crate::metrics::CleanerMetrics;
use crate::topics::Partition;
use crate::topics::TopicRegistry;

/// Starts the cleaner on the current runtime; it stops when `shutdown` turns true (a clean
/// in progress finishes first: the listener awaits the handle before closing the logs).
pub fn spawn(
    topics: &Arc<TopicRegistry>,
    metrics: &Arc<CleanerMetrics>,
    shutdown: &watch::Sender<bool>,
) -> JoinHandle<()> {
    let cleaner = Cleaner {
        topics: Arc::clone(topics),
        metrics: Arc::clone(metrics),
    };
    tokio::spawn(run(cleaner, shutdown.subscribe()))
}

/// What the cleaner reads and counts: the partitions (and the config their registry was
/// opened with: the backoff, the dedupe buffer), and its work.
#[derive(Debug, Clone)]
struct Cleaner {
    topics: Arc<TopicRegistry>,
    metrics: Arc<CleanerMetrics>,
}

async fn run(cleaner: Cleaner, mut shutdown: watch::Receiver<bool>) {
    let backoff = Duration::from_millis(cleaner.topics.config().log_cleaner_backoff_ms);
    loop {
        let round = cleaner.clone();
        let cleaned = tokio::task::spawn_blocking(move || clean_dirtiest(&round))
            .await
            .unwrap_or(false);
        if *shutdown.borrow() {
            return;
        }
        if cleaned {
            continue;
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// Cleans the dirtiest due log, if any; whether one was cleaned.
fn clean_dirtiest(cleaner: &Cleaner) -> bool {
    let now = cleaner.topics.now_ms();
    let dirtiest = cleaner
        .topics
        .partitions()
        .into_iter()
        .filter_map(|p| {
            let dirtiness = p.with_log(|log| log.dirtiness(now)).ok().flatten()?;
            Some(((dirtiness.forced, dirtiness.ratio_ppm), p))
        })
        .max_by_key(|(rank, _)| *rank);
    let Some((_, partition)) = dirtiest else {
        return false;
    };
    match clean(cleaner, &partition) {
        Ok(progress) => progress,
        Err(error) => {
            tracing::warn!(topic = %partition.topic, partition = partition.index, %error, "cleaning failed; the log is unchanged");
            false
        }
    }
}

fn decompress(
    codec: sluice_storage::Compression,
    section: &[u8],
) -> std::io::Result<Option<Vec<u8>>> {
    crate::codec::decompress(codec, section, limits::PRODUCE_DECOMPRESSED_BYTES_MAX)
}

/// One clean of `partition`: whether it made progress.
fn clean(cleaner: &Cleaner, partition: &Partition) -> Result<bool, String> {
    let started = Instant::now();
    let Some(plan) = partition
        .with_log(|log| log.begin_clean(cleaner.topics.now_ms()))
        .map_err(|e| e.to_string())?
    else {
        return Ok(false);
    };
    let cleaned = plan
        .run(
            cleaner.topics.config().log_cleaner_dedupe_buffer_bytes,
            Some(&decompress),
        )
        .map_err(|e| e.to_string())?;
    let outcome = partition
        .with_log(|log| log.complete_clean(cleaned, cleaner.topics.now_ms()))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let metrics = &cleaner.metrics;
    if outcome.abandoned {
        metrics.abandoned_total.fetch_add(1, Relaxed);
        return Ok(false);
    }
    metrics.cleans_total.fetch_add(1, Relaxed);
    metrics
        .bytes_read_total
        .fetch_add(outcome.bytes_read, Relaxed);
    metrics
        .bytes_written_total
        .fetch_add(outcome.bytes_written, Relaxed);
    metrics
        .records_removed_total
        .fetch_add(outcome.records_removed, Relaxed);
    let elapsed = started.elapsed();
    tracing::info!(
        topic = %partition.topic,
        partition = partition.index,
        read = outcome.bytes_read,
        written = outcome.bytes_written,
        removed = outcome.records_removed,
        cleaned_to = %outcome.cleaned_to,
        elapsed_ms = elapsed.as_millis() as u64,
        "compacted partition"
    );
    Ok(true)
}
