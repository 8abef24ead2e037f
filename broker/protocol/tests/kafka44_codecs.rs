//! Golden bytes for the Kafka 4.4.0 versions whose codecs come from the vendored
//! kafka-protocol (broker/protocol/kafka-protocol/VENDORED.md): ListOffsets v11, OffsetCommit
//! v10, OffsetFetch v10, ApiVersions v5, WriteTxnMarkers v2, TxnOffsetCommit v6,
//! DescribeLogDirs v5, DeleteGroups v3, requests and responses. Each golden message is written
//! here field by field from Kafka 4.4.0's message spec (compact strings and arrays, an empty
//! tag section per struct), independently of the codec; the codec must decode it into the
//! expected message and encode that message back into the same bytes.

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

/// Writes a message's fields in wire order.
#[derive(Default)]
struct Golden(Vec<u8>);

impl Golden {
    fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }
    fn i8(self, v: i8) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i16(self, v: i16) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i32(self, v: i32) -> Self {
        self.raw(&v.to_be_bytes())
    }
    fn i64(self, v: i64) -> Self {
        self.raw(&v.to_be_bytes())
    }
    /// A compact length: n + 1 (0 is null), one byte for the small ones here.
    fn len(self, n: Option<usize>) -> Self {
        let n = n.map_or(0, |n| n + 1);
        assert!(n < 0x80);
        self.raw(&[n as u8])
    }
    fn string(self, s: Option<&str>) -> Self {
        let s = s.map(str::as_bytes);
        self.len(s.map(<[u8]>::len)).raw(s.unwrap_or_default())
    }
    fn uuid(self, id: Uuid) -> Self {
        self.raw(id.as_bytes())
    }
    /// An empty tag section.
    fn tags(self) -> Self {
        self.raw(&[0])
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

const TOPIC_ID: Uuid = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);

/// `golden` decodes into `expected` at `version`, and `expected` encodes into `golden`.
fn golden<M: Decodable + Encodable + PartialEq + Debug>(
    version: i16,
    golden: Golden,
    expected: &M,
) {
    let mut bytes = Bytes::from(golden.0.clone());
    let decoded = M::decode(&mut bytes, version).unwrap();
    assert!(
        bytes.is_empty(),
        "v{version}: {} bytes not decoded",
        bytes.len()
    );
    assert_eq!(&decoded, expected, "v{version} decoded");
    let mut encoded = BytesMut::new();
    expected.encode(&mut encoded, version).unwrap();
    assert_eq!(encoded.to_vec(), golden.0, "v{version} encoded");
}

#[test]
fn api_versions_v5_carries_the_cluster_and_node() {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = s("apache-kafka-java");
    request.client_software_version = s("4.4.0");
    request.cluster_id = Some(s("c1"));
    request.node_id = 3;
    let bytes = Golden::default()
        .string(Some("apache-kafka-java"))
        .string(Some("4.4.0"))
        .string(Some("c1"))
        .i32(3)
        .tags();
    golden(5, bytes, &request);

    // REBOOTSTRAP_REQUIRED (129), no table.
    let mut response = ApiVersionsResponse::default();
    response.error_code = 129;
    let bytes = Golden::default().i16(129).len(Some(0)).i32(0).tags();
    golden(5, bytes, &response);
}

#[test]
fn list_offsets_v11_asks_for_the_earliest_pending_upload() {
    let mut partition = list_offsets_request::ListOffsetsPartition::default();
    partition.timestamp = -6;
    let mut topic = list_offsets_request::ListOffsetsTopic::default();
    topic.name = TopicName(s("t"));
    topic.partitions = vec![partition];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![topic];
    request.timeout_ms = 30_000;
    let bytes = Golden::default()
        .i32(-1) // replica id
        .i8(0) // isolation level
        .len(Some(1))
        .string(Some("t"))
        .len(Some(1))
        .i32(0) // partition
        .i32(-1) // current leader epoch
        .i64(-6)
        .tags()
        .tags()
        .i32(30_000)
        .tags();
    golden(11, bytes, &request);

    let mut answer = list_offsets_response::ListOffsetsPartitionResponse::default();
    answer.partition_index = 0;
    let mut topic = list_offsets_response::ListOffsetsTopicResponse::default();
    topic.name = TopicName(s("t"));
    topic.partitions = vec![answer];
    let mut response = ListOffsetsResponse::default();
    response.topics = vec![topic];
    let bytes = Golden::default()
        .i32(0) // throttle time
        .len(Some(1))
        .string(Some("t"))
        .len(Some(1))
        .i32(0)
        .i16(0)
        .i64(-1) // timestamp
        .i64(-1) // offset: none without tiered storage
        .i32(-1) // leader epoch
        .tags()
        .tags()
        .tags();
    golden(11, bytes, &response);
}

#[test]
fn offset_commit_v10_names_topics_by_id() {
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default();
    partition.committed_offset = 42;
    partition.committed_metadata = Some(s("m"));
    let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
    topic.topic_id = TOPIC_ID;
    topic.partitions = vec![partition];
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(s("g"));
    request.topics = vec![topic];
    let bytes = Golden::default()
        .string(Some("g"))
        .i32(-1) // generation or member epoch
        .string(Some("")) // member id
        .string(None) // group instance id
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .i64(42)
        .i32(-1) // committed leader epoch
        .string(Some("m"))
        .tags()
        .tags()
        .tags();
    golden(10, bytes, &request);

    let mut answer = offset_commit_response::OffsetCommitResponsePartition::default();
    answer.error_code = 100; // UNKNOWN_TOPIC_ID
    let mut topic = offset_commit_response::OffsetCommitResponseTopic::default();
    topic.topic_id = TOPIC_ID;
    topic.partitions = vec![answer];
    let mut response = OffsetCommitResponse::default();
    response.topics = vec![topic];
    let bytes = Golden::default()
        .i32(0)
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .i16(100)
        .tags()
        .tags()
        .tags();
    golden(10, bytes, &response);
}

#[test]
fn offset_fetch_v10_names_topics_by_id() {
    let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
    topic.topic_id = TOPIC_ID;
    topic.partition_indexes = vec![0];
    let mut group = offset_fetch_request::OffsetFetchRequestGroup::default();
    group.group_id = GroupId(s("g"));
    group.topics = Some(vec![topic]);
    let mut request = OffsetFetchRequest::default();
    request.groups = vec![group];
    let bytes = Golden::default()
        .len(Some(1))
        .string(Some("g"))
        .string(None) // member id
        .i32(-1) // member epoch
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .tags()
        .tags()
        .i8(0) // require stable
        .tags();
    golden(10, bytes, &request);

    let mut partition = offset_fetch_response::OffsetFetchResponsePartitions::default();
    partition.committed_offset = 42;
    partition.metadata = Some(s("m"));
    let mut topic = offset_fetch_response::OffsetFetchResponseTopics::default();
    topic.topic_id = TOPIC_ID;
    topic.partitions = vec![partition];
    let mut group = offset_fetch_response::OffsetFetchResponseGroup::default();
    group.group_id = GroupId(s("g"));
    group.topics = vec![topic];
    let mut response = OffsetFetchResponse::default();
    response.groups = vec![group];
    let bytes = Golden::default()
        .i32(0)
        .len(Some(1))
        .string(Some("g"))
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .i64(42)
        .i32(-1) // committed leader epoch
        .string(Some("m"))
        .i16(0)
        .tags()
        .tags()
        .i16(0) // group error
        .tags()
        .tags();
    golden(10, bytes, &response);
}

#[test]
fn write_txn_markers_v2_carries_the_transaction_version() {
    let mut topic = write_txn_markers_request::WritableTxnMarkerTopic::default();
    topic.name = TopicName(s("t"));
    topic.partition_indexes = vec![0];
    let mut marker = write_txn_markers_request::WritableTxnMarker::default();
    marker.producer_id = ProducerId(7);
    marker.producer_epoch = 1;
    marker.transaction_result = true;
    marker.topics = vec![topic];
    marker.transaction_version = 2;
    let mut request = WriteTxnMarkersRequest::default();
    request.markers = vec![marker];
    let bytes = Golden::default()
        .len(Some(1))
        .i64(7)
        .i16(1)
        .i8(1) // COMMIT
        .len(Some(1))
        .string(Some("t"))
        .len(Some(1))
        .i32(0)
        .tags()
        .i32(0) // coordinator epoch
        .i8(2) // transaction version
        .tags()
        .tags();
    golden(2, bytes, &request);

    let mut partition = write_txn_markers_response::WritableTxnMarkerPartitionResult::default();
    partition.error_code = 47; // INVALID_PRODUCER_EPOCH
    let mut topic = write_txn_markers_response::WritableTxnMarkerTopicResult::default();
    topic.name = TopicName(s("t"));
    topic.partitions = vec![partition];
    let mut result = write_txn_markers_response::WritableTxnMarkerResult::default();
    result.producer_id = ProducerId(7);
    result.topics = vec![topic];
    let mut response = WriteTxnMarkersResponse::default();
    response.markers = vec![result];
    let bytes = Golden::default()
        .len(Some(1))
        .i64(7)
        .len(Some(1))
        .string(Some("t"))
        .len(Some(1))
        .i32(0)
        .i16(47)
        .tags()
        .tags()
        .tags()
        .tags();
    golden(2, bytes, &response);
}

#[test]
fn txn_offset_commit_v6_names_topics_by_id() {
    let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    partition.committed_offset = 42;
    partition.committed_metadata = Some(s("m"));
    let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    topic.topic_id = TOPIC_ID;
    topic.partitions = vec![partition];
    let mut request = TxnOffsetCommitRequest::default();
    request.transactional_id = TransactionalId(s("x"));
    request.group_id = GroupId(s("g"));
    request.producer_id = ProducerId(7);
    request.producer_epoch = 1;
    request.generation_id_or_member_epoch = 5;
    request.member_id = s("m-1");
    request.topics = vec![topic];
    let bytes = Golden::default()
        .string(Some("x"))
        .string(Some("g"))
        .i64(7)
        .i16(1)
        .i32(5) // generation or member epoch
        .string(Some("m-1"))
        .string(None) // group instance id
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .i64(42)
        .i32(-1)
        .string(Some("m"))
        .tags()
        .tags()
        .tags();
    golden(6, bytes, &request);

    let mut partition = txn_offset_commit_response::TxnOffsetCommitResponsePartition::default();
    partition.error_code = 100; // UNKNOWN_TOPIC_ID
    let mut topic = txn_offset_commit_response::TxnOffsetCommitResponseTopic::default();
    topic.topic_id = TOPIC_ID;
    topic.partitions = vec![partition];
    let mut response = TxnOffsetCommitResponse::default();
    response.topics = vec![topic];
    let bytes = Golden::default()
        .i32(0)
        .len(Some(1))
        .uuid(TOPIC_ID)
        .len(Some(1))
        .i32(0)
        .i16(100)
        .tags()
        .tags()
        .tags();
    golden(6, bytes, &response);
}

#[test]
fn describe_log_dirs_v5_says_whether_a_dir_is_cordoned() {
    // The request is v4's: a null topic list asks for every partition.
    let request = DescribeLogDirsRequest::default().with_topics(None);
    golden(5, Golden::default().len(None).tags(), &request);

    let mut result = describe_log_dirs_response::DescribeLogDirsResult::default();
    result.log_dir = s("/d");
    result.total_bytes = 100;
    result.usable_bytes = 40;
    result.is_cordoned = true;
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![result];
    let bytes = Golden::default()
        .i32(0)
        .i16(0)
        .len(Some(1))
        .i16(0)
        .string(Some("/d"))
        .len(Some(0)) // topics
        .i64(100)
        .i64(40)
        .i8(1) // is cordoned
        .tags()
        .tags();
    golden(5, bytes, &response);
}

#[test]
fn delete_groups_v3_carries_an_error_message_per_group() {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]);
    golden(
        3,
        Golden::default().len(Some(1)).string(Some("g")).tags(),
        &request,
    );

    let mut missing = delete_groups_response::DeletableGroupResult::default();
    missing.group_id = GroupId(s("g"));
    missing.error_code = 69;
    missing.error_message = Some(s("The group id does not exist."));
    let mut deleted = delete_groups_response::DeletableGroupResult::default();
    deleted.group_id = GroupId(s("h"));
    let mut response = DeleteGroupsResponse::default();
    response.results = vec![missing, deleted];
    let bytes = Golden::default()
        .i32(0)
        .len(Some(2))
        .string(Some("g"))
        .i16(69)
        .string(Some("The group id does not exist."))
        .tags()
        .string(Some("h"))
        .i16(0)
        .string(None)
        .tags()
        .tags();
    golden(3, bytes, &response);

    // v2 has no message: the same answer leaves it out.
    let bytes = Golden::default()
        .i32(0)
        .len(Some(2))
        .string(Some("g"))
        .i16(69)
        .tags()
        .string(Some("h"))
        .i16(0)
        .tags()
        .tags();
    let mut encoded = BytesMut::new();
    response.encode(&mut encoded, 2).unwrap();
    assert_eq!(encoded.to_vec(), bytes.0);
}
