//! SyncGroup v0-5: the leader hands in every member's assignment (opaque bytes, relayed as
//! they are: assignors stay client-side); every member waits for its own. v4 is flexible;
//! v5 names the protocol type and name the member joined with, checked against the group's
//! (INCONSISTENT_GROUP_PROTOCOL otherwise) and answered back.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, Request, Response};

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers SyncGroup.
pub async fn handle(ctx: &Ctx<'_>, request: SyncGroupRequest) -> SyncGroupResponse {
    if !ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str())
    {
        let mut response = SyncGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
        return response;
    }
    if ctx.elsewhere(request.group_id.0.as_str()) {
        let mut response = SyncGroupResponse::default();
        response.error_code = kafka_protocol::ResponseError::NotCoordinator.code();
        return response;
    }
    let sync = sluice_group::SyncGroupRequest {
        group_id: string(&request.group_id.0),
        generation_id: request.generation_id,
        member_id: string(&request.member_id),
        group_instance_id: opt_string(request.group_instance_id.as_ref()),
        protocol_type: opt_string(request.protocol_type.as_ref()),
        protocol_name: opt_string(request.protocol_name.as_ref()),
        assignments: request
            .assignments
            .into_iter()
            // Copies: assignments are kept until every member has synced, the frame is not.
            .map(|a| {
                (
                    string(&a.member_id),
                    bytes::Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect(),
    };
    let mut response = SyncGroupResponse::default();
    match call(ctx, Request::SyncGroup(sync)).await {
        Some(Response::SyncGroup(synced)) => {
            response.error_code = synced.error.code();
            response.protocol_type = synced.protocol_type.map(StrBytes::from_string);
            response.protocol_name = synced.protocol_name.map(StrBytes::from_string);
            response.assignment = synced.assignment;
        }
        _ => response.error_code = ErrorCode::CoordinatorNotAvailable.code(),
    }
    response
}
