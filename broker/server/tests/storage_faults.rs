//! A failed write fences its partition: that produce and later ones to the partition get
//! KAFKA_STORAGE_ERROR, while other partitions keep serving; the fence prober lifts the fence
//! once its probe write and fsync succeed, and the partition, reopened from disk, takes
//! appends again without the torn batch (a failed write) or anything not fsynced (a failed
//! fsync). Runs on the storage engine's fault-injecting filesystem, which also exercises
//! the copying (non-sendfile) fetch path.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, TestBroker, batch, create, name, values, wait_until};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use sluice_storage::io::FaultyFs;

/// The error code of an acks=all produce of `records` to partition 0.
async fn produce_code(client: &mut Client, topic: &str, records: Bytes) -> i16 {
    common::produce(client, topic, 0, -1, records)
        .await
        .error_code
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
    assert_eq!(
        produce_code(&mut client, "doomed", batch(&["before"])).await,
        0
    );

    fs.fail_nth_write(1);
    let storage_error = ResponseError::KafkaStorageError.code();
    assert_eq!(
        produce_code(&mut client, "doomed", batch(&["lost"])).await,
        storage_error
    );
    assert_eq!(
        produce_code(&mut client, "healthy", batch(&["fine"])).await,
        0
    );
    assert_eq!(fetch_values(&mut client, "healthy").await, ["fine"]);

    let doomed = broker.broker.topics.partition("doomed", 0).unwrap();
    wait_until("the prober to lift the fence", || {
        !doomed.with_log(|log| log.is_fenced()).unwrap()
    })
    .await;
    assert_eq!(
        produce_code(&mut client, "doomed", batch(&["after"])).await,
        0
    );
    assert_eq!(
        fetch_values(&mut client, "doomed").await,
        ["before", "after"],
        "the torn batch was cut off when the log was reopened from disk"
    );
    let lifted = &broker.broker.metrics.fences.lifted_total;
    assert_eq!(lifted.load(std::sync::atomic::Ordering::Relaxed), 1);
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
    assert_eq!(produce_code(&mut client, "t", batch(&["kept"])).await, 0);
    fs.fail_nth_sync_losing_pages(1);
    assert_eq!(
        produce_code(&mut client, "t", batch(&["x"])).await,
        ResponseError::KafkaStorageError.code()
    );
    let partition = broker.broker.topics.partition("t", 0).unwrap();
    wait_until("the prober to lift the fence", || {
        !partition.with_log(|log| log.is_fenced()).unwrap()
    })
    .await;
    assert_eq!(produce_code(&mut client, "t", batch(&["z"])).await, 0);
    assert_eq!(
        fetch_values(&mut client, "t").await,
        ["kept", "z"],
        "x was written but its fsync failed: cut off, never trusted from the page cache"
    );
}
