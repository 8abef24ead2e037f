//! AddOffsetsToTxn v0-v4: a consumer group joins the transaction, so TxnOffsetCommit may
//! hold offsets for it until the commit (`send_offsets_to_transaction`). WRITE on the
//! transactional id, READ on the group. v3 is v2, flexible; v4 (KIP-890) lets the
//! coordinator answer TRANSACTION_ABORTABLE, which Kafka's does not send here either: its
//! answers are v3's. Clients of the transaction protocol v2 do not send it (TxnOffsetCommit
//! v5 adds the group).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use sluice_security::acl::AclOperation;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, refuse_transactional_id, wire_code};

/// The first AddOffsetsToTxn version that answers PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;

/// Answers AddOffsetsToTxn.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let mut response = AddOffsetsToTxnResponse::default();
    let id = request.transactional_id.0.as_str();
    let group = request.group_id.0.as_str();
    if let Some(code) = refuse_transactional_id(ctx, AclOperation::Write, id) {
        response.error_code = code;
        return response;
    }
    if !ctx.auth.group(AclOperation::Read, group) {
        response.error_code = ResponseError::GroupAuthorizationFailed.code();
        return response;
    }
    let txn = producer(id, request.producer_id.0, request.producer_epoch);
    response.error_code = match call(ctx, ctx.txns.add_offsets(txn, group.to_owned())).await {
        Some(code) => wire_code(code, version, FENCED_SINCE),
        None => UNAVAILABLE,
    };
    response
}
