//! Heartbeat v0-4 (v4 is flexible): keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use sluice_group::{ErrorCode, Request, Response};

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers Heartbeat.
pub async fn handle(ctx: &Ctx<'_>, request: HeartbeatRequest) -> HeartbeatResponse {
    if !ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str())
    {
        let mut response = HeartbeatResponse::default();
        response.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
        return response;
    }
    if ctx.elsewhere(request.group_id.0.as_str()) {
        let mut response = HeartbeatResponse::default();
        response.error_code = kafka_protocol::ResponseError::NotCoordinator.code();
        return response;
    }
    let heartbeat = sluice_group::HeartbeatRequest {
        group_id: string(&request.group_id.0),
        generation_id: request.generation_id,
        member_id: string(&request.member_id),
        group_instance_id: opt_string(request.group_instance_id.as_ref()),
    };
    let mut response = HeartbeatResponse::default();
    response.error_code = match call(ctx, Request::Heartbeat(heartbeat)).await {
        Some(Response::Heartbeat(beat)) => beat.error.code(),
        _ => ErrorCode::CoordinatorNotAvailable.code(),
    };
    response
}
