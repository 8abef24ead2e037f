//! ListTransactions v0 (KIP-664): the transactional ids the coordinator knows, filtered by
//! state and producer id; only ids the principal may DESCRIBE are listed. State filters that
//! name no state are echoed in `unknown_state_filters`, as Kafka does.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_txn::TxnState;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, refuse_transactional_id};

/// Answers ListTransactions.
pub async fn handle(ctx: &Ctx<'_>, request: ListTransactionsRequest) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for filter in request.state_filters {
        match TxnState::from_name(filter.as_str()) {
            Some(state) => states.push(state),
            None => response.unknown_state_filters.push(filter),
        }
    }
    // Every filter names an unknown state: nothing can match.
    if states.is_empty() && !response.unknown_state_filters.is_empty() {
        return response;
    }
    let producer_ids = request.producer_id_filters.iter().map(|p| p.0).collect();
    let Some(listed) = call(ctx, ctx.txns.list(states, producer_ids)).await else {
        response.error_code = UNAVAILABLE;
        return response;
    };
    for txn in listed {
        if refuse_transactional_id(ctx, AclOperation::Describe, &txn.transactional_id).is_some() {
            continue;
        }
        let mut state = TransactionState::default();
        state.transactional_id = TransactionalId(StrBytes::from_string(txn.transactional_id));
        state.producer_id = ProducerId(txn.producer_id.0);
        state.transaction_state = StrBytes::from_static_str(txn.state);
        response.transaction_states.push(state);
    }
    response
}
