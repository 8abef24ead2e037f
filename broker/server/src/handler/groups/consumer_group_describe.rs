//! ConsumerGroupDescribe v0-1 (KIP-848): a consumer-protocol group's state, epochs,
//! assignor and members, each with its subscription, current and target assignment (by
//! topic id and name). A classic group, or none, is GROUP_ID_NOT_FOUND, as Kafka answers:
//! Kafka's admin client then describes it with DescribeGroups.
//!
//! Authorization, as Kafka: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; topics
//! of an assignment are shown only if the principal may DESCRIBE them.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ConsumerGroup, ErrorCode};
use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use super::group_common::string;
use crate::authz;
use crate::handler::topic_ids::TopicIds;
use crate::limits;

/// Kafka's "authorized operations not requested" value.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Member type in v1: -1 unknown, 0 classic, 1 consumer (all are consumer members here).
const MEMBER_TYPE_CONSUMER: i8 = 1;

/// Answers ConsumerGroupDescribe.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let ids: Vec<String> = request
        .group_ids
        .iter()
        .take(limits::GROUPS_PER_REQUEST_MAX)
        .map(|g| string(&g.0))
        .collect();
    let allowed: Vec<String> = ids
        .iter()
        .filter(|id| ctx.auth.group(AclOperation::Describe, id))
        .cloned()
        .collect();
    let mut described = match ctx.groups.describe_consumer_groups(allowed).await {
        Some(described) => described.into_iter(),
        None => Vec::new().into_iter(),
    };
    let topic_ids = TopicIds::of(ctx.topics);
    let mut response = ConsumerGroupDescribeResponse::default();
    for id in ids {
        let mut group = DescribedGroup::default();
        group.group_id = GroupId(StrBytes::from_string(id.clone()));
        group.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
        if !ctx.auth.group(AclOperation::Describe, &id) {
            group.error_code = ResponseError::GroupAuthorizationFailed.code();
        } else if ctx.elsewhere(&id) {
            // Its slot in the coordinator's answer is skipped with it.
            described.next();
            group.error_code = ResponseError::NotCoordinator.code();
        } else {
            match described.next() {
                Some(Ok(consumer)) => {
                    encode(ctx, &topic_ids, &consumer, &mut group);
                    if request.include_authorized_operations {
                        group.authorized_operations =
                            ctx.auth
                                .operations(ResourceType::Group, &id, &authz::GROUP_OPERATIONS);
                    }
                }
                Some(Err(e)) => {
                    group.error_code = e.code();
                    group.error_message = Some(StrBytes::from_string(format!(
                        "group {id:?} is not a consumer-protocol group"
                    )));
                }
                None => group.error_code = ErrorCode::CoordinatorNotAvailable.code(),
            }
        }
        response.groups.push(group);
    }
    response
}

fn encode(
    ctx: &Ctx<'_>,
    topic_ids: &TopicIds,
    consumer: &ConsumerGroup,
    group: &mut DescribedGroup,
) {
    group.group_state = StrBytes::from_static_str(consumer.state().name());
    group.group_epoch = consumer.group_epoch();
    group.assignment_epoch = consumer.assignment_epoch();
    group.assignor_name = StrBytes::from_string(consumer.assignor().to_owned());
    let assignment = |assigned: Option<&sluice_group::Assignment>| {
        let mut out = Assignment::default();
        out.topic_partitions = assigned
            .into_iter()
            .flatten()
            .filter(|(topic, _)| {
                ctx.auth
                    .topic_or_view(ctx.topics, AclOperation::Describe, topic)
            })
            .map(|(topic, partitions)| {
                let mut t = TopicPartitions::default();
                t.topic_id = topic_ids.id(topic);
                t.topic_name = TopicName(StrBytes::from_string(topic.clone()));
                t.partitions = partitions.iter().copied().collect();
                t
            })
            .collect();
        out
    };
    group.members = consumer
        .members()
        .values()
        .map(|m| {
            let mut member = Member::default();
            member.member_id = StrBytes::from_string(m.member_id.clone());
            member.instance_id = m.instance_id.clone().map(StrBytes::from_string);
            member.rack_id = m.rack_id.clone().map(StrBytes::from_string);
            member.member_epoch = m.member_epoch;
            member.client_id = StrBytes::from_string(m.client_id.clone());
            member.client_host = StrBytes::from_string(m.client_host.clone());
            member.subscribed_topic_names = m
                .subscribed_topic_names
                .iter()
                .map(|n| TopicName(StrBytes::from_string(n.clone())))
                .collect();
            member.subscribed_topic_regex =
                m.subscribed_topic_regex.clone().map(StrBytes::from_string);
            member.assignment = assignment(Some(&m.assigned));
            member.target_assignment = assignment(consumer.target(&m.member_id));
            member.member_type = MEMBER_TYPE_CONSUMER;
            member
        })
        .collect();
}
