//! DescribeCluster, ElectLeaders, DescribeLogDirs and DeleteRecords over real TCP at every
//! served version the codec encodes (DescribeLogDirs v0, read as v1, is kafka-python's:
//! tests/e2e).

mod common;

use common::{TestBroker, at_every_version, create_topic, produce, s};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// DescribeCluster's endpoint types as a Kafka broker answers them: controllers are asked at a
/// controller's endpoint (MISMATCHED_ENDPOINT_TYPE), other types do not exist
/// (UNSUPPORTED_ENDPOINT_TYPE); v2's include-fenced flag changes nothing.
#[tokio::test]
async fn describe_cluster_answers_endpoint_types_as_a_broker() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let mut cluster = DescribeClusterRequest::default();
    for (endpoint_type, expected) in [(2, 114), (3, 115)] {
        cluster.endpoint_type = endpoint_type;
        for version in 1..=2 {
            let answer: DescribeClusterResponse = client
                .call(ApiKey::DescribeCluster, version, &cluster)
                .await;
            assert_eq!(answer.error_code, expected, "endpoint type {endpoint_type}");
            assert!(answer.brokers.is_empty());
        }
    }
    cluster.endpoint_type = 1;
    cluster.include_fenced_brokers = true;
    let with_fenced: DescribeClusterResponse =
        client.call(ApiKey::DescribeCluster, 2, &cluster).await;
    assert_eq!(with_fenced.brokers.len(), 1);
    assert!(!with_fenced.brokers[0].is_fenced);
}

#[tokio::test]
async fn every_served_version_answers() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "admin", 2).await;

    let mut cluster = DescribeClusterRequest::default();
    cluster.include_cluster_authorized_operations = true;
    cluster.endpoint_type = 1;
    let codes = at_every_version(
        &mut client,
        ApiKey::DescribeCluster,
        &cluster,
        |r: &DescribeClusterResponse| {
            assert_eq!(r.brokers.len(), 1);
            assert!(r.cluster_authorized_operations > 0, "{r:?}");
            r.error_code
        },
    )
    .await;
    assert!(
        codes.len() == 3 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );

    let mut elect = ElectLeadersRequest::default();
    let mut tp = TopicPartitions::default();
    tp.topic = TopicName(s("admin"));
    tp.partitions = vec![1, 7];
    elect.topic_partitions = Some(vec![tp]);
    elect.timeout_ms = 30_000;
    let codes = at_every_version(
        &mut client,
        ApiKey::ElectLeaders,
        &elect,
        |r: &ElectLeadersResponse| {
            let partitions = &r.replica_election_results[0].partition_result;
            assert_eq!(partitions[1].error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
            partitions[0].error_code
        },
    )
    .await;
    assert!(
        codes.len() == 3 && codes.iter().all(|&(_, c)| c == 84),
        "ELECTION_NOT_NEEDED: {codes:?}"
    );

    let mut dirs = DescribeLogDirsRequest::default();
    let mut topic = DescribableLogDirTopic::default();
    topic.topic = TopicName(s("admin"));
    topic.partitions = vec![0];
    dirs.topics = Some(vec![topic]);
    let codes = at_every_version(
        &mut client,
        ApiKey::DescribeLogDirs,
        &dirs,
        |r: &DescribeLogDirsResponse| {
            let [result] = &r.results[..] else {
                panic!("one log dir: {r:?}")
            };
            assert_eq!(
                result.topics[0].partitions.len(),
                1,
                "only the partition asked for"
            );
            r.error_code
        },
    )
    .await;
    assert!(
        codes.len() == 5 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );
    dirs.topics = None;
    let all: DescribeLogDirsResponse = client.call(ApiKey::DescribeLogDirs, 4, &dirs).await;
    assert_eq!(all.results[0].topics[0].partitions.len(), 2);
    assert!(all.results[0].total_bytes > 0 && all.results[0].usable_bytes > 0);
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn delete_records_at_every_version_moves_the_log_start() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "trim", 1).await;
    for _ in 0..10 {
        let batch = sluice_storage::testing::producer_batch(-1, -1, -1, 1, false);
        assert_eq!(
            produce(&mut client, "trim", 0, -1, batch.into())
                .await
                .error_code,
            0
        );
    }
    let mut next = 2;
    for version in 0..=2 {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = 0;
        p.offset = next;
        let mut t = DeleteRecordsTopic::default();
        t.name = TopicName(s("trim"));
        t.partitions = vec![p];
        let mut request = DeleteRecordsRequest::default();
        request.topics = vec![t];
        request.timeout_ms = 30_000;
        let response: DeleteRecordsResponse =
            client.call(ApiKey::DeleteRecords, version, &request).await;
        let result = &response.topics[0].partitions[0];
        assert_eq!(
            (result.error_code, result.low_watermark),
            (0, next),
            "v{version}"
        );
        next += 3;
    }
    let start = broker
        .broker
        .topics
        .partition("trim", 0)
        .unwrap()
        .with_log(|log| log.log_start_offset().value())
        .unwrap();
    assert_eq!(start, 8);
    let mut p = DeleteRecordsPartition::default();
    p.offset = 11;
    let mut t = DeleteRecordsTopic::default();
    t.name = TopicName(s("trim"));
    t.partitions = vec![p];
    let mut request = DeleteRecordsRequest::default();
    request.topics = vec![t];
    let past: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request).await;
    assert_eq!(
        past.topics[0].partitions[0].error_code, 1,
        "OFFSET_OUT_OF_RANGE"
    );
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn alter_configs_at_every_version_replaces_the_overrides() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    common::create_topic_with(&mut client, "conf", 1, &[("retention.ms", "3600000")]).await;
    let mut config = AlterableConfig::default();
    config.name = s("segment.bytes");
    config.value = Some(s("1048576"));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = 2;
    resource.resource_name = s("conf");
    resource.configs = vec![config];
    let mut request = AlterConfigsRequest::default();
    request.resources = vec![resource];
    let codes = at_every_version(
        &mut client,
        ApiKey::AlterConfigs,
        &request,
        |r: &AlterConfigsResponse| r.responses[0].error_code,
    )
    .await;
    assert!(
        codes.len() == 3 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );
    let overrides = broker
        .broker
        .topics
        .topic("conf")
        .unwrap()
        .overrides
        .clone();
    assert_eq!(overrides.len(), 1, "{overrides:?}");
    assert_eq!(
        overrides.get("segment.bytes").map(String::as_str),
        Some("1048576")
    );
    request.resources[0].resource_type = 4;
    let broker_config: AlterConfigsResponse = client.call(ApiKey::AlterConfigs, 1, &request).await;
    assert_eq!(broker_config.responses[0].error_code, 42, "INVALID_REQUEST");
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn describe_configs_v3_documents_every_key() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "documented", 1).await;
    let mut topic = DescribeConfigsResource::default();
    topic.resource_type = 2;
    topic.resource_name = s("documented");
    topic.configuration_keys = None;
    let mut node = DescribeConfigsResource::default();
    node.resource_type = 4;
    node.resource_name = s("0");
    node.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![topic, node];
    request.include_documentation = true;
    let response: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 3, &request).await;
    for result in &response.results {
        assert_eq!(result.error_code, 0);
        assert!(!result.configs.is_empty());
        for config in &result.configs {
            let doc = config.documentation.as_ref().map(|d| d.to_string());
            assert!(
                doc.as_ref().is_some_and(|d| !d.is_empty()),
                "{}: {doc:?}",
                config.name.as_str()
            );
        }
    }
    let retention = response.results[0]
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    let doc = retention.documentation.as_ref().unwrap().to_string();
    assert!(
        doc.starts_with("the topic's override of log.retention.ms"),
        "{doc}"
    );
    request.include_documentation = false;
    let plain: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 3, &request).await;
    assert!(
        plain.results[0]
            .configs
            .iter()
            .all(|c| c.documentation.is_none())
    );
    drop(client);
    broker.stop().await;
}

/// DescribeTopicPartitions (KIP-966): name order, pages of at most the partition limit with
/// a cursor to go on from, unknown named topics, a cursor outside the named topics refused.
#[tokio::test]
async fn describe_topic_partitions_pages_with_a_cursor() {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    for (name, partitions) in [("pb", 2), ("pa", 3), ("pc", 1)] {
        create_topic(&mut client, name, partitions).await;
    }
    let mut request = DescribeTopicPartitionsRequest::default();
    request.topics = ["pc", "pa", "nope", "pb"]
        .into_iter()
        .map(|n| {
            let mut t = TopicRequest::default();
            t.name = TopicName(s(n));
            t
        })
        .collect();
    request.response_partition_limit = 2;
    let mut pages = Vec::new();
    loop {
        let response: DescribeTopicPartitionsResponse = client
            .call(ApiKey::DescribeTopicPartitions, 0, &request)
            .await;
        let page: Vec<(String, i16, Vec<i32>)> = response
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().unwrap().0.to_string();
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                (name, t.error_code, partitions)
            })
            .collect();
        pages.push(page);
        let Some(next) = response.next_cursor else {
            break;
        };
        let mut cursor = Cursor::default();
        cursor.topic_name = next.topic_name;
        cursor.partition_index = next.partition_index;
        request.cursor = Some(cursor);
        assert!(pages.len() < 10, "{pages:?}");
    }
    let owned = |n: &str, e: i16, p: &[i32]| (n.to_owned(), e, p.to_vec());
    assert_eq!(
        pages,
        [
            vec![owned("nope", 3, &[]), owned("pa", 0, &[0, 1])],
            vec![owned("pa", 0, &[2]), owned("pb", 0, &[0])],
            vec![owned("pb", 0, &[1]), owned("pc", 0, &[0])],
        ]
    );
    let mut elsewhere = Cursor::default();
    elsewhere.topic_name = TopicName(s("zz"));
    request.cursor = Some(elsewhere);
    let refused: DescribeTopicPartitionsResponse = client
        .call(ApiKey::DescribeTopicPartitions, 0, &request)
        .await;
    assert!(
        refused.topics.iter().all(|t| t.error_code == 42),
        "{refused:?}"
    );
    // Every topic: the same pages without the unknown one.
    request.topics.clear();
    request.cursor = None;
    request.response_partition_limit = 100;
    let all: DescribeTopicPartitionsResponse = client
        .call(ApiKey::DescribeTopicPartitions, 0, &request)
        .await;
    let names: Vec<&str> = all
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.as_str())
        .collect();
    assert_eq!(names, ["pa", "pb", "pc"]);
    assert!(
        all.topics
            .iter()
            .all(|t| t.topic_authorized_operations > 0 && !t.topic_id.is_nil())
    );
    assert!(all.next_cursor.is_none());
}

/// AlterReplicaLogDirs v1-v2 with the one log dir: a move to it is NONE (nothing moves), to
/// another dir LOG_DIR_NOT_FOUND, of a partition the broker lacks UNKNOWN_TOPIC_OR_PARTITION.
#[tokio::test]
async fn alter_replica_log_dirs_knows_its_one_dir() {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "moving", 2).await;
    let described: DescribeLogDirsResponse = client
        .call(
            ApiKey::DescribeLogDirs,
            4,
            &DescribeLogDirsRequest::default(),
        )
        .await;
    let here = described.results[0].log_dir.clone();
    let dir = |path: StrBytes, partitions: Vec<i32>| {
        let mut topic = AlterReplicaLogDirTopic::default();
        topic.name = TopicName(s("moving"));
        topic.partitions = partitions;
        let mut dir = AlterReplicaLogDir::default();
        dir.path = path;
        dir.topics = vec![topic];
        dir
    };
    let mut request = AlterReplicaLogDirsRequest::default();
    request.dirs = vec![dir(here, vec![0, 1, 7]), dir(s("/elsewhere"), vec![0])];
    let codes = at_every_version(
        &mut client,
        ApiKey::AlterReplicaLogDirs,
        &request,
        |r: &AlterReplicaLogDirsResponse| {
            let codes: Vec<i16> = r
                .results
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
                .collect();
            assert_eq!(
                codes,
                [0, 0, 3, 57],
                "NONE, NONE, UNKNOWN_TOPIC_OR_PARTITION, LOG_DIR_NOT_FOUND"
            );
            0
        },
    )
    .await;
    assert_eq!(codes.len(), 2, "v1-v2: {codes:?}");
    drop(client);
    broker.stop().await;
}
