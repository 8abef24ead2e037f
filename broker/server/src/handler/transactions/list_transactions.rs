//! ListTransactions v0-v2 (KIP-664): the transactional ids the coordinator knows, filtered by
//! state and producer id; only ids the principal may DESCRIBE are listed. State filters that
//! name no state are echoed in `unknown_state_filters`, as Kafka does. v1's duration filter
//! (KIP-994) keeps the ids whose transaction has run longer than it (Kafka's test: now minus
//! the transaction's start above the filter; -1 lists all); v2's transactional id pattern
//! (KIP-1152) keeps the ids it matches as a whole, a regex compiled within
//! `TRANSACTIONAL_ID_PATTERN_PROGRAM_BYTES_MAX` (INVALID_REGULAR_EXPRESSION otherwise; empty
//! or null: no filter).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_txn::TxnState;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, refuse_transactional_id};
use crate::limits;

/// Answers ListTransactions.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: ListTransactionsRequest,
    now_ms: i64,
) -> ListTransactionsResponse {
    let mut response = ListTransactionsResponse::default();
    let pattern = match id_pattern(request.transactional_id_pattern.as_deref()) {
        Ok(pattern) => pattern,
        Err(message) => {
            response.error_code = ResponseError::InvalidRegularExpression.code();
            tracing::debug!(%message, "ListTransactions pattern refused");
            return response;
        }
    };
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
    let duration_ms = request.duration_filter;
    for txn in listed {
        // Kafka's `filterDurationMs >= 0 && now - txnStartTimestamp <= filterDurationMs`.
        if duration_ms >= 0 && now_ms.saturating_sub(txn.txn_start_ms) <= duration_ms {
            continue;
        }
        if pattern
            .as_ref()
            .is_some_and(|p| !p.is_match(&txn.transactional_id))
        {
            continue;
        }
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

/// v2's pattern, anchored (Java's `Matcher.matches`): `None` for none or an empty one.
fn id_pattern(pattern: Option<&str>) -> Result<Option<regex::Regex>, String> {
    let Some(pattern) = pattern.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(limits::TRANSACTIONAL_ID_PATTERN_PROGRAM_BYTES_MAX)
        .build()
        .map(Some)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::id_pattern;

    #[test]
    fn the_pattern_matches_whole_ids_and_refuses_bad_or_huge_regexes() {
        let pattern = id_pattern(Some("app-.*")).unwrap().unwrap();
        assert!(pattern.is_match("app-1") && !pattern.is_match("my-app-1"));
        assert!(id_pattern(Some("")).unwrap().is_none());
        assert!(id_pattern(None).unwrap().is_none());
        assert!(id_pattern(Some("(unclosed")).is_err());
        assert!(
            id_pattern(Some("(a{1000}){1000}")).is_err(),
            "over the program bound"
        );
    }
}
