//! ConsumerGroupHeartbeat v0-1 (KIP-848, Java 4.x's `group.protocol=consumer`): join,
//! heartbeat, leave, with the assignment computed by the coordinator's server-side
//! assignors. Partitions travel by topic id here; the coordinator works with names, so ids
//! are translated both ways (an owned partition of a topic that no longer exists is
//! dropped, as Kafka does). v1's regex subscription (`SubscribedTopicRegex`) is matched by
//! `topic_regex.rs`.
//!
//! Authorization, as Kafka: READ on the group, and DESCRIBE on every subscribed topic name
//! (TOPIC_AUTHORIZATION_FAILED naming those it lacks). A regex's matches are filtered by the
//! member's DESCRIBE rights silently, at every resolution, in the coordinator
//! (`topic_regex.rs`): neither an error nor an assignment names a topic the member may not
//! see.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, Request, Response};
use sluice_security::acl::AclOperation;

use super::Ctx;
use super::group_common::{call, opt_string, string};
use crate::handler::topic_ids::TopicIds;
use crate::limits;

/// Answers ConsumerGroupHeartbeat.
pub async fn handle(
    ctx: &Ctx<'_>,
    header: &RequestHeader,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    if let Err((error, message)) = authorize(ctx, &request) {
        return refused(error.code(), message);
    }
    let ids = TopicIds::of(ctx.topics);
    let owned = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .take(limits::TOPICS_PER_REQUEST_MAX)
            .filter_map(|t| {
                let name = ids.name(&t.topic_id)?;
                Some((name.to_owned(), t.partitions.iter().copied().collect()))
            })
            .collect()
    });
    let heartbeat = sluice_group::ConsumerHeartbeatRequest {
        group_id: string(&request.group_id.0),
        member_id: string(&request.member_id),
        member_epoch: request.member_epoch,
        instance_id: opt_string(request.instance_id.as_ref()),
        rack_id: opt_string(request.rack_id.as_ref()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| string(&n.0)).collect()),
        subscribed_topic_regex: opt_string(request.subscribed_topic_regex.as_ref()),
        server_assignor: opt_string(request.server_assignor.as_ref()),
        owned,
        client_id: opt_string(header.client_id.as_ref()).unwrap_or_default(),
        client_host: format!("/{}", ctx.client.host),
        principal: ctx.client.principal.to_string(),
    };
    let Some(Response::ConsumerGroupHeartbeat(answer)) =
        call(ctx, Request::ConsumerGroupHeartbeat(Box::new(heartbeat))).await
    else {
        return refused(ErrorCode::CoordinatorNotAvailable.code(), None);
    };
    let mut response = ConsumerGroupHeartbeatResponse::default();
    response.error_code = answer.error.code();
    response.member_id = answer.member_id.map(StrBytes::from_string);
    response.member_epoch = answer.member_epoch;
    response.heartbeat_interval_ms = answer.heartbeat_interval_ms;
    response.assignment = answer.assignment.map(|assigned| {
        let mut assignment = Assignment::default();
        assignment.topic_partitions = assigned
            .into_iter()
            .map(|(topic, partitions)| {
                let mut t = TopicPartitions::default();
                t.topic_id = ids.id(&topic);
                t.partitions = partitions.into_iter().collect();
                t
            })
            .collect();
        assignment
    });
    response
}

/// READ on the group; DESCRIBE on the topics subscribed by name.
fn authorize(
    ctx: &Ctx<'_>,
    request: &ConsumerGroupHeartbeatRequest,
) -> Result<(), (ResponseError, Option<String>)> {
    if !ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str())
    {
        return Err((ResponseError::GroupAuthorizationFailed, None));
    }
    if ctx.elsewhere(request.group_id.0.as_str()) {
        return Err((ResponseError::NotCoordinator, None));
    }
    let mut denied: Vec<String> = request
        .subscribed_topic_names
        .iter()
        .flatten()
        .map(|n| n.0.as_str())
        .filter(|name| !ctx.auth.topic(AclOperation::Describe, name))
        .map(str::to_owned)
        .collect();
    if denied.is_empty() {
        return Ok(());
    }
    denied.truncate(limits::ERROR_NAMES_LISTED_MAX);
    Err((
        ResponseError::TopicAuthorizationFailed,
        Some(format!("not authorized to describe topics {denied:?}")),
    ))
}

fn refused(error_code: i16, message: Option<String>) -> ConsumerGroupHeartbeatResponse {
    let mut response = ConsumerGroupHeartbeatResponse::default();
    response.error_code = error_code;
    response.error_message = message.map(StrBytes::from_string);
    response.member_epoch = -1;
    response
}
