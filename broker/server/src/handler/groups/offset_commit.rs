//! OffsetCommit v1-10 (v1 rewritten to v2 by `compat`): partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION here; the
//! rest go to the coordinator, which checks the member and generation and answers once the
//! records are appended to the offsets log (fsynced under `sluice.acks.all.fsync`).
//! `retention_time_ms` (v2-4) and v1's per-partition `commit_timestamp` are ignored, as Kafka does since 2.1 (`offsets.retention.minutes`
//! applies).
//!
//! v10 (KIP-848, vendored codec) names topics by id, answered by id: an id no topic (or view)
//! has gets UNKNOWN_TOPIC_ID for its partitions, checked after READ on the group and before
//! READ on the topic, as Kafka's `handleOffsetCommitRequest` orders them.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
use sluice_group::{CommitPartition, ErrorCode, Request, Response, TopicPartition};
use uuid::Uuid;

use super::group_common::{call, opt_string, string};
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::handler::topic_ids::TopicIds;

/// The first version that names topics by id instead of by name.
const FIRST_TOPIC_ID: i16 = 10;

/// Answers OffsetCommit.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    // Every requested partition in request order, and the error it is answered with here
    // (None: the coordinator answers it): GROUP_AUTHORIZATION_FAILED for all without READ
    // on the group, TOPIC_AUTHORIZATION_FAILED without READ on the topic (Kafka's checks),
    // UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
    let group_allowed = ctx
        .auth
        .group(AclOperation::Read, request.group_id.0.as_str());
    let mut answered: Vec<(TopicPartition, Uuid, Option<i16>)> = Vec::new();
    let mut partitions = Vec::new();
    let known = TopicIds::of(ctx.topics);
    for topic in &request.topics {
        let (name, id_known) = topic_name(&known, topic, version);
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
            } else if ctx.elsewhere(request.group_id.0.as_str()) {
                Some(ResponseError::NotCoordinator)
            } else if !id_known {
                Some(ResponseError::UnknownTopicId)
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
                answered.push((tp, topic.topic_id, Some(error.code())));
                continue;
            }
            answered.push((tp.clone(), topic.topic_id, None));
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
    for (tp, id, answer) in answered {
        let code = answer.unwrap_or_else(|| {
            results
                .pop_front()
                .unwrap_or(ErrorCode::UnknownServerError.code())
        });
        push(&mut response, tp, id, code);
    }
    response
}

/// The topic's name and whether it is known: from v10 the name of its id, if a topic (or
/// view) has it.
fn topic_name(
    known: &TopicIds<'_>,
    topic: &OffsetCommitRequestTopic,
    version: i16,
) -> (String, bool) {
    if version < FIRST_TOPIC_ID {
        return (string(&topic.name.0), true);
    }
    known
        .name(&topic.topic_id)
        .map_or((String::new(), false), |name| (name, true))
}

/// Adds a partition's answer, under its topic's name and id (the codec writes the one its
/// version has).
fn push(response: &mut OffsetCommitResponse, tp: TopicPartition, id: Uuid, error_code: i16) {
    let mut partition = OffsetCommitResponsePartition::default();
    partition.partition_index = tp.partition;
    partition.error_code = error_code;
    match response.topics.last_mut() {
        Some(topic) if topic.name.0.as_str() == tp.topic && topic.topic_id == id => {
            topic.partitions.push(partition)
        }
        _ => {
            let mut topic = OffsetCommitResponseTopic::default();
            topic.topic_id = id;
            topic.name = kafka_protocol::messages::TopicName(tp.topic.into());
            topic.partitions.push(partition);
            response.topics.push(topic);
        }
    }
}
