//! OffsetFetch v1-5: committed offsets of a group (-1 where none); from v2 a null topic list
//! asks for every partition the group has committed. Commits not yet appended to the
//! offsets log are not visible.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_group::{ErrorCode, FetchedOffset, TopicPartition};

use super::group_common::string;
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
    let fetched = ctx
        .groups
        .fetch_offsets(string(&request.group_id.0), partitions)
        .await
        .unwrap_or(Err(ErrorCode::CoordinatorNotAvailable));
    let mut response = OffsetFetchResponse::default();
    match fetched {
        Ok(offsets) => {
            for offset in offsets {
                push(&mut response, offset, version, ErrorCode::None);
            }
        }
        Err(error) => {
            // v2+ carry a top-level error; v1 only per partition.
            response.error_code = error.code();
            for tp in requested.unwrap_or_default() {
                let none = FetchedOffset {
                    tp,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                };
                push(&mut response, none, version, error);
            }
        }
    }
    response
}

fn push(
    response: &mut OffsetFetchResponse,
    fetched: FetchedOffset,
    version: i16,
    error: ErrorCode,
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
    partition.error_code = if version < 2 { error.code() } else { 0 };
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
