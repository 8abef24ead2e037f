//! Consumer groups and their committed offsets: everything the group coordinator answers,
//! the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), KIP-848's consumer
//! protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe), the offsets (OffsetCommit,
//! OffsetFetch, OffsetDelete) and the admin APIs (ListGroups, DescribeGroups, DeleteGroups).
//! `group_common.rs`: the round trip to the coordinator task, topic ids to names and back.
//! One `match` over their API keys.

mod consumer_group_describe;
mod consumer_group_heartbeat;
mod delete_groups;
mod describe_groups;
mod group_common;
mod heartbeat;
mod join_group;
mod leave_group;
mod list_groups;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod sync_group;

use kafka_protocol::messages::ApiKey;
use sluice_protocol::compat;

use crate::authz::Authz;
use crate::group::GroupHandle;
use crate::topics::TopicRegistry;
use crate::wire::{Client, ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// What a group handler is given: who asks, what they may do, the coordinator, and the
/// topics (their names and ids for KIP-848, and which names are views, for the ACLs).
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub auth: Authz<'a>,
    pub groups: &'a GroupHandle,
    pub topics: &'a TopicRegistry,
    /// The cluster side, when this broker is in a cluster (it coordinates only its groups).
    pub kraft: Option<&'a std::sync::Arc<crate::kraft::Kraft>>,
}

impl Ctx<'_> {
    /// Whether another broker coordinates `group` (NOT_COORDINATOR: the client finds it).
    pub fn elsewhere(&self, group: &str) -> bool {
        self.kraft
            .is_some_and(|k| !k.coordinates(crate::kraft::CoordinatorKind::Group, group))
    }
}

/// Answers a group request.
pub(super) async fn dispatch(
    conn: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        client: &conn.client,
        auth: Authz::new(&conn.broker.security, &conn.client),
        groups: &conn.groups,
        topics: &conn.broker.topics,
        kraft: conn.broker.kraft(),
    };
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::JoinGroup => {
            let request = call.request()?;
            answer.reply(&join_group::handle(ctx, &call.header, request, v).await)
        }
        ApiKey::SyncGroup => answer.reply(&sync_group::handle(ctx, call.request()?).await),
        ApiKey::Heartbeat => answer.reply(&heartbeat::handle(ctx, call.request()?).await),
        ApiKey::LeaveGroup => answer.reply(&leave_group::handle(ctx, call.request()?, v).await),
        ApiKey::OffsetCommit => {
            let response = offset_commit::handle(ctx, call.request()?, v).await;
            answer.reply_old(&response, compat::offset_commit)
        }
        ApiKey::OffsetFetch => answer.reply(&offset_fetch::handle(ctx, call.request()?, v).await),
        ApiKey::OffsetDelete => answer.reply(&offset_delete::handle(ctx, call.request()?).await),
        ApiKey::ListGroups => answer.reply(&list_groups::handle(ctx, call.request()?, v).await),
        ApiKey::DescribeGroups => {
            answer.reply(&describe_groups::handle(ctx, call.request()?, v).await)
        }
        ApiKey::DeleteGroups => answer.reply(&delete_groups::handle(ctx, call.request()?).await),
        ApiKey::ConsumerGroupHeartbeat => {
            let request = call.request()?;
            answer.reply(&consumer_group_heartbeat::handle(ctx, &call.header, request).await)
        }
        ApiKey::ConsumerGroupDescribe => {
            answer.reply(&consumer_group_describe::handle(ctx, call.request()?).await)
        }
        other => Err(no_handler(other)),
    }
}
