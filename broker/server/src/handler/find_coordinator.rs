//! FindCoordinator v0-v2: this broker coordinates every group (a single node). Transaction
//! coordinators do not exist yet: COORDINATOR_NOT_AVAILABLE.
//!
//! Advertising it matters beyond groups: librdkafka enables LZ4 only when the broker
//! advertises FindCoordinator (its proxy for "broker >= 0.8.2"), and otherwise silently sends
//! LZ4-configured batches uncompressed.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::AclOperation;

use crate::authz;
use crate::broker::NODE_ID;
use crate::wire::ConnectionContext;

/// Kafka's coordinator key type for consumer groups.
const KEY_TYPE_GROUP: i8 = 0;

/// Answers FindCoordinator.
pub fn handle(
    ctx: &ConnectionContext,
    request: FindCoordinatorRequest,
    _version: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if request.key_type != KEY_TYPE_GROUP {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        response.error_message = Some(StrBytes::from_static_str("transactions are not supported"));
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    if !authz::group(ctx, AclOperation::Describe, request.key.as_str()) {
        response.error_code = ResponseError::GroupAuthorizationFailed.code();
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    let advertised = ctx.broker.advertised(&ctx.listener_name);
    response.node_id = BrokerId(NODE_ID);
    response.host = StrBytes::from_string(advertised.host);
    response.port = i32::from(advertised.port);
    response
}
