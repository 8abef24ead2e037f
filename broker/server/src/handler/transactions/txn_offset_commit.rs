//! TxnOffsetCommit v0-v6: a transaction's consumer offsets (`send_offsets_to_transaction`),
//! held by the transaction coordinator and handed to the group coordinator when the
//! transaction commits (dropped if it aborts). WRITE on the transactional id, READ on the
//! group and on each topic; a partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION,
//! metadata over the group coordinator's limit OFFSET_METADATA_TOO_LARGE, and the rest of
//! the request is not attempted (the offsets of one request are one unit).
//!
//! v3 (flexible, KIP-447) carries the consumer's member id, generation and instance id,
//! checked against the group as the request arrives, as Kafka's group coordinator does
//! (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID): a zombie of a
//! consume-transform-produce application cannot commit for partitions its group handed on.
//! v0-v2's none (generation -1, no member) is allowed. v4 (KIP-890) answers a group not
//! added to an ongoing transaction TRANSACTION_ABORTABLE where v0-v3 answer
//! INVALID_TXN_STATE, as Kafka's verification does. v5 is the transaction protocol v2
//! (KIP-890 part 2): the commit adds its group to the transaction (no AddOffsetsToTxn),
//! starting one if none is open.
//!
//! v6 (KIP-1319, vendored codec) names topics by id, in the request and the answer: an id no
//! topic (or view) has is UNKNOWN_TOPIC_ID for its partitions (and, the offsets of one request
//! being one unit, the rest are not attempted).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use sluice_group::TxnOffsetCommitMember;
use sluice_security::acl::AclOperation;
use sluice_txn::{ErrorCode, PendingOffset, TopicPartition, TxnProtocol};

use super::Ctx;
use super::txn_common::{UNAVAILABLE, call, producer, transactional_id_denied, wire_code};
use crate::handler::topic_ids::TopicIds;

/// TxnOffsetCommit answers INVALID_PRODUCER_EPOCH for a fenced producer in every version
/// served here.
const FENCED_SINCE: i16 = i16::MAX;

/// From this version a group not in the ongoing transaction is TRANSACTION_ABORTABLE
/// (KIP-890), before it INVALID_TXN_STATE.
const ABORTABLE_SINCE: i16 = 4;

/// The first version of the transaction protocol v2 (KIP-890 part 2).
const PROTOCOL_V2_SINCE: i16 = 5;

/// The first version that names topics by id instead of by name (KIP-1319).
const FIRST_TOPIC_ID: i16 = 6;

/// Answers TxnOffsetCommit.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let id = request.transactional_id.0.as_str();
    let group = request.group_id.0.as_str();
    let mut offsets = Vec::new();
    // The group's coordinator answers it (in a cluster the transaction's may be another
    // broker: `hold` hands the offsets there), so only the right is checked here.
    let mut refused = transactional_id_denied(ctx, AclOperation::Write, id);
    if refused.is_none() && !ctx.auth.group(AclOperation::Read, group) {
        refused = Some(ResponseError::GroupAuthorizationFailed.code());
    }
    // Per partition: its topic's name and id, and the error it is answered with here, if any.
    let mut answered: Vec<(String, uuid::Uuid, i32, Option<i16>)> = Vec::new();
    // The group coordinator's limit, checked now: past it the commit could not write them.
    let metadata_max = ctx.config.group_config().offset_metadata_max_bytes;
    let known = TopicIds::of(ctx.topics);
    for topic in &request.topics {
        // v6: the name of the id, if a topic (or view) has it.
        let (name, id_known) = match version >= FIRST_TOPIC_ID {
            true => known
                .name(&topic.topic_id)
                .map_or((String::new(), false), |name| (name, true)),
            false => (topic.name.0.to_string(), true),
        };
        let name = name.as_str();
        let readable = ctx.auth.topic_or_view(ctx.topics, AclOperation::Read, name);
        for p in &topic.partitions {
            let metadata_len = p.committed_metadata.as_ref().map_or(0, |m| m.len());
            let error = if !id_known {
                Some(ResponseError::UnknownTopicId.code())
            } else if !readable {
                Some(ResponseError::TopicAuthorizationFailed.code())
            } else if ctx.topics.read_partition(name, p.partition_index).is_none() {
                Some(ResponseError::UnknownTopicOrPartition.code())
            } else if metadata_len > metadata_max {
                Some(ResponseError::OffsetMetadataTooLarge.code())
            } else {
                None
            };
            answered.push((name.to_owned(), topic.topic_id, p.partition_index, error));
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
    let partition_refused = answered.iter().any(|(.., e)| e.is_some());
    let code = match refused {
        Some(code) => code,
        None if partition_refused => ResponseError::OperationNotAttempted.code(),
        None if offsets.is_empty() => 0,
        None => hold(ctx, &request, offsets, version).await,
    };
    let mut response = TxnOffsetCommitResponse::default();
    for (name, id, partition, error) in answered {
        let mut out = TxnOffsetCommitResponsePartition::default();
        out.partition_index = partition;
        out.error_code = error.unwrap_or(code);
        match response.topics.last_mut() {
            Some(topic) if topic.name.0.as_str() == name && topic.topic_id == id => {
                topic.partitions.push(out)
            }
            _ => {
                let mut topic = TxnOffsetCommitResponseTopic::default();
                topic.topic_id = id;
                topic.name = kafka_protocol::messages::TopicName(name.into());
                topic.partitions.push(out);
                response.topics.push(topic);
            }
        }
    }
    response
}

/// Checks the request's member fields with the group coordinator, then hands the offsets to
/// the transaction coordinator; the error code for every partition.
async fn hold(
    ctx: &Ctx<'_>,
    request: &TxnOffsetCommitRequest,
    offsets: Vec<PendingOffset>,
    version: i16,
) -> i16 {
    let group = request.group_id.0.to_string();
    let member = TxnOffsetCommitMember {
        group_id: group.clone(),
        generation_id: request.generation_id_or_member_epoch,
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.as_ref().map(ToString::to_string),
    };
    let partitions = offsets.iter().map(crate::txn::group_offset).collect();
    match call(ctx, ctx.groups.check_txn_offset_commit(member, partitions)).await {
        Some(Ok(())) => {}
        Some(Err(code)) => return code.code(),
        None => return UNAVAILABLE,
    }
    let txn = producer(
        request.transactional_id.0.as_str(),
        request.producer_id.0,
        request.producer_epoch,
    );
    let protocol = match version >= PROTOCOL_V2_SINCE {
        true => TxnProtocol::V2,
        false => TxnProtocol::V1,
    };
    let coordinator = ctx.kraft.and_then(|k| {
        let node = k.coordinator_node(
            crate::kraft::CoordinatorKind::Transaction,
            request.transactional_id.0.as_str(),
        );
        (node != Some(k.node_id())).then_some((k, node))
    });
    let held = match coordinator {
        None => call(ctx, ctx.txns.commit_offsets(txn, group, offsets, protocol)).await,
        Some((_, None)) => Some(ErrorCode::CoordinatorNotAvailable),
        Some((kraft, Some(node))) => {
            let message = crate::cluster::BrokerMessage::HoldTxnOffsets {
                transactional_id: txn.transactional_id,
                producer_id: txn.producer_id,
                producer_epoch: txn.producer_epoch,
                group_id: group,
                offsets: offsets.iter().map(crate::txn::peers::wire_offset).collect(),
                protocol_v2: protocol == TxnProtocol::V2,
            };
            match kraft.message(node, &message).await {
                Ok(code) => {
                    Some(ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError))
                }
                Err(e) => {
                    tracing::warn!(coordinator = node, error = %e, "handing a transaction's offsets to its coordinator failed");
                    Some(ErrorCode::CoordinatorNotAvailable)
                }
            }
        }
    };
    match held {
        Some(ErrorCode::InvalidTxnState) if version >= ABORTABLE_SINCE => {
            ErrorCode::TransactionAbortable.code()
        }
        Some(code) => wire_code(code, version, FENCED_SINCE),
        None => UNAVAILABLE,
    }
}
