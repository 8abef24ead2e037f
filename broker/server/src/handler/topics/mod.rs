//! Topics and their configs: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
//! AlterConfigs and IncrementalAlterConfigs (broker and topic resources alike). The oldest
//! CreateTopics, DeleteTopics and DescribeConfigs versions are answered in their own layout
//! (`sluice_protocol::compat`). One `match` over their API keys.

mod alter_configs;
mod create_partitions;
mod create_topics;
mod delete_topics;
mod describe_configs;
mod incremental_alter_configs;

use kafka_protocol::messages::ApiKey;
use sluice_protocol::compat;

use crate::wire::{ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// Answers a topic or config request.
pub(super) async fn dispatch(
    ctx: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let (answer, v, sent) = (call.answer, call.read_as, call.version);
    match call.key {
        ApiKey::CreateTopics => {
            let response = create_topics::handle(ctx, call.request()?).await;
            answer.reply_old(&response, |r| compat::create_topics(r, sent))
        }
        ApiKey::DeleteTopics => {
            let response = delete_topics::handle(ctx, call.request()?).await;
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
        ApiKey::IncrementalAlterConfigs => {
            answer.reply(&incremental_alter_configs::handle(ctx, call.request()?).await)
        }
        other => Err(no_handler(other)),
    }
}
