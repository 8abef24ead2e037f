//! JoinGroup v0-9: translated to the coordinator's request (v0 has no rebalance timeout: the
//! session timeout stands in; v4+ require a known member id, answering MEMBER_ID_REQUIRED
//! first; v5 carries `group.instance.id` for static membership; v6 is flexible; v7 answers
//! the protocol type and a nullable protocol name; v8's reason is logged, as Kafka logs it
//! with the rebalance; v9 lets a rejoining static leader skip the assignment, KIP-814). The
//! answer waits for the rebalance's join phase to complete.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, Protocol, Request, Response};

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers JoinGroup.
pub async fn handle(
    ctx: &Ctx<'_>,
    header: &RequestHeader,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    if !ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str())
    {
        let mut response = JoinGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
        response.generation_id = -1;
        return response;
    }
    if ctx.elsewhere(request.group_id.0.as_str()) {
        let mut response = JoinGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::NotCoordinator.code();
        response.generation_id = -1;
        return response;
    }
    let rebalance_timeout_ms = if version == 0 {
        request.session_timeout_ms
    } else {
        request.rebalance_timeout_ms
    };
    let member_id = string(&request.member_id);
    if let Some(reason) = request.reason.as_ref().filter(|r| !r.is_empty()) {
        tracing::info!(
            group = %request.group_id.0.as_str(),
            member = %member_id,
            reason = %reason.as_str(),
            "JoinGroup"
        );
    }
    let join = sluice_group::JoinGroupRequest {
        group_id: string(&request.group_id.0),
        member_id: member_id.clone(),
        group_instance_id: opt_string(request.group_instance_id.as_ref()),
        client_id: opt_string(header.client_id.as_ref()).unwrap_or_default(),
        client_host: format!("/{}", ctx.client.peer.ip()),
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type: string(&request.protocol_type),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: string(&p.name),
                // A copy: the member's metadata is kept for the rebalance, the frame is not.
                metadata: bytes::Bytes::copy_from_slice(&p.metadata),
            })
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    match call(ctx, Request::JoinGroup(join)).await {
        Some(Response::JoinGroup(joined)) => encode(joined, version),
        _ => encode(
            sluice_group::JoinGroupResponse {
                error: ErrorCode::CoordinatorNotAvailable,
                generation_id: -1,
                protocol_type: None,
                protocol_name: None,
                leader: String::new(),
                member_id,
                members: Vec::new(),
                skip_assignment: false,
            },
            version,
        ),
    }
}

fn encode(joined: sluice_group::JoinGroupResponse, version: i16) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.error_code = joined.error.code();
    response.generation_id = joined.generation_id;
    response.protocol_type = joined.protocol_type.map(StrBytes::from_string);
    // The protocol name is nullable only from v7; older versions carry "" instead.
    response.protocol_name = match joined.protocol_name {
        Some(name) => Some(StrBytes::from_string(name)),
        None if version < 7 => Some(StrBytes::default()),
        None => None,
    };
    response.leader = StrBytes::from_string(joined.leader);
    response.member_id = StrBytes::from_string(joined.member_id);
    response.skip_assignment = joined.skip_assignment;
    response.members = joined
        .members
        .into_iter()
        .map(|m| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = StrBytes::from_string(m.member_id);
            member.group_instance_id = m.group_instance_id.map(StrBytes::from_string);
            member.metadata = m.metadata;
            member
        })
        .collect();
    response
}
