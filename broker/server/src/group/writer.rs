//! The offsets-log writer: appends the coordinator's record batches in the order they were
//! handed out, on the blocking pool. Consecutive batches waiting in the queue share one
//! append and one fsync (group commit); each is then acknowledged separately.

use sluice_group::{ErrorCode, OffsetRecord, PersistId};
use tokio::sync::mpsc;

use super::offsets_log::OffsetsLog;
use crate::limits;

/// Work for the writer, in log order.
#[derive(Debug)]
pub enum WriterJob {
    /// Append these records, then report `Persisted`.
    Persist {
        id: PersistId,
        records: Vec<OffsetRecord>,
    },
    /// Replace the log with this snapshot (sent only with no `Persist` in flight).
    Compact { snapshot: Vec<OffsetRecord> },
}

/// What the writer reports back.
#[derive(Debug)]
pub enum WriterDone {
    /// A batch was appended (or not).
    Persisted {
        id: PersistId,
        result: Result<(), ErrorCode>,
        /// The log's size after the append, in bytes.
        log_bytes: u64,
    },
    /// A compaction finished (or failed: the old log stays live).
    Compacted { log_bytes: u64 },
}

/// Runs until `jobs` closes, then closes the log.
pub async fn run(
    log: OffsetsLog,
    mut jobs: mpsc::Receiver<WriterJob>,
    done: mpsc::Sender<WriterDone>,
) {
    let mut log = Some(log);
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < limits::OFFSETS_WRITES_PER_APPEND_MAX {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let Some(owned) = log.take() else { break };
        let worked = tokio::task::spawn_blocking(move || {
            let mut owned = owned;
            let results = carry_out(&mut owned, batch);
            (owned, results)
        })
        .await;
        let Ok((owned, results)) = worked else {
            tracing::error!("the offsets-log writer panicked; group commits now fail");
            return;
        };
        log = Some(owned);
        for result in results {
            if done.send(result).await.is_err() {
                break;
            }
        }
    }
    if let Some(log) = log
        && let Err(e) = tokio::task::spawn_blocking(move || log.close())
            .await
            .unwrap_or(Ok(()))
    {
        tracing::error!(error = %e, "closing the offsets log failed");
    }
}

/// Carries out jobs in order: runs of `Persist` share one append.
fn carry_out(log: &mut OffsetsLog, jobs: Vec<WriterJob>) -> Vec<WriterDone> {
    let mut out = Vec::with_capacity(jobs.len());
    let mut run: Vec<(PersistId, Vec<OffsetRecord>)> = Vec::new();
    for job in jobs {
        match job {
            WriterJob::Persist { id, records } => run.push((id, records)),
            WriterJob::Compact { snapshot } => {
                append_run(log, &mut run, &mut out);
                if let Err(e) = log.compact(&snapshot) {
                    tracing::error!(error = %e, "compacting the offsets log failed");
                } else {
                    tracing::info!(
                        records = snapshot.len(),
                        log_bytes = log.size_bytes(),
                        "compacted the offsets log"
                    );
                }
                out.push(WriterDone::Compacted {
                    log_bytes: log.size_bytes(),
                });
            }
        }
    }
    append_run(log, &mut run, &mut out);
    out
}

fn append_run(
    log: &mut OffsetsLog,
    run: &mut Vec<(PersistId, Vec<OffsetRecord>)>,
    out: &mut Vec<WriterDone>,
) {
    if run.is_empty() {
        return;
    }
    let records: Vec<&OffsetRecord> = run.iter().flat_map(|(_, r)| r.iter()).collect();
    let result = log.append(&records).map_err(|e| {
        tracing::error!(error = %e, "appending to the offsets log failed");
        // Retriable, as Kafka answers a commit whose append failed.
        ErrorCode::CoordinatorNotAvailable
    });
    let log_bytes = log.size_bytes();
    for (id, _) in run.drain(..) {
        out.push(WriterDone::Persisted {
            id,
            result,
            log_bytes,
        });
    }
}
