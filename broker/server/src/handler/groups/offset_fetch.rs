//! OffsetFetch v1-10: committed offsets of a group (-1 where none); from v2 a null topic list
//! asks for every partition the group has committed. v8+ asks for several groups at once
//! (at most [`limits::GROUPS_PER_REQUEST_MAX`]), v9+ names the consumer-group member
//! asking (KIP-848), checked as Kafka does (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
//! Commits not yet appended to the offsets log are not visible, and a transaction's offsets
//! only once it commits, so v7's `require_stable` is already what is served.
//!
//! v10 (KIP-848, vendored codec) names topics by id, in the request and the answer: an id no
//! topic (or view) has gets UNKNOWN_TOPIC_ID for its partitions (offset -1), not asked of the
//! coordinator, as Kafka's `handleOffsetFetchRequest` answers it.

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
use crate::handler::topic_ids::TopicIds;
use crate::limits;

/// The first version that names topics by id instead of by name.
const FIRST_TOPIC_ID: i16 = 10;

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
    let known = TopicIds::of(ctx.topics);
    let by_id = version >= FIRST_TOPIC_ID;
    for group in request
        .groups
        .into_iter()
        .take(limits::GROUPS_PER_REQUEST_MAX)
    {
        // v10: the topics whose ids no topic has, answered here.
        let mut unknown = Vec::new();
        let partitions = group.topics.map(|topics| {
            let mut partitions = Vec::new();
            for t in topics {
                let name = match by_id {
                    true => known.name(&t.topic_id),
                    false => Some(string(&t.name.0)),
                };
                match name {
                    Some(name) => partitions.extend(named(name, &t.partition_indexes)),
                    None => unknown.push(t),
                }
            }
            partitions
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
            let id = match by_id {
                true => known.id(&fetched.tp.topic),
                false => uuid::Uuid::nil(),
            };
            push_group_topic(&mut out.topics, fetched, id, code);
        }
        if answer.error_code == 0 {
            out.topics.extend(unknown.into_iter().map(unknown_topic_id));
        }
        response.groups.push(out);
    }
    response
}

fn partitions_of<'a>(
    name: &'a TopicName,
    indexes: &'a [i32],
) -> impl Iterator<Item = TopicPartition> + 'a {
    named(string(&name.0), indexes)
}

fn named(name: String, indexes: &[i32]) -> impl Iterator<Item = TopicPartition> + '_ {
    indexes.iter().map(move |&partition| TopicPartition {
        topic: name.clone(),
        partition,
    })
}

/// A v10 topic whose id no topic has: UNKNOWN_TOPIC_ID for each partition asked.
fn unknown_topic_id(
    topic: kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics,
) -> OffsetFetchResponseTopics {
    let mut out = OffsetFetchResponseTopics::default();
    out.topic_id = topic.topic_id;
    out.partitions = topic
        .partition_indexes
        .iter()
        .map(|&index| {
            let mut partition = OffsetFetchResponsePartitions::default();
            partition.partition_index = index;
            partition.committed_offset = -1;
            partition.committed_leader_epoch = -1;
            partition.metadata = Some(StrBytes::from_static_str(""));
            partition.error_code = ResponseError::UnknownTopicId.code();
            partition
        })
        .collect();
    out
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
    let fetched = if ctx.elsewhere(&group) {
        Err(ResponseError::NotCoordinator.code())
    } else if ctx.auth.group(AclOperation::Describe, &group) {
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

/// Adds a partition's answer, under its topic's name and id (the codec writes the one its
/// version has).
fn push_group_topic(
    topics: &mut Vec<OffsetFetchResponseTopics>,
    fetched: FetchedOffset,
    id: uuid::Uuid,
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
            topic.topic_id = id;
            topic.name = TopicName(StrBytes::from_string(fetched.tp.topic));
            topic.partitions.push(partition);
            topics.push(topic);
        }
    }
}
