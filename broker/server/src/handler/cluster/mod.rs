//! What the cluster is and where its pieces are: ApiVersions (the protocol crate's version
//! table), Metadata and DescribeTopicPartitions (its paginated topic descriptions, KIP-966),
//! FindCoordinator (where a group's or a transaction's coordinator is), DescribeCluster,
//! DescribeLogDirs and ElectLeaders. One `match` over their API keys.

mod alter_replica_log_dirs;
mod api_versions;
mod describe_cluster;
mod describe_log_dirs;
mod describe_topic_partitions;
mod elect_leaders;
mod find_coordinator;
mod metadata;

use kafka_protocol::messages::ApiKey;

use std::sync::{Arc, Mutex};

use crate::authz::Authz;
use crate::config::{BrokerConfig, HostPort};
use crate::metrics::{ClientSoftware, SoftwareSeen};
use crate::topics::TopicRegistry;
use crate::wire::{ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

pub(super) use api_versions::unsupported_version as unsupported_api_versions;

/// What a cluster handler is given: what the client may do, what these APIs say of
/// the broker (its cluster id, the address the client's listener advertises), its topics
/// (Metadata, DescribeLogDirs, ElectLeaders), the config (whether Metadata may create a
/// topic) and the connection's client software (ApiVersions).
pub(super) struct Ctx<'a> {
    pub auth: Authz<'a>,
    pub cluster_id: &'a str,
    pub advertised: HostPort,
    pub topics: &'a Arc<TopicRegistry>,
    pub config: &'a BrokerConfig,
    /// What the connection is counted as (ApiVersions v3+ renames it), and the gauge.
    pub client_software: (&'a Mutex<SoftwareSeen>, &'a Arc<ClientSoftware>),
}

/// Answers a cluster request.
pub(super) async fn dispatch(
    conn: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        auth: Authz::new(&conn.broker.security, &conn.client),
        cluster_id: &conn.broker.cluster_id,
        advertised: conn.broker.advertised(&conn.client.listener_name),
        topics: &conn.broker.topics,
        config: &conn.broker.config,
        client_software: (&conn.client_software, &conn.broker.metrics.client_software),
    };
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::ApiVersions => answer.reply(&api_versions::handle(ctx, &call.request()?, v)),
        ApiKey::Metadata => answer.reply(&metadata::handle(ctx, call.request()?, v).await),
        ApiKey::FindCoordinator => answer.reply(&find_coordinator::handle(ctx, call.request()?, v)),
        ApiKey::DescribeTopicPartitions => {
            answer.reply(&describe_topic_partitions::handle(ctx, &call.request()?))
        }
        ApiKey::DescribeCluster => {
            answer.reply(&describe_cluster::handle(ctx, &call.request()?, v))
        }
        // Its v0, gone from the codec crate, is read and answered as v1 (same layout).
        ApiKey::DescribeLogDirs => {
            answer.reply(&describe_log_dirs::handle(ctx, call.request()?, v).await)
        }
        ApiKey::ElectLeaders => answer.reply(&elect_leaders::handle(ctx, call.request()?, v)),
        ApiKey::AlterReplicaLogDirs => {
            answer.reply(&alter_replica_log_dirs::handle(ctx, &call.request()?))
        }
        other => Err(no_handler(other)),
    }
}
