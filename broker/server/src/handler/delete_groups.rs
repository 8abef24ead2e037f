//! DeleteGroups v0-1: an Empty group is deleted with its committed offsets (answered once the
//! tombstones are appended); others get NON_EMPTY_GROUP or GROUP_ID_NOT_FOUND.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;
use sluice_group::ErrorCode;

use super::group_common::string;
use crate::wire::ConnectionContext;

/// Answers DeleteGroups.
pub async fn handle(ctx: &ConnectionContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let ids: Vec<String> = request.groups_names.iter().map(|g| string(&g.0)).collect();
    let results = match ctx.groups.delete_groups(ids.clone()).await {
        Some(results) => results,
        None => ids
            .into_iter()
            .map(|id| (id, ErrorCode::CoordinatorNotAvailable))
            .collect(),
    };
    let mut response = DeleteGroupsResponse::default();
    response.results = results
        .into_iter()
        .map(|(id, error)| {
            let mut result = DeletableGroupResult::default();
            result.group_id = GroupId(StrBytes::from_string(id));
            result.error_code = error.code();
            result
        })
        .collect();
    response
}
