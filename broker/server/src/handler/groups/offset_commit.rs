//! OffsetCommit v1-7 (v1 rewritten to v2 by `compat`): partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION here; the
//! rest go to the coordinator, which checks the member and generation and answers once the
//! records are appended to the offsets log (fsynced under `sluice.acks.all.fsync`).
//! `retention_time_ms` (v2-4) and v1's per-partition `commit_timestamp` are ignored, as Kafka does since 2.1 (`offsets.retention.minutes`
//! applies).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use sluice_group::{CommitPartition, ErrorCode, Request, Response, TopicPartition};

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;

/// Answers OffsetCommit.
pub async fn handle(ctx: &Ctx<'_>, request: OffsetCommitRequest) -> OffsetCommitResponse {
    // Every requested partition in request order, and the error it is answered with here
    // (None: the coordinator answers it): GROUP_AUTHORIZATION_FAILED for all without READ
    // on the group, TOPIC_AUTHORIZATION_FAILED without READ on the topic (Kafka's checks),
    // UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
    let group_allowed = ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str());
    let mut answered: Vec<(TopicPartition, Option<i16>)> = Vec::new();
    let mut partitions = Vec::new();
    for topic in &request.topics {
        let name = string(&topic.name.0);
        let topic_allowed = group_allowed
            && ctx
                .auth
                .topic_or_view(ctx.topics, AclOperation::Read, &name);
        for p in &topic.partitions {
            let tp = TopicPartition {
                topic: name.clone(),
                partition: p.partition_index,
            };
            let refused = if !group_allowed {
                Some(ResponseError::GroupAuthorizationFailed)
            } else if !topic_allowed {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if ctx
                .topics
                .read_partition(&name, p.partition_index)
                .is_none()
            {
                Some(ResponseError::UnknownTopicOrPartition)
            } else {
                None
            };
            if let Some(error) = refused {
                answered.push((tp, Some(error.code())));
                continue;
            }
            answered.push((tp.clone(), None));
            partitions.push(CommitPartition {
                tp,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: opt_string(p.committed_metadata.as_ref()),
            });
        }
    }
    let mut results = std::collections::VecDeque::new();
    if !partitions.is_empty() {
        let count = partitions.len();
        let commit = sluice_group::OffsetCommitRequest {
            group_id: string(&request.group_id.0),
            generation_id: request.generation_id_or_member_epoch,
            member_id: string(&request.member_id),
            group_instance_id: opt_string(request.group_instance_id.as_ref()),
            partitions,
        };
        match call(ctx, Request::OffsetCommit(commit)).await {
            Some(Response::OffsetCommit(committed)) => {
                results.extend(committed.partitions.into_iter().map(|r| r.error.code()));
            }
            _ => results.extend(std::iter::repeat_n(
                ErrorCode::CoordinatorNotAvailable.code(),
                count,
            )),
        }
    }
    let mut response = OffsetCommitResponse::default();
    for (tp, answer) in answered {
        let code = answer.unwrap_or_else(|| {
            results
                .pop_front()
                .unwrap_or(ErrorCode::UnknownServerError.code())
        });
        push(&mut response, tp, code);
    }
    response
}

fn push(response: &mut OffsetCommitResponse, tp: TopicPartition, error_code: i16) {
    let mut partition = OffsetCommitResponsePartition::default();
    partition.partition_index = tp.partition;
    partition.error_code = error_code;
    match response.topics.last_mut() {
        Some(topic) if topic.name.0.as_str() == tp.topic => topic.partitions.push(partition),
        _ => {
            let mut topic = OffsetCommitResponseTopic::default();
            topic.name = kafka_protocol::messages::TopicName(tp.topic.into());
            topic.partitions.push(partition);
            response.topics.push(topic);
        }
    }
}
