//! OffsetCommit v1, the version sarama 1.x sends by default (`Consumer.Offsets.Retention` 0),
//! over TCP with the bytes sarama 1.22.1 puts on the wire (the layout of
//! `sluice_protocol::compat`'s golden capture, with this group's member and generation).
//!
//! The broker used to refuse v1 as a framing error and close the connection. sarama commits
//! every second once a group member has consumed, and it shares one connection per broker
//! between the producer, the fetcher and the coordinator of a `sarama.Client`; so the close
//! cut off whatever was pipelined behind the commit (produce requests included) and the
//! offsets were never stored. Here a v1 commit is answered in v1's layout, the offset is
//! stored, and a request pipelined behind it on the same connection is still answered.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::{Client, TestBroker, create_topic, s};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

const FAST_GROUPS: &[(&str, &str)] = &[("group.initial.rebalance.delay.ms", "0")];

/// Joins a one-member group (JoinGroup v3, as sarama 1.22.1 with V2_1_0_0) and syncs;
/// returns (member, generation).
async fn join_and_sync_v3(client: &mut Client, group_id: &str) -> (String, i32) {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = Bytes::from_static(b"subscription");
    let mut join = JoinGroupRequest::default();
    join.group_id = GroupId(s(group_id));
    join.session_timeout_ms = 10_000;
    join.rebalance_timeout_ms = 10_000;
    join.protocol_type = s("consumer");
    join.protocols = vec![protocol];
    let joined: JoinGroupResponse = client.call(ApiKey::JoinGroup, 3, &join).await;
    assert_eq!(joined.error_code, 0);
    let member_id = joined.member_id.to_string();
    let mut assignment = SyncGroupRequestAssignment::default();
    assignment.member_id = s(&member_id);
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s(group_id));
    sync.generation_id = joined.generation_id;
    sync.member_id = s(&member_id);
    sync.assignments = vec![assignment];
    let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 2, &sync).await;
    assert_eq!(synced.error_code, 0);
    (member_id, joined.generation_id)
}

fn put_str(buf: &mut BytesMut, text: &str) {
    buf.put_i16(text.len() as i16);
    buf.put_slice(text.as_bytes());
}

/// An OffsetCommit v1 frame laid out as sarama 1.22.1 encodes it: header v1 (client id
/// "sarama"), group, generation, member, then per partition offset, commit timestamp -1
/// (sarama's ReceiveTime) and metadata.
fn sarama_commit_v1(correlation_id: i32, group: &str, generation: i32, member: &str) -> Bytes {
    let mut body = BytesMut::new();
    body.put_i16(8); // OffsetCommit
    body.put_i16(1);
    body.put_i32(correlation_id);
    put_str(&mut body, "sarama");
    put_str(&mut body, group);
    body.put_i32(generation);
    put_str(&mut body, member);
    body.put_i32(1); // topics
    put_str(&mut body, "orders");
    body.put_i32(2); // partitions
    for (partition, offset) in [(0, 42i64), (1, 7)] {
        body.put_i32(partition);
        body.put_i64(offset);
        body.put_i64(-1);
        put_str(&mut body, "meta");
    }
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.put_slice(&body);
    frame.freeze()
}

#[tokio::test]
async fn a_sarama_offset_commit_v1_is_stored_and_the_connection_stays_open() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 2).await;
    let (member, generation) = join_and_sync_v3(&mut client, "sarama-group").await;

    // The v1 commit and, pipelined behind it, a Metadata request on the same connection.
    client
        .send_raw(&sarama_commit_v1(1000, "sarama-group", generation, &member))
        .await;
    let metadata_id = client
        .send(ApiKey::Metadata, 5, &MetadataRequest::default())
        .await;

    let mut frame = client
        .recv_frame()
        .await
        .expect("an OffsetCommit v1 response, not a closed connection");
    let header = ResponseHeader::decode(&mut frame, 0).unwrap();
    assert_eq!(header.correlation_id, 1000);
    // v1's response is v2's layout: topics, partitions, error codes (no throttle time).
    let response = OffsetCommitResponse::decode(&mut frame, 2).unwrap();
    assert!(frame.is_empty(), "{} trailing bytes", frame.len());
    let codes: Vec<(i32, i16)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(response.topics[0].name.0.as_str(), "orders");
    assert_eq!(codes, [(0, 0), (1, 0)]);

    let (got, _): (i32, MetadataResponse) = client.recv(ApiKey::Metadata, 5).await;
    assert_eq!(
        got, metadata_id,
        "the request behind the commit is answered"
    );

    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = GroupId(s("sarama-group"));
    fetch.topics = None;
    let fetched: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 5, &fetch).await;
    let offsets: Vec<(i32, i64, String)> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let metadata = p.metadata.as_ref().map(ToString::to_string);
            (
                p.partition_index,
                p.committed_offset,
                metadata.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(offsets, [(0, 42, "meta".into()), (1, 7, "meta".into())]);
    broker.stop().await;
}

#[tokio::test]
async fn a_stale_generation_in_v1_gets_its_error_code_in_v1_layout() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 2).await;
    let (member, generation) = join_and_sync_v3(&mut client, "sarama-group").await;
    client
        .send_raw(&sarama_commit_v1(
            7,
            "sarama-group",
            generation + 1,
            &member,
        ))
        .await;
    let mut frame = client.recv_frame().await.expect("a response");
    assert_eq!(
        ResponseHeader::decode(&mut frame, 0)
            .unwrap()
            .correlation_id,
        7
    );
    let response = OffsetCommitResponse::decode(&mut frame, 2).unwrap();
    assert!(frame.is_empty());
    for p in &response.topics[0].partitions {
        assert_eq!(p.error_code, 22, "ILLEGAL_GENERATION");
    }
    broker.stop().await;
}
