//! Fetches across many segments through the sendfile path: large batches in small segments,
//! read back in order with consumer-style fetch loops and a small `partition_max_bytes`
//! (KIP-74: a batch larger than the limit still comes back whole).

mod common;

use common::{Client, TestBroker, batch, values};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const BATCHES: usize = 40;
const VALUE_BYTES: usize = 30_000;

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str("big"))
}

async fn create_small_segment_topic(client: &mut Client) {
    let mut config = CreatableTopicConfig::default();
    config.name = StrBytes::from_static_str("segment.bytes");
    config.value = Some(StrBytes::from_static_str("100000"));
    let mut topic = CreatableTopic::default();
    topic.name = topic_name();
    topic.num_partitions = 1;
    topic.replication_factor = 1;
    topic.configs = vec![config];
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![topic];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(response.topics[0].error_code, 0);
}

fn value(i: usize) -> String {
    format!(
        "{i:05}{}",
        char::from(b'a' + (i % 26) as u8)
            .to_string()
            .repeat(VALUE_BYTES)
    )
}

async fn fetch_from(client: &mut Client, offset: i64, partition_max_bytes: i32) -> Vec<String> {
    let mut p = FetchPartition::default();
    p.fetch_offset = offset;
    p.partition_max_bytes = partition_max_bytes;
    let mut t = FetchTopic::default();
    t.topic = topic_name();
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 50 << 20;
    request.topics = vec![t];
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    values(partition.records.clone().unwrap_or_default())
}

#[tokio::test]
async fn fetch_loops_read_every_segment_in_order() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_small_segment_topic(&mut client).await;
    for i in 0..BATCHES {
        let mut p = PartitionProduceData::default();
        p.records = Some(batch(&[&value(i)]));
        let mut t = TopicProduceData::default();
        t.name = topic_name();
        t.partition_data = vec![p];
        let mut request = ProduceRequest::default();
        request.acks = 1;
        request.topic_data = vec![t];
        let response: ProduceResponse = client.call(ApiKey::Produce, 8, &request).await;
        assert_eq!(
            response.responses[0].partition_responses[0].base_offset,
            i as i64
        );
    }
    let segments = std::fs::read_dir(broker.data_dir().join("topics/big/0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert!(segments > 5, "only {segments} segments");

    for partition_max_bytes in [1, 1 << 20] {
        let mut got = Vec::new();
        while got.len() < BATCHES {
            let more = fetch_from(&mut client, got.len() as i64, partition_max_bytes).await;
            assert!(!more.is_empty(), "fetch at {} returned nothing", got.len());
            got.extend(more);
        }
        assert_eq!(
            got,
            (0..BATCHES).map(value).collect::<Vec<_>>(),
            "partition_max_bytes {partition_max_bytes}"
        );
    }
}
