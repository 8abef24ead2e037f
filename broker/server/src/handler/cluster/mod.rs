//! What the cluster is and where its pieces are: ApiVersions (the protocol crate's version
//! table), Metadata, FindCoordinator (where a group's or a transaction's coordinator is),
//! DescribeCluster, DescribeLogDirs and ElectLeaders. One `match` over their API keys.

mod api_versions;
mod describe_cluster;
mod describe_log_dirs;
mod elect_leaders;
mod find_coordinator;
mod metadata;

use kafka_protocol::messages::ApiKey;

use crate::wire::{ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

pub(super) use api_versions::unsupported_version as unsupported_api_versions;

/// Answers a cluster request.
pub(super) async fn dispatch(
    ctx: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::ApiVersions => answer.reply(&api_versions::handle(call.request()?)),
        ApiKey::Metadata => answer.reply(&metadata::handle(ctx, call.request()?, v).await),
        ApiKey::FindCoordinator => answer.reply(&find_coordinator::handle(ctx, call.request()?, v)),
        ApiKey::DescribeCluster => {
            answer.reply(&describe_cluster::handle(ctx, &call.request()?, v))
        }
        // Its v0, gone from the codec crate, is read and answered as v1 (same layout).
        ApiKey::DescribeLogDirs => {
            answer.reply(&describe_log_dirs::handle(ctx, call.request()?, v).await)
        }
        ApiKey::ElectLeaders => answer.reply(&elect_leaders::handle(ctx, call.request()?, v)),
        other => Err(no_handler(other)),
    }
}
