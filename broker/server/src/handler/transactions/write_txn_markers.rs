//! WriteTxnMarkers v1-v2: a COMMIT or ABORT marker (control batch) of a producer appended to
//! each partition named, ending the producer's open transaction there so the partition's
//! last stable offset moves on. Kafka's transaction coordinators send it to partition
//! leaders; here the coordinator writes its own markers in-process (`crate::txn`), and what
//! sends it is an operator: `kafka-transactions.sh abort` (the admin client's
//! `abortTransaction`) ending a **hanging** transaction, one no coordinator will end.
//!
//! Authorization as Kafka's `handleWriteTxnMarkersRequest`: ALTER on the cluster, else
//! CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition and
//! nothing written. Per partition: UNKNOWN_TOPIC_OR_PARTITION when it does not exist (a view
//! has no log of its own), INVALID_PRODUCER_EPOCH when the producer is at a newer epoch there,
//! KAFKA_STORAGE_ERROR when the append fails. The marker is as durable as an acks=all write
//! (fsynced under `sluice.acks.all.fsync`). The coordinator epoch is recorded in the producer
//! state (DescribeProducers shows it) but not checked: this broker's one coordinator has
//! epoch 0. Markers for `__consumer_offsets` do not apply (there is no such topic: a
//! transaction's offsets are the coordinator's, docs/transactions.md). Each marker written is
//! an audit line (`txn.marker`).
//!
//! v2 (KIP-1228, vendored codec) says each marker's transaction version. Under transaction
//! version 2 (KIP-890) the coordinator bumps the producer's epoch as each transaction ends and
//! writes the marker at the bumped epoch, so such a marker at the producer's current epoch
//! here (or older) is a late or repeated one: INVALID_PRODUCER_EPOCH, as Kafka 4.4's leaders
//! check it (`producerEpoch <= currentEpoch`). Markers of transaction versions 0-1 (and every
//! v1 marker) keep the older check (refused only below the current epoch).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use sluice_security::acl::AclOperation;
use sluice_storage::{AppendError, Durability, Marker};

use crate::audit;
use std::sync::Arc;

use super::Ctx;
use crate::error::KafkaError;
use crate::topics::TopicRegistry;
use crate::topics::append::append_error;

/// KIP-890's transaction version 2: from it a marker's epoch is above the producer's.
const STRICT_EPOCH_TRANSACTION_VERSION: i8 = 2;

/// Answers WriteTxnMarkers.
pub async fn handle(ctx: &Ctx<'_>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let allowed =
        ctx.auth.cluster(AclOperation::Alter) || ctx.auth.cluster(AclOperation::ClusterAction);
    if !allowed {
        let refused = ResponseError::ClusterAuthorizationFailed.code();
        let mut response = WriteTxnMarkersResponse::default();
        response.markers = request
            .markers
            .iter()
            .map(|m| answer(m, |_, _| refused))
            .collect();
        return response;
    }
    let topics = Arc::clone(ctx.topics);
    let durability = match ctx.config.acks_all_fsync {
        true => Durability::Fsync,
        false => Durability::OsCache,
    };
    let written = tokio::task::spawn_blocking(move || {
        request
            .markers
            .iter()
            .map(|m| {
                (
                    answer(m, |topic, index| {
                        write(&topics, durability, m, topic, index)
                    }),
                    m.clone(),
                )
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "write txn markers task failed");
        Vec::new()
    });
    let mut response = WriteTxnMarkersResponse::default();
    for (result, marker) in written {
        audit_marker(ctx, &marker, &result);
        response.markers.push(result);
    }
    response
}

/// One marker's answer: `code(topic, partition)` for each partition it names.
fn answer(
    marker: &WritableTxnMarker,
    mut code: impl FnMut(&str, i32) -> i16,
) -> WritableTxnMarkerResult {
    let mut result = WritableTxnMarkerResult::default();
    result.producer_id = marker.producer_id;
    for topic in &marker.topics {
        let mut out = WritableTxnMarkerTopicResult::default();
        out.name = topic.name.clone();
        out.partitions = topic
            .partition_indexes
            .iter()
            .map(|&index| {
                let mut p = WritableTxnMarkerPartitionResult::default();
                p.partition_index = index;
                p.error_code = code(topic.name.0.as_str(), index);
                p
            })
            .collect();
        result.topics.push(out);
    }
    result
}

/// Appends the marker to one partition (blocking); the error code to answer.
fn write(
    topics: &TopicRegistry,
    durability: Durability,
    marker: &WritableTxnMarker,
    topic: &str,
    index: i32,
) -> i16 {
    let Some(partition) = topics.partition(topic, index) else {
        return ResponseError::UnknownTopicOrPartition.code();
    };
    let kind = match marker.transaction_result {
        true => Marker::Commit,
        false => Marker::Abort,
    };
    let written = partition.with_log(|log| {
        if let Err(e) = check_strict_epoch(log, marker) {
            return (Err(e), log.log_end_offset().value());
        }
        let outcome = log.append_marker(
            marker.producer_id.0,
            marker.producer_epoch,
            kind,
            marker.coordinator_epoch,
            durability,
            topics.now_ms(),
        );
        (outcome, log.log_end_offset().value())
    });
    let result = written.and_then(|(outcome, end)| {
        outcome
            .map(|_| end)
            .map_err(|e| append_error(&partition, e, topics.now_ms()))
    });
    match result {
        Ok(end) => {
            partition.notify_appended(end);
            0
        }
        Err(KafkaError { code, .. }) => code.code(),
    }
}

/// A transaction version 2 marker must carry an epoch above the producer's here (KIP-1228).
fn check_strict_epoch(
    log: &sluice_storage::Log,
    marker: &WritableTxnMarker,
) -> Result<(), AppendError> {
    if marker.transaction_version < STRICT_EPOCH_TRANSACTION_VERSION {
        return Ok(());
    }
    let producer_id = marker.producer_id.0;
    match log.producer_state().producer(producer_id) {
        Some(entry) if marker.producer_epoch <= entry.epoch => {
            Err(AppendError::InvalidProducerEpoch {
                producer_id,
                epoch: marker.producer_epoch,
                current: entry.epoch,
            })
        }
        _ => Ok(()),
    }
}

/// One audit line per marker: who ended which producer's transaction where.
fn audit_marker(ctx: &Ctx<'_>, marker: &WritableTxnMarker, result: &WritableTxnMarkerResult) {
    let kind = if marker.transaction_result {
        "COMMIT"
    } else {
        "ABORT"
    };
    for topic in &result.topics {
        for p in &topic.partitions {
            let resource = format!("{}-{}", topic.name.0.as_str(), p.partition_index);
            let detail = format!(
                "{kind} marker of producer {} epoch {}",
                marker.producer_id.0, marker.producer_epoch
            );
            match ResponseError::try_from_code(p.error_code) {
                None => audit::done(ctx.client.actor(), "txn.marker", &resource, &detail),
                Some(e) => audit::refused(
                    ctx.client.actor(),
                    "txn.marker",
                    &resource,
                    &format!("{detail}: {e}"),
                ),
            }
        }
    }
}
