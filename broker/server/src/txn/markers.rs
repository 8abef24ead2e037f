//! Finishing a transaction outside the coordinator: a COMMIT or ABORT marker (control batch)
//! appended to every partition of the transaction, and, for a commit, its offsets handed to
//! the group coordinator. Both are idempotent, so a retry after a failure or a restart
//! writes them again harmlessly. In a cluster a partition led by another broker gets its
//! marker there, with WriteTxnMarkers on its inter-broker listener (`kraft/peers.rs`), as
//! Kafka's coordinators send them.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use sluice_storage::{AppendError, Durability, Marker};
use sluice_txn::{PendingOffsets, TopicPartition, WriteMarkers};

use crate::kraft::Kraft;

use crate::broker::Broker;
use crate::group::GroupHandle;

/// Writes `markers`; `false` if some part could not be written (retry later).
pub(super) async fn write(
    broker: &Arc<Broker>,
    groups: &GroupHandle,
    markers: &WriteMarkers,
) -> bool {
    let (here, elsewhere) = split_by_leader(broker, markers);
    let partitions_written = {
        let broker = broker.clone();
        let markers = here;
        tokio::task::spawn_blocking(move || write_partitions(&broker, &markers))
            .await
            .unwrap_or(false)
    };
    let mut remote_written = true;
    if let Some(kraft) = broker.kraft() {
        for (leader, partitions) in elsewhere {
            remote_written &= write_remote(kraft, leader, markers, &partitions).await;
        }
    }
    let partitions_written = partitions_written && remote_written;
    let mut offsets_written = true;
    if markers.commit {
        for pending in &markers.offsets_to_commit {
            offsets_written &= commit_offsets(broker, groups, pending).await;
        }
    }
    partitions_written && offsets_written
}

/// The markers of the partitions this broker leads (or has no placement for: a single
/// node), and the others by their leader.
fn split_by_leader(
    broker: &Broker,
    markers: &WriteMarkers,
) -> (WriteMarkers, BTreeMap<i32, Vec<TopicPartition>>) {
    let mut here = markers.clone();
    here.partitions.clear();
    let mut elsewhere: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in &markers.partitions {
        let placement = broker
            .topics
            .partition(&tp.topic, tp.partition)
            .and_then(|p| p.placement());
        match placement {
            Some(p) if !p.here => elsewhere.entry(p.leader).or_default().push(tp.clone()),
            _ => here.partitions.push(tp.clone()),
        }
    }
    (here, elsewhere)
}

/// WriteTxnMarkers to `leader` for `partitions`; `false` if any is not written yet (no
/// leader, a broker that did not answer, an error other than the ones that mean "no marker
/// needed": a deleted partition, a newer producer epoch there).
async fn write_remote(
    kraft: &Kraft,
    leader: i32,
    markers: &WriteMarkers,
    partitions: &[TopicPartition],
) -> bool {
    if leader < 0 {
        tracing::info!(
            partitions = partitions.len(),
            "a transaction's partitions have no leader; their markers wait"
        );
        return false;
    }
    let by_topic = super::by_topic(partitions);
    let mut marker = WritableTxnMarker::default();
    marker.producer_id = ProducerId(markers.producer_id.0);
    marker.producer_epoch = markers.producer_epoch;
    marker.transaction_result = markers.commit;
    marker.coordinator_epoch = 0;
    marker.topics = by_topic
        .into_iter()
        .map(|(name, indexes)| {
            let mut t = WritableTxnMarkerTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_owned()));
            t.partition_indexes = indexes;
            t
        })
        .collect();
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![marker];
    let response = match kraft
        .call_broker(leader, &request, WRITE_TXN_MARKERS_VERSION)
        .await
    {
        Ok(response) => response,
        Err(e) => {
            tracing::warn!(leader, error = %e, "sending transaction markers failed; retrying later");
            return false;
        }
    };
    let mut all = true;
    for p in response
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| t.partitions.iter().map(move |p| (&t.name, p)))
    {
        let code = p.1.error_code;
        let done = code == 0
            || code == ResponseError::UnknownTopicOrPartition.code()
            || code == ResponseError::InvalidProducerEpoch.code();
        if !done {
            tracing::warn!(topic = %p.0.0, partition = p.1.partition_index, leader, error = code, "a transaction marker was not written there; retrying later");
            all = false;
        }
    }
    all
}

/// WriteTxnMarkers v1: the markers' epochs checked as transaction versions 0-1 check them
/// (below the current epoch is refused), which both protocols' markers pass.
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

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
pub(super) async fn commit_offsets(
    broker: &Broker,
    groups: &GroupHandle,
    pending: &PendingOffsets,
) -> bool {
    if let Some(kraft) = broker.kraft() {
        let coordinator =
            kraft.coordinator_node(crate::kraft::CoordinatorKind::Group, &pending.group_id);
        match coordinator {
            Some(node) if node == kraft.node_id() => {}
            Some(node) => {
                let message = crate::cluster::BrokerMessage::CommitGroupOffsets {
                    group_id: pending.group_id.clone(),
                    offsets: pending
                        .offsets
                        .iter()
                        .map(super::peers::wire_offset)
                        .collect(),
                };
                return match kraft.message(node, &message).await {
                    Ok(0) => true,
                    Ok(code) => {
                        tracing::warn!(
                            group = pending.group_id,
                            coordinator = node,
                            code,
                            "the group's coordinator did not commit the transaction's offsets yet; retrying later"
                        );
                        false
                    }
                    Err(e) => {
                        tracing::warn!(group = pending.group_id, coordinator = node, error = %e, "sending a transaction's offsets to the group's coordinator failed; retrying later");
                        false
                    }
                };
            }
            None => {
                tracing::info!(
                    group = pending.group_id,
                    "the group's coordinator is not available; the transaction's offsets wait"
                );
                return false;
            }
        }
    }
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
