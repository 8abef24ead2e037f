//! What the request shape guard costs per request: `shape::check` on a Produce v11 request
//! (one topic, `PARTITIONS` partitions of a 1 KiB record batch each) and on a Fetch v18
//! request, timed over a loop; and the first check, which resolves every shape once. A
//! measurement, not a test: run it in release,
//! `cargo run --release -p sluice-protocol --example shape_cost`; no timing is asserted.

use std::hint::black_box;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use sluice_protocol::shape;

/// Partitions in the timed Produce request.
const PARTITIONS: usize = 16;
/// Bytes of each partition's record set.
const RECORDS_BYTES: usize = 1024;
/// Timed calls per trial.
const ROUNDS: u32 = 100_000;
/// Trials per request; the fastest and the median are reported (the machine is shared).
const TRIALS: usize = 9;

fn produce() -> Bytes {
    let mut request = ProduceRequest::default();
    let mut topic = produce_request::TopicProduceData::default();
    topic.name = TopicName(StrBytes::from_static_str("orders"));
    topic.partition_data = (0..PARTITIONS as i32)
        .map(|index| {
            let mut partition = produce_request::PartitionProduceData::default();
            partition.index = index;
            partition.records = Some(Bytes::from(vec![7u8; RECORDS_BYTES]));
            partition
        })
        .collect();
    request.topic_data = vec![topic];
    request.acks = -1;
    request.timeout_ms = 30_000;
    encode(&request, 11)
}

fn fetch() -> Bytes {
    let mut request = FetchRequest::default();
    let mut topic = fetch_request::FetchTopic::default();
    topic.topic_id = uuid::Uuid::from_u128(7);
    topic.partitions = vec![fetch_request::FetchPartition::default(); PARTITIONS];
    request.topics = vec![topic];
    encode(&request, 18)
}

fn encode<R: Encodable>(request: &R, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    request.encode(&mut buf, version).expect("encodes");
    buf.freeze()
}

fn time(name: &str, key: ApiKey, version: i16, body: &[u8]) {
    shape::check(key, version, body).expect("a real request passes");
    let mut per_call_ns: Vec<u128> = (0..TRIALS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ROUNDS {
                black_box(shape::check(key, version, black_box(body))).ok();
            }
            start.elapsed().as_nanos() / u128::from(ROUNDS)
        })
        .collect();
    per_call_ns.sort_unstable();
    println!(
        "{name} ({} bytes): {} ns per check at best, {} ns median of {TRIALS} trials",
        body.len(),
        per_call_ns[0],
        per_call_ns[TRIALS / 2]
    );
}

fn main() {
    let start = Instant::now();
    shape::check(ApiKey::ApiVersions, 3, &[1, 1, 0]).expect("an empty ApiVersions v3 passes");
    println!(
        "first check (shapes resolved): {} us",
        start.elapsed().as_micros()
    );
    time("Produce v11", ApiKey::Produce, 11, &produce());
    time("Fetch v18", ApiKey::Fetch, 18, &fetch());
}
