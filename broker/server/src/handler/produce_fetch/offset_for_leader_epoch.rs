//! OffsetForLeaderEpoch v2-v4 (v4 flexible; KIP-101, KIP-320): for each partition, the
//! largest leader epoch at or below the one asked that this log knows, and the offset where
//! it ended (the next epoch's first offset, or the log end for the current epoch; -1/-1 for
//! an epoch newer than any here). Consumers ask after a leader epoch change, with the epoch
//! of their position, and treat an end offset below their position as a truncation of the
//! log (they then reset to it). `current_leader_epoch` (v2+) is checked like Fetch's
//! (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). DESCRIBE on the topic, as for ListOffsets
//! (TOPIC_AUTHORIZATION_FAILED; on a view, DESCRIBE on the view and its owner's READ on the
//! source, `authz::read_through`); unknown partitions are UNKNOWN_TOPIC_OR_PARTITION.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::topics::TopicRegistry;

/// Answers OffsetForLeaderEpoch.
pub fn handle(ctx: &Ctx<'_>, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    response.topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.topic.0.as_str();
            let allowed = ctx
                .auth
                .read_through(ctx.topics, AclOperation::Describe, name);
            let mut out = OffsetForLeaderTopicResult::default();
            out.partitions = topic
                .partitions
                .iter()
                .map(|p| match allowed {
                    true => end_offset(ctx.topics, name, p),
                    false => refused(p.partition, ResponseError::TopicAuthorizationFailed),
                })
                .collect();
            out.topic = topic.topic;
            out
        })
        .collect();
    response
}

fn refused(index: i32, error: ResponseError) -> EpochEndOffset {
    let mut out = EpochEndOffset::default();
    out.partition = index;
    out.leader_epoch = -1;
    out.end_offset = -1;
    out.error_code = error.code();
    out
}

fn end_offset(
    topics: &TopicRegistry,
    topic: &str,
    asked: &OffsetForLeaderPartition,
) -> EpochEndOffset {
    let Some((partition, _)) = topics.read_partition(topic, asked.partition) else {
        return refused(asked.partition, ResponseError::UnknownTopicOrPartition);
    };
    if let Err(error) = partition.check_leader() {
        return refused(asked.partition, error.code);
    }
    if let Err(error) = partition.check_leader_epoch(asked.current_leader_epoch) {
        return refused(asked.partition, error);
    }
    match partition.with_log(|log| log.end_offset_for_leader_epoch(asked.leader_epoch)) {
        Ok((leader_epoch, end_offset)) => {
            let mut out = refused(asked.partition, ResponseError::UnknownServerError);
            out.error_code = 0;
            out.leader_epoch = leader_epoch;
            out.end_offset = end_offset;
            out
        }
        Err(e) => refused(asked.partition, e.code),
    }
}
