//! OffsetFetch v1-9: committed offsets of a group (-1 where none); from v2 a null topic list
//! asks for every partition the group has committed. v8+ asks for several groups at once
//! (at most [`limits::GROUPS_PER_REQUEST_MAX`]), v9+ names the consumer-group member
//! asking (KIP-848), checked as Kafka does (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
//! Commits not yet appended to the offsets log are not visible, and a transaction's offsets
//! only once it commits, so v7's `require_stable` is already what is served.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, FetchedOffset, TopicPartition};

use super::group_common::string;
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::limits;

/// One group's answer: a group-level error (v2+), and per partition its offset and error.
struct GroupAnswer {
    error_code: i16,
    partitions: Vec<(FetchedOffset, i16)>,
}

/// Answers OffsetFetch.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    if version < 8 {
        let partitions = request.topics.map(|topics| {
            topics
                .iter()
                .flat_map(|t| partitions_of(&t.name, &t.partition_indexes))
                .collect::<Vec<_>>()
        });
        let answer = fetch_group(ctx, string(&request.group_id.0), None, partitions).await;
        // v2+ carry a top-level error; v1 only per partition.
        response.error_code = answer.error_code;
        for (fetched, code) in answer.partitions {
            let code = if version < 2 && code == 0 {
                answer.error_code
            } else {
                code
            };
            push_topic(&mut response.topics, fetched, version, code);
        }
        return response;
    }
    for group in request
        .groups
        .into_iter()
        .take(limits::GROUPS_PER_REQUEST_MAX)
    {
        let partitions = group.topics.map(|topics| {
            topics
                .iter()
                .flat_map(|t| partitions_of(&t.name, &t.partition_indexes))
                .collect::<Vec<_>>()
        });
        // v9: a member id and epoch (a consumer-protocol member); none from others.
        let member = group
            .member_id
            .as_ref()
            .map(|id| (string(id), group.member_epoch))
            .filter(|(id, epoch)| !(id.is_empty() && *epoch < 0));
        let group_id = string(&group.group_id.0);
        let answer = fetch_group(ctx, group_id.clone(), member, partitions).await;
        let mut out = OffsetFetchResponseGroup::default();
        out.group_id = GroupId(StrBytes::from_string(group_id));
        out.error_code = answer.error_code;
        for (fetched, code) in answer.partitions {
            push_group_topic(&mut out.topics, fetched, code);
        }
        response.groups.push(out);
    }
    response
}

fn partitions_of<'a>(
    name: &'a TopicName,
    indexes: &'a [i32],
) -> impl Iterator<Item = TopicPartition> + 'a {
    let name = string(&name.0);
    indexes.iter().map(move |&partition| TopicPartition {
        topic: name.clone(),
        partition,
    })
}

/// Kafka's checks: DESCRIBE on the group, then DESCRIBE on each topic (a named topic
/// without it answers TOPIC_AUTHORIZATION_FAILED; "all topics" leaves it out).
async fn fetch_group(
    ctx: &Ctx<'_>,
    group: String,
    member: Option<(String, i32)>,
    partitions: Option<Vec<TopicPartition>>,
) -> GroupAnswer {
    let requested = partitions.clone();
    let fetched = if ctx.auth.group(AclOperation::Describe, &group) {
        ctx.groups
            .fetch_offsets(group, member, partitions)
            .await
            .map_or(Err(ErrorCode::CoordinatorNotAvailable.code()), |r| {
                r.map_err(|e| e.code())
            })
    } else {
        Err(ResponseError::GroupAuthorizationFailed.code())
    };
    let none = |tp| FetchedOffset {
        tp,
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
    };
    match fetched {
        Ok(offsets) => {
            let mut describable = std::collections::HashMap::new();
            let mut partitions = Vec::with_capacity(offsets.len());
            for offset in offsets {
                let allowed = *describable
                    .entry(offset.tp.topic.clone())
                    .or_insert_with(|| {
                        ctx.auth
                            .topic_or_view(ctx.topics, AclOperation::Describe, &offset.tp.topic)
                    });
                match (allowed, &requested) {
                    (true, _) => partitions.push((offset, 0)),
                    (false, Some(_)) => partitions.push((
                        none(offset.tp),
                        ResponseError::TopicAuthorizationFailed.code(),
                    )),
                    (false, None) => {}
                }
            }
            GroupAnswer {
                error_code: 0,
                partitions,
            }
        }
        Err(error_code) => GroupAnswer {
            error_code,
            partitions: requested
                .unwrap_or_default()
                .into_iter()
                .map(|tp| (none(tp), 0))
                .collect(),
        },
    }
}

fn push_topic(
    topics: &mut Vec<OffsetFetchResponseTopic>,
    fetched: FetchedOffset,
    version: i16,
    error_code: i16,
) {
    let mut partition = OffsetFetchResponsePartition::default();
    partition.partition_index = fetched.tp.partition;
    partition.committed_offset = fetched.offset;
    partition.committed_leader_epoch = if version >= 5 {
        fetched.leader_epoch
    } else {
        -1
    };
    partition.metadata = Some(StrBytes::from_string(fetched.metadata));
    partition.error_code = error_code;
    match topics.last_mut() {
        Some(topic) if topic.name.0.as_str() == fetched.tp.topic => {
            topic.partitions.push(partition)
        }
        _ => {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = TopicName(StrBytes::from_string(fetched.tp.topic));
            topic.partitions.push(partition);
            topics.push(topic);
        }
    }
}

fn push_group_topic(
    topics: &mut Vec<OffsetFetchResponseTopics>,
    fetched: FetchedOffset,
    error_code: i16,
) {
    let mut partition = OffsetFetchResponsePartitions::default();
    partition.partition_index = fetched.tp.partition;
    partition.committed_offset = fetched.offset;
    partition.committed_leader_epoch = fetched.leader_epoch;
    partition.metadata = Some(StrBytes::from_string(fetched.metadata));
    partition.error_code = error_code;
    match topics.last_mut() {
        Some(topic) if topic.name.0.as_str() == fetched.tp.topic => {
            topic.partitions.push(partition)
        }
        _ => {
            let mut topic = OffsetFetchResponseTopics::default();
            topic.name = TopicName(StrBytes::from_string(fetched.tp.topic));
            topic.partitions.push(partition);
            topics.push(topic);
        }
    }
}
