//! DescribeQuorum v0-v2 (KIP-595, KIP-836, KIP-853): the metadata quorum's state, what
//! `kafka-metadata-quorum --bootstrap-server ... describe --status / --replication` and
//! Java's `Admin.describeMetadataQuorum` read. The one partition is `__cluster_metadata-0`;
//! its leader is the active controller, its leader epoch the Raft term, its high watermark
//! the committed index + 1, and each voter's log end offset the last index the leader knows
//! it holds + 1 (-1 when unknown: a node that does not lead only knows its own). v1 adds
//! the last fetch and caught-up times (known to the leader); v2 the voters' controller
//! listeners (`nodes`). Broker-only nodes (`process.roles=broker`, the quorum's learners) are
//! its observers.
//!
//! A single node (no voters configured) is a quorum of one: itself, leading at epoch 0,
//! with no metadata log (high watermark -1).
//!
//! DESCRIBE on the cluster, as Kafka: CLUSTER_AUTHORIZATION_FAILED otherwise. A request
//! for another topic or partition gets UNKNOWN_TOPIC_OR_PARTITION for it.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;

/// The metadata log's topic, as Kafka names it.
const METADATA_TOPIC: &str = "__cluster_metadata";

/// Answers DescribeQuorum.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: &DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let mut response = DescribeQuorumResponse::default();
    if !ctx.auth.cluster(AclOperation::Describe) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        response.error_message = Some(StrBytes::from_static_str("Cluster authorization failed."));
        return response;
    }
    let quorum = quorum(ctx).await;
    response.topics = request
        .topics
        .iter()
        .map(|topic| {
            let mut out = TopicData::default();
            out.topic_name = topic.topic_name.clone();
            out.partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    if topic.topic_name.0.as_str() == METADATA_TOPIC && p.partition_index == 0 {
                        quorum.clone()
                    } else {
                        let mut refused = PartitionData::default();
                        refused.partition_index = p.partition_index;
                        refused.error_code = ResponseError::UnknownTopicOrPartition.code();
                        refused.leader_id = BrokerId(-1);
                        refused.leader_epoch = -1;
                        refused.high_watermark = -1;
                        refused
                    }
                })
                .collect();
            out
        })
        .collect();
    if version >= 2 {
        response.nodes = nodes(ctx);
    }
    if version < 1 {
        // No timestamps before v1 (the codec refuses a set one).
        for voter in response
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
            .flat_map(|p| p.current_voters.iter_mut())
        {
            voter.last_fetch_timestamp = -1;
            voter.last_caught_up_timestamp = -1;
        }
    }
    response
}

/// `__cluster_metadata-0` as this node sees the quorum.
async fn quorum(ctx: &Ctx<'_>) -> PartitionData {
    let mut out = PartitionData::default();
    out.partition_index = 0;
    let status = match ctx.kraft {
        Some(kraft) => kraft.status().await,
        None => None,
    };
    let Some(status) = status else {
        // A single node: a quorum of one, with no metadata log.
        out.leader_id = BrokerId(ctx.config.node_id);
        out.leader_epoch = 0;
        out.high_watermark = -1;
        let mut me = ReplicaState::default();
        me.replica_id = BrokerId(ctx.config.node_id);
        me.log_end_offset = -1;
        me.last_fetch_timestamp = -1;
        me.last_caught_up_timestamp = -1;
        out.current_voters = vec![me];
        return out;
    };
    let now = crate::clock::now_ms();
    let id = |n: u64| BrokerId(i32::try_from(n).unwrap_or(-1));
    out.leader_id = status.leader_id.map_or(BrokerId(-1), id);
    out.leader_epoch = i32::try_from(status.term).unwrap_or(i32::MAX);
    out.high_watermark = status.committed_index.map_or(-1, |c| {
        i64::try_from(c).unwrap_or(i64::MAX).saturating_add(1)
    });
    let replica = |v: &crate::cluster::VoterStatus| {
        let mut state = ReplicaState::default();
        state.replica_id = id(v.node_id);
        state.log_end_offset = v.match_index.map_or(-1, |m| {
            i64::try_from(m).unwrap_or(i64::MAX).saturating_add(1)
        });
        let seen = v.last_ack_ms_ago.map_or(-1, |ago| {
            now.saturating_sub(i64::try_from(ago).unwrap_or(i64::MAX))
        });
        let seen = if v.node_id == status.node_id && status.leader_id == Some(v.node_id) {
            now
        } else {
            seen
        };
        state.last_fetch_timestamp = seen;
        state.last_caught_up_timestamp = seen;
        state
    };
    out.current_voters = status.voters.iter().map(replica).collect();
    out.observers = status.learners.iter().map(replica).collect();
    out
}

/// v2: each voter's controller listener.
fn nodes(ctx: &Ctx<'_>) -> Vec<Node> {
    let listener = ctx
        .config
        .controller_listener_names
        .first()
        .cloned()
        .unwrap_or_else(|| "CONTROLLER".to_owned());
    ctx.config
        .controller_quorum_voters
        .iter()
        .map(|v| {
            let mut node = Node::default();
            node.node_id = BrokerId(v.node_id);
            let mut l = Listener::default();
            l.name = StrBytes::from_string(listener.clone());
            l.host = StrBytes::from_string(v.addr.host.clone());
            l.port = v.addr.port;
            node.listeners = vec![l];
            node
        })
        .collect()
}
