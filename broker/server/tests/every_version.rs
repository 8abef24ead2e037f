//! Every advertised version of every API answers: a realistic request (with an error case
//! where one is cheap) is decoded and its response encoded at each version in the table, so
//! the table never advertises a version a codec cannot handle.

mod common;

use common::{Client, TestBroker, at_every_version, batch, name};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// Sends `request` at every served version of `key`; each must get a decodable response.
async fn answers<Req: Encodable, Resp: Decodable>(client: &mut Client, key: ApiKey, request: &Req) {
    at_every_version::<_, Resp>(client, key, request, |_| 0).await;
}

#[tokio::test]
async fn every_served_version_answers() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;

    let mut metadata = MetadataRequest::default();
    let mut mt = MetadataRequestTopic::default();
    mt.name = Some(name("v"));
    metadata.topics = Some(vec![mt]);
    answers::<_, MetadataResponse>(&mut client, ApiKey::Metadata, &metadata).await;

    let mut produce = ProduceRequest::default();
    produce.acks = -1;
    let mut pd = PartitionProduceData::default();
    pd.records = Some(batch(&["a"]));
    let mut bad = PartitionProduceData::default();
    bad.index = 7; // unknown partition: an error in every version's layout
    bad.records = Some(batch(&["b"]));
    let mut td = TopicProduceData::default();
    td.name = name("v");
    td.partition_data = vec![pd, bad];
    produce.topic_data = vec![td];
    answers::<_, ProduceResponse>(&mut client, ApiKey::Produce, &produce).await;

    let mut fetch = FetchRequest::default();
    fetch.replica_id = BrokerId(-1);
    fetch.max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    ft.topic = name("v");
    let mut fp = FetchPartition::default();
    fp.partition_max_bytes = 1 << 20;
    let mut out_of_range = FetchPartition::default();
    out_of_range.fetch_offset = 1_000;
    ft.partitions = vec![fp, out_of_range];
    fetch.topics = vec![ft];
    answers::<_, FetchResponse>(&mut client, ApiKey::Fetch, &fetch).await;

    let mut list = ListOffsetsRequest::default();
    list.replica_id = BrokerId(-1);
    let mut lt = ListOffsetsTopic::default();
    lt.name = name("v");
    let mut earliest = ListOffsetsPartition::default();
    earliest.timestamp = -2;
    let mut unknown = ListOffsetsPartition::default();
    unknown.partition_index = 9;
    lt.partitions = vec![earliest, unknown];
    list.topics = vec![lt];
    answers::<_, ListOffsetsResponse>(&mut client, ApiKey::ListOffsets, &list).await;

    let mut create = CreateTopicsRequest::default();
    let mut ok = CreatableTopic::default();
    ok.name = name("made");
    ok.num_partitions = 1;
    ok.replication_factor = 1;
    let mut invalid = CreatableTopic::default();
    invalid.name = name("bad name");
    invalid.num_partitions = 1;
    invalid.replication_factor = 1;
    create.topics = vec![ok, invalid];
    create.validate_only = true;
    answers::<_, CreateTopicsResponse>(&mut client, ApiKey::CreateTopics, &create).await;

    let mut describe = DescribeConfigsRequest::default();
    let mut topic = DescribeConfigsResource::default();
    topic.resource_type = 2;
    topic.resource_name = StrBytes::from_static_str("v");
    let mut missing = DescribeConfigsResource::default();
    missing.resource_type = 2;
    missing.resource_name = StrBytes::from_static_str("missing");
    let mut node = DescribeConfigsResource::default();
    node.resource_type = 4;
    node.resource_name = StrBytes::from_static_str("0");
    describe.resources = vec![topic, missing, node];
    answers::<_, DescribeConfigsResponse>(&mut client, ApiKey::DescribeConfigs, &describe).await;

    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str("g");
    answers::<_, FindCoordinatorResponse>(&mut client, ApiKey::FindCoordinator, &find).await;

    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![name("never-there")];
    answers::<_, DeleteTopicsResponse>(&mut client, ApiKey::DeleteTopics, &delete).await;
}

/// The ACL APIs at every served version, and v3's USER resource type (7): a binding on a
/// user is created, described and deleted like any other.
#[tokio::test]
async fn acls_at_every_version_and_user_bindings() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut create = CreateAclsRequest::default();
    let mut creation = AclCreation::default();
    creation.resource_type = 7;
    creation.resource_name = StrBytes::from_static_str("User:bob");
    creation.resource_pattern_type = 3;
    creation.principal = StrBytes::from_static_str("User:alice");
    creation.host = StrBytes::from_static_str("*");
    creation.operation = 13; // CREATE_TOKENS
    creation.permission_type = 3;
    create.creations = vec![creation];
    let codes = at_every_version(
        &mut client,
        ApiKey::CreateAcls,
        &create,
        |r: &CreateAclsResponse| r.results[0].error_code,
    )
    .await;
    assert_eq!(codes, [(1, 0), (2, 0), (3, 0)]);

    let mut describe = DescribeAclsRequest::default();
    describe.resource_type_filter = 7;
    describe.resource_name_filter = None;
    describe.principal_filter = None;
    describe.host_filter = None;
    describe.pattern_type_filter = 1;
    describe.operation = 1;
    describe.permission_type = 1;
    let found = at_every_version(
        &mut client,
        ApiKey::DescribeAcls,
        &describe,
        |r: &DescribeAclsResponse| {
            assert_eq!(r.error_code, 0);
            r.resources.len() as i16
        },
    )
    .await;
    assert_eq!(found, [(1, 1), (2, 1), (3, 1)]);

    let mut delete = DeleteAclsRequest::default();
    let mut filter = DeleteAclsFilter::default();
    filter.resource_type_filter = 7;
    filter.resource_name_filter = None;
    filter.principal_filter = None;
    filter.host_filter = None;
    filter.pattern_type_filter = 1;
    filter.operation = 1;
    filter.permission_type = 1;
    delete.filters = vec![filter];
    let deleted: DeleteAclsResponse = client.call(ApiKey::DeleteAcls, 3, &delete).await;
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    assert_eq!(deleted.filter_results[0].matching_acls[0].resource_type, 7);
    let again: DeleteAclsResponse = client.call(ApiKey::DeleteAcls, 2, &delete).await;
    assert!(again.filter_results[0].matching_acls.is_empty());
}

/// ListConfigResources (KIP-1000, KIP-1142): v0 lists client-metrics resources (none here),
/// v1 the asked types (none asked: all of Kafka's), a type Kafka does not list is
/// UNSUPPORTED_VERSION.
#[tokio::test]
async fn list_config_resources_by_type() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    common::create_topic(&mut client, "listed", 1).await;
    let mut list = ListConfigResourcesRequest::default();
    let mut listed = async |version, list: &ListConfigResourcesRequest| {
        let response: ListConfigResourcesResponse = client
            .call(ApiKey::ListConfigResources, version, list)
            .await;
        let resources: Vec<(String, i8)> = response
            .config_resources
            .iter()
            .map(|r| (r.resource_name.to_string(), r.resource_type))
            .collect();
        (response.error_code, resources)
    };
    assert_eq!(listed(0, &list).await, (0, vec![]));
    let every = (
        0,
        vec![("0".into(), 8), ("0".into(), 4), ("listed".into(), 2)],
    );
    assert_eq!(listed(1, &list).await, every);
    list.resource_types = vec![2];
    assert_eq!(listed(1, &list).await, (0, vec![("listed".into(), 2)]));
    list.resource_types = vec![2, 3];
    assert_eq!(listed(1, &list).await, (35, vec![]));
}
