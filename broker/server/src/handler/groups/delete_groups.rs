//! DeleteGroups v0-3 (v2 is flexible): an Empty group is deleted with its committed offsets
//! (answered once the tombstones are appended); others get NON_EMPTY_GROUP or
//! GROUP_ID_NOT_FOUND. v3 (vendored codec) may carry a message with a group's error: Kafka
//! 4.4 writes one only when deleting a share group's or a Streams group's state fails (its
//! `GroupCoordinatorService.deleteGroups`), and none for a classic or consumer group's
//! GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP (`GroupCoordinatorShard.deleteGroups` sets the code
//! alone). This broker has only those, so the message is always null, as Kafka's.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;
use sluice_group::ErrorCode;

use super::group_common::string;
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers DeleteGroups.
pub async fn handle(ctx: &Ctx<'_>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let ids: Vec<String> = request.groups_names.iter().map(|g| string(&g.0)).collect();
    // Without DELETE on a group: GROUP_AUTHORIZATION_FAILED for it, and it is left alone.
    let (allowed, denied): (Vec<String>, Vec<String>) = ids
        .into_iter()
        .partition(|id| ctx.auth.group(AclOperation::Delete, id));
    let (allowed, elsewhere): (Vec<String>, Vec<String>) =
        allowed.into_iter().partition(|id| !ctx.elsewhere(id));
    let mut results: Vec<(String, i16)> = if allowed.is_empty() {
        Vec::new()
    } else {
        match ctx.groups.delete_groups(allowed.clone()).await {
            Some(results) => results.into_iter().map(|(id, e)| (id, e.code())).collect(),
            None => allowed
                .into_iter()
                .map(|id| (id, ErrorCode::CoordinatorNotAvailable.code()))
                .collect(),
        }
    };
    let denied_code = kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
    results.extend(denied.into_iter().map(|id| (id, denied_code)));
    let not_coordinator = kafka_protocol::ResponseError::NotCoordinator.code();
    results.extend(elsewhere.into_iter().map(|id| (id, not_coordinator)));
    let mut response = DeleteGroupsResponse::default();
    response.results = results
        .into_iter()
        .map(|(id, error)| {
            let mut result = DeletableGroupResult::default();
            result.group_id = GroupId(StrBytes::from_string(id));
            result.error_code = error;
            result.error_message = None;
            result
        })
        .collect();
    response
}
