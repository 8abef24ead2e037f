//! ListConfigResources v0-v1 (KIP-1000's ListClientMetricsResources, renamed and widened by
//! KIP-1142): the config resources of the asked types, as Kafka's `handleListConfigResources`
//! lists them. v0 lists client-metrics resources only; v1 names the types (none: every type
//! Kafka lists: topic 2, broker 4, broker logger 8, client metrics 16, group 32), and a type
//! outside those is UNSUPPORTED_VERSION for the whole request. This broker has no
//! client-metrics subscriptions (KIP-714) and no group configs, so those types list nothing;
//! broker and broker logger list this node, topic every topic (views have no configs of
//! their own). DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), as
//! Kafka checks.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Kafka's `ConfigResource.Type` ids.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// What v1 may ask for (Kafka's `supportedResourceTypes`), in the order Kafka lists them.
const V1_TYPES: [i8; 5] = [GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC];

/// Answers ListConfigResources.
pub fn handle(
    ctx: &Ctx<'_>,
    request: &ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    let mut response = ListConfigResourcesResponse::default();
    if !ctx.auth.cluster(AclOperation::DescribeConfigs) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    let supported: &[i8] = if version == 0 {
        &[CLIENT_METRICS]
    } else {
        &V1_TYPES
    };
    let asked = &request.resource_types;
    if asked.iter().any(|t| !supported.contains(t)) {
        response.error_code = ResponseError::UnsupportedVersion.code();
        return response;
    }
    let wanted = |t: i8| supported.contains(&t) && (asked.is_empty() || asked.contains(&t));
    let resource = |name: String, resource_type: i8| {
        let mut r = ConfigResource::default();
        r.resource_name = StrBytes::from_string(name);
        r.resource_type = resource_type;
        r
    };
    // Groups and client metrics: none here (no group configs, no KIP-714 subscriptions).
    for node_type in [BROKER_LOGGER, BROKER].into_iter().filter(|&t| wanted(t)) {
        response
            .config_resources
            .push(resource(ctx.config.node_id.to_string(), node_type));
    }
    if wanted(TOPIC) {
        let topics = ctx.topics.topics();
        response
            .config_resources
            .extend(topics.iter().map(|t| resource(t.name.clone(), TOPIC)));
    }
    response
}
