//! DescribeGroups v0-6: state, protocol and members (with their subscription metadata and
//! assignment bytes while Stable). v5 is flexible. A group that does not exist is `Dead`
//! with no error before v6; from v6 (KIP-1043) it is `Dead` with GROUP_ID_NOT_FOUND and
//! Kafka's message.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, GroupDescription, GroupState};

use super::group_common::string;
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Kafka's "authorized operations not requested" value.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Answers DescribeGroups.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let ids: Vec<String> = request.groups.iter().map(|g| string(&g.0)).collect();
    let mut response = DescribeGroupsResponse::default();
    // Without DESCRIBE on a group: GROUP_AUTHORIZATION_FAILED for it.
    let denied = |id: &str| !ctx.auth.group(AclOperation::Describe, id);
    match ctx.groups.describe_groups(ids.clone()).await {
        Some(described) => {
            response.groups = described
                .into_iter()
                .map(|d| {
                    if ctx.elsewhere(&d.group_id) {
                        let mut group = DescribedGroup::default();
                        group.group_id = GroupId(StrBytes::from_string(d.group_id));
                        group.error_code = kafka_protocol::ResponseError::NotCoordinator.code();
                        group.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
                        group
                    } else if denied(&d.group_id) {
                        let mut group = DescribedGroup::default();
                        group.group_id = GroupId(StrBytes::from_string(d.group_id));
                        group.error_code =
                            kafka_protocol::ResponseError::GroupAuthorizationFailed.code();
                        group.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
                        group
                    } else {
                        encode(d, version)
                    }
                })
                .collect();
        }
        None => {
            response.groups = ids
                .into_iter()
                .map(|id| {
                    let mut group = DescribedGroup::default();
                    group.group_id = GroupId(StrBytes::from_string(id));
                    group.error_code = ErrorCode::CoordinatorNotAvailable.code();
                    group
                })
                .collect();
        }
    }
    response
}

fn encode(described: GroupDescription, version: i16) -> DescribedGroup {
    let mut group = DescribedGroup::default();
    group.error_code = described.error.code();
    let unknown = described.state == GroupState::Dead && described.error == ErrorCode::None;
    if version >= 6 && unknown {
        group.error_code = ErrorCode::GroupIdNotFound.code();
        group.error_message = Some(StrBytes::from_string(format!(
            "Group {} not found.",
            described.group_id
        )));
    }
    group.group_id = GroupId(StrBytes::from_string(described.group_id));
    group.group_state = StrBytes::from_static_str(described.state.as_str());
    group.protocol_type = StrBytes::from_string(described.protocol_type);
    group.protocol_data = StrBytes::from_string(described.protocol);
    group.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
    group.members = described
        .members
        .into_iter()
        .map(|m| {
            let mut member = DescribedGroupMember::default();
            member.member_id = StrBytes::from_string(m.member_id);
            member.group_instance_id = m.group_instance_id.map(StrBytes::from_string);
            member.client_id = StrBytes::from_string(m.client_id);
            member.client_host = StrBytes::from_string(m.client_host);
            member.member_metadata = m.metadata;
            member.member_assignment = m.assignment;
            member
        })
        .collect();
    group
}
