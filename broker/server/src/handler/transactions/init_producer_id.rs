//! InitProducerId v0-v5: a producer id and epoch from the transaction coordinator
//! (`crate::txn`), for idempotent producers (no transactional id: a fresh id, epoch 0) and
//! transactional ones (the id's producer, its epoch bumped, which fences an older producer
//! with the same `transactional.id` and aborts its open transaction first).
//!
//! v2+ are flexible. v3 (KIP-360) carries the producer's current id and epoch, so a
//! transactional producer recovers after an abortable error (UNKNOWN_PRODUCER_ID, an aborted
//! transaction) with its epoch bumped and the same id; a retry whose answer was lost gets the
//! same epoch again; any other pair is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH before v4
//! (KIP-588), as Kafka answers (`TransactionCoordinator.handleInitProducerId`). Only one of
//! the two set is INVALID_REQUEST; an idempotent producer's pair is ignored (a fresh id, as
//! Kafka does: its epoch bumps are the client's own). v5 (KIP-890) may answer
//! TRANSACTION_ABORTABLE, which this coordinator never needs to.
//!
//! Producer ids come from blocks the coordinator reserves in the transaction log, so they
//! are never reused, across restarts too; the last epoch a KIP-360 retry is checked against
//! is in the same log.

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
    // KafkaApis: (-1, -1) is a new producer; only one of them -1 is INVALID_REQUEST.
    let expected = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => return answer(Err(ResponseError::InvalidRequest.code())),
        (producer_id, epoch) => Some((producer_id, epoch)),
    };
    let timeout_ms = request.transaction_timeout_ms;
    let assigned = ctx
        .txns
        .init_producer_id(transactional_id, timeout_ms, expected);
    let assigned = call(ctx, assigned).await;
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
