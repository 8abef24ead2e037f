//! acks=all group commit through the broker: many pipelined acks=all produces from several
//! connections to one partition all succeed with distinct offsets, each connection's answers
//! in request order (its appends go on while earlier requests wait for their fsync); on the fault-injecting filesystem, a failed group fsync answers its waiters
//! with KAFKA_STORAGE_ERROR and fences the partition, while appends acknowledged by an
//! earlier sync stay readable; once the prober lifts the fence the partition continues at
//! the durable offset.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestBroker, batch, create, name, wait_until};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use sluice_storage::io::FaultyFs;

const CLIENTS: usize = 4;
const REQUESTS_PER_CLIENT: usize = 50;

fn acks_all(topic: &str, records: Bytes) -> ProduceRequest {
    let mut p = PartitionProduceData::default();
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data = vec![p];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 10_000;
    request.topic_data = vec![t];
    request
}

/// Sends `count` acks=all produces back to back, then reads every answer: (error, offset).
async fn pipelined(client: &mut Client, topic: &str, count: usize) -> Vec<(i16, i64)> {
    for i in 0..count {
        let request = acks_all(topic, batch(&[&format!("r{i}")]));
        client.send(ApiKey::Produce, 8, &request).await;
    }
    let mut answers = Vec::new();
    let mut last_correlation_id = 0;
    for _ in 0..count {
        let (id, response): (i32, ProduceResponse) = client.recv(ApiKey::Produce, 8).await;
        assert!(id > last_correlation_id, "answers come in request order");
        last_correlation_id = id;
        let p = &response.responses[0].partition_responses[0];
        answers.push((p.error_code, p.base_offset));
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acks_all_produces_all_succeed_with_distinct_offsets() {
    let broker = TestBroker::start(&[("sluice.acks.all.fsync", "true")]).await;
    create(&mut broker.client().await, "busy").await;
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let mut client = broker.client().await;
        tasks.push(tokio::spawn(async move {
            pipelined(&mut client, "busy", REQUESTS_PER_CLIENT).await
        }));
    }
    let mut offsets = Vec::new();
    for task in tasks {
        for (error, offset) in task.await.unwrap() {
            assert_eq!(error, 0);
            offsets.push(offset);
        }
    }
    offsets.sort_unstable();
    let expected: Vec<i64> = (0..(CLIENTS * REQUESTS_PER_CLIENT) as i64).collect();
    assert_eq!(offsets, expected);
}

#[tokio::test]
async fn a_failed_group_fsync_fails_its_waiters_and_fences_the_partition() {
    let fs = FaultyFs::new();
    let broker = TestBroker::start_with(
        tempfile::tempdir().unwrap(),
        &[("sluice.acks.all.fsync", "true")],
        Arc::new(fs.clone()),
    )
    .await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    let durable = pipelined(&mut client, "t", 3).await;
    assert!(durable.iter().all(|&(error, _)| error == 0));

    fs.fail_nth_sync(1);
    let storage_error = ResponseError::KafkaStorageError.code();
    let failed = pipelined(&mut client, "t", 3).await;
    assert!(
        failed.iter().all(|&(error, _)| error == storage_error),
        "every waiter past the durable offset fails: {failed:?}"
    );
    let partition = broker.broker.topics.partition("t", 0).unwrap();
    wait_until("the prober to lift the fence", || {
        !partition.with_log(|log| log.is_fenced()).unwrap()
    })
    .await;
    let later = pipelined(&mut client, "t", 1).await;
    assert_eq!(
        later[0],
        (0, 3),
        "the first three stay acknowledged; the failed ones were cut off"
    );
}
