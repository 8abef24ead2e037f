//! DescribeTransactions v0 (KIP-664): each transactional id's state, timeout, start time,
//! producer id and epoch, and its partitions. DESCRIBE on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the principal may not
//! DESCRIBE are left out, as Kafka does. An unknown id is TRANSACTIONAL_ID_NOT_FOUND.

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_txn::{ErrorCode, TxnDescription};

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, refuse_transactional_id};

/// Answers DescribeTransactions.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let ids: Vec<String> = request
        .transactional_ids
        .iter()
        .map(|id| id.0.to_string())
        .collect();
    let refused: Vec<Option<i16>> = ids
        .iter()
        .map(|id| refuse_transactional_id(ctx, AclOperation::Describe, id))
        .collect();
    let wanted: Vec<String> = ids
        .iter()
        .zip(&refused)
        .filter(|(_, r)| r.is_none())
        .map(|(id, _)| id.clone())
        .collect();
    let described = match wanted.is_empty() {
        true => Some(Vec::new()),
        false => call(ctx, ctx.txns.describe(wanted)).await,
    };
    let mut described = described.map(Vec::into_iter);
    let mut response = DescribeTransactionsResponse::default();
    for (id, refused) in request.transactional_ids.into_iter().zip(refused) {
        let mut state = TransactionState::default();
        state.producer_id = ProducerId(-1);
        state.producer_epoch = -1;
        state.transaction_start_time_ms = -1;
        match (refused, described.as_mut().map(Iterator::next)) {
            (Some(code), _) => state.error_code = code,
            (None, None) => state.error_code = UNAVAILABLE,
            (None, Some(Some(Some(d)))) => fill(ctx, &mut state, d),
            (None, Some(_)) => state.error_code = ErrorCode::TransactionalIdNotFound.code(),
        }
        state.transactional_id = id;
        response.transaction_states.push(state);
    }
    response
}

fn fill(ctx: &Ctx<'_>, state: &mut TransactionState, d: TxnDescription) {
    state.transaction_state = StrBytes::from_static_str(d.state);
    state.transaction_timeout_ms = d.timeout_ms;
    state.transaction_start_time_ms = d.txn_start_ms;
    state.producer_id = ProducerId(d.producer_id.0);
    state.producer_epoch = d.producer_epoch;
    for tp in d.partitions {
        if !ctx.auth.topic(AclOperation::Describe, &tp.topic) {
            continue;
        }
        match state.topics.last_mut() {
            Some(topic) if topic.topic.0.as_str() == tp.topic => {
                topic.partitions.push(tp.partition)
            }
            _ => {
                let mut topic = TopicData::default();
                topic.topic = TopicName(tp.topic.into());
                topic.partitions.push(tp.partition);
                state.topics.push(topic);
            }
        }
    }
}
