//! ApiVersions v0-v5: the version table, as is (`sluice_protocol::versions::api_versions`).
//! Its response header is always v0 (KIP-511), and a version we do not know is answered in v0
//! with UNSUPPORTED_VERSION and the table, so the client can retry with one we do. v3+ carry
//! the client's software name and version (KIP-511): each must match Kafka's pattern
//! (`[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`), else INVALID_REQUEST without the table, as
//! Kafka answers; a valid pair is what the connection is counted as in the
//! `sluice_client_software_connections` gauge.
//!
//! v3+ also carry the features (KIP-584): `transaction.version` supported 0-2 and finalized
//! at the `transaction.version` config key's level, so Kafka 4 clients speak the
//! transaction protocol v2 (KIP-890 part 2) at 2 and v1 at 1, and `group.version` 0-1
//! finalized at 1 (the consumer group protocol, KIP-848, is served). As Kafka's
//! `ApiVersionsResponse`: v3 omits supported features whose minimum is 0 (older clients fail
//! to parse them, KAFKA-17011/KAFKA-17492), and a finalized level of 0 is never listed.
//!
//! v5 (KIP-1242, vendored codec) may name the cluster and node the client means to reach,
//! both or neither (one alone is INVALID_REQUEST, Kafka's `ApiVersionsRequest.isValid`). A
//! client that names another cluster or node (its bootstrap address now reaches another
//! broker) is answered REBOOTSTRAP_REQUIRED without the table, as Kafka's error answers are,
//! and goes back to its bootstrap servers.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::versions;

use super::Ctx;
use crate::wire::{FrameError, Response};

/// The first version that may name the cluster and node the client means to reach.
const TARGET_SINCE: i16 = 5;

/// Answers ApiVersions.
pub fn handle(ctx: &Ctx<'_>, request: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    if version < 3 {
        return versions::api_versions();
    }
    let (name, software_version) = (
        request.client_software_name.as_str(),
        request.client_software_version.as_str(),
    );
    let half_target = request.cluster_id.is_some() != (request.node_id != -1);
    if !valid_software(name) || !valid_software(software_version) || half_target {
        return error(ResponseError::InvalidRequest);
    }
    let (seen, gauge) = ctx.client_software;
    let counted = gauge.connect(name, software_version);
    // The previous entry (`unknown` at first) is dropped, and uncounted, here.
    *seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = counted;
    if version >= TARGET_SINCE && !is_target(ctx.cluster_id, ctx.config.node_id, request) {
        return error(ResponseError::RebootstrapRequired);
    }
    let mut response = versions::api_versions();
    let transaction_version = i16::try_from(ctx.config.transaction_version).unwrap_or(1);
    add_features(&mut response, version, transaction_version);
    response
}

/// The features this broker supports (name, min, max) and the level each is finalized at.
fn features(transaction_version: i16) -> [(&'static str, i16, i16, i16); 2] {
    [
        ("group.version", 0, 1, 1),
        ("transaction.version", 0, 2, transaction_version),
    ]
}

/// Kafka's `createSupportedFeatureKeys` and `createFinalizedFeatureKeys` (v3+).
fn add_features(response: &mut ApiVersionsResponse, version: i16, transaction_version: i16) {
    for (name, min, max, level) in features(transaction_version) {
        if version >= 4 || min > 0 {
            let mut key = SupportedFeatureKey::default();
            key.name = StrBytes::from_static_str(name);
            key.min_version = min;
            key.max_version = max;
            response.supported_features.push(key);
        }
        if level > 0 {
            let mut key = FinalizedFeatureKey::default();
            key.name = StrBytes::from_static_str(name);
            key.min_version_level = level;
            key.max_version_level = level;
            response.finalized_features.push(key);
        }
    }
    // One broker whose features change only with its config: epoch 0 is valid (>= 0).
    response.finalized_features_epoch = 0;
}

/// An answer with `error` and no table.
fn error(error: ResponseError) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error.code();
    response
}

/// True unless the request names a cluster or node other than this broker (v5, KIP-1242).
fn is_target(cluster_id: &str, node_id: i32, request: &ApiVersionsRequest) -> bool {
    let cluster_ok = request
        .cluster_id
        .as_ref()
        .is_none_or(|id| id.as_str() == cluster_id);
    let node_ok = request.node_id == -1 || request.node_id == node_id;
    cluster_ok && node_ok
}

/// Kafka's `SOFTWARE_NAME_VERSION_PATTERN`: alphanumerics, with `-` and `.` inside.
fn valid_software(text: &str) -> bool {
    let bytes = text.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
}

/// The v0 answer to an ApiVersions version we do not serve.
pub fn unsupported_version(correlation_id: i32) -> Result<Response, FrameError> {
    crate::handler::encode(correlation_id, 0, &versions::api_versions_unsupported(), 0)
}

#[cfg(test)]
mod tests {
    use super::{is_target, valid_software};
    use kafka_protocol::messages::ApiVersionsRequest;
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn v5_names_this_cluster_and_node_or_another() {
        let target = |cluster: Option<&str>, node| {
            let mut request = ApiVersionsRequest::default();
            request.cluster_id = cluster.map(|c| StrBytes::from_string(c.to_owned()));
            request.node_id = node;
            is_target("cluster-a", 0, &request)
        };
        assert!(target(None, -1));
        assert!(target(Some("cluster-a"), 0));
        assert!(!target(Some("cluster-b"), 0));
        assert!(!target(Some("cluster-a"), 1));
    }

    #[test]
    fn software_names_follow_kafkas_pattern() {
        for ok in [
            "apache-kafka-java",
            "4.4.0",
            "librdkafka",
            "a",
            "v1.2-rc.1",
            "X9",
        ] {
            assert!(valid_software(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", ".a", "a.", "a b", "a_b", "é", "kafka/java"] {
            assert!(!valid_software(bad), "{bad}");
        }
    }
}
