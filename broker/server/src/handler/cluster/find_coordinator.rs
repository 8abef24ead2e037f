//! FindCoordinator v0-v6: on a single node this broker coordinates every group and every
//! transactional id; in a cluster the coordinator is placed as Kafka places it
//! (`kraft/routing.rs`: the leader of the key's partition of `__consumer_offsets` or
//! `__transaction_state`), COORDINATOR_NOT_AVAILABLE while that partition has no leader. DESCRIBE on the group (key type 0) or the transactional id (key type 1).
//! v3 is flexible; v4+ batch the keys (KIP-699), each answered on its own. Key type 2
//! (share groups, v6) is answered as Kafka answers it with share groups disabled: CLUSTER_ACTION
//! on the cluster is checked (CLUSTER_AUTHORIZATION_FAILED), then INVALID_REQUEST, as it is
//! below v6; another key type is INVALID_REQUEST.
//!
//! Advertising it matters beyond groups: librdkafka enables LZ4 only when the broker
//! advertises FindCoordinator (its proxy for "broker >= 0.8.2"), and otherwise silently sends
//! LZ4-configured batches uncompressed.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use crate::kraft::CoordinatorKind;

/// Kafka's coordinator key type for consumer groups.
const KEY_TYPE_GROUP: i8 = 0;
/// Kafka's coordinator key type for transactional ids.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// Kafka's coordinator key type for share groups (KIP-932, FindCoordinator v6+).
const KEY_TYPE_SHARE: i8 = 2;
/// The first version that batches coordinator keys (KIP-699).
const BATCHED_VERSION: i16 = 4;

/// Answers FindCoordinator.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if version >= BATCHED_VERSION {
        // One answer per key the request carries (decoded from the frame, so bounded by it).
        let mut coordinators = Vec::new();
        for key in request.coordinator_keys {
            let mut coordinator = Coordinator::default();
            let (node_id, host, port) = match find(ctx, request.key_type, &key, version).await {
                Ok(found) => found,
                Err(error) => {
                    coordinator.error_code = error.code();
                    no_node()
                }
            };
            coordinator.key = key;
            (coordinator.node_id, coordinator.host, coordinator.port) = (node_id, host, port);
            coordinators.push(coordinator);
        }
        response.coordinators = coordinators;
        return response;
    }
    let (node_id, host, port) = match find(ctx, request.key_type, &request.key, version).await {
        Ok(found) => found,
        Err(error) => {
            response.error_code = error.code();
            if error == ResponseError::InvalidRequest {
                response.error_message =
                    Some(StrBytes::from_static_str("unknown coordinator key type"));
            }
            no_node()
        }
    };
    (response.node_id, response.host, response.port) = (node_id, host, port);
    response
}

/// Kafka's `Node.noNode()`: id -1, no host, port -1.
fn no_node() -> (BrokerId, StrBytes, i32) {
    (BrokerId(-1), StrBytes::default(), -1)
}

/// The coordinator of `key` (Kafka's `getCoordinator`): this broker, or why not.
async fn find(
    ctx: &Ctx<'_>,
    key_type: i8,
    key: &str,
    version: i16,
) -> Result<(BrokerId, StrBytes, i32), ResponseError> {
    let refused = match key_type {
        KEY_TYPE_GROUP => (!ctx.auth.group(AclOperation::Describe, key))
            .then_some(ResponseError::GroupAuthorizationFailed),
        KEY_TYPE_TRANSACTION => {
            (!ctx
                .auth
                .allowed(AclOperation::Describe, ResourceType::TransactionalId, key))
            .then_some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        KEY_TYPE_SHARE if version >= 6 && !ctx.auth.cluster(AclOperation::ClusterAction) => {
            Some(ResponseError::ClusterAuthorizationFailed)
        }
        // Share groups are not served: Kafka without a share coordinator answers this.
        _ => Some(ResponseError::InvalidRequest),
    };
    if let Some(error) = refused {
        return Err(error);
    }
    if let Some(kraft) = ctx.kraft {
        let kind = if key_type == KEY_TYPE_GROUP {
            CoordinatorKind::Group
        } else {
            CoordinatorKind::Transaction
        };
        let found = kraft
            .find_coordinator(kind, key)
            .await
            .map_err(|e| e.code)?;
        let node = ctx
            .nodes()
            .into_iter()
            .find(|n| n.node_id == found.node_id)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        return Ok((
            BrokerId(node.node_id),
            StrBytes::from_string(node.host),
            node.port,
        ));
    }
    let advertised = ctx.advertised.clone();
    Ok((
        BrokerId(ctx.config.node_id),
        StrBytes::from_string(advertised.host),
        i32::from(advertised.port),
    ))
}
