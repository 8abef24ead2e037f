//! FindCoordinator v0-v2: this broker coordinates every group and every transactional id
//! (a single node). DESCRIBE on the group (key type 0) or the transactional id (key type 1);
//! another key type is INVALID_REQUEST.
//!
//! Advertising it matters beyond groups: librdkafka enables LZ4 only when the broker
//! advertises FindCoordinator (its proxy for "broker >= 0.8.2"), and otherwise silently sends
//! LZ4-configured batches uncompressed.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use crate::config::NODE_ID;

/// Kafka's coordinator key type for consumer groups.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's coordinator key type for transactional ids.
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Answers FindCoordinator.
pub fn handle(
    ctx: &Ctx<'_>,
    request: FindCoordinatorRequest,
    _version: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    let key = request.key.as_str();
    let refused = match request.key_type {
        KEY_TYPE_GROUP => (!ctx.auth.group(AclOperation::Describe, key))
            .then_some(ResponseError::GroupAuthorizationFailed),
        KEY_TYPE_TRANSACTION => {
            (!ctx
                .auth
                .allowed(AclOperation::Describe, ResourceType::TransactionalId, key))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        _ => Some(ResponseError::InvalidRequest),
    };
    if let Some(error) = refused {
        response.error_code = error.code();
        if error == ResponseError::InvalidRequest {
            response.error_message =
                Some(StrBytes::from_static_str("unknown coordinator key type"));
        }
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    let advertised = ctx.advertised.clone();
    response.node_id = BrokerId(NODE_ID);
    response.host = StrBytes::from_string(advertised.host);
    response.port = i32::from(advertised.port);
    response
}
