//! Consumer-group APIs over TCP with a raw kafka-protocol client: the JoinGroup v4
//! MEMBER_ID_REQUIRED handshake, SyncGroup relaying the leader's bytes, Heartbeat,
//! OffsetCommit/OffsetFetch (all partitions from v2), LeaveGroup v3, ListGroups,
//! DescribeGroups, DeleteGroups, FindCoordinator; committed offsets surviving a restart;
//! commits to unknown partitions; a deleted topic's offsets; old versions (JoinGroup v0,
//! LeaveGroup v0); a JoinGroup parked in a rebalance answered at shutdown; the reserved
//! `__consumer_offsets` name; mutated group requests; every served version of every group API.

mod common;

use bytes::Bytes;
use common::{Client, TestBroker, at_every_version, create_topic, encode_request as encode, s};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;

const FAST_GROUPS: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("group.min.session.timeout.ms", "100"),
];

fn group(id: &str) -> GroupId {
    GroupId(s(id))
}

fn join_request(group_id: &str, member_id: &str) -> JoinGroupRequest {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = Bytes::from_static(b"subscription");
    let mut request = JoinGroupRequest::default();
    request.group_id = group(group_id);
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.member_id = s(member_id);
    request.protocol_type = s("consumer");
    request.protocols = vec![protocol];
    request
}

/// Joins a one-member group through the v4 handshake and syncs; returns (member, generation).
async fn join_and_sync_v4(client: &mut Client, group_id: &str) -> (String, i32) {
    let first: JoinGroupResponse = client
        .call(ApiKey::JoinGroup, 4, &join_request(group_id, ""))
        .await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let member_id = first.member_id.to_string();
    assert!(member_id.starts_with("sluice-test-"), "{member_id}");
    let joined: JoinGroupResponse = client
        .call(ApiKey::JoinGroup, 4, &join_request(group_id, &member_id))
        .await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), member_id);
    assert_eq!(
        joined.protocol_name.as_ref().map(|p| p.as_str()),
        Some("range")
    );
    assert_eq!(joined.members.len(), 1);
    assert_eq!(&joined.members[0].metadata[..], b"subscription");
    let mut assignment = SyncGroupRequestAssignment::default();
    assignment.member_id = s(&member_id);
    assignment.assignment = Bytes::from_static(b"leader's bytes");
    let mut sync = SyncGroupRequest::default();
    sync.group_id = group(group_id);
    sync.generation_id = joined.generation_id;
    sync.member_id = s(&member_id);
    sync.assignments = vec![assignment];
    let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 3, &sync).await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"leader's bytes");
    (member_id, joined.generation_id)
}

fn commit_request(
    group_id: &str,
    member: &str,
    generation: i32,
    commits: &[(&str, i32, i64)],
) -> OffsetCommitRequest {
    let mut request = OffsetCommitRequest::default();
    request.group_id = group(group_id);
    request.generation_id_or_member_epoch = generation;
    request.member_id = s(member);
    for (topic, partition, offset) in commits {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = *partition;
        p.committed_offset = *offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(s("meta"));
        let mut t = OffsetCommitRequestTopic::default();
        t.name = TopicName(s(topic));
        t.partitions = vec![p];
        request.topics.push(t);
    }
    request
}

/// Every committed (topic, partition, offset, metadata) of a group (OffsetFetch v5, null topics).
async fn committed(client: &mut Client, group_id: &str) -> Vec<(String, i32, i64, String)> {
    let mut request = OffsetFetchRequest::default();
    request.group_id = group(group_id);
    request.topics = None;
    let response: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 5, &request).await;
    assert_eq!(response.error_code, 0);
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                )
            })
        })
        .collect()
}

/// The Stable group described, its member leaving (v3), listed, then deleted with its offsets.
async fn describe_leave_list_and_delete(client: &mut Client, member: &str) {
    let described: DescribeGroupsResponse = client
        .call(ApiKey::DescribeGroups, 4, &{
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![group("g")];
            r
        })
        .await;
    let g = &described.groups[0];
    assert_eq!(
        (g.group_state.as_str(), g.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(&g.members[0].member_assignment[..], b"leader's bytes");

    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group("g");
    let mut identity = MemberIdentity::default();
    identity.member_id = s(member);
    leave.members = vec![identity];
    let left: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 3, &leave).await;
    assert_eq!((left.error_code, left.members[0].error_code), (0, 0));

    let listed: ListGroupsResponse = client
        .call(ApiKey::ListGroups, 2, &ListGroupsRequest::default())
        .await;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].protocol_type.as_str(), "consumer");

    let delete = |id: &str| {
        let mut r = DeleteGroupsRequest::default();
        r.groups_names = vec![group(id)];
        r
    };
    let deleted: DeleteGroupsResponse = client.call(ApiKey::DeleteGroups, 1, &delete("g")).await;
    assert_eq!(deleted.results[0].error_code, 0);
    let again: DeleteGroupsResponse = client.call(ApiKey::DeleteGroups, 1, &delete("g")).await;
    assert_eq!(again.results[0].error_code, 69, "GROUP_ID_NOT_FOUND");
}

#[tokio::test]
async fn a_member_joins_syncs_heartbeats_commits_and_leaves() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 2).await;

    let find: FindCoordinatorResponse = client
        .call(ApiKey::FindCoordinator, 2, &{
            let mut r = FindCoordinatorRequest::default();
            r.key = s("g");
            r
        })
        .await;
    assert_eq!(find.error_code, 0);
    assert_eq!(i32::from(broker.addr.port()), find.port);

    let (member, generation) = join_and_sync_v4(&mut client, "g").await;
    let mut beat = HeartbeatRequest::default();
    beat.group_id = group("g");
    beat.generation_id = generation;
    beat.member_id = s(&member);
    let beat_ok: HeartbeatResponse = client.call(ApiKey::Heartbeat, 3, &beat).await;
    assert_eq!(beat_ok.error_code, 0);
    beat.generation_id = generation + 1;
    let stale: HeartbeatResponse = client.call(ApiKey::Heartbeat, 3, &beat).await;
    assert_eq!(stale.error_code, 22, "ILLEGAL_GENERATION");

    let commit = commit_request(
        "g",
        &member,
        generation,
        &[("orders", 0, 5), ("orders", 1, 7)],
    );
    let answer: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 7, &commit).await;
    assert!(
        answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == 0)
    );
    let stale = commit_request("g", &member, generation + 1, &[("orders", 0, 9)]);
    let answer: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 7, &stale).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 22);
    assert_eq!(
        committed(&mut client, "g").await,
        vec![
            ("orders".into(), 0, 5, "meta".into()),
            ("orders".into(), 1, 7, "meta".into())
        ]
    );

    describe_leave_list_and_delete(&mut client, &member).await;
    assert!(committed(&mut client, "g").await.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn committed_offsets_survive_a_restart_and_deletions_do_too() {
    let mut sets = FAST_GROUPS.to_vec();
    sets.push(("sluice.acks.all.fsync", "true"));
    let broker = TestBroker::start(&sets).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "a", 1).await;
    create_topic(&mut client, "b", 1).await;
    for (group_id, offset) in [("keep", 3), ("drop", 4)] {
        let commit = commit_request(group_id, "", -1, &[("a", 0, offset), ("b", 0, offset)]);
        let answer: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 7, &commit).await;
        assert!(
            answer
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0)
        );
    }
    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![group("drop")];
    let _: DeleteGroupsResponse = client.call(ApiKey::DeleteGroups, 1, &delete).await;
    let mut delete_topic = DeleteTopicsRequest::default();
    delete_topic.topic_names = vec![TopicName(s("b"))];
    let _: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 3, &delete_topic).await;
    drop(client);

    let dir = broker.stop().await;
    let broker = TestBroker::start_in(dir, &sets).await;
    let mut client = broker.client().await;
    assert_eq!(
        committed(&mut client, "keep").await,
        vec![("a".into(), 0, 3, "meta".into())]
    );
    assert!(committed(&mut client, "drop").await.is_empty());
    broker.stop().await;
}

#[tokio::test]
async fn commits_to_unknown_partitions_are_refused_per_partition() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let commit = commit_request("g", "", -1, &[("t", 0, 1), ("t", 5, 1), ("nope", 0, 1)]);
    let answer: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 2, &commit).await;
    let codes: Vec<i16> = answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes, vec![0, 3, 3]);
    // OffsetFetch v1 names partitions; one never committed reads -1.
    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = group("g");
    let mut topic = OffsetFetchRequestTopic::default();
    topic.name = TopicName(s("t"));
    topic.partition_indexes = vec![0, 3];
    fetch.topics = Some(vec![topic]);
    let fetched: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 1, &fetch).await;
    let offsets: Vec<i64> = fetched.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(offsets, vec![1, -1]);
    broker.stop().await;
}

#[tokio::test]
async fn the_internal_offsets_topic_name_is_reserved() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    let mut t = CreatableTopic::default();
    t.name = TopicName(s("__consumer_offsets"));
    t.num_partitions = 1;
    t.replication_factor = 1;
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![t];
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(response.topics[0].error_code, 17, "INVALID_TOPIC_EXCEPTION");
    // Nor does asking Metadata for it create it.
    let mut metadata = MetadataRequest::default();
    let mut wanted = metadata_request::MetadataRequestTopic::default();
    wanted.name = Some(TopicName(s("__consumer_offsets")));
    metadata.topics = Some(vec![wanted]);
    metadata.allow_auto_topic_creation = true;
    let answer: MetadataResponse = client.call(ApiKey::Metadata, 8, &metadata).await;
    assert_ne!(answer.topics[0].error_code, 0);
    assert!(broker.broker.topics.topic("__consumer_offsets").is_none());
    broker.stop().await;
}

#[tokio::test]
async fn old_versions_join_and_leave() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    // JoinGroup v0: no rebalance timeout, no member-id handshake.
    let joined: JoinGroupResponse = client
        .call(ApiKey::JoinGroup, 0, &join_request("old", ""))
        .await;
    assert_eq!(joined.error_code, 0);
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group("old");
    leave.member_id = joined.member_id.clone();
    let left: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 0, &leave).await;
    assert_eq!(left.error_code, 0);
    let left_again: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 0, &leave).await;
    assert_eq!(left_again.error_code, 25, "UNKNOWN_MEMBER_ID");
    broker.stop().await;
}

#[tokio::test]
async fn a_join_parked_in_a_rebalance_is_answered_at_shutdown() {
    let broker = TestBroker::start(&[("group.initial.rebalance.delay.ms", "600000")]).await;
    let mut client = broker.client().await;
    let id = client
        .send(ApiKey::JoinGroup, 2, &join_request("slow", ""))
        .await;
    // The join waits for the initial rebalance delay; stopping must not wait for it.
    let mut observer = broker.client().await;
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    loop {
        let mut describe = DescribeGroupsRequest::default();
        describe.groups = vec![group("slow")];
        let d: DescribeGroupsResponse = observer.call(ApiKey::DescribeGroups, 4, &describe).await;
        if d.groups[0].group_state.as_str() == "PreparingRebalance" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the join never parked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    drop(observer);
    let stopping = tokio::spawn(broker.stop());
    let (got, parked): (i32, JoinGroupResponse) = client.recv(ApiKey::JoinGroup, 2).await;
    assert_eq!(got, id);
    assert_eq!(parked.error_code, 15, "COORDINATOR_NOT_AVAILABLE");
    stopping.await.unwrap();
}

/// Valid group requests to mutate.
fn group_seeds() -> Vec<(ApiKey, i16, Bytes)> {
    let mut join = join_request("fuzz", "");
    join.group_instance_id = Some(s("instance"));
    let mut sync = SyncGroupRequest::default();
    sync.group_id = group("fuzz");
    sync.member_id = s("m");
    let mut assignment = SyncGroupRequestAssignment::default();
    assignment.member_id = s("m");
    assignment.assignment = Bytes::from_static(b"bytes");
    sync.assignments = vec![assignment];
    let mut beat = HeartbeatRequest::default();
    beat.group_id = group("fuzz");
    beat.member_id = s("m");
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group("fuzz");
    let mut identity = MemberIdentity::default();
    identity.member_id = s("m");
    leave.members = vec![identity];
    let commit = commit_request("fuzz", "", -1, &[("t", 0, 5)]);
    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = group("fuzz");
    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![group("fuzz")];
    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![group("fuzz")];
    vec![
        (ApiKey::JoinGroup, 5, encode(ApiKey::JoinGroup, 5, 1, &join)),
        (ApiKey::SyncGroup, 3, encode(ApiKey::SyncGroup, 3, 1, &sync)),
        (ApiKey::Heartbeat, 3, encode(ApiKey::Heartbeat, 3, 1, &beat)),
        (
            ApiKey::LeaveGroup,
            3,
            encode(ApiKey::LeaveGroup, 3, 1, &leave),
        ),
        (
            ApiKey::OffsetCommit,
            7,
            encode(ApiKey::OffsetCommit, 7, 1, &commit),
        ),
        (
            ApiKey::OffsetFetch,
            5,
            encode(ApiKey::OffsetFetch, 5, 1, &fetch),
        ),
        (
            ApiKey::DescribeGroups,
            4,
            encode(ApiKey::DescribeGroups, 4, 1, &describe),
        ),
        (
            ApiKey::DeleteGroups,
            1,
            encode(ApiKey::DeleteGroups, 1, 1, &delete),
        ),
    ]
}

/// Mutated group requests (1-4 random bytes after the API key and version) never crash the
/// broker or its coordinator. A mutated JoinGroup or SyncGroup may legitimately wait for a
/// rebalance, so each goes on its own connection, dropped afterwards; the coordinator must still serve a
/// full join, sync and commit at the end (a panic in it would answer
/// COORDINATOR_NOT_AVAILABLE from then on).
#[tokio::test]
async fn mutated_group_requests_never_break_the_coordinator() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (key, _, frame) in group_seeds() {
        for _ in 0..60 {
            let mut mutated = frame.to_vec();
            for _ in 0..(next() % 4 + 1) {
                let at = 8 + (next() as usize) % (mutated.len() - 8);
                mutated[at] = next() as u8;
            }
            let mut fuzzed = broker.client().await;
            fuzzed.send_raw(&mutated).await;
            // Only JoinGroup and SyncGroup may park; every other request is answered (or
            // its connection closed) at once.
            if !matches!(key, ApiKey::JoinGroup | ApiKey::SyncGroup) {
                let _answer_or_close = fuzzed.recv_frame().await;
            }
        }
    }
    let (member, generation) = join_and_sync_v4(&mut client, "after-fuzz").await;
    let commit = commit_request("after-fuzz", &member, generation, &[("t", 0, 1)]);
    let answer: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 7, &commit).await;
    assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    drop(client);
    broker.stop().await;
}

/// Every served version of JoinGroup, SyncGroup, Heartbeat and LeaveGroup is decoded,
/// answered and encoded.
#[tokio::test]
async fn every_served_membership_api_version_answers() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    // A new member of a fresh group per version: a second new member would (rightly) wait
    // for the first to rejoin.
    for version in 0..=9 {
        let join = join_request(&format!("every-{version}"), "");
        let joined: JoinGroupResponse = client.call(ApiKey::JoinGroup, version, &join).await;
        let expected = if version >= 4 { 79 } else { 0 };
        assert_eq!(joined.error_code, expected, "JoinGroup v{version}");
    }

    let mut sync = SyncGroupRequest::default();
    sync.group_id = group("every");
    sync.member_id = s("nobody");
    let codes = at_every_version(
        &mut client,
        ApiKey::SyncGroup,
        &sync,
        |r: &SyncGroupResponse| r.error_code,
    )
    .await;
    assert!(
        codes.len() == 6 && codes.iter().all(|&(_, c)| c == 25),
        "{codes:?}"
    );

    let mut beat = HeartbeatRequest::default();
    beat.group_id = group("every");
    beat.member_id = s("nobody");
    let codes = at_every_version(
        &mut client,
        ApiKey::Heartbeat,
        &beat,
        |r: &HeartbeatResponse| r.error_code,
    )
    .await;
    assert!(
        codes.len() == 5 && codes.iter().all(|&(_, c)| c == 25),
        "{codes:?}"
    );

    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group("every");
    leave.member_id = s("nobody");
    let old = at_every_version(
        &mut client,
        ApiKey::LeaveGroup,
        &leave,
        |r: &LeaveGroupResponse| r.error_code,
    )
    .await;
    assert!(
        old.len() == 3 && old.iter().all(|&(_, c)| c == 25),
        "{old:?}"
    );

    drop(client);
    broker.stop().await;
}

/// The id of topic `name` (Metadata v12).
async fn topic_id(client: &mut Client, name: &str) -> uuid::Uuid {
    let mut request = MetadataRequest::default();
    let mut topic = metadata_request::MetadataRequestTopic::default();
    topic.name = Some(TopicName(s(name)));
    request.topics = Some(vec![topic]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    response.topics[0].topic_id
}

/// OffsetFetch v8+ (groups, each naming its topics, by id from v10; v9: and the member
/// asking, none here) finds the commit of `every_served_offsets_and_admin_api_version_answers`.
async fn fetch_grouped_at_every_version(client: &mut Client, id: uuid::Uuid) {
    // v8+: groups, each naming its topics (v9: and the member asking; none here).
    let mut grouped = OffsetFetchRequest::default();
    let mut entry = offset_fetch_request::OffsetFetchRequestGroup::default();
    entry.group_id = group("every-commit");
    let mut topic = offset_fetch_request::OffsetFetchRequestTopics::default();
    topic.name = TopicName(s("t"));
    topic.topic_id = id;
    topic.partition_indexes = vec![0];
    entry.topics = Some(vec![topic]);
    grouped.groups = vec![entry];
    let offsets = at_every_version(
        client,
        ApiKey::OffsetFetch,
        &grouped,
        |r: &OffsetFetchResponse| r.groups[0].topics[0].partitions[0].committed_offset as i16,
    )
    .await;
    assert!(
        offsets.len() == 3 && offsets.iter().all(|&(_, o)| o == 4),
        "{offsets:?}"
    );
}

/// Every served version of OffsetCommit, OffsetFetch, ListGroups, DescribeGroups and
/// DeleteGroups is decoded, answered and encoded.
#[tokio::test]
async fn every_served_offsets_and_admin_api_version_answers() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    let id = topic_id(&mut client, "t").await;
    // By name, and from v10 by id (each version writes the one it has).
    let mut commit = commit_request("every-commit", "", -1, &[("t", 0, 4)]);
    commit.topics[0].topic_id = id;
    let codes = at_every_version(
        &mut client,
        ApiKey::OffsetCommit,
        &commit,
        |r: &OffsetCommitResponse| r.topics[0].partitions[0].error_code,
    )
    .await;
    assert!(
        codes.len() == 9 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );

    let mut fetch = OffsetFetchRequest::default();
    fetch.group_id = group("every-commit");
    let mut topic = OffsetFetchRequestTopic::default();
    topic.name = TopicName(s("t"));
    topic.partition_indexes = vec![0];
    fetch.topics = Some(vec![topic]);
    let offsets = at_every_version(
        &mut client,
        ApiKey::OffsetFetch,
        &fetch,
        |r: &OffsetFetchResponse| r.topics[0].partitions[0].committed_offset as i16,
    )
    .await;
    assert!(
        offsets.len() == 7 && offsets.iter().all(|&(_, o)| o == 4),
        "{offsets:?}"
    );
    fetch_grouped_at_every_version(&mut client, id).await;

    let listed = at_every_version(
        &mut client,
        ApiKey::ListGroups,
        &ListGroupsRequest::default(),
        |r: &ListGroupsResponse| r.groups.len() as i16,
    )
    .await;
    assert!(
        listed.len() == 6 && listed.iter().all(|&(_, n)| n == 1),
        "{listed:?}"
    );

    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![group("every-commit")];
    let codes = at_every_version(
        &mut client,
        ApiKey::DescribeGroups,
        &describe,
        |r: &DescribeGroupsResponse| r.groups[0].error_code,
    )
    .await;
    assert!(
        codes.len() == 7 && codes.iter().all(|&(_, c)| c == 0),
        "{codes:?}"
    );

    let mut delete = DeleteGroupsRequest::default();
    delete.groups_names = vec![group("no-such-group")];
    let codes = at_every_version(
        &mut client,
        ApiKey::DeleteGroups,
        &delete,
        |r: &DeleteGroupsResponse| r.results[0].error_code,
    )
    .await;
    assert!(
        codes.len() == 4 && codes.iter().all(|&(_, c)| c == 69),
        "{codes:?}"
    );
    drop(client);
    broker.stop().await;
}

/// DescribeGroups of an unknown group: Dead without an error before v6, GROUP_ID_NOT_FOUND
/// from v6 (KIP-1043), with Kafka's message.
#[tokio::test]
async fn describing_an_unknown_group_is_group_id_not_found_from_v6() {
    let broker = TestBroker::start(FAST_GROUPS).await;
    let mut client = broker.client().await;
    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![group("no-such-group")];
    let unknown = at_every_version(
        &mut client,
        ApiKey::DescribeGroups,
        &describe,
        |r: &DescribeGroupsResponse| r.groups[0].error_code,
    )
    .await;
    let expected: Vec<(i16, i16)> = (0..=6).map(|v| (v, if v >= 6 { 69 } else { 0 })).collect();
    assert_eq!(unknown, expected);
    let v6: DescribeGroupsResponse = client.call(ApiKey::DescribeGroups, 6, &describe).await;
    assert_eq!(v6.groups[0].group_state.as_str(), "Dead");
    assert_eq!(
        v6.groups[0].error_message.as_deref(),
        Some("Group no-such-group not found.")
    );
    drop(client);
    broker.stop().await;
}

fn offset_delete(group_id: &str, partitions: &[(&str, i32)]) -> OffsetDeleteRequest {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let mut request = OffsetDeleteRequest::default();
    request.group_id = group(group_id);
    for (topic, partition) in partitions {
        let mut p = OffsetDeleteRequestPartition::default();
        p.partition_index = *partition;
        let mut t = OffsetDeleteRequestTopic::default();
        t.name = TopicName(s(topic));
        t.partitions = vec![p];
        request.topics.push(t);
    }
    request
}

/// OffsetDelete: an unknown group, an Empty group's offsets deleted per partition (the
/// deletion survives a restart), an unknown partition refused on its own.
#[tokio::test]
async fn offset_delete_drops_an_empty_groups_offsets_per_partition() {
    let mut sets = FAST_GROUPS.to_vec();
    sets.push(("sluice.acks.all.fsync", "true"));
    let broker = TestBroker::start(&sets).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "od", 2).await;
    let commit = commit_request("simple", "", -1, &[("od", 0, 3), ("od", 1, 4)]);
    let _: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 7, &commit).await;

    let missing: OffsetDeleteResponse = client
        .call(
            ApiKey::OffsetDelete,
            0,
            &offset_delete("nobody", &[("od", 0)]),
        )
        .await;
    assert_eq!(missing.error_code, 69, "GROUP_ID_NOT_FOUND");
    let deleted: OffsetDeleteResponse = client
        .call(
            ApiKey::OffsetDelete,
            0,
            &offset_delete("simple", &[("od", 0), ("od", 9)]),
        )
        .await;
    assert_eq!(deleted.error_code, 0);
    let codes: Vec<i16> = deleted
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes, vec![0, 3], "the unknown partition alone is refused");
    assert_eq!(
        committed(&mut client, "simple").await,
        vec![("od".into(), 1, 4, "meta".into())]
    );
    drop(client);
    let broker = TestBroker::start_in(broker.stop().await, &sets).await;
    let mut client = broker.client().await;
    assert_eq!(
        committed(&mut client, "simple").await,
        vec![("od".into(), 1, 4, "meta".into())],
        "the deletion is in the offsets log"
    );
    drop(client);
    broker.stop().await;
}
