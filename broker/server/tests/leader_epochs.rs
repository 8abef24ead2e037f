//! Leader epochs over the wire (KIP-101, KIP-320): every time the broker opens a partition
//! that took appends is a new leader epoch; Metadata and ListOffsets answer it,
//! OffsetForLeaderEpoch answers where each epoch ended at every served version, and Fetch
//! and ListOffsets refuse a `current_leader_epoch` that is older or newer than the
//! partition's.

mod common;

use common::{TestBroker, at_every_version, batch, name};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::*;

async fn leader_epoch(client: &mut common::Client, topic: &str) -> i32 {
    let mut request = MetadataRequest::default();
    let mut t = metadata_request::MetadataRequestTopic::default();
    t.name = Some(name(topic));
    request.topics = Some(vec![t]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 8, &request).await;
    response.topics[0].partitions[0].leader_epoch
}

async fn produce(client: &mut common::Client, topic: &str, values: &[&str]) {
    let p = common::produce(client, topic, 0, -1, batch(values)).await;
    assert_eq!(p.error_code, 0);
}

fn epoch_request(topic: &str, current: i32, asked: i32) -> OffsetForLeaderEpochRequest {
    let mut p = OffsetForLeaderPartition::default();
    p.partition = 0;
    p.current_leader_epoch = current;
    p.leader_epoch = asked;
    let mut t = OffsetForLeaderTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    // replica_id stays its default (-2, "a debugging consumer", as for v0-v2).
    let mut request = OffsetForLeaderEpochRequest::default();
    request.topics = vec![t];
    request
}

/// (error, leader epoch, end offset) of the one partition, at `version`.
async fn end_of(
    client: &mut common::Client,
    version: i16,
    request: &OffsetForLeaderEpochRequest,
) -> (i16, i32, i64) {
    let response: OffsetForLeaderEpochResponse = client
        .call(ApiKey::OffsetForLeaderEpoch, version, request)
        .await;
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

fn list_offsets(topic: &str, current: i32, timestamp: i64) -> ListOffsetsRequest {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.current_leader_epoch = current;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![t];
    request
}

fn fetch(topic: &str, current: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.current_leader_epoch = current;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    request
}

/// A broker whose topic `e` has offsets 0..3 in epoch 0 and 3..5 in epoch 1 (a restart
/// between them), and a client of it.
async fn two_epochs() -> (TestBroker, common::Client) {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    common::create_topic(&mut client, "e", 1).await;
    assert_eq!(leader_epoch(&mut client, "e").await, 0);
    produce(&mut client, "e", &["a", "b", "c"]).await; // 0..3 in epoch 0
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        leader_epoch(&mut client, "e").await,
        1,
        "a restart is a new leadership"
    );
    produce(&mut client, "e", &["d", "e"]).await; // 3..5 in epoch 1

    (broker, client)
}

#[tokio::test]
async fn offset_for_leader_epoch_answers_where_each_epoch_ended() {
    let (_broker, mut client) = two_epochs().await;
    for (asked, want) in [(0, (0, 0, 3)), (1, (0, 1, 5)), (2, (0, -1, -1))] {
        let request = epoch_request("e", -1, asked);
        let codes = at_every_version(
            &mut client,
            ApiKey::OffsetForLeaderEpoch,
            &request,
            |r: &OffsetForLeaderEpochResponse| r.topics[0].partitions[0].error_code,
        )
        .await;
        assert_eq!(codes, vec![(2, 0), (3, 0), (4, 0)], "v2-v4 served");
        for version in 2..=4 {
            assert_eq!(
                end_of(&mut client, version, &request).await,
                want,
                "epoch {asked} at v{version}"
            );
        }
    }
    let fenced = end_of(&mut client, 4, &epoch_request("e", 0, 0)).await;
    assert_eq!(fenced.0, ResponseError::FencedLeaderEpoch.code());
    let ahead = end_of(&mut client, 4, &epoch_request("e", 7, 0)).await;
    assert_eq!(ahead.0, ResponseError::UnknownLeaderEpoch.code());
    let unknown = end_of(&mut client, 4, &epoch_request("nope", -1, 0)).await;
    assert_eq!(unknown.0, ResponseError::UnknownTopicOrPartition.code());
}

#[tokio::test]
async fn list_offsets_and_fetch_carry_and_check_the_leader_epoch() {
    let (_broker, mut client) = two_epochs().await;
    let listed: ListOffsetsResponse = client
        .call(ApiKey::ListOffsets, 5, &list_offsets("e", 1, -1))
        .await;
    let latest = &listed.topics[0].partitions[0];
    assert_eq!(
        (latest.error_code, latest.offset, latest.leader_epoch),
        (0, 5, 1)
    );
    let listed: ListOffsetsResponse = client
        .call(ApiKey::ListOffsets, 5, &list_offsets("e", -1, -2))
        .await;
    let earliest = &listed.topics[0].partitions[0];
    assert_eq!((earliest.offset, earliest.leader_epoch), (0, 0));
    let listed: ListOffsetsResponse = client
        .call(ApiKey::ListOffsets, 5, &list_offsets("e", 0, -1))
        .await;
    assert_eq!(
        listed.topics[0].partitions[0].error_code,
        ResponseError::FencedLeaderEpoch.code()
    );

    let fetched: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch("e", 0)).await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        ResponseError::FencedLeaderEpoch.code()
    );
    let fetched: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch("e", 2)).await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    let fetched: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch("e", 1)).await;
    let p = &fetched.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 5));
    let records = p.records.clone().unwrap();
    let epochs: Vec<i32> = sluice_storage::batch::iter_batches(&records)
        .map(|b| b.unwrap().0.partition_leader_epoch)
        .collect();
    assert_eq!(
        epochs,
        vec![0, 0, 0, 1, 1],
        "each batch carries the epoch it was appended in"
    );
}

#[tokio::test]
async fn a_restart_bumps_the_epoch_only_after_appends() {
    let (broker, client) = two_epochs().await;
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(leader_epoch(&mut client, "e").await, 2);
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        leader_epoch(&mut client, "e").await,
        2,
        "after a clean shutdown an epoch with no records is kept"
    );
}
