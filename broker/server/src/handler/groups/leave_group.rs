//! LeaveGroup v0-5: v0-2 carry one member id (the answer is that member's error, as Kafka);
//! v3 batches members, static ones by `group.instance.id`; v4 is flexible; v5 carries each
//! member's reason, logged as Kafka logs it.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, LeavingMember, Request, Response};

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers LeaveGroup.
pub async fn handle(ctx: &Ctx<'_>, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    if !ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str())
    {
        let mut response = LeaveGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
        return response;
    }
    if ctx.elsewhere(request.group_id.0.as_str()) {
        let mut response = LeaveGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::NotCoordinator.code();
        return response;
    }
    let members = if version < 3 {
        vec![LeavingMember {
            member_id: string(&request.member_id),
            group_instance_id: None,
        }]
    } else {
        request
            .members
            .iter()
            .inspect(|m| log_reason(&request, m))
            .map(|m| LeavingMember {
                member_id: string(&m.member_id),
                group_instance_id: opt_string(m.group_instance_id.as_ref()),
            })
            .collect()
    };
    let leave = sluice_group::LeaveGroupRequest {
        group_id: string(&request.group_id.0),
        members,
    };
    let mut response = LeaveGroupResponse::default();
    let Some(Response::LeaveGroup(left)) = call(ctx, Request::LeaveGroup(leave)).await else {
        response.error_code = ErrorCode::CoordinatorNotAvailable.code();
        return response;
    };
    response.error_code = left.error.code();
    if version < 3 {
        if left.error.is_ok()
            && let Some(first) = left.members.first()
        {
            response.error_code = first.error.code();
        }
        return response;
    }
    response.members = left
        .members
        .into_iter()
        .map(|m| {
            let mut member = MemberResponse::default();
            member.member_id = StrBytes::from_string(m.member_id);
            member.group_instance_id = m.group_instance_id.map(StrBytes::from_string);
            member.error_code = m.error.code();
            member
        })
        .collect();
    response
}

/// Logs a v5 member's reason for leaving, when it gives one.
fn log_reason(
    request: &LeaveGroupRequest,
    member: &kafka_protocol::messages::leave_group_request::MemberIdentity,
) {
    if let Some(reason) = member.reason.as_ref().filter(|r| !r.is_empty()) {
        tracing::info!(
            group = %request.group_id.0.as_str(),
            member = %member.member_id.as_str(),
            reason = %reason.as_str(),
            "LeaveGroup"
        );
    }
}
