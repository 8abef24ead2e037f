//! A failed write fences its partition: that produce and every later one to the partition get
//! KAFKA_STORAGE_ERROR, while other partitions keep serving. Runs on the storage engine's
//! fault-injecting filesystem, which also exercises the copying (non-sendfile) fetch path.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestBroker, batch, values};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_storage::io::FaultyFs;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

async fn create(client: &mut Client, topic: &str) {
    let mut request = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    request.topics = Some(vec![t]);
    request.allow_auto_topic_creation = true;
    let response: MetadataResponse = client.call(ApiKey::Metadata, 8, &request).await;
    assert_eq!(response.topics[0].error_code, 0);
}

async fn produce(client: &mut Client, topic: &str, records: Bytes) -> i16 {
    let mut p = PartitionProduceData::default();
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data = vec![p];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.topic_data = vec![t];
    let response: ProduceResponse = client.call(ApiKey::Produce, 8, &request).await;
    response.responses[0].partition_responses[0].error_code
}

async fn fetch_values(client: &mut Client, topic: &str) -> Vec<String> {
    let mut p = FetchPartition::default();
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    values(partition.records.clone().unwrap_or_default())
}

#[tokio::test]
async fn a_failed_write_fences_only_its_partition() {
    let fs = FaultyFs::new();
    let broker =
        TestBroker::start_with(tempfile::tempdir().unwrap(), &[], Arc::new(fs.clone())).await;
    let mut client = broker.client().await;
    create(&mut client, "doomed").await;
    create(&mut client, "healthy").await;
    assert_eq!(produce(&mut client, "doomed", batch(&["before"])).await, 0);

    fs.fail_nth_write(1);
    let storage_error = ResponseError::KafkaStorageError.code();
    assert_eq!(
        produce(&mut client, "doomed", batch(&["lost"])).await,
        storage_error
    );
    assert_eq!(
        produce(&mut client, "doomed", batch(&["after"])).await,
        storage_error,
        "fenced until reopened"
    );

    assert_eq!(produce(&mut client, "healthy", batch(&["fine"])).await, 0);
    assert_eq!(fetch_values(&mut client, "healthy").await, ["fine"]);
}

#[tokio::test]
async fn a_failed_fsync_on_acks_all_is_a_storage_error() {
    let fs = FaultyFs::new();
    let broker = TestBroker::start_with(
        tempfile::tempdir().unwrap(),
        &[("sluice.acks.all.fsync", "true")],
        Arc::new(fs.clone()),
    )
    .await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    fs.fail_nth_sync(1);
    assert_eq!(
        produce(&mut client, "t", batch(&["x"])).await,
        ResponseError::KafkaStorageError.code()
    );
}
