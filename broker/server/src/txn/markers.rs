//! Finishing a transaction outside the coordinator: a COMMIT or ABORT marker (control batch)
//! appended to every partition of the transaction, and, for a commit, its offsets handed to
//! the group coordinator. Both are idempotent, so a retry after a failure or a restart
//! writes them again harmlessly.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use sluice_storage::{AppendError, Durability, Marker};
use sluice_txn::{PendingOffsets, WriteMarkers};

use crate::broker::Broker;
use crate::group::GroupHandle;

/// Writes `markers`; `false` if some part could not be written (retry later).
pub(super) async fn write(
    broker: &Arc<Broker>,
    groups: &GroupHandle,
    markers: &WriteMarkers,
) -> bool {
    let partitions_written = {
        let broker = broker.clone();
        let markers = markers.clone();
        tokio::task::spawn_blocking(move || write_partitions(&broker, &markers))
            .await
            .unwrap_or(false)
    };
    let mut offsets_written = true;
    if markers.commit {
        for pending in &markers.offsets_to_commit {
            offsets_written &= commit_offsets(broker, groups, pending).await;
        }
    }
    partitions_written && offsets_written
}

/// Appends the marker to each partition (blocking: call on the blocking pool). A partition
/// that no longer exists (its topic was deleted) needs none.
fn write_partitions(broker: &Broker, markers: &WriteMarkers) -> bool {
    let marker = if markers.commit {
        Marker::Commit
    } else {
        Marker::Abort
    };
    // A marker decides what read_committed consumers see: as durable as an acks=all write.
    let durability = if broker.config.acks_all_fsync {
        Durability::Fsync
    } else {
        Durability::OsCache
    };
    let mut all = true;
    for tp in &markers.partitions {
        let Some(partition) = broker.topics.partition(&tp.topic, tp.partition) else {
            tracing::debug!(
                topic = tp.topic,
                partition = tp.partition,
                "no marker for a deleted partition"
            );
            continue;
        };
        let written = partition.with_log(|log| {
            let outcome = log.append_marker(
                markers.producer_id.0,
                markers.producer_epoch,
                marker,
                0,
                durability,
                broker.now_ms(),
            );
            (outcome, log.log_end_offset().value())
        });
        match written {
            Ok((Ok(_), end_offset)) => partition.notify_appended(end_offset),
            // The partition has seen a newer epoch of this producer: a later transaction
            // superseded this one there, and its marker would only be refused.
            Ok((Err(AppendError::InvalidProducerEpoch { current, .. }), _)) => {
                tracing::warn!(
                    topic = tp.topic,
                    partition = tp.partition,
                    producer_id = markers.producer_id.0,
                    epoch = markers.producer_epoch,
                    current,
                    "marker superseded by a newer producer epoch"
                );
            }
            Ok((Err(e), _)) => {
                partition.metrics.produce_errors.fetch_add(1, Relaxed);
                tracing::warn!(topic = tp.topic, partition = tp.partition, error = %e, "writing a transaction marker failed; retrying later");
                all = false;
            }
            Err(e) => {
                tracing::warn!(topic = tp.topic, partition = tp.partition, error = %e.message, "writing a transaction marker failed; retrying later");
                all = false;
            }
        }
    }
    all
}

/// Hands a committed transaction's offsets of one group to the group coordinator: `false`
/// only when that may work later (the coordinator is gone or its log append failed). The
/// offsets of partitions deleted since are dropped, and a partition the group refuses for
/// good (its metadata over a lowered `offset.metadata.max.bytes`) is logged and dropped: the
/// transaction's records are committed either way.
async fn commit_offsets(broker: &Broker, groups: &GroupHandle, pending: &PendingOffsets) -> bool {
    let partitions: Vec<sluice_group::CommitPartition> = pending
        .offsets
        .iter()
        .filter(|o| {
            broker
                .topics
                .read_partition(&o.tp.topic, o.tp.partition)
                .is_some()
        })
        .map(super::group_offset)
        .collect();
    if partitions.is_empty() {
        return true;
    }
    let Some(results) = groups
        .commit_txn_offsets(pending.group_id.clone(), partitions)
        .await
    else {
        return false;
    };
    let retriable = sluice_group::ErrorCode::CoordinatorNotAvailable;
    let mut written = true;
    for result in results.iter().filter(|r| !r.error.is_ok()) {
        written &= result.error != retriable;
        tracing::warn!(
            group = pending.group_id,
            topic = result.tp.topic,
            partition = result.tp.partition,
            error = ?result.error,
            "a committed transaction's offset was not written"
        );
    }
    written
}
