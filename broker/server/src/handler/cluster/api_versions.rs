//! ApiVersions v0-v4: the version table, as is (`sluice_protocol::versions::api_versions`).
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

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::versions;

use super::Ctx;
use crate::wire::{FrameError, Response};

/// Answers ApiVersions.
pub fn handle(ctx: &Ctx<'_>, request: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
    if version < 3 {
        return versions::api_versions();
    }
    let (name, software_version) = (
        request.client_software_name.as_str(),
        request.client_software_version.as_str(),
    );
    if !valid_software(name) || !valid_software(software_version) {
        let mut response = ApiVersionsResponse::default();
        response.error_code = ResponseError::InvalidRequest.code();
        return response;
    }
    let (seen, gauge) = ctx.client_software;
    let counted = gauge.connect(name, software_version);
    // The previous entry (`unknown` at first) is dropped, and uncounted, here.
    *seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = counted;
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
    use super::valid_software;

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
