//! EndTxn v0-v4: commit or abort the producer's transaction. Answered once the decision is
//! in the transaction log and the markers are written to every partition of the
//! transaction (`crate::txn`), so a read_committed consumer sees the commit when the
//! producer's `commit_transaction` returns. WRITE on the transactional id.
//!
//! v3 is v2, flexible. v4 (KIP-890) lets the coordinator answer TRANSACTION_ABORTABLE, which
//! Kafka's coordinator does not send for EndTxn either: its answers are v3's. v5 bumps the
//! epoch with every transaction (transaction version 2, KIP-890 part 2), which this broker
//! does not finalize: clients do not send it here.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use sluice_security::acl::AclOperation;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, refuse_transactional_id, wire_code};

/// The first EndTxn version that answers PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;

/// Answers EndTxn.
pub async fn handle(ctx: &Ctx<'_>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let mut response = EndTxnResponse::default();
    let id = request.transactional_id.0.as_str();
    if let Some(code) = refuse_transactional_id(ctx, AclOperation::Write, id) {
        response.error_code = code;
        return response;
    }
    let txn = producer(id, request.producer_id.0, request.producer_epoch);
    response.error_code = match call(ctx, ctx.txns.end_txn(txn, request.committed)).await {
        Some(code) => wire_code(code, version, FENCED_SINCE),
        None => UNAVAILABLE,
    };
    response
}
