//! DeleteRecords v0-v2 (v2 flexible; `kafka-delete-records`, AdminClient `delete_records`):
//! moves each partition's log start offset forward to the given offset (-1: the high
//! watermark), deleting the segments wholly below it; the new start is in the partition's
//! checkpoint (through the durable-write path) before the answer, so it survives a crash.
//! Records below it are gone for every reader (OFFSET_OUT_OF_RANGE, ListOffsets earliest
//! moves). DELETE on the topic (TOPIC_AUTHORIZATION_FAILED); an offset past the high
//! watermark is OFFSET_OUT_OF_RANGE; a view, which holds no records, is refused as read-only.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use sluice_security::acl::AclOperation;
use sluice_storage::{Offset, StorageError};

use super::Ctx;
use crate::error::KafkaError;
use crate::topics::TopicRegistry;

/// Kafka's "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Answers DeleteRecords.
pub async fn handle(ctx: &Ctx<'_>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let allowed: Vec<bool> = request
        .topics
        .iter()
        .map(|t| ctx.auth.topic(AclOperation::Delete, t.name.0.as_str()))
        .collect();
    let registry = Arc::clone(ctx.topics);
    let topics = tokio::task::spawn_blocking(move || {
        request
            .topics
            .into_iter()
            .zip(allowed)
            .map(|(topic, allowed)| {
                let mut out = DeleteRecordsTopicResult::default();
                for p in &topic.partitions {
                    let result = match allowed {
                        true => delete_before(
                            &registry,
                            topic.name.0.as_str(),
                            p.partition_index,
                            p.offset,
                        ),
                        false => Err(KafkaError::new(
                            ResponseError::TopicAuthorizationFailed,
                            "Authorization failed.",
                        )),
                    };
                    let mut partition = DeleteRecordsPartitionResult::default();
                    partition.partition_index = p.partition_index;
                    match result {
                        Ok(low_watermark) => partition.low_watermark = low_watermark,
                        Err(e) => {
                            partition.low_watermark = -1;
                            partition.error_code = e.code.code();
                        }
                    }
                    out.partitions.push(partition);
                }
                out.name = topic.name;
                out
            })
            .collect()
    })
    .await;
    let mut response = DeleteRecordsResponse::default();
    response.topics = topics.unwrap_or_else(|e| {
        tracing::error!(error = %e, "delete records task failed");
        Vec::new()
    });
    response
}

/// Moves one partition's log start offset to `offset`; the new low watermark.
fn delete_before(
    topics: &TopicRegistry,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<i64, KafkaError> {
    let partition = topics.partition(topic, index).ok_or_else(|| {
        if topics.view(topic).is_some() {
            return crate::topics::read_only(topic);
        }
        KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown partition {topic}-{index}"),
        )
    })?;
    partition.check_leader()?;
    if offset < HIGH_WATERMARK {
        return Err(KafkaError::new(
            ResponseError::OffsetOutOfRange,
            format!("{topic}-{index}: offset {offset} is negative"),
        ));
    }
    let now = topics.now_ms();
    let moved = partition.with_log(|log| {
        let to = match offset {
            HIGH_WATERMARK => log.log_end_offset(),
            offset => Offset(offset),
        };
        log.advance_log_start_offset(to, now)
    })?;
    match moved {
        Ok(start) => {
            tracing::info!(topic, partition = index, log_start = %start, "deleted records");
            Ok(start.value())
        }
        Err(StorageError::OffsetOutOfRange { log_end, .. }) => Err(KafkaError::new(
            ResponseError::OffsetOutOfRange,
            format!("{topic}-{index}: offset {offset} is past the high watermark {log_end}"),
        )),
        Err(e) => {
            tracing::error!(topic, partition = index, error = %e, "deleting records failed");
            Err(KafkaError::new(
                ResponseError::KafkaStorageError,
                format!("{topic}-{index}: {e}"),
            ))
        }
    }
}
