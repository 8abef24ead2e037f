//! ListGroups v0-2: every group this coordinator knows (with members or committed offsets).

use kafka_protocol::messages::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_group::ErrorCode;

use sluice_security::acl::AclOperation;

use crate::authz;
use crate::wire::ConnectionContext;

/// Answers ListGroups.
pub async fn handle(ctx: &ConnectionContext, _request: ListGroupsRequest) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    let Some(groups) = ctx.groups.list_groups().await else {
        response.error_code = ErrorCode::CoordinatorNotAvailable.code();
        return response;
    };
    // DESCRIBE on the cluster lists every group; else only those the principal may DESCRIBE.
    let all = authz::cluster(ctx, AclOperation::Describe);
    response.groups = groups
        .into_iter()
        .filter(|g| all || authz::group(ctx, AclOperation::Describe, &g.group_id))
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(StrBytes::from_string(g.group_id));
            listed.protocol_type = StrBytes::from_string(g.protocol_type);
            listed.group_state = StrBytes::from_static_str(g.state.as_str());
            listed
        })
        .collect();
    response
}
