//! UnregisterBroker v0 (KIP-631): a broker that is gone for good leaves the cluster, what
//! `kafka-cluster unregister --bootstrap-server ... --id N` sends. The receiving broker
//! submits it to the active controller: the broker's leaderships move away and its
//! registration goes (`Controller::unregister_broker`); a broker-only node also leaves the
//! quorum's learners, so the controller stops sending it the metadata log. A broker that is
//! still running registers again at its next heartbeat, as in Kafka.
//!
//! ALTER on the cluster, as Kafka's `handleUnregisterBrokerRequest`: CLUSTER_AUTHORIZATION_FAILED
//! otherwise. A single node (no quorum) has no other broker to unregister:
//! BROKER_ID_NOT_REGISTERED, or INVALID_REQUEST for itself.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::cluster::ControllerOp;

/// Answers UnregisterBroker.
pub async fn handle(ctx: &Ctx<'_>, request: &UnregisterBrokerRequest) -> UnregisterBrokerResponse {
    let node_id = request.broker_id.0;
    let outcome = if ctx.auth.cluster(AclOperation::Alter) {
        unregister(ctx, node_id).await
    } else {
        Err((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".to_owned(),
        ))
    };
    let mut response = UnregisterBrokerResponse::default();
    if let Err((code, message)) = outcome {
        response.error_code = code.code();
        response.error_message = Some(StrBytes::from_string(message));
    }
    response
}

async fn unregister(ctx: &Ctx<'_>, node_id: i32) -> Result<(), (ResponseError, String)> {
    let Some(kraft) = ctx.kraft else {
        return Err(if node_id == ctx.config.node_id {
            (
                ResponseError::InvalidRequest,
                format!("broker {node_id} is this single node: it cannot unregister itself"),
            )
        } else {
            (
                ResponseError::BrokerIdNotRegistered,
                format!("broker {node_id} is not registered: this is a single node"),
            )
        });
    };
    let failed = |e: crate::cluster::ClusterError| {
        let e = crate::kraft::kafka_error(&e);
        (e.code, e.message)
    };
    kraft
        .submit(ControllerOp::UnregisterBroker { node_id })
        .await
        .map_err(failed)?;
    tracing::info!(node = node_id, "broker unregistered");
    Ok(())
}
