//! AddPartitionsToTxn v0-v5: partitions join the producer's transaction before it writes
//! to them. v0-v3 carry one transaction; v4 (KIP-890, sent by brokers) batches several and
//! may only verify (`verify_only`) that partitions are already in their transactions; v5 is
//! v4 for a broker that takes TRANSACTION_ABORTABLE, which v4's verification already answers
//! here, as Kafka's coordinator does at every version.
//!
//! Checked here first, as Kafka does: WRITE on the transactional id (else every partition
//! gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic
//! (TOPIC_AUTHORIZATION_FAILED) and that each partition exists (UNKNOWN_TOPIC_OR_PARTITION);
//! when any partition is refused the others get OPERATION_NOT_ATTEMPTED and nothing is
//! added. v4-v5 need CLUSTER_ACTION on the cluster (it is the brokers' form); its verify-only
//! answers are Kafka's (`Coordinator::verify_partitions`: TRANSACTION_ABORTABLE for a
//! partition not in the transaction). Produce verifies in-process (`crate::txn::verify`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use sluice_security::acl::AclOperation;
use sluice_txn::TopicPartition;

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, refuse_transactional_id, wire_code};

/// The first AddPartitionsToTxn version that answers PRODUCER_FENCED (KIP-588).
const FENCED_SINCE: i16 = 2;
/// The first batched version (KIP-890).
const BATCHED_SINCE: i16 = 4;

/// Answers AddPartitionsToTxn.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut response = AddPartitionsToTxnResponse::default();
    if version < BATCHED_SINCE {
        let mut one = AddPartitionsToTxnTransaction::default();
        one.transactional_id = request.v3_and_below_transactional_id;
        one.producer_id = request.v3_and_below_producer_id;
        one.producer_epoch = request.v3_and_below_producer_epoch;
        one.topics = request.v3_and_below_topics;
        response.results_by_topic_v3_and_below = transaction(ctx, one, version).await.topic_results;
        return response;
    }
    if !ctx.auth.cluster(AclOperation::ClusterAction) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return response;
    }
    for txn in request.transactions {
        response
            .results_by_transaction
            .push(transaction(ctx, txn, version).await);
    }
    response
}

/// One transaction's partitions: checked, then added (or verified).
async fn transaction(
    ctx: &Ctx<'_>,
    txn: AddPartitionsToTxnTransaction,
    version: i16,
) -> AddPartitionsToTxnResult {
    let id = txn.transactional_id.0.as_str();
    let mut checked: Vec<(TopicPartition, Option<i16>)> = Vec::new();
    let id_refused = refuse_transactional_id(ctx, AclOperation::Write, id);
    for topic in &txn.topics {
        check_topic(ctx, topic, id_refused, &mut checked);
    }
    let any_refused = checked.iter().any(|(_, e)| e.is_some());
    let partitions: Vec<TopicPartition> = checked.iter().map(|(tp, _)| tp.clone()).collect();
    let who = producer(id, txn.producer_id.0, txn.producer_epoch);
    let codes: Vec<i16> = if any_refused {
        let not_attempted = ResponseError::OperationNotAttempted.code();
        checked
            .iter()
            .map(|(_, e)| e.unwrap_or(not_attempted))
            .collect()
    } else if partitions.is_empty() {
        Vec::new()
    } else if txn.verify_only {
        match call(ctx, ctx.txns.verify_partitions(who, partitions)).await {
            Some(Ok(verified)) => checked
                .iter()
                .map(|(tp, _)| {
                    let found = verified.iter().find(|v| &v.tp == tp);
                    found.map_or(ResponseError::TransactionAbortable.code(), |v| {
                        v.error.code()
                    })
                })
                .collect(),
            Some(Err(code)) => vec![wire_code(code, version, FENCED_SINCE); checked.len()],
            None => vec![UNAVAILABLE; checked.len()],
        }
    } else {
        let code = match call(ctx, ctx.txns.add_partitions(who, partitions)).await {
            Some(code) => wire_code(code, version, FENCED_SINCE),
            None => UNAVAILABLE,
        };
        vec![code; checked.len()]
    };
    let mut result = AddPartitionsToTxnResult::default();
    result.transactional_id = txn.transactional_id;
    for ((tp, _), code) in checked.into_iter().zip(codes) {
        let mut out = AddPartitionsToTxnPartitionResult::default();
        out.partition_index = tp.partition;
        out.partition_error_code = code;
        match result.topic_results.last_mut() {
            Some(topic) if topic.name.0.as_str() == tp.topic => {
                topic.results_by_partition.push(out);
            }
            _ => {
                let mut topic = AddPartitionsToTxnTopicResult::default();
                topic.name = kafka_protocol::messages::TopicName(tp.topic.into());
                topic.results_by_partition.push(out);
                result.topic_results.push(topic);
            }
        }
    }
    result
}

/// Each partition of `topic` with the error it is refused with here, if any.
fn check_topic(
    ctx: &Ctx<'_>,
    topic: &AddPartitionsToTxnTopic,
    id_refused: Option<i16>,
    out: &mut Vec<(TopicPartition, Option<i16>)>,
) {
    let name = topic.name.0.as_str();
    let writable = ctx.auth.topic(AclOperation::Write, name);
    for &partition in &topic.partitions {
        let error = if id_refused.is_some() {
            id_refused
        } else if !writable {
            Some(ResponseError::TopicAuthorizationFailed.code())
        } else if ctx.topics.partition(name, partition).is_none() {
            Some(ResponseError::UnknownTopicOrPartition.code())
        } else {
            None
        };
        let tp = TopicPartition {
            topic: name.to_owned(),
            partition,
        };
        out.push((tp, error));
    }
}
