//! ApiVersions: the version table, as is. Its response header is always v0 (KIP-511), and a
//! version we do not know is answered in v0 with UNSUPPORTED_VERSION and the table, so the
//! client can retry with one we do.
//!
//! Default-valued tagged fields of v3 are left out (kafka-protocol omits them), which
//! librdkafka 2.0.2 (Debian's kcat 1.7.1) needs: it mis-parses them.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::versions::SUPPORTED;
use crate::wire::{FrameError, Response};

/// Answers ApiVersions.
pub fn handle(_request: ApiVersionsRequest) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = table();
    response
}

/// The v0 answer to an ApiVersions version we do not serve.
pub fn unsupported_version(correlation_id: i32) -> Result<Response, FrameError> {
    let mut response = ApiVersionsResponse::default();
    response.error_code = ResponseError::UnsupportedVersion.code();
    response.api_keys = table();
    super::encode(correlation_id, 0, &response, 0)
}

fn table() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            v.min_version = s.advertised_min;
            v.max_version = s.max;
            v
        })
        .collect()
}
