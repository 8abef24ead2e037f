//! Graceful shutdown and restart: in-flight requests are answered before the broker stops,
//! and topics (partition counts, configs) and their records survive a restart.

mod common;

use common::{TestBroker, batch, name, values};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;

fn fetch(topic: &str, partition: i32, max_wait_ms: i32) -> FetchRequest {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = max_wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 1 << 20;
    request.topics = vec![t];
    request
}

/// Creates `topic` with a 1 h retention.
async fn create_topic(client: &mut common::Client, topic: &str, partitions: i32) {
    common::create_topic_with(client, topic, partitions, &[("retention.ms", "3600000")]).await;
}

/// An acks=all produce of `vals` to one partition; returns the base offset.
async fn produce(client: &mut common::Client, topic: &str, partition: i32, vals: &[&str]) -> i64 {
    let p = common::produce(client, topic, partition, -1, batch(vals)).await;
    assert_eq!(p.error_code, 0);
    p.base_offset
}

#[tokio::test]
async fn topics_and_records_survive_a_restart() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "kept", 2).await;
    produce(&mut client, "kept", 0, &["a", "b"]).await;
    produce(&mut client, "kept", 1, &["c"]).await;
    drop(client);
    let dir = broker.stop().await;
    assert!(
        dir.path().join("topics/kept/0/clean-shutdown").exists(),
        "clean-shutdown marker written"
    );

    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        produce(&mut client, "kept", 0, &["d"]).await,
        2,
        "offsets continue"
    );
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch("kept", 0, 0)).await;
    assert_eq!(
        values(response.responses[0].partitions[0].records.clone().unwrap()),
        ["a", "b", "d"]
    );
    let topic = broker.broker.topics.topic("kept").expect("topic reloaded");
    assert_eq!(topic.partitions.len(), 2);
    assert_eq!(
        topic.overrides.get("retention.ms").map(String::as_str),
        Some("3600000")
    );
}

#[tokio::test]
async fn shutdown_answers_a_parked_long_poll() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let id = client.send(ApiKey::Fetch, 11, &fetch("t", 0, 30_000)).await;
    common::wait_until("the fetch to park", || {
        broker.broker.metrics.waiting_fetches() == 1
    })
    .await;
    let started = std::time::Instant::now();
    let stopping = tokio::spawn(broker.stop());
    let (got, response): (i32, FetchResponse) = client.recv(ApiKey::Fetch, 11).await;
    assert_eq!(got, id);
    assert_eq!(response.responses[0].partitions[0].error_code, 0);
    assert!(
        started.elapsed().as_secs() < 10,
        "shutdown did not wait out the long poll"
    );
    assert!(client.closed_by_broker().await);
    stopping.await.unwrap();
}

/// Produces one record stamped in 2023 (older than the topics' 1 h retention).
async fn produce_ancient(client: &mut common::Client) {
    const YEAR_2023_MS: i64 = 1_700_000_000_000;
    produce_old_at(client, "ancient", YEAR_2023_MS).await;
}

/// Produces `value` to `old`, stamped `timestamp_ms` (acks=1); asserts it was appended.
async fn produce_old_at(client: &mut common::Client, value: &str, timestamp_ms: i64) {
    let records = common::batch_at(&[value], timestamp_ms);
    let p = common::produce(client, "old", 0, 1, records).await;
    assert_eq!(p.error_code, 0);
}

async fn earliest_offset(client: &mut common::Client, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    let mut p = ListOffsetsPartition::default();
    p.timestamp = -2;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.topics = vec![t];
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 5, &request).await;
    response.topics[0].partitions[0].offset
}

#[tokio::test]
async fn retention_runs_on_its_check_interval() {
    let broker = TestBroker::start(&[("log.retention.check.interval.ms", "50")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "old", 1).await; // retention.ms = 1 h
    produce_ancient(&mut client).await;
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    while earliest_offset(&mut client, "old").await != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention never ran"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn retention_ages_records_by_the_brokers_clock() {
    // A record stamped "now" by a manual clock stays through many retention checks while the
    // clock stands still, and goes at the first check after the clock passes retention.ms.
    let start_ms = sluice_server::clock::now_ms();
    let clock = sluice_server::ManualClock::new(start_ms);
    let seams = sluice_server::Seams {
        clock: clock.clone(),
        ..sluice_server::Seams::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let broker =
        TestBroker::start_seams(dir, &[("log.retention.check.interval.ms", "20")], seams).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "old", 1).await; // retention.ms = 1 h
    produce_old_at(&mut client, "fresh", start_ms).await;
    let checks = std::time::Instant::now();
    common::wait_until("several retention checks", || {
        checks.elapsed().as_millis() > 3 * u128::from(sluice_server::limits::LOG_TICK_INTERVAL_MS)
    })
    .await;
    assert_eq!(
        earliest_offset(&mut client, "old").await,
        0,
        "the clock stood still"
    );
    clock.advance(2 * 3_600_000);
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    while earliest_offset(&mut client, "old").await != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "retention did not follow the clock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn old_records_stay_readable_until_the_retention_check() {
    // Kafka checks retention every 5 minutes by default; replayed history must not vanish
    // the moment it is written.
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "old", 1).await;
    produce_ancient(&mut client).await;
    // Several log ticks (flush/roll) pass; the record must still be there.
    let ticks_before = std::time::Instant::now();
    common::wait_until("a few log ticks", || {
        ticks_before.elapsed().as_millis()
            > 3 * u128::from(sluice_server::limits::LOG_TICK_INTERVAL_MS)
    })
    .await;
    assert_eq!(earliest_offset(&mut client, "old").await, 0);
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch("old", 0, 0)).await;
    assert_eq!(
        values(response.responses[0].partitions[0].records.clone().unwrap()),
        ["ancient"]
    );
}
