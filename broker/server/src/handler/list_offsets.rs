//! ListOffsets v1-v5: earliest (-2) is the log start offset, latest (-1) the log end offset,
//! any other timestamp the first offset whose batch max timestamp is at or after it, found
//! through the time index (-1/-1 when there is none).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::broker::Broker;
use crate::connection::ConnectionContext;

/// Kafka's "earliest" sentinel timestamp.
const EARLIEST_TIMESTAMP: i64 = -2;
/// Kafka's "latest" sentinel timestamp.
const LATEST_TIMESTAMP: i64 = -1;

/// Answers ListOffsets.
pub async fn handle(
    ctx: &ConnectionContext,
    request: ListOffsetsRequest,
    _version: i16,
) -> ListOffsetsResponse {
    let broker = ctx.broker.clone();
    let topics = tokio::task::spawn_blocking(move || {
        request
            .topics
            .into_iter()
            .map(|topic| {
                let name = topic.name.0.to_string();
                let mut out = ListOffsetsTopicResponse::default();
                out.partitions = topic
                    .partitions
                    .iter()
                    .map(|p| lookup(&broker, &name, p.partition_index, p.timestamp))
                    .collect();
                out.name = topic.name;
                out
            })
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "list offsets task failed");
        Vec::new()
    });
    let mut response = ListOffsetsResponse::default();
    response.topics = topics;
    response
}

fn lookup(
    broker: &Broker,
    topic: &str,
    index: i32,
    timestamp: i64,
) -> ListOffsetsPartitionResponse {
    let mut out = ListOffsetsPartitionResponse::default();
    out.partition_index = index;
    out.timestamp = -1;
    out.offset = -1;
    out.leader_epoch = -1;
    let Some(partition) = broker.partition(topic, index) else {
        out.error_code = ResponseError::UnknownTopicOrPartition.code();
        return out;
    };
    let found = partition.with_log(|log| match timestamp {
        EARLIEST_TIMESTAMP => Ok(Some((log.log_start_offset().value(), -1))),
        LATEST_TIMESTAMP => Ok(Some((log.log_end_offset().value(), -1))),
        ts => log
            .offset_for_timestamp(ts)
            .map(|hit| hit.map(|(offset, ts)| (offset.value(), ts))),
    });
    match found {
        Ok(Ok(Some((offset, ts)))) => {
            out.offset = offset;
            out.timestamp = ts;
        }
        Ok(Ok(None)) => {}
        Ok(Err(e)) => {
            tracing::error!(topic, partition = index, error = %e, "time index lookup failed");
            out.error_code = ResponseError::KafkaStorageError.code();
        }
        Err(e) => out.error_code = e.code.code(),
    }
    out
}
