//! DescribeTopicPartitions v0 (KIP-966; Java's `Admin.describeTopics` asks it from Kafka
//! 3.8 on): topics and their partitions as Metadata describes them (views too), sorted by
//! name and paginated, as Kafka's `DescribeTopicPartitionsRequestHandler` answers. A page
//! holds at most the request's partition limit, clamped to 1 up to
//! `DESCRIBE_TOPIC_PARTITIONS_PARTITIONS_MAX` (Kafka's `max.request.partition.size.limit`
//! default); when it fills, the next cursor names the topic and partition to go on from. No
//! topics named: every topic the principal may DESCRIBE, from the cursor's topic on; named
//! topics (at most `TOPICS_PER_REQUEST_MAX`): those from the cursor's topic on, which must
//! be among them (INVALID_REQUEST for every topic otherwise, as for a negative cursor
//! partition), an unknown one UNKNOWN_TOPIC_OR_PARTITION, one the principal may not
//! DESCRIBE TOPIC_AUTHORIZATION_FAILED without its id, listed last. Each described topic
//! carries the principal's authorized operations on it.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use super::metadata::{describe, view_id};
use crate::authz;
use crate::limits;

/// Answers DescribeTopicPartitions.
pub fn handle(
    ctx: &Ctx<'_>,
    request: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let cursor = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.as_str(), c.partition_index));
    let (cursor_name, _) = cursor.unwrap_or(("", 0));
    let fetch_all = request.topics.is_empty();
    let names: BTreeSet<String> = if fetch_all {
        every_describable(ctx)
    } else {
        request
            .topics
            .iter()
            .take(limits::TOPICS_PER_REQUEST_MAX)
            .map(|t| t.name.0.to_string())
            .collect()
    };
    let names: Vec<String> = names
        .into_iter()
        .filter(|n| n.as_str() >= cursor_name)
        .collect();
    let bad_cursor = cursor
        .is_some_and(|(name, index)| index < 0 || (!fetch_all && !names.iter().any(|n| n == name)));
    if bad_cursor {
        return refused(request, ResponseError::InvalidRequest);
    }
    let (allowed, denied): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| may_describe(ctx, n));
    let limit = request
        .response_partition_limit
        .clamp(1, limits::DESCRIBE_TOPIC_PARTITIONS_PARTITIONS_MAX);
    let mut response = page(ctx, allowed, cursor, limit, fetch_all);
    for topic in &mut response.topics {
        let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
        topic.topic_authorized_operations =
            ctx.auth
                .operations(ResourceType::Topic, name, &authz::TOPIC_OPERATIONS);
    }
    response.topics.extend(denied.into_iter().map(|name| {
        let mut topic = DescribeTopicPartitionsResponseTopic::default();
        topic.name = Some(TopicName(StrBytes::from_string(name)));
        topic.error_code = ResponseError::TopicAuthorizationFailed.code();
        topic
    }));
    response
}

/// Every topic and (non-ephemeral) view the principal may DESCRIBE.
fn every_describable(ctx: &Ctx<'_>) -> BTreeSet<String> {
    let topics = ctx.topics.topics();
    let views = ctx.topics.views();
    topics
        .iter()
        .map(|t| t.name.clone())
        .chain(
            views
                .iter()
                .filter(|v| !v.spec.ephemeral)
                .map(|v| v.name().to_owned()),
        )
        .filter(|n| may_describe(ctx, n))
        .collect()
}

/// DESCRIBE on the view of that name, if there is one, else on the topic.
fn may_describe(ctx: &Ctx<'_>, name: &str) -> bool {
    if ctx.topics.view(name).is_some() {
        ctx.auth
            .allowed(AclOperation::Describe, ResourceType::View, name)
    } else {
        ctx.auth.topic(AclOperation::Describe, name)
    }
}

/// `name` as Metadata describes it, if it exists.
fn lookup(ctx: &Ctx<'_>, name: &str) -> Option<MetadataResponseTopic> {
    if let Some(view) = ctx.topics.view(name) {
        return Some(describe(
            ctx.config.node_id,
            view.name(),
            view_id(view.name()),
            &view.source,
        ));
    }
    let topic = ctx.topics.topic(name)?;
    Some(describe(ctx.config.node_id, &topic.name, topic.id, &topic))
}

/// One page: the topics in name order, their partitions from the cursor on, at most `limit`
/// partitions in all (Kafka's `describeTopicResponse`).
fn page(
    ctx: &Ctx<'_>,
    names: Vec<String>,
    cursor: Option<(&str, i32)>,
    limit: i32,
    fetch_all: bool,
) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut remaining = usize::try_from(limit).unwrap_or(1);
    for name in names {
        if remaining == 0 {
            response.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(described) = lookup(ctx, &name) else {
            if !fetch_all {
                let mut topic = DescribeTopicPartitionsResponseTopic::default();
                topic.name = Some(TopicName(StrBytes::from_string(name)));
                topic.error_code = ResponseError::UnknownTopicOrPartition.code();
                response.topics.push(topic);
            }
            continue;
        };
        let start = cursor
            .filter(|(cursor_name, _)| *cursor_name == name)
            .map_or(0, |(_, index)| index);
        let mut partitions = described
            .partitions
            .into_iter()
            .filter(|p| p.partition_index >= start);
        let taken: Vec<_> = partitions.by_ref().take(remaining).map(partition).collect();
        remaining -= taken.len();
        let next = partitions.next().map(|p| p.partition_index);
        let mut topic = DescribeTopicPartitionsResponseTopic::default();
        topic.error_code = described.error_code;
        topic.name = described.name;
        topic.topic_id = described.topic_id;
        topic.partitions = taken;
        response.topics.push(topic);
        if let Some(next) = next {
            response.next_cursor = Some(cursor_at(&name, next));
            break;
        }
    }
    response
}

fn cursor_at(name: &str, partition_index: i32) -> Cursor {
    let mut cursor = Cursor::default();
    cursor.topic_name = TopicName(StrBytes::from_string(name.to_owned()));
    cursor.partition_index = partition_index;
    cursor
}

/// A Metadata partition in this API's shape (no eligible leader replicas: one replica).
fn partition(
    p: kafka_protocol::messages::metadata_response::MetadataResponsePartition,
) -> DescribeTopicPartitionsResponsePartition {
    let mut out = DescribeTopicPartitionsResponsePartition::default();
    out.error_code = p.error_code;
    out.partition_index = p.partition_index;
    out.leader_id = p.leader_id;
    out.leader_epoch = p.leader_epoch;
    out.replica_nodes = p.replica_nodes;
    out.isr_nodes = p.isr_nodes;
    out.eligible_leader_replicas = Some(Vec::new());
    out.last_known_elr = Some(Vec::new());
    out.offline_replicas = p.offline_replicas;
    out
}

/// The whole request refused with `error` (Kafka's `getErrorResponse`): every named topic.
fn refused(
    request: &DescribeTopicPartitionsRequest,
    error: ResponseError,
) -> DescribeTopicPartitionsResponse {
    let mut response = DescribeTopicPartitionsResponse::default();
    response.topics = request
        .topics
        .iter()
        .take(limits::TOPICS_PER_REQUEST_MAX)
        .map(|t| {
            let mut topic = DescribeTopicPartitionsResponseTopic::default();
            topic.name = Some(t.name.clone());
            topic.error_code = error.code();
            topic
        })
        .collect();
    response
}
