//! The seed corpus of the fuzz targets, built from real encodings: kafka-protocol's encoding
//! of a real request at every version the broker advertises (the compat and Produce v0-v2
//! layouts cut from the newer ones as those clients send them), record batches from the
//! client encoder in every codec and from the storage crate's builder, each codec's own
//! output, offsets records and log batches from the group crate and the offsets-log writer,
//! the JSON files the broker itself writes, admin API bodies as the CLI sends them, and
//! columns the host builds from a decoded batch.
//!
//! `cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus` writes them.

use std::collections::BTreeMap;
use std::io::Write;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_group::api::TopicPartition;
use sluice_group::offsets::{CommittedOffset, OffsetRecord, RecordKey};
use sluice_plugin_host::ColumnarBatch;
use sluice_storage::testing::{TestRecord, build_batch};

use sluice_protocol::{compat, versions};

/// One seed: the target it is for, a file name, the bytes.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every seed of every target.
#[must_use]
pub fn all() -> Vec<Seed> {
    let mut out = Vec::new();
    out.extend(requests());
    out.extend(record_batches());
    out.extend(compressed());
    out.extend(offsets());
    out.extend(metadata_files());
    out.extend(admin_bodies());
    out.extend(guest_columns());
    out.extend(plugin_components());
    out
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn encoded<M: Encodable>(message: &M, version: i16) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

/// A frame of every advertised (API, version): header, then the body as that client writes it.
fn requests() -> Vec<Seed> {
    let mut out = Vec::new();
    for support in versions::SUPPORTED {
        let key = support.key;
        for version in support.advertised_min..=support.max {
            let Some(body) = body(key, version) else {
                continue;
            };
            let mut header = RequestHeader::default();
            header.request_api_key = key as i16;
            header.request_api_version = version;
            header.correlation_id = 7;
            header.client_id = Some(s("sluice-fuzz"));
            let Some(mut frame) = encoded(&header, key.request_header_version(version)) else {
                continue;
            };
            frame.extend_from_slice(&body);
            out.push(("request", format!("{key:?}-v{version}"), frame));
        }
    }
    out
}

/// The body of a real request of `key` at `version`.
fn body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    if key == ApiKey::Produce && version < 3 {
        // v0-v2 are v3 without transactional_id (a null string, 2 bytes, first).
        return Some(encoded(&produce(), 3)?[2..].to_vec());
    }
    if key == ApiKey::OffsetCommit && version == 1 {
        return Some(offset_commit_v1());
    }
    if let Some((as_version, suffix)) = compat::request_as(key, version) {
        let newer = body(key, as_version)?;
        return Some(newer[..newer.len() - suffix.len()].to_vec());
    }
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::Produce => enc!(produce()),
        ApiKey::Fetch => enc!(fetch()),
        ApiKey::ListOffsets => enc!(list_offsets()),
        ApiKey::Metadata => enc!(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic()))
        ]))),
        ApiKey::FindCoordinator => enc!(FindCoordinatorRequest::default().with_key(s("group-1"))),
        ApiKey::CreateTopics => enc!(create_topics()),
        ApiKey::DeleteTopics => enc!(
            DeleteTopicsRequest::default()
                .with_topic_names(vec![topic()])
                .with_timeout_ms(30_000)
        ),
        ApiKey::DescribeConfigs => enc!(DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configuration_keys(Some(vec![s("retention.ms")]))
        ])),
        ApiKey::IncrementalAlterConfigs => enc!(alter_configs()),
        ApiKey::ApiVersions => enc!(api_versions(version)),
        ApiKey::JoinGroup => enc!(join_group(version)),
        ApiKey::SyncGroup => enc!(sync_group()),
        ApiKey::Heartbeat => enc!(
            HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(s("m-1"))
        ),
        ApiKey::LeaveGroup => enc!(leave_group(version)),
        ApiKey::OffsetCommit => enc!(offset_commit()),
        ApiKey::OffsetFetch
        | ApiKey::ListGroups
        | ApiKey::ConsumerGroupHeartbeat
        | ApiKey::ConsumerGroupDescribe => consumer_group_body(key, version),
        ApiKey::DescribeGroups => enc!(DescribeGroupsRequest::default().with_groups(vec![group()])),
        ApiKey::DeleteGroups => {
            enc!(DeleteGroupsRequest::default().with_groups_names(vec![group()]))
        }
        ApiKey::InitProducerId => enc!(
            InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(s("txn-1"))))
                .with_transaction_timeout_ms(60_000)
        ),
        _ => txn_body(key, version),
    }
}

/// The bodies of the transaction requests.
fn txn_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    let id = || TransactionalId(s("txn-1"));
    let topics = || {
        vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic())
                .with_partitions(vec![0, 1]),
        ]
    };
    match key {
        ApiKey::AddPartitionsToTxn if version >= 4 => {
            enc!(AddPartitionsToTxnRequest::default().with_transactions(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(id())
                    .with_producer_id(ProducerId(4000))
                    .with_verify_only(true)
                    .with_topics(topics())
            ]))
        }
        ApiKey::AddPartitionsToTxn => enc!(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(id())
                .with_v3_and_below_producer_id(ProducerId(4000))
                .with_v3_and_below_topics(topics())
        ),
        ApiKey::AddOffsetsToTxn => enc!(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(id())
                .with_producer_id(ProducerId(4000))
                .with_group_id(group())
        ),
        ApiKey::TxnOffsetCommit => enc!(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(id())
                .with_group_id(group())
                .with_producer_id(ProducerId(4000))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                                .with_committed_offset(42)
                                .with_committed_metadata(Some(s("m")))
                        ])
                ])
        ),
        ApiKey::EndTxn => enc!(
            EndTxnRequest::default()
                .with_transactional_id(id())
                .with_producer_id(ProducerId(4000))
                .with_committed(true)
        ),
        ApiKey::DescribeTransactions => {
            enc!(DescribeTransactionsRequest::default().with_transactional_ids(vec![id()]))
        }
        ApiKey::ListTransactions => enc!(
            ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing")])
                .with_producer_id_filters(vec![ProducerId(4000)])
        ),
        // What `kafka-transactions.sh abort` sends: one ABORT marker for one partition.
        ApiKey::WriteTxnMarkers => enc!(WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(4000))
                .with_producer_epoch(3)
                .with_transaction_result(false)
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0])
                ])
        ])),
        _ => admin_body(key, version),
    }
}

/// The bodies of the cluster admin requests.
fn admin_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::CreatePartitions => enc!(
            CreatePartitionsRequest::default()
                .with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default()
                        .with_name(topic())
                        .with_count(4)
                        .with_assignments(Some(vec![
                            create_partitions_request::CreatePartitionsAssignment::default()
                                .with_broker_ids(vec![BrokerId(0)])
                        ]))
                ])
                .with_timeout_ms(30_000)
                .with_validate_only(true)
        ),
        ApiKey::DescribeCluster => enc!(
            DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(true)
                .with_endpoint_type(1)
        ),
        ApiKey::ElectLeaders => enc!(
            ElectLeadersRequest::default()
                .with_election_type(0)
                .with_topic_partitions(Some(vec![
                    elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic())
                        .with_partitions(vec![0, 1])
                ]))
                .with_timeout_ms(30_000)
        ),
        ApiKey::DeleteRecords => enc!(
            DeleteRecordsRequest::default()
                .with_topics(vec![
                    delete_records_request::DeleteRecordsTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(-1)
                        ])
                ])
                .with_timeout_ms(30_000)
        ),
        ApiKey::AlterConfigs => enc!(
            AlterConfigsRequest::default()
                .with_resources(vec![
                    alter_configs_request::AlterConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(s("orders"))
                        .with_configs(vec![
                            alter_configs_request::AlterableConfig::default()
                                .with_name(s("retention.ms"))
                                .with_value(Some(s("3600000")))
                        ])
                ])
                .with_validate_only(true)
        ),
        ApiKey::DescribeLogDirs => {
            enc!(DescribeLogDirsRequest::default().with_topics(Some(vec![
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![0])
            ])))
        }
        _ => offsets_admin_body(key, version),
    }
}

/// OffsetFetch (one group before v8, a list from v8, with the member from v9), ListGroups
/// (with the v4-v5 filters) and KIP-848's consumer group APIs.
fn consumer_group_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::OffsetFetch if version >= 8 => {
            enc!(OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(group())
                .with_member_id((version >= 9).then(|| s("m-1")))
                .with_member_epoch(if version >= 9 { 3 } else { -1 })
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopics::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0, 1])
                ]))
        ]))
        }
        ApiKey::OffsetFetch => enc!(
            OffsetFetchRequest::default()
                .with_group_id(group())
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0, 1])
                ]))
        ),
        ApiKey::ListGroups => {
            let mut request = ListGroupsRequest::default();
            if version >= 4 {
                request.states_filter = vec![s("Stable"), s("Empty")];
            }
            if version >= 5 {
                request.types_filter = vec![s("consumer")];
            }
            enc!(request)
        }
        ApiKey::ConsumerGroupHeartbeat => enc!(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group())
                .with_member_id(s("m-1"))
                .with_member_epoch(2)
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(vec![topic()]))
                .with_subscribed_topic_regex((version >= 1).then(|| s("ord.*")))
                .with_server_assignor(Some(s("uniform")))
                .with_topic_partitions(Some(vec![
                    consumer_group_heartbeat_request::TopicPartitions::default()
                        .with_topic_id(uuid::Uuid::from_u128(0x5175_1ce0))
                        .with_partitions(vec![0, 1])
                ]))
        ),
        ApiKey::ConsumerGroupDescribe => enc!(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![group()])
                .with_include_authorized_operations(true)
        ),
        _ => None,
    }
}

/// The bodies of the committed-offset admin requests and OffsetForLeaderEpoch.
fn offsets_admin_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::OffsetDelete => enc!(
            OffsetDeleteRequest::default()
                .with_group_id(group())
                .with_topics(vec![
                    offset_delete_request::OffsetDeleteRequestTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![
                            offset_delete_request::OffsetDeleteRequestPartition::default()
                                .with_partition_index(0)
                        ])
                ])
        ),
        ApiKey::OffsetForLeaderEpoch => enc!(
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(topic())
                        .with_partitions(vec![
                            offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_current_leader_epoch(-1)
                                .with_leader_epoch(0)
                        ])
                ])
        ),
        _ => security_body(key, version),
    }
}

/// The bodies of the SASL and ACL requests.
fn security_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::SaslHandshake => {
            enc!(SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-256")))
        }
        ApiKey::SaslAuthenticate => enc!(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"))
        ),
        ApiKey::CreateAcls => enc!(CreateAclsRequest::default().with_creations(vec![
            create_acls_request::AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_resource_pattern_type(3)
                .with_principal(s("User:alice"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)
        ])),
        ApiKey::DescribeAcls => enc!(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1)
        ),
        ApiKey::DeleteAcls => enc!(DeleteAclsRequest::default().with_filters(vec![
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(s("orders")))
                .with_pattern_type_filter(3)
                .with_principal_filter(Some(s("User:alice")))
                .with_operation(1)
                .with_permission_type(1)
        ])),
        ApiKey::DescribeProducers => enc!(DescribeProducersRequest::default().with_topics(vec![
                describe_producers_request::TopicRequest::default()
                    .with_name(topic())
                    .with_partition_indexes(vec![0, 1])
            ])),
        ApiKey::DescribeUserScramCredentials => enc!(
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default().with_name(s("alice"))
            ]))
        ),
        ApiKey::AlterUserScramCredentials => enc!(
            AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![
                    alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                        .with_name(s("bob"))
                        .with_mechanism(2)
                ])
                .with_upsertions(vec![
                    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                        .with_name(s("alice"))
                        .with_mechanism(1)
                        .with_iterations(4096)
                        .with_salt(Bytes::from_static(b"salt-salt-salt"))
                        .with_salted_password(Bytes::from_static(&[7; 32]))
                ])
        ),
        _ => quota_body(key, version),
    }
}

/// The bodies of the client quota requests.
fn quota_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    match key {
        ApiKey::DescribeClientQuotas => {
            enc!(DescribeClientQuotasRequest::default().with_components(vec![
                describe_client_quotas_request::ComponentData::default()
                    .with_entity_type(s("user"))
                    .with_match_type(0)
                    .with_match(Some(s("alice")))
            ]))
        }
        ApiKey::AlterClientQuotas => enc!(AlterClientQuotasRequest::default().with_entries(vec![
            alter_client_quotas_request::EntryData::default()
                .with_entity(vec![
                    alter_client_quotas_request::EntityData::default()
                        .with_entity_type(s("client-id"))
                        .with_entity_name(Some(s("loader")))
                ])
                .with_ops(vec![
                    alter_client_quotas_request::OpData::default()
                        .with_key(s("producer_byte_rate"))
                        .with_value(1_048_576.0)
                ])
        ])),
        _ => None,
    }
}

fn topic() -> TopicName {
    TopicName(s("orders"))
}

fn group() -> GroupId {
    GroupId(s("group-1"))
}

fn produce() -> ProduceRequest {
    let partition = produce_request::PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(Bytes::from(client_batch(Codec::None))));
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(topic())
                .with_partition_data(vec![partition]),
        ])
}

fn fetch() -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            fetch_request::FetchTopic::default()
                .with_topic(topic())
                .with_partitions(vec![
                    fetch_request::FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(42)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

fn list_offsets() -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(-1),
                ]),
        ])
}

fn create_topics() -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(topic())
                .with_num_partitions(3)
                .with_replication_factor(1)
                .with_configs(vec![
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("3600000"))),
                ]),
        ])
}

fn alter_configs() -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("1000"))),
            ]),
    ])
}

fn api_versions(version: i16) -> ApiVersionsRequest {
    let request = ApiVersionsRequest::default();
    if version < 3 {
        return request;
    }
    request
        .with_client_software_name(s("librdkafka"))
        .with_client_software_version(s("2.3.0"))
}

fn join_group(version: i16) -> JoinGroupRequest {
    let request = JoinGroupRequest::default()
        .with_group_id(group())
        .with_session_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            join_group_request::JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(b"\0\x01\0\0\0\x01\0\x06orders\0\0\0\0")),
        ]);
    if version == 0 {
        request
    } else {
        request.with_rebalance_timeout_ms(30_000)
    }
}

fn sync_group() -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s("m-1"))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s("m-1"))
                .with_assignment(Bytes::from_static(
                    b"\0\x01\0\0\0\x01\0\x06orders\0\0\0\x01\0\0\0\0\0\0\0\0",
                )),
        ])
}

fn leave_group(version: i16) -> LeaveGroupRequest {
    let request = LeaveGroupRequest::default().with_group_id(group());
    if version < 3 {
        return request.with_member_id(s("m-1"));
    }
    request.with_members(vec![
        leave_group_request::MemberIdentity::default().with_member_id(s("m-1")),
    ])
}

fn offset_commit() -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(1)
        .with_member_id(s("m-1"))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(42)
                        .with_committed_metadata(Some(s("meta"))),
                ]),
        ])
}

/// [`offset_commit`] in v1's layout, which kafka-protocol no longer writes: no retention
/// time, and a commit timestamp per partition (-1, as sarama sends it).
fn offset_commit_v1() -> Vec<u8> {
    fn string(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as i16).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    let mut out = Vec::new();
    string(&mut out, "group-1");
    out.extend_from_slice(&1i32.to_be_bytes()); // generation_id
    string(&mut out, "m-1");
    out.extend_from_slice(&1i32.to_be_bytes()); // topics
    string(&mut out, "orders");
    out.extend_from_slice(&1i32.to_be_bytes()); // partitions
    out.extend_from_slice(&0i32.to_be_bytes()); // partition_index
    out.extend_from_slice(&42i64.to_be_bytes()); // committed_offset
    out.extend_from_slice(&(-1i64).to_be_bytes()); // commit_timestamp
    string(&mut out, "meta");
    out
}

fn client_record(offset: i64, key: Option<&'static [u8]>, value: &'static [u8]) -> Record {
    let mut headers = IndexMap::new();
    headers.insert(s("trace"), Some(Bytes::from_static(b"abc")));
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp: 1_700_000_000_000 + offset,
        key: key.map(Bytes::from_static),
        value: Some(Bytes::from_static(value)),
        headers,
    }
}

/// A batch as kafka-protocol's producer side writes it, in `codec`.
fn client_batch(codec: Codec) -> Vec<u8> {
    let records = [
        client_record(0, Some(b"user-1"), b"{\"id\":1,\"action\":\"login\"}"),
        client_record(1, None, b"{\"id\":2,\"action\":\"logout\"}"),
        client_record(2, Some(b"user-1"), b"{\"id\":3,\"action\":\"login\"}"),
    ];
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: codec,
    };
    match RecordBatchEncoder::encode(&mut buf, records.iter(), &options) {
        Ok(()) => buf.to_vec(),
        Err(_) => Vec::new(),
    }
}

fn record_batches() -> Vec<Seed> {
    let mut out = Vec::new();
    for (name, codec) in [
        ("none", Codec::None),
        ("gzip", Codec::Gzip),
        ("snappy", Codec::Snappy),
        ("lz4", Codec::Lz4),
        ("zstd", Codec::Zstd),
    ] {
        out.push((
            "record_batch",
            format!("client-{name}"),
            client_batch(codec),
        ));
    }
    let records = [
        TestRecord::value(b"one"),
        TestRecord {
            key: Some(&b"k"[..]),
            value: None,
            timestamp_delta: 5,
            headers: vec![(&b"h"[..], Some(&b"v"[..])), (&b"n"[..], None)],
        },
    ];
    let stored = build_batch(1000, 1_700_000_000_000, &records);
    let mut two = stored.clone();
    two.extend_from_slice(&build_batch(1002, 1_700_000_000_010, &records[..1]));
    out.push(("record_batch", "storage-builder".into(), stored));
    out.push(("record_batch", "storage-two-batches".into(), two));
    out
}

/// Each codec's own output, behind the selector byte `decompress` reads.
fn compressed() -> Vec<Seed> {
    let data = b"records records records {\"id\":1} {\"id\":2} {\"id\":3} records records";
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gzip.write_all(data);
    let gzip = gzip.finish().unwrap_or_default();
    let raw_snappy = snap::raw::Encoder::new()
        .compress_vec(data)
        .unwrap_or_default();
    let mut xerial = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    xerial.extend_from_slice(&(raw_snappy.len() as u32).to_be_bytes());
    xerial.extend_from_slice(&raw_snappy);
    let lz4 = lz4::EncoderBuilder::new()
        .build(Vec::new())
        .and_then(|mut e| {
            e.write_all(data)?;
            let (out, result) = e.finish();
            result.map(|()| out)
        });
    let zstd = zstd::bulk::compress(data, 3).unwrap_or_default();
    [
        ("gzip", 0u8, gzip),
        ("snappy-raw", 1, raw_snappy),
        ("snappy-xerial", 1, xerial),
        ("lz4-frame", 2, lz4.unwrap_or_default()),
        ("zstd", 3, zstd),
    ]
    .into_iter()
    .map(|(name, selector, bytes)| {
        let mut input = vec![selector];
        input.extend_from_slice(&bytes);
        ("decompress", name.to_owned(), input)
    })
    .collect()
}

fn offsets() -> Vec<Seed> {
    let tp = TopicPartition {
        topic: "orders".into(),
        partition: 3,
    };
    let committed = OffsetRecord {
        key: RecordKey::Offset {
            group: "group-1".into(),
            tp: tp.clone(),
        },
        value: Some(CommittedOffset {
            offset: 42,
            leader_epoch: -1,
            metadata: "consumer meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        }),
    };
    let tombstone = OffsetRecord::offset_tombstone("group-1", tp);
    let group_gone = OffsetRecord {
        key: RecordKey::Group {
            group: "group-2".into(),
        },
        value: None,
    };
    let mut out = Vec::new();
    for (name, record) in [
        ("commit", &committed),
        ("tombstone", &tombstone),
        ("group-tombstone", &group_gone),
    ] {
        let key = record.encode_key();
        let mut input = vec![0];
        input.extend_from_slice(&(key.len() as u16).to_be_bytes());
        input.extend_from_slice(&key);
        input.extend_from_slice(&record.encode_value().unwrap_or_default());
        out.push(("offsets_log", format!("record-{name}"), input));
    }
    let all = [&committed, &tombstone, &group_gone];
    if let Ok(log) = crate::group::offsets_log::encode_batches(&all, 1_700_000_000_000) {
        let mut input = vec![1];
        input.extend_from_slice(&log);
        out.push(("offsets_log", "log-batches".into(), input));
    }
    out
}

fn metadata_files() -> Vec<Seed> {
    let topic = crate::broker::TopicFile {
        name: "orders".into(),
        partitions: 3,
        configs: BTreeMap::from([
            ("retention.ms".to_owned(), "3600000".to_owned()),
            ("segment.bytes".to_owned(), "1048576".to_owned()),
            ("cleanup.policy".to_owned(), "delete".to_owned()),
        ]),
        topic_id: Some("5f0c3e7a-2b1d-4c8e-9a6f-0d4b7e2c1a93".into()),
    };
    let view = view_spec();
    let cluster = crate::broker::ClusterFile {
        cluster_id: "kS2yX1mZQ3ubWvE0n7pA9g".into(),
    };
    let file = |selector: u8, text: String| {
        let mut input = vec![selector];
        input.extend_from_slice(text.as_bytes());
        input
    };
    vec![
        (
            "topic_metadata",
            "topic.json".into(),
            file(0, pretty(&topic)),
        ),
        ("topic_metadata", "view.json".into(), file(1, pretty(&view))),
        (
            "topic_metadata",
            "cluster.json".into(),
            file(2, pretty(&cluster)),
        ),
    ]
}

fn view_spec() -> crate::views::ViewSpec {
    crate::views::ViewSpec {
        name: "orders-eu".into(),
        source: "orders".into(),
        stages: vec![crate::views::StageSpec {
            plugin: "json-field".into(),
            params: BTreeMap::from([("field".to_owned(), "region".to_owned())]),
            kind: Some("filter".into()),
        }],
        on_error: "skip".into(),
        ephemeral: false,
        owner: None,
        owner_host: None,
    }
}

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn admin_bodies() -> Vec<Seed> {
    let bodies = [
        ("create-topic", 0u8, r#"{"name": "orders", "partitions": 3, "configs": {"retention.ms": "3600000", "sluice.partitioner": "murmur2"}}"#.to_owned()),
        ("alter-topic", 1, r#"{"set": {"retention.ms": "7d", "segment.bytes": "100 MiB"}, "delete": ["segment.ms"]}"#.to_owned()),
        ("create-view", 2, serde_json::to_string(&view_spec()).unwrap_or_default()),
        ("deploy-transform", 3, r#"{"name": "orders-split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us"], "params": {"field": "$.region", "value": "eu"}, "from_offset": "1764547200000ms", "on_error": "dead-letter", "dead_letter_topic": "orders-dlq"}"#.to_owned()),
        ("transform-spec", 4, r#"{"name": "orders-split", "source": "orders", "plugin": "split-transform", "params": [["field", "$.region"], ["value", "eu"]], "outputs": ["orders-eu", "orders-us"], "dead_letter_topic": null, "on_error": "stop", "partitioning": "key", "commit_interval_ms": 100, "from_offset": "earliest", "start_offsets": [0, 0, 0], "paused": false, "generation": 0, "principal": "User:ANONYMOUS", "created_ms": 1764547200000}"#.to_owned()),
    ];
    bodies
        .into_iter()
        .map(|(name, selector, body)| {
            let mut input = vec![selector];
            input.extend_from_slice(body.as_bytes());
            ("admin_json", name.to_owned(), input)
        })
        .collect()
}

/// Uploaded plugins, as the install-time checks read them before compiling: a component over
/// the core-instance limit, one within it, and ones importing what the host links and what
/// it refuses.
fn plugin_components() -> Vec<Seed> {
    use sluice_plugin_host::fuzz::component_seeds;
    use sluice_plugin_host::limits::PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX;
    let over = PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX as u8 + 1;
    [
        component_seeds(2, "wasi:cli/environment@0.2.9"),
        component_seeds(over, "wasi:http/outgoing-handler@0.2.0"),
    ]
    .into_iter()
    .flatten()
    .map(|(name, bytes)| ("plugin_component", name, bytes))
    .collect()
}

/// Columns as the host builds them from a real batch, in `guest_columns`' input form: as a
/// transform would echo them, and naming input records by index as a transform's output does.
fn guest_columns() -> Vec<Seed> {
    // kafka-protocol's encoder writes one batch per record here (their sequences are -1, so
    // not contiguous): the first batch is one real batch.
    let batches = client_batch(Codec::None);
    let first = batches.get(8..12).map_or(0, |l| {
        12 + i32::from_be_bytes([l[0], l[1], l[2], l[3]]).max(0) as usize
    });
    let batch = &batches[..first.min(batches.len())];
    let limit = crate::records::DecompressLimit {
        bytes: 1 << 20,
        name: "seed",
    };
    let mut columns = ColumnarBatch::new();
    if let Err(e) = crate::records::decode(batch, &mut columns, limit) {
        panic!("guest_columns seed: {e} ({} bytes)", batch.len());
    }
    let mut output = ColumnarBatch::new();
    for (index, record) in columns.records().enumerate() {
        let headers: Vec<_> = record.headers().iter().collect();
        output.push(
            index as i64,
            -1,
            record.key(),
            Some(b"{\"masked\":true}"),
            &headers,
        );
    }
    let encode = sluice_plugin_host::fuzz::encode_columns;
    vec![
        (
            "guest_columns",
            "decoded-batch".into(),
            encode(0x23, &columns),
        ),
        (
            "guest_columns",
            "transform-output".into(),
            encode(0x33, &output),
        ),
    ]
}
