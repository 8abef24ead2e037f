//! ApiVersions: the version table, as is (`sluice_protocol::versions::api_versions`). Its
//! response header is always v0 (KIP-511), and a version we do not know is answered in v0
//! with UNSUPPORTED_VERSION and the table, so the client can retry with one we do.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use sluice_protocol::versions;

use crate::wire::{FrameError, Response};

/// Answers ApiVersions.
pub fn handle(_request: ApiVersionsRequest) -> ApiVersionsResponse {
    versions::api_versions()
}

/// The v0 answer to an ApiVersions version we do not serve.
pub fn unsupported_version(correlation_id: i32) -> Result<Response, FrameError> {
    crate::handler::encode(correlation_id, 0, &versions::api_versions_unsupported(), 0)
}
