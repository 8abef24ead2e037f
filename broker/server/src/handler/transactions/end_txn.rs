//! EndTxn v0-v5: commit or abort the producer's transaction. Answered once the decision is
//! in the transaction log and the markers are written to every partition of the
//! transaction (`crate::txn`), so a read_committed consumer sees the commit when the
//! producer's `commit_transaction` returns. WRITE on the transactional id.
//!
//! v3 is v2, flexible. v4 (KIP-890) lets the coordinator answer TRANSACTION_ABORTABLE, which
//! Kafka's coordinator does not send for EndTxn either: its answers are v3's. v5 is the
//! transaction protocol v2 (KIP-890 part 2, what clients speak when `transaction.version` is
//! finalized at 2): the epoch is bumped with every transaction, the markers carry the new
//! one, and the answer gives the producer id and epoch the next transaction uses (a retry
//! whose answer was lost gets the same pair; an abort with nothing added is allowed).

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use sluice_security::acl::AclOperation;

use sluice_txn::TxnProtocol;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, refuse_transactional_id, wire_code};

/// The first EndTxn version that answers PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;

/// The first EndTxn version of the transaction protocol v2 (KIP-890 part 2).
const PROTOCOL_V2_SINCE: i16 = 5;

/// Answers EndTxn.
pub async fn handle(ctx: &Ctx<'_>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let mut response = EndTxnResponse::default();
    let id = request.transactional_id.0.as_str();
    if let Some(code) = refuse_transactional_id(ctx, AclOperation::Write, id) {
        response.error_code = code;
        return response;
    }
    let txn = producer(id, request.producer_id.0, request.producer_epoch);
    let protocol = match version >= PROTOCOL_V2_SINCE {
        true => TxnProtocol::V2,
        false => TxnProtocol::V1,
    };
    let ended = ctx.txns.end_txn(txn, request.committed, protocol);
    let Some(answer) = call(ctx, ended).await else {
        response.error_code = UNAVAILABLE;
        return response;
    };
    response.error_code = wire_code(answer.error, version, FENCED_SINCE);
    response.producer_id = answer.producer_id.into();
    response.producer_epoch = answer.producer_epoch;
    response
}
