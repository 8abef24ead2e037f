//! The offsets-log writer: appends the coordinator's record batches in the order they were
//! handed out, on the blocking pool. Consecutive batches waiting in the queue share one
//! append and one fsync (group commit); each is then acknowledged separately. After its
//! appends have been answered, the writer cleans the log in place when the cleaner finds it
//! due (`CompactedLog::clean_if_due`, at most once per `INTERNAL_LOG_CLEAN_CHECK_MS`);
//! appends queued meanwhile wait for it.

use sluice_group::{ErrorCode, OffsetRecord, PersistId};
use tokio::sync::mpsc;

use super::offsets_log::OffsetsLog;
use crate::limits;

/// Work for the writer, in log order: append these records, then report them persisted.
#[derive(Debug)]
pub struct WriterJob {
    pub id: PersistId,
    pub records: Vec<OffsetRecord>,
}

/// What the writer reports back: a batch was appended (or not).
#[derive(Debug)]
pub struct WriterDone {
    pub id: PersistId,
    pub result: Result<(), ErrorCode>,
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
        // After the answers, so a clean never delays the commits it follows.
        if log.as_ref().is_some_and(OffsetsLog::clean_check_due) {
            let Some(owned) = log.take() else { break };
            let Ok(owned) = tokio::task::spawn_blocking(move || clean(owned)).await else {
                tracing::error!("cleaning the offsets log panicked; group commits now fail");
                return;
            };
            log = Some(owned);
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

/// Appends the jobs' records in one append (one fsync).
fn carry_out(log: &mut OffsetsLog, jobs: Vec<WriterJob>) -> Vec<WriterDone> {
    let records: Vec<&OffsetRecord> = jobs.iter().flat_map(|job| job.records.iter()).collect();
    let result = log.append(&records).map_err(|e| {
        tracing::error!(error = %e, "appending to the offsets log failed");
        // Retriable, as Kafka answers a commit whose append failed.
        ErrorCode::CoordinatorNotAvailable
    });
    jobs.into_iter()
        .map(|job| WriterDone { id: job.id, result })
        .collect()
}

fn clean(mut log: OffsetsLog) -> OffsetsLog {
    if let Err(e) = log.clean_if_due() {
        tracing::error!(error = %e, "cleaning the offsets log failed; it is unchanged");
    }
    log
}
