//! ElectLeaders v0-v2 (v2 flexible; `kafka-leader-election`): on a single broker every
//! partition's one replica is already its leader, preferred or not, so a named partition
//! gets ELECTION_NOT_NEEDED (Kafka's answer when the leader is already the one asked for)
//! and an unknown one UNKNOWN_TOPIC_OR_PARTITION; all partitions (a null list) need no
//! election and get an empty result, as Kafka leaves those out. ALTER on the cluster.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::limits;

/// The first version with a top-level error code.
const TOP_LEVEL_ERROR_SINCE: i16 = 1;

/// Answers ElectLeaders.
pub fn handle(ctx: &Ctx<'_>, request: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    let mut response = ElectLeadersResponse::default();
    let allowed = ctx.auth.cluster(AclOperation::Alter);
    if !allowed && version >= TOP_LEVEL_ERROR_SINCE {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    let topics = request.topic_partitions.unwrap_or_default();
    for (i, topic) in topics.into_iter().enumerate() {
        let mut result = ReplicaElectionResult::default();
        for &partition in &topic.partitions {
            let (error, message) = if !allowed {
                (ResponseError::ClusterAuthorizationFailed, None)
            } else if i >= limits::TOPICS_PER_REQUEST_MAX {
                (
                    ResponseError::PolicyViolation,
                    Some("too many topics in one request"),
                )
            } else if ctx
                .topics
                .partition(topic.topic.0.as_str(), partition)
                .is_none()
            {
                (ResponseError::UnknownTopicOrPartition, None)
            } else {
                (
                    ResponseError::ElectionNotNeeded,
                    Some("the partition's only replica is its leader"),
                )
            };
            let mut out = PartitionResult::default();
            out.partition_id = partition;
            out.error_code = error.code();
            out.error_message = message.map(StrBytes::from_static_str);
            result.partition_result.push(out);
        }
        result.topic = topic.topic;
        response.replica_election_results.push(result);
    }
    response
}
