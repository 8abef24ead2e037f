//! DescribeCluster v0-v2 (KIP-700, flexible; what Java's `AdminClient.describeCluster` and
//! `kafka-cluster cluster-id` ask): the cluster id, the brokers (in a cluster the live ones,
//! each as the client's listener advertises it; else this one) and the controller, and on request the operations the principal may do on the cluster (0 without
//! DESCRIBE on it). No ACL guards the rest, as in Kafka's `computeDescribeClusterResponse`:
//! Metadata tells any client the same brokers and cluster id. v1's endpoint type is answered
//! as a Kafka
//! broker answers it: brokers (1) are described; controllers (2) are
//! MISMATCHED_ENDPOINT_TYPE (ask a controller's listener; there is none apart from this
//! broker); any other type UNSUPPORTED_ENDPOINT_TYPE. v2's `include_fenced_brokers` changes
//! nothing: the one broker is never fenced.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

use super::Ctx;
use crate::authz;

/// Kafka's endpoint type of brokers.
const ENDPOINT_BROKERS: i8 = 1;
/// Kafka's endpoint type of controllers.
const ENDPOINT_CONTROLLERS: i8 = 2;
/// Kafka's "authorized operations not requested".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// Answers DescribeCluster.
pub fn handle(
    ctx: &Ctx<'_>,
    request: &DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    let mut response = DescribeClusterResponse::default();
    response.endpoint_type = ENDPOINT_BROKERS;
    response.controller_id = BrokerId(-1);
    response.cluster_authorized_operations = OPERATIONS_NOT_REQUESTED;
    if version >= 1 && request.endpoint_type != ENDPOINT_BROKERS {
        // Kafka's `computeDescribeClusterResponse` on a broker's listener.
        let (error, message) = if request.endpoint_type == ENDPOINT_CONTROLLERS {
            (
                ResponseError::MismatchedEndpointType,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint \
                 of type CONTROLLER"
                    .to_owned(),
            )
        } else {
            (
                ResponseError::UnsupportedEndpointType,
                format!("Unsupported endpoint type {}", request.endpoint_type),
            )
        };
        response.error_code = error.code();
        response.error_message = Some(StrBytes::from_string(message));
        return response;
    }
    response.brokers = ctx
        .nodes()
        .into_iter()
        .map(|n| {
            let mut node = DescribeClusterBroker::default();
            node.broker_id = BrokerId(n.node_id);
            node.host = StrBytes::from_string(n.host);
            node.port = n.port;
            node.rack = n.rack.map(StrBytes::from_string);
            node
        })
        .collect();
    response.cluster_id = StrBytes::from_string(ctx.cluster_id.to_owned());
    response.controller_id = BrokerId(ctx.controller_id());
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = if ctx.auth.cluster(AclOperation::Describe) {
            ctx.auth.operations(
                ResourceType::Cluster,
                CLUSTER_NAME,
                &authz::CLUSTER_OPERATIONS,
            )
        } else {
            0
        };
    }
    response
}
