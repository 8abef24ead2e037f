//! InitProducerId v0-v1, the minimum an idempotent producer needs (librdkafka's
//! `enable.idempotence=true`, the Java client's default since 3.0): a fresh producer id with
//! epoch 0 per request. Transactions are not supported: a transactional id gets
//! COORDINATOR_NOT_AVAILABLE, as FindCoordinator answers for transaction coordinators.
//!
//! Producer ids are unique per broker process and, as they start from the wall clock in
//! microseconds, across restarts unless the clock goes back. Each partition's producer state
//! (`sluice_storage::producer`) deduplicates by (producer id, epoch, sequence range).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use sluice_security::acl::{AclOperation, ResourceType};

use crate::authz;
use crate::clock::now_ms;
use crate::wire::ConnectionContext;

/// The next producer id to hand out.
static NEXT_PRODUCER_ID: OnceLock<AtomicI64> = OnceLock::new();

/// Answers InitProducerId.
pub fn handle(ctx: &ConnectionContext, request: &InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    // An idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    // (Kafka's `authorizeByResourceType`, KIP-679).
    let idempotent = authz::cluster(ctx, AclOperation::IdempotentWrite)
        || authz::any_of_type(ctx, AclOperation::Write, ResourceType::Topic);
    if request.transactional_id.is_none() && !idempotent {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        return response;
    }
    assign(request)
}

/// A fresh producer id (once authorized).
fn assign(request: &InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        return response;
    }
    let next = NEXT_PRODUCER_ID.get_or_init(|| AtomicI64::new(now_ms().saturating_mul(1000)));
    response.producer_id = ProducerId(next.fetch_add(1, Ordering::Relaxed));
    response.producer_epoch = 0;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_idempotent_producer_gets_its_own_id_and_transactions_are_refused() {
        let mut idempotent = InitProducerIdRequest::default();
        idempotent.transactional_id = None;
        let a = assign(&idempotent);
        let b = assign(&idempotent);
        assert_eq!(a.error_code, 0);
        assert!(a.producer_id.0 >= 0 && a.producer_id != b.producer_id);
        let mut tx = InitProducerIdRequest::default();
        tx.transactional_id = Some(kafka_protocol::messages::TransactionalId(
            kafka_protocol::protocol::StrBytes::from_static_str("t"),
        ));
        assert_eq!(
            assign(&tx).error_code,
            ResponseError::CoordinatorNotAvailable.code()
        );
    }
}
