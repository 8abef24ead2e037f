//! Topics and their configs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
//! AlterConfigs and IncrementalAlterConfigs (broker and topic resources alike), and
//! ListConfigResources (which config resources there are). The oldest
//! CreateTopics, DeleteTopics and DescribeConfigs versions are answered in their own layout
//! (`sluice_protocol::compat`). One `match` over their API keys.

mod alter_configs;
mod create_partitions;
mod create_topics;
mod delete_topics;
mod describe_configs;
mod incremental_alter_configs;
mod list_config_resources;

use kafka_protocol::messages::ApiKey;
use sluice_protocol::compat;

use std::sync::Arc;

use crate::authz::Authz;
use crate::config::BrokerConfig;
use crate::group::GroupHandle;
use crate::topics::TopicRegistry;
use crate::wire::{Client, ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// What a topic or config handler is given: who asks, what they may do, the topic registry
/// (which binds the topics' plugins), the config (the broker's keys DescribeConfigs
/// shows), and the group coordinator (a deleted topic's committed offsets go with it).
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub auth: Authz<'a>,
    pub topics: &'a Arc<TopicRegistry>,
    pub config: &'a BrokerConfig,
    pub groups: &'a GroupHandle,
}

/// Answers a topic or config request.
pub(super) async fn dispatch(
    conn: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        client: &conn.client,
        auth: Authz::new(&conn.broker.security, &conn.client),
        topics: &conn.broker.topics,
        config: &conn.broker.config,
        groups: &conn.groups,
    };
    let (answer, v, sent) = (call.answer, call.read_as, call.version);
    match call.key {
        ApiKey::CreateTopics => {
            let response = create_topics::handle(ctx, call.request()?, v).await;
            answer.reply_old(&response, |r| compat::create_topics(r, sent))
        }
        ApiKey::DeleteTopics => {
            let response = delete_topics::handle(ctx, call.request()?, v).await;
            answer.reply_old(&response, compat::delete_topics)
        }
        ApiKey::CreatePartitions => {
            answer.reply(&create_partitions::handle(ctx, call.request()?).await)
        }
        ApiKey::DescribeConfigs => {
            let response = describe_configs::handle(ctx, call.request()?, v);
            answer.reply_old(&response, compat::describe_configs)
        }
        ApiKey::AlterConfigs => answer.reply(&alter_configs::handle(ctx, call.request()?).await),
        ApiKey::ListConfigResources => {
            answer.reply(&list_config_resources::handle(ctx, &call.request()?, v))
        }
        ApiKey::IncrementalAlterConfigs => {
            answer.reply(&incremental_alter_configs::handle(ctx, call.request()?).await)
        }
        other => Err(no_handler(other)),
    }
}
