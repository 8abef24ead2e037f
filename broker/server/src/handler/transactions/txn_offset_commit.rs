//! TxnOffsetCommit v0-v2: a transaction's consumer offsets (`send_offsets_to_transaction`),
//! held by the transaction coordinator and handed to the group coordinator when the
//! transaction commits (dropped if it aborts). WRITE on the transactional id, READ on the
//! group and on each topic; a partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION,
//! metadata over the group coordinator's limit OFFSET_METADATA_TOO_LARGE, and the rest of
//! the request is not attempted (the offsets of one request are one unit).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use sluice_security::acl::AclOperation;
use sluice_txn::{PendingOffset, TopicPartition};

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, refuse_transactional_id, wire_code};

/// TxnOffsetCommit answers INVALID_PRODUCER_EPOCH for a fenced producer in every version
/// served here.
const FENCED_SINCE: i16 = i16::MAX;

/// Answers TxnOffsetCommit.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let id = request.transactional_id.0.as_str();
    let group = request.group_id.0.as_str();
    let mut offsets = Vec::new();
    let mut refused = refuse_transactional_id(ctx, AclOperation::Write, id);
    if refused.is_none() && !ctx.auth.group(AclOperation::Read, group) {
        refused = Some(ResponseError::GroupAuthorizationFailed.code());
    }
    // Per partition: the error it is answered with here, if any.
    let mut answered: Vec<(&str, i32, Option<i16>)> = Vec::new();
    // The group coordinator's limit, checked now: past it the commit could not write them.
    let metadata_max = ctx.config.group_config().offset_metadata_max_bytes;
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let readable = ctx.auth.topic_or_view(ctx.topics, AclOperation::Read, name);
        for p in &topic.partitions {
            let metadata_len = p.committed_metadata.as_ref().map_or(0, |m| m.len());
            let error = if !readable {
                Some(ResponseError::TopicAuthorizationFailed.code())
            } else if ctx.topics.read_partition(name, p.partition_index).is_none() {
                Some(ResponseError::UnknownTopicOrPartition.code())
            } else if metadata_len > metadata_max {
                Some(ResponseError::OffsetMetadataTooLarge.code())
            } else {
                None
            };
            answered.push((name, p.partition_index, error));
            offsets.push(PendingOffset {
                tp: TopicPartition {
                    topic: name.to_owned(),
                    partition: p.partition_index,
                },
                committed_offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(ToString::to_string),
            });
        }
    }
    let partition_refused = answered.iter().any(|(_, _, e)| e.is_some());
    let code = match refused {
        Some(code) => code,
        None if partition_refused => ResponseError::OperationNotAttempted.code(),
        None if offsets.is_empty() => 0,
        None => {
            let txn = producer(id, request.producer_id.0, request.producer_epoch);
            let held = ctx.txns.commit_offsets(txn, group.to_owned(), offsets);
            match call(ctx, held).await {
                Some(code) => wire_code(code, version, FENCED_SINCE),
                None => UNAVAILABLE,
            }
        }
    };
    let mut response = TxnOffsetCommitResponse::default();
    for (name, partition, error) in answered {
        let mut out = TxnOffsetCommitResponsePartition::default();
        out.partition_index = partition;
        out.error_code = error.unwrap_or(code);
        match response.topics.last_mut() {
            Some(topic) if topic.name.0.as_str() == name => topic.partitions.push(out),
            _ => {
                let mut topic = TxnOffsetCommitResponseTopic::default();
                topic.name = kafka_protocol::messages::TopicName(name.to_owned().into());
                topic.partitions.push(out);
                response.topics.push(topic);
            }
        }
    }
    response
}
