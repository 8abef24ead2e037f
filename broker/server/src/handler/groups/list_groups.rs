//! ListGroups v0-5: every group this coordinator knows (with members or committed offsets).
//! v4 filters by state, v5 by type (`classic`, `consumer`), both case-insensitively, as
//! Kafka; a consumer-protocol (KIP-848) group shows its own state (Empty, Assigning,
//! Reconciling, Stable).

use kafka_protocol::messages::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_group::ErrorCode;

use sluice_security::acl::AclOperation;

use super::Ctx;

/// Kafka's group types (ListGroups v5, `kafka-groups --list`).
const CLASSIC: &str = "classic";
const CONSUMER: &str = "consumer";

/// Answers ListGroups.
pub async fn handle(ctx: &Ctx<'_>, request: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    let Some(groups) = ctx.groups.list_groups().await else {
        response.error_code = ErrorCode::CoordinatorNotAvailable.code();
        return response;
    };
    let wanted = |filter: &[StrBytes], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
    };
    // DESCRIBE on the cluster lists every group; else only those the principal may DESCRIBE.
    let all = ctx.auth.cluster(AclOperation::Describe);
    response.groups = groups
        .into_iter()
        .filter_map(|g| {
            let (state, group_type) = match g.consumer_state {
                Some(consumer) => (consumer.name(), CONSUMER),
                None => (g.state.as_str(), CLASSIC),
            };
            let shown = wanted(&request.states_filter, state)
                && wanted(&request.types_filter, group_type)
                && (all || ctx.auth.group(AclOperation::Describe, &g.group_id));
            shown.then(|| {
                let mut listed = ListedGroup::default();
                listed.group_id = GroupId(StrBytes::from_string(g.group_id));
                listed.protocol_type = StrBytes::from_string(g.protocol_type);
                if version >= 4 {
                    listed.group_state = StrBytes::from_static_str(state);
                }
                if version >= 5 {
                    listed.group_type = StrBytes::from_static_str(group_type);
                }
                listed
            })
        })
        .collect();
    response
}
