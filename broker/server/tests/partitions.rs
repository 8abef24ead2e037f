//! CreatePartitions over real TCP: every served version grows a topic, validate_only does
//! not, and a directory left by an interrupted earlier attempt does not leak into the new
//! partition.

mod common;

use common::{TestBroker, create_topic, produce, s};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::*;
use sluice_storage::testing::producer_batch;

fn grow(topic: &str, count: i32, validate_only: bool) -> CreatePartitionsRequest {
    let mut t = CreatePartitionsTopic::default();
    t.name = TopicName(s(topic));
    t.count = count;
    t.assignments = None;
    let mut request = CreatePartitionsRequest::default();
    request.topics = vec![t];
    request.timeout_ms = 30_000;
    request.validate_only = validate_only;
    request
}

#[tokio::test]
async fn every_served_version_grows_the_topic_and_validate_only_does_not() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "grown", 1).await;
    let mut count = 1;
    for version in 0..=3 {
        let checked: CreatePartitionsResponse = client
            .call(
                ApiKey::CreatePartitions,
                version,
                &grow("grown", count + 1, true),
            )
            .await;
        assert_eq!(checked.results[0].error_code, 0, "v{version}: {checked:?}");
        assert_eq!(
            broker
                .broker
                .topics
                .topic("grown")
                .unwrap()
                .partitions
                .len(),
            count as usize
        );
        count += 1;
        let grown: CreatePartitionsResponse = client
            .call(
                ApiKey::CreatePartitions,
                version,
                &grow("grown", count, false),
            )
            .await;
        assert_eq!(grown.results[0].error_code, 0, "v{version}: {grown:?}");
        assert_eq!(
            broker
                .broker
                .topics
                .topic("grown")
                .unwrap()
                .partitions
                .len(),
            count as usize
        );
    }
    let same: CreatePartitionsResponse = client
        .call(ApiKey::CreatePartitions, 3, &grow("grown", count, false))
        .await;
    assert_eq!(same.results[0].error_code, 37, "INVALID_PARTITIONS");
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn a_stale_partition_directory_is_reset_before_the_partition_is_added() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "stale", 1).await;
    drop(client);
    let dir = broker.stop().await;
    // What a crash after creating partition 1's log, before topic.json, leaves (with a
    // record in it, which a reused directory would wrongly bring back).
    let stale = dir.path().join("topics/stale/1");
    {
        let mut log =
            sluice_storage::Log::open(&stale, sluice_storage::LogConfig::default(), 0).unwrap();
        let mut batch = bytes::BytesMut::from(&producer_batch(-1, -1, -1, 3, false)[..]);
        log.append(&mut batch, sluice_storage::Durability::Fsync, 0)
            .unwrap();
        log.close().unwrap();
    }
    let broker = TestBroker::start_in(dir, &[]).await;
    assert_eq!(
        broker
            .broker
            .topics
            .topic("stale")
            .unwrap()
            .partitions
            .len(),
        1
    );
    let mut client = broker.client().await;
    let grown: CreatePartitionsResponse = client
        .call(ApiKey::CreatePartitions, 1, &grow("stale", 2, false))
        .await;
    assert_eq!(grown.results[0].error_code, 0);
    let end = broker
        .broker
        .topics
        .partition("stale", 1)
        .unwrap()
        .with_log(|log| log.log_end_offset().value())
        .unwrap();
    assert_eq!(end, 0, "the new partition starts empty");
    let batch = producer_batch(-1, -1, -1, 1, false);
    assert_eq!(
        produce(&mut client, "stale", 1, -1, batch.into())
            .await
            .base_offset,
        0
    );
    drop(client);
    broker.stop().await;
}
