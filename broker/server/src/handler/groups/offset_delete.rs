//! OffsetDelete v0 (KIP-496; `kafka-consumer-groups --delete-offsets`, AdminClient
//! `delete_consumer_group_offsets`): drops a group's committed offsets of some partitions,
//! answered once the tombstones are in the offsets log. DELETE on the group (top-level
//! GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED per
//! partition); a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION. The group
//! coordinator decides the rest (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
//! GROUP_SUBSCRIBED_TO_TOPIC: `sluice_group::Coordinator::delete_offsets`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, TopicPartition};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers OffsetDelete.
pub async fn handle(ctx: &Ctx<'_>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let mut response = OffsetDeleteResponse::default();
    let group = request.group_id.0.to_string();
    if !ctx.auth.group(AclOperation::Delete, &group) {
        response.error_code = ResponseError::GroupAuthorizationFailed.code();
        return response;
    }
    if ctx.elsewhere(&group) {
        response.error_code = ResponseError::NotCoordinator.code();
        return response;
    }
    // Every partition in request order with the error it gets here, if any.
    let mut answered: Vec<(TopicPartition, Option<i16>)> = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let readable = ctx.auth.topic_or_view(ctx.topics, AclOperation::Read, name);
        for p in &topic.partitions {
            let error = if !readable {
                Some(ResponseError::TopicAuthorizationFailed.code())
            } else if ctx.topics.read_partition(name, p.partition_index).is_none() {
                Some(ResponseError::UnknownTopicOrPartition.code())
            } else {
                None
            };
            let tp = TopicPartition {
                topic: name.to_owned(),
                partition: p.partition_index,
            };
            answered.push((tp, error));
        }
    }
    let asked: Vec<TopicPartition> = answered
        .iter()
        .filter(|(_, e)| e.is_none())
        .map(|(tp, _)| tp.clone())
        .collect();
    let mut decided = match ctx.groups.delete_offsets(group, asked).await {
        Some(Ok(results)) => results.into_iter(),
        Some(Err(code)) => {
            response.error_code = code.code();
            return response;
        }
        None => {
            response.error_code = ErrorCode::CoordinatorNotAvailable.code();
            return response;
        }
    };
    for (tp, error) in answered {
        let code = error.unwrap_or_else(|| {
            decided
                .next()
                .map_or(ErrorCode::CoordinatorNotAvailable.code(), |(_, e)| e.code())
        });
        let mut partition = OffsetDeleteResponsePartition::default();
        partition.partition_index = tp.partition;
        partition.error_code = code;
        match response.topics.last_mut() {
            Some(topic) if topic.name.0.as_str() == tp.topic => topic.partitions.push(partition),
            _ => {
                let mut topic = OffsetDeleteResponseTopic::default();
                topic.name = TopicName(StrBytes::from_string(tp.topic));
                topic.partitions.push(partition);
                response.topics.push(topic);
            }
        }
    }
    response
}
