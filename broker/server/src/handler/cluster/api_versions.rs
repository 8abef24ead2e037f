//! ApiVersions v0-v4: the version table, as is (`sluice_protocol::versions::api_versions`).
//! Its response header is always v0 (KIP-511), and a version we do not know is answered in v0
//! with UNSUPPORTED_VERSION and the table, so the client can retry with one we do. v3+ carry
//! the client's software name and version (KIP-511): each must match Kafka's pattern
//! (`[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`), else INVALID_REQUEST without the table, as
//! Kafka answers; a valid pair is what the connection is counted as in the
//! `sluice_client_software_connections` gauge. v4 only lets a feature's minimum version be
//! 0 (KAFKA-17011); this broker lists no features.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
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
    versions::api_versions()
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
