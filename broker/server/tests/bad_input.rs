//! Hostile and broken input over raw sockets: oversized, negative and truncated frames,
//! unknown APIs and versions, garbage bodies, bad CRCs and oversized batches. The offending
//! connection is closed (or the request gets a Kafka error code) and the broker keeps serving.

mod common;

use bytes::Bytes;
use common::{Client, TestBroker, batch, create, encode_request, produce_request};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

async fn still_serving(broker: &TestBroker) {
    let mut client = broker.client().await;
    let response: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 3, &common::api_versions_request())
        .await;
    assert_eq!(response.error_code, 0);
}

async fn produce_error(client: &mut Client, topic: &str, records: Bytes) -> i16 {
    let response: ProduceResponse = client
        .call(ApiKey::Produce, 8, &produce_request(topic, 0, 1, records))
        .await;
    response.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn a_frame_above_the_limit_is_refused_before_allocation() {
    let broker = TestBroker::start(&[("socket.request.max.bytes", "2000000")]).await;
    let mut client = broker.client().await;
    // Claims 2 GiB - 1 and sends nothing else: the broker must close, not wait or allocate.
    client.send_raw(&i32::MAX.to_be_bytes()).await;
    assert!(client.closed_by_broker().await);
    let mut client = broker.client().await;
    client.send_raw(&2_000_001i32.to_be_bytes()).await;
    assert!(client.closed_by_broker().await);
    still_serving(&broker).await;
}

#[tokio::test]
async fn negative_and_tiny_lengths_close_the_connection() {
    let broker = TestBroker::start(&[]).await;
    for length in [-1i32, 0, 3] {
        let mut client = broker.client().await;
        client.send_raw(&length.to_be_bytes()).await;
        client.send_raw(&[0u8; 8]).await;
        assert!(client.closed_by_broker().await, "length {length}");
    }
    still_serving(&broker).await;
}

#[tokio::test]
async fn unknown_api_keys_and_unserved_versions_close_the_connection() {
    let broker = TestBroker::start(&[]).await;
    let mut frame = encode_request(ApiKey::Metadata, 8, 1, &MetadataRequest::default()).to_vec();
    frame[4..6].copy_from_slice(&999i16.to_be_bytes());
    let mut client = broker.client().await;
    client.send_raw(&frame).await;
    assert!(client.closed_by_broker().await);
    // A version past the table's (DescribeLogDirs v6: v5 is Kafka 4.4's newest, and served),
    // in the layout of the newest.
    let newest = sluice_protocol::versions::lookup(ApiKey::DescribeLogDirs as i16)
        .unwrap()
        .max;
    let describe = DescribeLogDirsRequest::default();
    let mut frame = encode_request(ApiKey::DescribeLogDirs, newest, 1, &describe).to_vec();
    frame[6..8].copy_from_slice(&(newest + 1).to_be_bytes());
    let mut client = broker.client().await;
    client.send_raw(&frame).await;
    assert!(client.closed_by_broker().await);
    still_serving(&broker).await;
}

#[tokio::test]
async fn garbage_bodies_close_only_their_connection() {
    let broker = TestBroker::start(&[]).await;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for key in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DescribeConfigs,
        ApiKey::ApiVersions,
    ] {
        for _ in 0..20 {
            let len = (next() % 200) as usize + 8;
            let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            body[0..2].copy_from_slice(&(key as i16).to_be_bytes());
            let version = sluice_protocol::versions::lookup(key as i16).unwrap().max;
            body[2..4].copy_from_slice(&version.to_be_bytes());
            let mut client = broker.client().await;
            client.send_raw(&(len as i32).to_be_bytes()).await;
            client.send_raw(&body).await;
            // Either a response (the garbage happened to parse) or a close; never a hang.
            let _ = client.recv_frame().await;
        }
    }
    still_serving(&broker).await;
}

/// Valid requests of every served API, to mutate.
fn seeds() -> Vec<(ApiKey, i16, Vec<u8>)> {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let topic = || TopicName(StrBytes::from_static_str("t"));
    let mut fetch = FetchRequest::default();
    let mut ft = FetchTopic::default();
    ft.topic = topic();
    ft.partitions = vec![FetchPartition::default()];
    fetch.topics = vec![ft];
    let mut metadata = MetadataRequest::default();
    let mut mt = MetadataRequestTopic::default();
    mt.name = Some(topic());
    metadata.topics = Some(vec![mt]);
    let mut delete = DeleteTopicsRequest::default();
    delete.topic_names = vec![topic()];
    vec![
        (
            ApiKey::Produce,
            8,
            encode_request(
                ApiKey::Produce,
                8,
                1,
                &produce_request("t", 0, 1, batch(&["a", "b"])),
            )
            .to_vec(),
        ),
        (
            ApiKey::Fetch,
            11,
            encode_request(ApiKey::Fetch, 11, 1, &fetch).to_vec(),
        ),
        (
            ApiKey::Fetch,
            4,
            encode_request(ApiKey::Fetch, 4, 1, &fetch).to_vec(),
        ),
        (
            ApiKey::Metadata,
            8,
            encode_request(ApiKey::Metadata, 8, 1, &metadata).to_vec(),
        ),
        (
            ApiKey::DeleteTopics,
            3,
            encode_request(ApiKey::DeleteTopics, 3, 1, &delete).to_vec(),
        ),
        (
            ApiKey::ApiVersions,
            3,
            encode_request(ApiKey::ApiVersions, 3, 1, &common::api_versions_request()).to_vec(),
        ),
    ]
}

#[tokio::test]
async fn mutated_valid_requests_never_hang_or_crash_the_broker() {
    let broker = TestBroker::start(&[("auto.create.topics.enable", "false")]).await;
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (key, version, frame) in seeds() {
        for _ in 0..40 {
            let mut mutated = frame.clone();
            // Keep the length prefix and API key/version; flip 1-4 bytes after them.
            for _ in 0..(next() % 4 + 1) {
                let at = 8 + (next() as usize) % (mutated.len() - 8);
                mutated[at] = next() as u8;
            }
            let mut client = broker.client().await;
            client.send_raw(&mutated).await;
            // A probe behind it: the broker must answer it or close (a mutated acks=0 produce
            // legitimately gets no answer of its own).
            client
                .send_raw(&encode_request(
                    ApiKey::ApiVersions,
                    0,
                    999_999,
                    &ApiVersionsRequest::default(),
                ))
                .await;
            while let Some(frame) = client.recv_frame().await {
                if frame[..4] == 999_999i32.to_be_bytes() {
                    break;
                }
            }
        }
        let _ = (key, version);
    }
    still_serving(&broker).await;
}

#[tokio::test]
async fn a_truncated_frame_does_not_stall_the_broker() {
    let broker = TestBroker::start(&[]).await;
    let mut stalled = broker.client().await;
    stalled.send_raw(&1000i32.to_be_bytes()).await;
    stalled.send_raw(&[0u8; 10]).await;
    still_serving(&broker).await;
    drop(stalled);
    still_serving(&broker).await;
}

#[tokio::test]
async fn bad_crc_is_corrupt_message() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    let mut records = batch(&["a", "b"]).to_vec();
    let last = records.len() - 1;
    records[last] ^= 0xff;
    assert_eq!(
        produce_error(&mut client, "t", Bytes::from(records)).await,
        ResponseError::CorruptMessage.code()
    );
    let mut truncated = batch(&["a"]).to_vec();
    truncated.truncate(truncated.len() - 3);
    assert_eq!(
        produce_error(&mut client, "t", Bytes::from(truncated)).await,
        ResponseError::CorruptMessage.code()
    );
    assert_eq!(produce_error(&mut client, "t", batch(&["fine"])).await, 0);
}

#[tokio::test]
async fn a_batch_above_message_max_bytes_is_message_too_large() {
    let broker = TestBroker::start(&[("message.max.bytes", "1000")]).await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    let big = "x".repeat(2000);
    assert_eq!(
        produce_error(&mut client, "t", batch(&[&big])).await,
        ResponseError::MessageTooLarge.code()
    );
    assert_eq!(produce_error(&mut client, "t", batch(&["small"])).await, 0);
}

#[tokio::test]
async fn old_produce_versions_get_unsupported_version() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    // Produce v2's body is v3's without transactional_id: encode v3, strip the null id (2 bytes).
    let v3 = encode_request(
        ApiKey::Produce,
        3,
        7,
        &produce_request("t", 0, 1, batch(&["x"])),
    )
    .to_vec();
    let header_len = 2 + 2 + 4 + 2 + "sluice-test".len();
    let mut body = v3[4..4 + header_len].to_vec();
    body[2..4].copy_from_slice(&2i16.to_be_bytes());
    body.extend_from_slice(&v3[4 + header_len + 2..]);
    client.send_raw(&(body.len() as i32).to_be_bytes()).await;
    client.send_raw(&body).await;
    let mut response = client.recv_frame().await.expect("a response");
    assert_eq!(&response[0..4], &7i32.to_be_bytes());
    let decoded = <ProduceResponse as kafka_protocol::protocol::Decodable>::decode(
        &mut response.split_off(4),
        3,
    )
    .unwrap();
    let p = &decoded.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::UnsupportedVersion.code());
}

#[tokio::test]
async fn huge_array_counts_in_tiny_frames_are_refused() {
    // kafka-protocol reserves `count` elements before decoding them; a 2^31 count in a
    // 20-byte frame must be caught before it reaches the decoder (or the process aborts).
    let broker = TestBroker::start(&[]).await;
    let cases: [(ApiKey, i16); 7] = [
        (ApiKey::Metadata, 8),
        (ApiKey::Produce, 8),
        (ApiKey::Fetch, 11),
        (ApiKey::ListOffsets, 5),
        (ApiKey::CreateTopics, 4),
        (ApiKey::DeleteTopics, 3),
        (ApiKey::DescribeConfigs, 3),
    ];
    for (key, version) in cases {
        let mut frame = vec![0u8; 4];
        frame.extend_from_slice(&(key as i16).to_be_bytes());
        frame.extend_from_slice(&version.to_be_bytes());
        frame.extend_from_slice(&1i32.to_be_bytes());
        frame.extend_from_slice(&(-1i16).to_be_bytes()); // null client_id
        // Enough leading fields for every API, then counts of i32::MAX everywhere.
        for _ in 0..12 {
            frame.extend_from_slice(&i32::MAX.to_be_bytes());
        }
        let len = (frame.len() - 4) as i32;
        frame[0..4].copy_from_slice(&len.to_be_bytes());
        let mut client = broker.client().await;
        client.send_raw(&frame).await;
        assert!(client.closed_by_broker().await, "{key:?} v{version}");
    }
    still_serving(&broker).await;
}

#[tokio::test]
async fn a_failed_acks_zero_produce_closes_the_connection() {
    // There is no response to carry the error; Kafka closes so the client notices.
    let broker = TestBroker::start(&[("auto.create.topics.enable", "false")]).await;
    let mut client = broker.client().await;
    let mut request = produce_request("missing", 0, 1, batch(&["x"]));
    request.acks = 0;
    client.send(ApiKey::Produce, 8, &request).await;
    assert!(client.closed_by_broker().await);
    still_serving(&broker).await;
}

#[tokio::test]
async fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let broker = TestBroker::start(&[("connections.max.idle.ms", "100")]).await;
    let mut idle = broker.client().await;
    assert!(idle.closed_by_broker().await);
    still_serving(&broker).await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_connections_max_idle_ms() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use tokio::io::AsyncReadExt;
    let broker = TestBroker::start(&[("connections.max.idle.ms", "300")]).await;
    let mut client = broker.client().await;
    create(&mut client, "t").await;
    let big = "x".repeat(900_000);
    assert_eq!(produce_error(&mut client, "t", batch(&[&big])).await, 0);
    let mut fetch = FetchRequest::default();
    let mut topic = FetchTopic::default();
    topic.topic = TopicName(StrBytes::from_static_str("t"));
    let mut partition = FetchPartition::default();
    partition.partition_max_bytes = 1 << 20;
    topic.partitions = vec![partition];
    fetch.topics = vec![topic];
    fetch.max_bytes = 1 << 20;
    // 40 responses of ~900 KB, far more than the socket buffers hold, and nobody reads them.
    const REQUESTS: usize = 40;
    for _ in 0..REQUESTS {
        client.send(ApiKey::Fetch, 11, &fetch).await;
    }
    let mut read_total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let drained = tokio::time::timeout(common::DEADLINE, async {
        // Start reading only once the broker has given up on us.
        common::wait_until("the broker to close the connection", || {
            broker.broker.metrics.open_connections() == 0
        })
        .await;
        loop {
            match client.stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read_total += n,
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the connection was not closed");
    assert!(
        read_total < REQUESTS * 900_000,
        "all {read_total} bytes arrived: the broker never gave up"
    );
    still_serving(&broker).await;
}
