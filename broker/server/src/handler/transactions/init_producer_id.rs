//! InitProducerId v0-v1: a producer id and epoch from the transaction coordinator
//! (`crate::txn`), for idempotent producers (no transactional id: a fresh id, epoch 0) and
//! transactional ones (the id's producer, its epoch bumped, which fences an older producer
//! with the same `transactional.id` and aborts its open transaction first).
//!
//! Producer ids come from blocks the coordinator reserves in the transaction log, so they
//! are never reused, across restarts too.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, refuse_transactional_id, wire_code};

/// The first InitProducerId version that answers PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 4;

/// Answers InitProducerId.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let transactional_id = request.transactional_id.map(|id| id.0.to_string());
    let refused = match &transactional_id {
        Some(id) => refuse_transactional_id(ctx, AclOperation::Write, id),
        // An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some
        // topic (Kafka's `authorizeByResourceType`, KIP-679).
        None => {
            let idempotent = ctx.auth.cluster(AclOperation::IdempotentWrite)
                || ctx
                    .auth
                    .any_of_type(AclOperation::Write, ResourceType::Topic);
            (!idempotent).then(|| ResponseError::ClusterAuthorizationFailed.code())
        }
    };
    if let Some(code) = refused {
        return answer(Err(code));
    }
    let timeout_ms = request.transaction_timeout_ms;
    let assigned = call(ctx, ctx.txns.init_producer_id(transactional_id, timeout_ms)).await;
    answer(match assigned {
        Some(Ok(ids)) => Ok(ids),
        Some(Err(code)) => Err(wire_code(code, version, FENCED_SINCE)),
        None => Err(UNAVAILABLE),
    })
}

fn answer(assigned: Result<(i64, i16), i16>) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    match assigned {
        Ok((producer_id, producer_epoch)) => {
            response.producer_id = ProducerId(producer_id);
            response.producer_epoch = producer_epoch;
        }
        Err(code) => {
            response.error_code = code;
            response.producer_id = ProducerId(-1);
            response.producer_epoch = -1;
        }
    }
    response
}
