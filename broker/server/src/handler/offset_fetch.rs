//! OffsetFetch v1-5: committed offsets of a group (-1 where none); from v2 a null topic list
//! asks for every partition the group has committed. Commits not yet appended to the
//! offsets log are not visible.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, FetchedOffset, TopicPartition};

use super::group_common::string;
use sluice_security::acl::AclOperation;

use crate::authz;
use crate::wire::ConnectionContext;

/// Answers OffsetFetch.
pub async fn handle(
    ctx: &ConnectionContext,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let partitions = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                let name = string(&t.name.0);
                t.partition_indexes
                    .iter()
                    .map(move |&partition| TopicPartition {
                        topic: name.clone(),
                        partition,
                    })
            })
            .collect::<Vec<_>>()
    });
    let requested = partitions.clone();
    let group = string(&request.group_id.0);
    // Kafka's checks: DESCRIBE on the group, then DESCRIBE on each topic.
    let fetched = if authz::group(ctx, AclOperation::Describe, &group) {
        ctx.groups
            .fetch_offsets(group, partitions)
            .await
            .map_or(Err(ErrorCode::CoordinatorNotAvailable.code()), |r| {
                r.map_err(|e| e.code())
            })
    } else {
        Err(ResponseError::GroupAuthorizationFailed.code())
    };
    let mut response = OffsetFetchResponse::default();
    let none = |tp| FetchedOffset {
        tp,
        offset: -1,
        leader_epoch: -1,
        metadata: String::new(),
    };
    match fetched {
        Ok(offsets) => {
            let mut describable = std::collections::HashMap::new();
            for offset in offsets {
                let allowed = *describable
                    .entry(offset.tp.topic.clone())
                    .or_insert_with(|| authz::topic(ctx, AclOperation::Describe, &offset.tp.topic));
                match (allowed, &requested) {
                    (true, _) => push(&mut response, offset, version, 0),
                    // Named: answered with the error; all topics: left out.
                    (false, Some(_)) => push(
                        &mut response,
                        none(offset.tp),
                        version,
                        ResponseError::TopicAuthorizationFailed.code(),
                    ),
                    (false, None) => {}
                }
            }
        }
        Err(code) => {
            // v2+ carry a top-level error; v1 only per partition.
            response.error_code = code;
            let per_partition = if version < 2 { code } else { 0 };
            for tp in requested.unwrap_or_default() {
                push(&mut response, none(tp), version, per_partition);
            }
        }
    }
    response
}

fn push(response: &mut OffsetFetchResponse, fetched: FetchedOffset, version: i16, error_code: i16) {
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
    match response.topics.last_mut() {
        Some(topic) if topic.name.0.as_str() == fetched.tp.topic => {
            topic.partitions.push(partition)
        }
        _ => {
            let mut topic = OffsetFetchResponseTopic::default();
            topic.name = TopicName(StrBytes::from_string(fetched.tp.topic));
            topic.partitions.push(partition);
            response.topics.push(topic);
        }
    }
}
