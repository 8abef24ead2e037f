//! The seed corpus of the `request` fuzz target, built from real encodings: kafka-protocol's
//! encoding of a real request at every version the broker advertises (the compat and
//! Produce v0-v2 layouts cut from the newer ones as those clients send them), and the
//! records a client writes ([`client_records`], which the server's record-batch seeds
//! encode in every codec).
//!
//! `cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus` writes them with
//! the server's seeds.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression as Codec, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::{compat, versions};

/// One seed: the target it is for, a file name, the bytes.
pub type Seed = (&'static str, String, Vec<u8>);

/// Every seed of this crate's targets.
#[must_use]
pub fn all() -> Vec<Seed> {
    requests()
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
pub fn requests() -> Vec<Seed> {
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

/// AlterReplicaLogDirs: two partitions to one dir.
fn alter_replica_log_dirs() -> AlterReplicaLogDirsRequest {
    AlterReplicaLogDirsRequest::default().with_dirs(vec![
        alter_replica_log_dirs_request::AlterReplicaLogDir::default()
            .with_path(s("/var/lib/sluice"))
            .with_topics(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![0, 1]),
            ]),
    ])
}

/// DeleteTopics by name, and from v6 (KIP-516) by name and by id.
fn delete_topics(version: i16) -> DeleteTopicsRequest {
    if version >= 6 {
        return DeleteTopicsRequest::default()
            .with_topics(vec![
                delete_topics_request::DeleteTopicState::default().with_name(Some(topic())),
                delete_topics_request::DeleteTopicState::default()
                    .with_topic_id(uuid::Uuid::from_u128(0x5eed)),
            ])
            .with_timeout_ms(30_000);
    }
    DeleteTopicsRequest::default()
        .with_topic_names(vec![topic()])
        .with_timeout_ms(30_000)
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
        ApiKey::ListOffsets => enc!(list_offsets(version)),
        ApiKey::DescribeTopicPartitions => enc!(describe_topic_partitions()),
        ApiKey::ListConfigResources if version >= 1 => {
            enc!(ListConfigResourcesRequest::default().with_resource_types(vec![2, 4]))
        }
        ApiKey::ListConfigResources => enc!(ListConfigResourcesRequest::default()),
        ApiKey::Metadata => enc!(MetadataRequest::default().with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic()))
        ]))),
        ApiKey::FindCoordinator if version >= 4 => enc!(
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![s("group-1"), s("group-2")])
        ),
        ApiKey::FindCoordinator => enc!(FindCoordinatorRequest::default().with_key(s("group-1"))),
        ApiKey::CreateTopics => enc!(create_topics()),
        ApiKey::DeleteTopics => enc!(delete_topics(version)),
        ApiKey::DescribeConfigs => enc!(DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configuration_keys(Some(vec![s("retention.ms")]))
        ])),
        ApiKey::IncrementalAlterConfigs => enc!(alter_configs()),
        ApiKey::ApiVersions => enc!(api_versions(version)),
        ApiKey::JoinGroup => enc!(join_group(version)),
        ApiKey::SyncGroup => enc!(sync_group(version)),
        ApiKey::Heartbeat => enc!(
            HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(s("m-1"))
        ),
        ApiKey::LeaveGroup => enc!(leave_group(version)),
        ApiKey::OffsetCommit => enc!(offset_commit(version)),
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
                // v3+ (KIP-360): the producer's current id and epoch.
                .with_producer_id(ProducerId(if version >= 3 { 4000 } else { -1 }))
                .with_producer_epoch(if version >= 3 { 2 } else { -1 })
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
                .with_generation_id_or_member_epoch(if version >= 3 { 3 } else { -1 })
                .with_member_id(if version >= 3 { s("member-1") } else { s("") })
                .with_group_instance_id((version >= 3).then(|| s("instance-1")))
                .with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(topic())
                        .with_topic_id(topic_id(version, 6))
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
        ApiKey::ListTransactions => enc!(list_transactions(version)),
        // What `kafka-transactions.sh abort` sends: one ABORT marker for one partition.
        ApiKey::WriteTxnMarkers => enc!(WriteTxnMarkersRequest::default().with_markers(vec![
            write_txn_markers_request::WritableTxnMarker::default()
                .with_producer_id(ProducerId(4000))
                .with_producer_epoch(3)
                .with_transaction_result(false)
                // v2 (KIP-1228): the marker's transaction version.
                .with_transaction_version(if version >= 2 { 2 } else { 0 })
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic())
                        .with_partition_indexes(vec![0])
                ])
        ])),
        _ => admin_body(key, version),
    }
}

fn legacy_alter_configs() -> AlterConfigsRequest {
    AlterConfigsRequest::default()
        .with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(vec![
                    alter_configs_request::AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("3600000"))),
                ]),
        ])
        .with_validate_only(true)
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
                .with_include_fenced_brokers(version >= 2)
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
        ApiKey::AlterConfigs => enc!(legacy_alter_configs()),
        ApiKey::AlterReplicaLogDirs => enc!(alter_replica_log_dirs()),
        ApiKey::UnregisterBroker => {
            enc!(UnregisterBrokerRequest::default().with_broker_id(BrokerId(4)))
        }
        ApiKey::DescribeQuorum => enc!(DescribeQuorumRequest::default().with_topics(vec![
                describe_quorum_request::TopicData::default()
                    .with_topic_name(TopicName(s("__cluster_metadata")))
                    .with_partitions(vec![
                        describe_quorum_request::PartitionData::default().with_partition_index(0)
                    ])
            ])),
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
                        .with_topic_id(topic_id(version, 10))
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
        // v3: the USER resource type (a user others may create tokens for).
        ApiKey::CreateAcls => enc!(CreateAclsRequest::default().with_creations(vec![
            create_acls_request::AclCreation::default()
                .with_resource_type(if version >= 3 { 7 } else { 2 })
                .with_resource_name(s(if version >= 3 { "User:bob" } else { "orders" }))
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
        _ => token_body(key, version),
    }
}

/// The bodies of the delegation token requests (KIP-48).
fn token_body(key: ApiKey, version: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($m:expr) => {
            encoded(&$m, version)
        };
    }
    let hmac = || Bytes::from_static(&[7; 64]);
    match key {
        ApiKey::CreateDelegationToken => {
            let mut request = CreateDelegationTokenRequest::default()
                .with_renewers(vec![
                    create_delegation_token_request::CreatableRenewers::default()
                        .with_principal_type(s("User"))
                        .with_principal_name(s("bob")),
                ])
                .with_max_lifetime_ms(3_600_000);
            if version >= 3 {
                request = request
                    .with_owner_principal_type(Some(s("User")))
                    .with_owner_principal_name(Some(s("alice")));
            }
            enc!(request)
        }
        ApiKey::RenewDelegationToken => enc!(
            RenewDelegationTokenRequest::default()
                .with_hmac(hmac())
                .with_renew_period_ms(3_600_000)
        ),
        ApiKey::ExpireDelegationToken => enc!(
            ExpireDelegationTokenRequest::default()
                .with_hmac(hmac())
                .with_expiry_time_period_ms(-1)
        ),
        ApiKey::GetTelemetrySubscriptions => enc!(GetTelemetrySubscriptionsRequest::default()),
        ApiKey::PushTelemetry => enc!(
            PushTelemetryRequest::default()
                .with_client_instance_id(uuid::Uuid::from_u128(0x5eed))
                .with_subscription_id(7)
                .with_compression_type(0)
                .with_metrics(Bytes::from_static(b"\x0a\x00"))
        ),
        ApiKey::DescribeDelegationToken => enc!(
            DescribeDelegationTokenRequest::default().with_owners(Some(vec![
                describe_delegation_token_request::DescribeDelegationTokenOwner::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("alice")),
            ]))
        ),
        _ => None,
    }
}

fn topic() -> TopicName {
    TopicName(s("orders"))
}

/// From version `since` a topic is named by id (the name is then not written).
fn topic_id(version: i16, since: i16) -> uuid::Uuid {
    match version >= since {
        true => uuid::Uuid::from_u128(0x5eed),
        false => uuid::Uuid::nil(),
    }
}

fn group() -> GroupId {
    GroupId(s("group-1"))
}

fn produce() -> ProduceRequest {
    let partition = produce_request::PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(Bytes::from(client_batch())));
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

/// Latest, and from v7 the largest timestamp (-3, KIP-734) as `OffsetSpec.maxTimestamp()`
/// asks; v10's timeout.
fn list_offsets(version: i16) -> ListOffsetsRequest {
    let partition = |index, timestamp| {
        list_offsets_request::ListOffsetsPartition::default()
            .with_partition_index(index)
            .with_timestamp(timestamp)
    };
    let mut partitions = vec![partition(0, -1)];
    if version >= 7 {
        partitions.push(partition(1, -3));
    }
    if version >= 11 {
        // KIP-1023: the earliest offset not yet uploaded to remote storage.
        partitions.push(partition(2, -6));
    }
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_timeout_ms(if version >= 10 { 30_000 } else { 0 })
        .with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic())
                .with_partitions(partitions),
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
                // APPEND (KIP-339) to a list-typed key.
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("cleanup.policy"))
                    .with_config_operation(2)
                    .with_value(Some(s("compact"))),
            ]),
    ])
}

fn api_versions(version: i16) -> ApiVersionsRequest {
    let request = ApiVersionsRequest::default();
    if version < 3 {
        return request;
    }
    let request = request
        .with_client_software_name(s("librdkafka"))
        .with_client_software_version(s("2.3.0"));
    if version < 5 {
        return request;
    }
    // KIP-1242: the cluster and node the client means to reach.
    request
        .with_cluster_id(Some(s("sluice-cluster")))
        .with_node_id(0)
}

/// Java's Admin.describeTopics, asking for its second page.
fn describe_topic_partitions() -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default().with_name(topic()),
        ])
        .with_response_partition_limit(2_000)
        .with_cursor(Some(
            describe_topic_partitions_request::Cursor::default()
                .with_topic_name(topic())
                .with_partition_index(1),
        ))
}

/// v1 adds the duration filter, v2 the transactional id pattern.
fn list_transactions(version: i16) -> ListTransactionsRequest {
    let request = ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing")])
        .with_producer_id_filters(vec![ProducerId(4000)]);
    match version {
        0 => request,
        1 => request.with_duration_filter(60_000),
        _ => request
            .with_duration_filter(60_000)
            .with_transactional_id_pattern(Some(s("app-.*"))),
    }
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
    match version {
        0 => request,
        1..=7 => request.with_rebalance_timeout_ms(30_000),
        _ => request
            .with_rebalance_timeout_ms(30_000)
            .with_reason(Some(s("rebalance failed due to a new member"))),
    }
}

fn sync_group(version: i16) -> SyncGroupRequest {
    let request = SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s("m-1"))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s("m-1"))
                .with_assignment(Bytes::from_static(
                    b"\0\x01\0\0\0\x01\0\x06orders\0\0\0\x01\0\0\0\0\0\0\0\0",
                )),
        ]);
    if version < 5 {
        return request;
    }
    request
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
}

fn leave_group(version: i16) -> LeaveGroupRequest {
    let request = LeaveGroupRequest::default().with_group_id(group());
    if version < 3 {
        return request.with_member_id(s("m-1"));
    }
    let member = leave_group_request::MemberIdentity::default().with_member_id(s("m-1"));
    let member = if version >= 5 {
        member.with_reason(Some(s("the consumer is being closed")))
    } else {
        member
    };
    request.with_members(vec![member])
}

/// By name, and from v10 (KIP-848) by topic id.
fn offset_commit(version: i16) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(1)
        .with_member_id(s("m-1"))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(topic())
                .with_topic_id(topic_id(version, 10))
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

/// The records of the seed batches, as a client writes them: keyed and keyless JSON values,
/// each with a header.
#[must_use]
pub fn client_records() -> [Record; 3] {
    [
        client_record(0, Some(b"user-1"), b"{\"id\":1,\"action\":\"login\"}"),
        client_record(1, None, b"{\"id\":2,\"action\":\"logout\"}"),
        client_record(2, Some(b"user-1"), b"{\"id\":3,\"action\":\"login\"}"),
    ]
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

/// [`client_records`] uncompressed, as kafka-protocol's producer side writes them (the
/// records of the Produce seeds).
fn client_batch() -> Vec<u8> {
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Codec::None,
    };
    match RecordBatchEncoder::encode(&mut buf, client_records().iter(), &options) {
        Ok(()) => buf.to_vec(),
        Err(_) => Vec::new(),
    }
}
