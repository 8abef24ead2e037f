//! The shape guard against kafka-protocol's own encodings: real requests pass at every
//! served version, and at every version the specs have that the version table does not
//! serve yet; a walk ends exactly where the encoding does; for every (API, version) a
//! sample request with non-empty arrays, strings and tagged fields passes (and is, byte
//! for byte, what kafka-protocol encodes after decoding it), and the same request with any
//! one array count raised to 2^31-1 or any string length past the end is refused.
use super::*;
use bytes::{BufMut, Bytes, BytesMut};
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
        assert_eq!(
            walk_body(key, version, &buf),
            Ok(buf.len()),
            "{key:?} v{version}"
        );
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
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
    accepts(ApiKey::InitProducerId, &init);
    let mut versions = ApiVersionsRequest::default();
    versions.client_software_name = StrBytes::from_static_str("librdkafka");
    versions.client_software_version = StrBytes::from_static_str("2.3.0");
    accepts(ApiKey::ApiVersions, &versions);
    let mut alter = IncrementalAlterConfigsRequest::default();
    let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
    resource.configs = vec![incremental_alter_configs_request::AlterableConfig::default(); 2];
    alter.resources = vec![resource];
    accepts(ApiKey::IncrementalAlterConfigs, &alter);
}

#[test]
fn every_advertised_version_has_a_shape() {
    assert_eq!(assert_complete(), Ok(()));
    let e = check(ApiKey::Produce, 14, &[]).unwrap_err();
    assert!(e.contains("has no request shape"), "{e}");
}

#[test]
fn the_20_byte_produce_v0_is_refused() {
    // acks, timeout, then a topic array claiming 2^31-1 topics.
    let body = [0, 1, 0, 0, 0x13, 0x88, 0x7f, 0xff, 0xff, 0xff, 0, 0];
    for version in 0..=2 {
        let e = check(ApiKey::Produce, version, &body).unwrap_err();
        assert!(e.contains("2147483647 elements"), "{e}");
    }
}

#[test]
fn flexible_api_versions_lengths_are_checked() {
    let good = [4, b's', b'l', b'u', 2, b'1', 0];
    assert_eq!(check(ApiKey::ApiVersions, 3, &good), Ok(()));
    let long_name = [0xff, 0xff, 0xff, 0x7f, 0];
    assert!(check(ApiKey::ApiVersions, 3, &long_name).is_err());
    let tags = [1, 1, 1, 0, 0x7f];
    assert!(check(ApiKey::ApiVersions, 3, &tags).is_err());
}

#[test]
fn a_huge_count_is_refused() {
    let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
    assert!(check(ApiKey::DeleteTopics, 3, &body).is_err());
    assert!(check(ApiKey::Metadata, 8, &body).is_err());
}

#[test]
fn every_served_version_has_a_spec_or_a_removed_shape() {
    let resolved = spec::resolve_all().unwrap();
    let spec_of = |key: ApiKey| resolved.iter().find(|r| r.api_key == key as i16);
    for support in crate::versions::SUPPORTED {
        let spec = spec_of(support.key).unwrap_or_else(|| panic!("{:?}: no spec", support.key));
        for version in support.advertised_min..=support.max {
            let removed = removed::shape(support.key, version);
            if spec.valid.contains(version) {
                assert_eq!(removed, None, "{:?} v{version}: two shapes", support.key);
            } else {
                assert!(
                    removed.is_some() && version < spec.valid.min,
                    "{:?} v{version}: neither spec'd nor in removed.rs",
                    support.key
                );
            }
        }
    }
    for &(key, min, max) in removed::VERSIONS {
        for version in min..=max {
            assert!(
                version < spec_of(key).unwrap().valid.min,
                "{key:?} v{version}"
            );
        }
    }
}

#[test]
fn a_version_table_naming_an_unshaped_version_is_refused() {
    use crate::versions::ApiSupport;
    let produce = |max| ApiSupport {
        key: ApiKey::Produce,
        advertised_min: 0,
        served_min: 3,
        max,
    };
    assert_eq!(complete(&[produce(13)]), Ok(()));
    let e = complete(&[produce(14)]).unwrap_err();
    assert!(e.contains("Produce v14"), "{e}");
}

/// Checks `request` at every version the spec has that kafka-protocol encodes (`versions`).
fn accepts_versions<R: Encodable>(key: ApiKey, request: &R, versions: &[i16]) {
    for &version in versions {
        let mut buf = BytesMut::new();
        request.encode(&mut buf, version).unwrap();
        let walked = walk_body(key, version, &buf);
        assert_eq!(walked, Ok(buf.len()), "{key:?} v{version}");
    }
}

#[test]
fn versions_the_table_does_not_serve_yet_have_shapes() {
    let mut produce = ProduceRequest::default();
    let mut topic = produce_request::TopicProduceData::default();
    topic.topic_id = uuid::Uuid::from_u128(7);
    let mut partition = produce_request::PartitionProduceData::default();
    partition.records = Some(Bytes::from_static(b"batch"));
    topic.partition_data = vec![partition; 2];
    produce.topic_data = vec![topic];
    accepts_versions(ApiKey::Produce, &produce, &[12, 13]);

    let mut join = JoinGroupRequest::default();
    join.protocols = vec![join_group_request::JoinGroupRequestProtocol::default(); 2];
    join.reason = Some(StrBytes::from_static_str("rebalance"));
    accepts_versions(ApiKey::JoinGroup, &join, &[6, 7, 8, 9]);

    let mut create = CreateTopicsRequest::default();
    let mut topic = create_topics_request::CreatableTopic::default();
    topic.assignments = vec![create_topics_request::CreatableReplicaAssignment::default()];
    topic.configs = vec![create_topics_request::CreatableTopicConfig::default(); 2];
    create.topics = vec![topic];
    accepts_versions(ApiKey::CreateTopics, &create, &[5, 6, 7]);

    // v6 (KIP-1319, the vendored codec) names topics by id.
    let mut txn = TxnOffsetCommitRequest::default();
    let mut topic = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    topic.topic_id = uuid::Uuid::from_u128(7);
    topic.partitions =
        vec![txn_offset_commit_request::TxnOffsetCommitRequestPartition::default(); 2];
    txn.topics = vec![topic];
    txn.member_id = StrBytes::from_static_str("member-1");
    accepts_versions(ApiKey::TxnOffsetCommit, &txn, &[6]);
}

#[test]
fn known_tagged_fields_are_walked_within_their_size() {
    let mut fetch = FetchRequest::default();
    fetch.cluster_id = Some(StrBytes::from_static_str("cluster"));
    fetch.replica_state.replica_id = BrokerId(3);
    fetch.replica_state.replica_epoch = 9;
    let mut topic = fetch_request::FetchTopic::default();
    let mut partition = fetch_request::FetchPartition::default();
    partition.replica_directory_id = uuid::Uuid::from_u128(1);
    partition.high_watermark = 5;
    topic.partitions = vec![partition; 2];
    fetch.topics = vec![topic];
    accepts_versions(ApiKey::Fetch, &fetch, &[15, 16, 17, 18]);

    // BrokerHeartbeat v1's tag 0 is an array of log dir ids, which the decoder reads straight
    // from the frame: a count it cannot hold is refused even inside a tagged field.
    let head = [
        0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0,
    ];
    let body = |tagged: &[u8]| [&head[..], tagged].concat();
    assert_eq!(
        check(ApiKey::BrokerHeartbeat, 1, &body(&[1, 0, 1, 1])),
        Ok(())
    );
    let huge = body(&[1, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x07]);
    let e = check(ApiKey::BrokerHeartbeat, 1, &huge).unwrap_err();
    assert!(e.contains("elements"), "{e}");
    // A known tag whose content is shorter than its size would put the decoder out of step.
    let short = body(&[1, 0, 2, 1, 0]);
    let e = check(ApiKey::BrokerHeartbeat, 1, &short).unwrap_err();
    assert!(e.contains("tagged field 0"), "{e}");
    // An unknown tag is skipped by its size.
    assert_eq!(
        check(ApiKey::BrokerHeartbeat, 1, &body(&[1, 9, 2, 0xff, 0xff])),
        Ok(())
    );
}

/// A sample body of a shape: two elements in every array, "ab" in every string and bytes
/// field, every nullable struct present, every known tagged field set, fixed fields 0x01
/// bytes (rarely a default, so an encoder keeps tagged ones). With `hostile` set to `n`, the
/// `n`th length (array count or string length, in encoding order) is hostile instead: a
/// count of 2^31-1, a length past the end.
struct Sample {
    hostile: Option<usize>,
    lengths: usize,
}

impl Sample {
    fn body(shape: &[Field], hostile: Option<usize>) -> (Vec<u8>, usize) {
        let mut sample = Sample {
            hostile,
            lengths: 0,
        };
        let mut out = Vec::new();
        sample.fields(shape, &mut out);
        (out, sample.lengths)
    }

    /// `normal`, or `hostile` if this is the hostile length.
    fn length(&mut self, normal: u32, hostile: u32) -> u32 {
        self.lengths += 1;
        if self.hostile == Some(self.lengths - 1) {
            hostile
        } else {
            normal
        }
    }

    fn fields(&mut self, fields: &[Field], out: &mut Vec<u8>) {
        for field in fields {
            self.field(field, out);
        }
    }

    fn field(&mut self, field: &Field, out: &mut Vec<u8>) {
        const PAST_END: u32 = i32::MAX as u32;
        match field {
            Field::Fixed(n) => out.extend(std::iter::repeat_n(1, *n)),
            Field::Str => {
                out.put_i16(self.length(2, i16::MAX as u32) as i16);
                out.put_slice(b"ab");
            }
            Field::Bytes => {
                out.put_i32(self.length(2, PAST_END) as i32);
                out.put_slice(b"ab");
            }
            Field::CompactStr => {
                put_uvarint(out, self.length(2, PAST_END) + 1);
                out.put_slice(b"ab");
            }
            Field::Array(element) => {
                out.put_i32(self.length(2, PAST_END) as i32);
                self.fields(&element.fields, out);
                self.fields(&element.fields, out);
            }
            Field::CompactArray(element) => {
                put_uvarint(out, self.length(2, PAST_END) + 1);
                self.fields(&element.fields, out);
                self.fields(&element.fields, out);
            }
            Field::Struct(fields) => self.fields(fields, out),
            Field::NullableStruct(fields) => {
                out.push(1);
                self.fields(fields, out);
            }
            Field::Tags(known) => {
                let mut sorted: Vec<_> = known.iter().collect();
                sorted.sort_by_key(|f| f.tag);
                put_uvarint(out, sorted.len() as u32);
                for tagged in sorted {
                    let mut content = Vec::new();
                    self.field(&tagged.shape, &mut content);
                    put_uvarint(out, tagged.tag);
                    put_uvarint(out, content.len() as u32);
                    out.extend(content);
                }
            }
        }
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The sample decoded by kafka-protocol and encoded again, or `None` if kafka-protocol has no
/// codec for this (API, version). A removed version is decoded as the broker reads it
/// (compat.rs), and must decode whole.
fn kafka_protocol_round_trip(api_key: i16, version: i16, sample: &[u8]) -> Option<Vec<u8>> {
    let key = ApiKey::try_from(api_key).ok()?;
    let removed = removed::VERSIONS
        .iter()
        .any(|&(k, min, max)| k == key && (min..=max).contains(&version));
    if removed {
        let (as_version, mut body) = if key == ApiKey::Produce {
            // v0-v2 are read as v3 behind a null transactional id.
            (3, Bytes::from([&[0xff, 0xff], sample].concat()))
        } else {
            crate::compat::upgrade(key, version, Bytes::copy_from_slice(sample)).unwrap()
        };
        let decoded = RequestKind::decode(key, &mut body, as_version);
        assert!(decoded.is_ok() && body.is_empty(), "{key:?} v{version}");
        return None;
    }
    let codec = key.valid_versions();
    if !(codec.min..=codec.max).contains(&version) {
        return None;
    }
    let mut body = Bytes::copy_from_slice(sample);
    let decoded = match RequestKind::decode(key, &mut body, version) {
        Ok(decoded) => decoded,
        // `ApiKey::valid_versions` lists a version Kafka marks unstable (InitProducerId v6)
        // that the message's own codec does not have.
        Err(e) if format!("{e:#}").contains("version not supported") => return None,
        Err(e) => panic!("{key:?} v{version}: {e:#}"),
    };
    assert!(
        body.is_empty(),
        "{key:?} v{version}: {} bytes not decoded",
        body.len()
    );
    let mut encoded = BytesMut::new();
    decoded.encode(&mut encoded, version).unwrap();
    Some(encoded.to_vec())
}

/// A body walked along `shape`: the bytes walked.
fn walk_shape(shape: &[Field], body: &[u8]) -> Result<usize, String> {
    let mut at = 0;
    walk(shape, body, &mut at).map(|()| at)
}

#[test]
fn every_shape_passes_its_sample_and_refuses_every_hostile_length() {
    let shapes = shapes().unwrap();
    let (mut cross_checked, mut hostile) = (0, 0);
    for (&(api_key, version), shape) in shapes {
        let name = format!("API {api_key} v{version}");
        let (sample, lengths) = Sample::body(shape, None);
        // So a string length of i16::MAX runs past the end.
        assert!(sample.len() < i16::MAX as usize, "{name}");
        assert_eq!(walk_shape(shape, &sample), Ok(sample.len()), "{name}");
        if let Some(encoded) = kafka_protocol_round_trip(api_key, version, &sample) {
            assert_eq!(encoded, sample, "{name}: kafka-protocol encodes otherwise");
            cross_checked += 1;
        }
        for n in 0..lengths {
            let (bad, _) = Sample::body(shape, Some(n));
            assert!(
                walk_shape(shape, &bad).is_err(),
                "{name}: hostile length {n} of {lengths} passed"
            );
            hostile += 1;
        }
    }
    eprintln!(
        "{} shapes; {cross_checked} round-tripped through kafka-protocol; {hostile} hostile lengths refused",
        shapes.len()
    );
    assert!(
        cross_checked > 250 && hostile > 1500,
        "{cross_checked} {hostile}"
    );
}

#[test]
fn a_count_just_over_the_bound_is_refused() {
    // DeleteTopics v0: topic names (each at least 2 bytes), timeout. After the count, 2 * 3
    // bytes of empty names and a 4-byte timeout: at most 5 names fit.
    let body = |count: i32| [&count.to_be_bytes()[..], &[0; 10]].concat();
    assert_eq!(check(ApiKey::DeleteTopics, 0, &body(3)), Ok(()));
    let e = check(ApiKey::DeleteTopics, 0, &body(5)).unwrap_err();
    assert!(!e.contains("elements"), "{e}");
    let e = check(ApiKey::DeleteTopics, 0, &body(6)).unwrap_err();
    assert!(e.contains("6 elements (each at least 2 bytes)"), "{e}");
}
