//! DescribeProducers v0 (KIP-664): each partition's active idempotent and transactional
//! producers, from its producer state (`sluice_storage::producer`): producer id, epoch, last
//! sequence, last timestamp, coordinator epoch and the first offset of its open transaction
//! (-1: none). READ on the topic, as Kafka asks; a partition listed twice is answered once
//! per listing.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use sluice_security::acl::{AclOperation, ResourceType};

use std::sync::Arc;

use super::Ctx;
use crate::topics::TopicRegistry;

/// Answers DescribeProducers. The partition locks are taken on the blocking pool (an append
/// under `flush.messages` may hold one through an fsync), as Fetch does.
pub async fn handle(ctx: &Ctx<'_>, request: DescribeProducersRequest) -> DescribeProducersResponse {
    let topics: Vec<(bool, _)> = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let readable = ctx
                .auth
                .allowed(AclOperation::Read, ResourceType::Topic, name);
            (readable, topic)
        })
        .collect();
    let registry = Arc::clone(ctx.topics);
    let described = tokio::task::spawn_blocking(move || {
        topics
            .into_iter()
            .map(|(readable, topic)| {
                let mut out = TopicResponse::default();
                out.partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&index| match readable {
                        true => describe(&registry, topic.name.0.as_str(), index),
                        false => refused(index, ResponseError::TopicAuthorizationFailed),
                    })
                    .collect();
                out.name = topic.name;
                out
            })
            .collect()
    })
    .await;
    let mut response = DescribeProducersResponse::default();
    response.topics = described.unwrap_or_else(|e| {
        tracing::error!(error = %e, "describe producers task failed");
        Vec::new()
    });
    response
}

fn refused(index: i32, error: ResponseError) -> PartitionResponse {
    let mut out = PartitionResponse::default();
    out.partition_index = index;
    out.error_code = error.code();
    out
}

fn describe(topics: &TopicRegistry, topic: &str, index: i32) -> PartitionResponse {
    let Some(partition) = topics.partition(topic, index) else {
        return refused(index, ResponseError::UnknownTopicOrPartition);
    };
    let producers = partition.with_log(|log| {
        let mut producers: Vec<ProducerState> = log
            .producer_state()
            .producers()
            .map(|entry| {
                let mut state = ProducerState::default();
                state.producer_id = ProducerId(entry.producer_id);
                state.producer_epoch = i32::from(entry.epoch);
                state.last_sequence = entry.last_seq();
                state.last_timestamp = entry.last_timestamp_ms;
                state.coordinator_epoch = entry.coordinator_epoch;
                state.current_txn_start_offset = entry.txn_first_offset.unwrap_or(-1);
                state
            })
            .collect();
        producers.sort_unstable_by_key(|p| p.producer_id.0);
        producers
    });
    match producers {
        Ok(active_producers) => {
            let mut out = refused(index, ResponseError::UnknownServerError);
            out.error_code = 0;
            out.active_producers = active_producers;
            out
        }
        Err(e) => refused(index, e.code),
    }
}
