//! What the cluster is and where its pieces are: ApiVersions (the protocol crate's version
//! table), Metadata and DescribeTopicPartitions (its paginated topic descriptions, KIP-966),
//! FindCoordinator (where a group's or a transaction's coordinator is), DescribeCluster,
//! DescribeLogDirs and ElectLeaders. One `match` over their API keys.

mod alter_replica_log_dirs;
mod api_versions;
mod describe_cluster;
mod describe_log_dirs;
mod describe_quorum;
mod describe_topic_partitions;
mod elect_leaders;
mod find_coordinator;
mod metadata;
mod unregister_broker;

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
    /// The cluster side, when this broker is in a cluster: brokers, placement and
    /// coordinators come from its image.
    pub kraft: Option<&'a Arc<crate::kraft::Kraft>>,
    /// The listener the client came in on (each broker is advertised by its listener of
    /// the same name).
    pub listener: &'a str,
}

/// A broker as the client's listener advertises it.
pub(super) struct Node {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

impl Ctx<'_> {
    /// The brokers to list: the live ones of the cluster, or this one.
    pub(super) fn nodes(&self) -> Vec<Node> {
        match self.kraft {
            Some(kraft) => {
                let mut nodes: Vec<Node> = kraft
                    .live_brokers(self.listener)
                    .into_iter()
                    .map(|b| Node {
                        node_id: b.node_id,
                        host: b.host,
                        port: i32::from(b.port),
                        rack: b.rack,
                    })
                    .collect();
                // Until its registration is applied (a broker starting while the quorum
                // elects), this broker still lists itself: the client is talking to it.
                if !nodes.iter().any(|n| n.node_id == self.config.node_id) {
                    nodes.push(self.this_node());
                    nodes.sort_by_key(|n| n.node_id);
                }
                nodes
            }
            None => vec![self.this_node()],
        }
    }

    fn this_node(&self) -> Node {
        Node {
            node_id: self.config.node_id,
            host: self.advertised.host.clone(),
            port: i32::from(self.advertised.port),
            rack: self.config.broker_rack.clone(),
        }
    }

    /// The controller id to tell clients: this broker. As a KRaft broker answers (a live
    /// broker, since clients never reach the quorum itself): the admin requests clients send
    /// to "the controller" come here and are forwarded to the active controller, so a client
    /// is never stuck on a controller that died. DescribeQuorum names the active controller.
    pub(super) fn controller_id(&self) -> i32 {
        self.config.node_id
    }

    /// Whether a topic of the registry is one the cluster lists (a topic on this disk that
    /// the cluster does not know is not served: `kraft/publisher.rs`).
    pub(super) fn listed(&self, name: &str) -> bool {
        self.kraft
            .is_none_or(|k| k.image().topic_ids().contains_key(name))
    }
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
        kraft: conn.broker.kraft(),
        listener: &conn.client.listener_name,
    };
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::ApiVersions => answer.reply(&api_versions::handle(ctx, &call.request()?, v)),
        ApiKey::Metadata => answer.reply(&metadata::handle(ctx, call.request()?, v).await),
        ApiKey::FindCoordinator => {
            answer.reply(&find_coordinator::handle(ctx, call.request()?, v).await)
        }
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
        ApiKey::DescribeQuorum => {
            answer.reply(&describe_quorum::handle(ctx, &call.request()?, v).await)
        }
        ApiKey::AlterReplicaLogDirs => {
            answer.reply(&alter_replica_log_dirs::handle(ctx, &call.request()?))
        }
        ApiKey::UnregisterBroker => {
            answer.reply(&unregister_broker::handle(ctx, &call.request()?).await)
        }
        other => Err(no_handler(other)),
    }
}
