//! A pre-decode check of every array count in a request body.
//!
//! kafka-protocol reserves `count` elements before decoding them, so a 20-byte frame that
//! claims 2^31 topics would make it allocate ~100 GB and abort the process. Before decoding,
//! we walk the body along the request's schema (the non-flexible versions we serve) and
//! refuse any array whose count exceeds the bytes left divided by its element's minimum size.
//! Strings and byte fields are bounds-checked by the decoder itself; only arrays need this.
//! ApiVersions (the only flexible request we serve) has no arrays.

use kafka_protocol::messages::ApiKey;

/// One field of a request schema.
#[derive(Debug, Clone)]
enum Field {
    /// A fixed-size field of this many bytes (int8..int64, bool).
    Fixed(usize),
    /// `string` / `nullable string`: i16 length, -1 for null.
    Str,
    /// `bytes` / `nullable bytes` (records): i32 length, -1 for null.
    Bytes,
    /// An array (nullable allowed): i32 count, then that many structs.
    Array(Vec<Field>),
}

use Field::{Array, Bytes, Fixed, Str};

const I8: Field = Fixed(1);
const I16: Field = Fixed(2);
const I32: Field = Fixed(4);
const I64: Field = Fixed(8);

/// Fields that exist only from version `since`.
fn since(version: i16, min: i16, field: Field) -> Option<Field> {
    (version >= min).then_some(field)
}

fn fields(list: impl IntoIterator<Item = Option<Field>>) -> Vec<Field> {
    list.into_iter().flatten().collect()
}

/// The request body schema of `key` at a served `version`; `None` for requests without arrays.
fn schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    Some(match key {
        ApiKey::Produce => fields([
            Some(Str),
            Some(I16),
            Some(I32),
            Some(Array(vec![Str, Array(vec![I32, Bytes])])),
        ]),
        ApiKey::Fetch => fields([
            Some(I32),
            Some(I32),
            Some(I32),
            Some(I32),
            Some(I8),
            since(v, 7, I32),
            since(v, 7, I32),
            Some(Array(vec![
                Str,
                Array(fields([
                    Some(I32),
                    since(v, 9, I32),
                    Some(I64),
                    since(v, 5, I64),
                    Some(I32),
                ])),
            ])),
            since(v, 7, Array(vec![Str, Array(vec![I32])])),
            since(v, 11, Str),
        ]),
        ApiKey::ListOffsets => fields([
            Some(I32),
            since(v, 2, I8),
            Some(Array(vec![
                Str,
                Array(fields([Some(I32), since(v, 4, I32), Some(I64)])),
            ])),
        ]),
        ApiKey::Metadata => vec![Array(vec![Str])],
        ApiKey::CreateTopics => vec![Array(vec![
            Str,
            I32,
            I16,
            Array(vec![I32, Array(vec![I32])]),
            Array(vec![Str, Str]),
        ])],
        ApiKey::DeleteTopics => vec![Array(vec![Str])],
        ApiKey::DescribeConfigs => vec![Array(vec![I8, Str, Array(vec![Str])])],
        ApiKey::IncrementalAlterConfigs => vec![Array(vec![I8, Str, Array(vec![Str, I8, Str])])],
        ApiKey::JoinGroup => fields([
            Some(Str),
            Some(I32),
            since(v, 1, I32),
            Some(Str),
            since(v, 5, Str),
            Some(Str),
            Some(Array(vec![Str, Bytes])),
        ]),
        ApiKey::SyncGroup => fields([
            Some(Str),
            Some(I32),
            Some(Str),
            since(v, 3, Str),
            Some(Array(vec![Str, Bytes])),
        ]),
        ApiKey::LeaveGroup if v >= 3 => vec![Str, Array(vec![Str, Str])],
        ApiKey::OffsetCommit => offset_commit(v),
        ApiKey::OffsetFetch => vec![Str, Array(vec![Str, Array(vec![I32])])],
        ApiKey::DescribeGroups | ApiKey::DeleteGroups => vec![Array(vec![Str])],
        _ => return None,
    })
}

/// OffsetCommit: v1 has a per-partition commit_timestamp, v2-4 a retention_time_ms.
fn offset_commit(v: i16) -> Vec<Field> {
    fields([
        Some(Str),
        Some(I32),
        Some(Str),
        (2..=4).contains(&v).then_some(I64),
        since(v, 7, Str),
        Some(Array(vec![
            Str,
            Array(fields([
                Some(I32),
                Some(I64),
                since(v, 6, I32),
                (v == 1).then_some(I64),
                Some(Str),
            ])),
        ])),
    ])
}

/// Checks the array counts of a request body (after the header). Trailing fields after the
/// last array are left to the decoder.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), String> {
    let Some(schema) = schema(key, version) else {
        return Ok(());
    };
    let mut at = 0;
    walk(&schema, body, &mut at)
}

fn walk(schema: &[Field], body: &[u8], at: &mut usize) -> Result<(), String> {
    for field in schema {
        match field {
            Fixed(n) => take(body, at, *n)?,
            Str => {
                let len = i16::from_be_bytes(read::<2>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            Bytes => {
                let len = i32::from_be_bytes(read::<4>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            Array(element) => {
                let count = i32::from_be_bytes(read::<4>(body, at)?);
                let count = usize::try_from(count).unwrap_or(0);
                let left = body.len() - *at;
                let min = min_size(element).max(1);
                if count > left / min {
                    return Err(format!(
                        "array of {count} elements (each at least {min} bytes) in the {left} bytes left of the frame"
                    ));
                }
                for _ in 0..count {
                    walk(element, body, at)?;
                }
            }
        }
    }
    Ok(())
}

fn min_size(schema: &[Field]) -> usize {
    schema
        .iter()
        .map(|f| match f {
            Fixed(n) => *n,
            Str => 2,
            Bytes | Array(_) => 4,
        })
        .sum()
}

fn read<const N: usize>(body: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let bytes = body
        .get(*at..*at + N)
        .ok_or_else(|| format!("frame ends at byte {} inside a field", body.len()))?;
    *at += N;
    Ok(bytes.try_into().unwrap_or([0; N]))
}

fn take(body: &[u8], at: &mut usize, n: usize) -> Result<(), String> {
    if body.len() - *at < n {
        return Err(format!("a {n}-byte field runs past the end of the frame"));
    }
    *at += n;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The walker agrees with kafka-protocol's encoding of real requests at every served version.
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn accepts<R: Encodable>(key: ApiKey, request: &R) {
        let support = crate::versions::lookup(key as i16).unwrap();
        let mut checked = 0;
        for version in support.served_min..=support.max {
            let mut buf = BytesMut::new();
            // Fields set for newer versions make older encodings fail; those are skipped.
            if request.encode(&mut buf, version).is_err() {
                continue;
            }
            assert_eq!(check(key, version, &buf), Ok(()), "{key:?} v{version}");
            checked += 1;
        }
        assert!(checked > 0, "{key:?}: no version encoded");
    }

    #[test]
    fn real_requests_pass() {
        let name = || TopicName(StrBytes::from_static_str("orders"));
        let mut produce = ProduceRequest::default();
        let mut topic = produce_request::TopicProduceData::default();
        topic.name = name();
        topic.partition_data = vec![produce_request::PartitionProduceData::default(); 3];
        produce.topic_data = vec![topic];
        accepts(ApiKey::Produce, &produce);

        let mut fetch = FetchRequest::default();
        let mut topic = fetch_request::FetchTopic::default();
        topic.topic = name();
        topic.partitions = vec![fetch_request::FetchPartition::default(); 2];
        fetch.topics = vec![topic];
        accepts(ApiKey::Fetch, &fetch);
        let mut forgotten = fetch_request::ForgottenTopic::default();
        forgotten.partitions = vec![1, 2];
        fetch.forgotten_topics_data = vec![forgotten];
        fetch.rack_id = StrBytes::from_static_str("rack");
        accepts(ApiKey::Fetch, &fetch);

        let mut list = ListOffsetsRequest::default();
        let mut topic = list_offsets_request::ListOffsetsTopic::default();
        topic.partitions = vec![list_offsets_request::ListOffsetsPartition::default(); 2];
        list.topics = vec![topic];
        accepts(ApiKey::ListOffsets, &list);

        let mut create = CreateTopicsRequest::default();
        let mut topic = create_topics_request::CreatableTopic::default();
        topic.assignments = vec![create_topics_request::CreatableReplicaAssignment::default()];
        topic.configs = vec![create_topics_request::CreatableTopicConfig::default()];
        create.topics = vec![topic];
        accepts(ApiKey::CreateTopics, &create);

        let mut delete = DeleteTopicsRequest::default();
        delete.topic_names = vec![name(), name()];
        accepts(ApiKey::DeleteTopics, &delete);

        let mut describe = DescribeConfigsRequest::default();
        describe.resources = vec![describe_configs_request::DescribeConfigsResource::default()];
        accepts(ApiKey::DescribeConfigs, &describe);

        let mut metadata = MetadataRequest::default();
        metadata.topics = Some(vec![metadata_request::MetadataRequestTopic::default()]);
        accepts(ApiKey::Metadata, &metadata);
        metadata.topics = None;
        accepts(ApiKey::Metadata, &metadata);
    }

    #[test]
    fn real_group_requests_pass() {
        let name = || TopicName(StrBytes::from_static_str("orders"));
        let mut join = JoinGroupRequest::default();
        join.protocols = vec![join_group_request::JoinGroupRequestProtocol::default(); 2];
        accepts(ApiKey::JoinGroup, &join);
        join.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::JoinGroup, &join);

        let mut sync = SyncGroupRequest::default();
        sync.assignments = vec![sync_group_request::SyncGroupRequestAssignment::default(); 2];
        accepts(ApiKey::SyncGroup, &sync);
        sync.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::SyncGroup, &sync);

        let mut leave = LeaveGroupRequest::default();
        accepts(ApiKey::LeaveGroup, &leave);
        leave.members = vec![leave_group_request::MemberIdentity::default(); 2];
        accepts(ApiKey::LeaveGroup, &leave);

        let mut commit = OffsetCommitRequest::default();
        let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
        topic.name = name();
        topic.partitions = vec![offset_commit_request::OffsetCommitRequestPartition::default(); 3];
        commit.topics = vec![topic];
        accepts(ApiKey::OffsetCommit, &commit);
        commit.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::OffsetCommit, &commit);

        let mut fetch = OffsetFetchRequest::default();
        let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
        topic.name = name();
        topic.partition_indexes = vec![0, 1];
        fetch.topics = Some(vec![topic]);
        accepts(ApiKey::OffsetFetch, &fetch);
        fetch.topics = None;
        accepts(ApiKey::OffsetFetch, &fetch);

        let mut describe = DescribeGroupsRequest::default();
        describe.groups = vec![GroupId(StrBytes::from_static_str("g")); 2];
        accepts(ApiKey::DescribeGroups, &describe);
        let mut delete = DeleteGroupsRequest::default();
        delete.groups_names = vec![GroupId(StrBytes::from_static_str("g")); 2];
        accepts(ApiKey::DeleteGroups, &delete);
        accepts(ApiKey::Heartbeat, &HeartbeatRequest::default());
        accepts(ApiKey::ListGroups, &ListGroupsRequest::default());
        accepts(ApiKey::FindCoordinator, &FindCoordinatorRequest::default());
    }

    #[test]
    fn a_huge_count_is_refused() {
        let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert!(check(ApiKey::DeleteTopics, 3, &body).is_err());
        assert!(check(ApiKey::Metadata, 8, &body).is_err());
    }
}
