//! Helpers shared by the transaction API handlers: the call to the transaction coordinator
//! that gives up at shutdown, the producer a request names, Kafka's version mapping of
//! PRODUCER_FENCED, and the transactional-id authorization every transaction API starts with.

use std::future::Future;

use kafka_protocol::ResponseError;
use sluice_security::acl::{AclOperation, ResourceType};
use sluice_txn::ErrorCode;

use super::Ctx;
use crate::txn::TxnProducer;

/// Waits for the coordinator's answer; `None` when the broker shuts down first or the
/// coordinator is gone (handlers answer COORDINATOR_NOT_AVAILABLE, which clients retry).
pub async fn call<T>(ctx: &Ctx<'_>, answer: impl Future<Output = Option<T>>) -> Option<T> {
    let mut shutdown = ctx.client.shutdown.clone();
    tokio::select! {
        answer = answer => answer,
        _ = shutdown.wait_for(|stop| *stop) => None,
    }
}

/// The producer of a transaction request.
pub fn producer(transactional_id: &str, producer_id: i64, producer_epoch: i16) -> TxnProducer {
    TxnProducer {
        transactional_id: transactional_id.to_owned(),
        producer_id,
        producer_epoch,
    }
}

/// A coordinator error on the wire at `version`: before KIP-588's versions (the API's
/// `fenced_since`) a fenced producer is INVALID_PRODUCER_EPOCH, as Kafka answers.
pub fn wire_code(code: ErrorCode, version: i16, fenced_since: i16) -> i16 {
    match code {
        ErrorCode::ProducerFenced if version < fenced_since => {
            ErrorCode::InvalidProducerEpoch.code()
        }
        code => code.code(),
    }
}

/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED without `operation` on the transactional id.
pub fn transactional_id_denied(
    ctx: &Ctx<'_>,
    operation: AclOperation,
    transactional_id: &str,
) -> Option<i16> {
    let allowed = ctx
        .auth
        .allowed(operation, ResourceType::TransactionalId, transactional_id);
    (!allowed).then(|| ResponseError::TransactionalIdAuthorizationFailed.code())
}

/// `None` if the principal may `operation` the transactional id, else the error to answer.
pub fn refuse_transactional_id(
    ctx: &Ctx<'_>,
    operation: AclOperation,
    transactional_id: &str,
) -> Option<i16> {
    if let Some(denied) = transactional_id_denied(ctx, operation, transactional_id) {
        return Some(denied);
    }
    let elsewhere = ctx.kraft.is_some_and(|k| {
        !k.coordinates(crate::kraft::CoordinatorKind::Transaction, transactional_id)
    });
    elsewhere.then(|| ResponseError::NotCoordinator.code())
}

/// The answer when the coordinator is gone or the broker is shutting down.
pub const UNAVAILABLE: i16 = ErrorCode::CoordinatorNotAvailable.code();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_is_invalid_epoch_before_kip_588() {
        assert_eq!(wire_code(ErrorCode::ProducerFenced, 1, 2), 47);
        assert_eq!(wire_code(ErrorCode::ProducerFenced, 2, 2), 90);
        assert_eq!(wire_code(ErrorCode::ConcurrentTransactions, 0, 2), 51);
    }
}
