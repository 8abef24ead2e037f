//! KIP-848's consumer group protocol over TCP with a raw kafka-protocol client: members join
//! with ConsumerGroupHeartbeat and get partitions by topic id (the ids Metadata v12 shows),
//! a second member gets only what the first revoked, ConsumerGroupDescribe shows the group
//! (and refuses a classic one with GROUP_ID_NOT_FOUND), OffsetCommit v9 and OffsetFetch v9
//! check the member epoch, ListGroups v5 filters by type and state, and a topic created
//! later reaches a regex subscription.

mod common;

use std::collections::BTreeMap;

use common::{Client, TestBroker, create_topic, s};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;

/// A heartbeat: a join when `epoch` is 0 (with the subscription), else one reporting `owned`.
fn heartbeat(
    member: &str,
    epoch: i32,
    topics: Option<&[&str]>,
    regex: Option<&str>,
    owned: Option<Vec<TopicPartitions>>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s("kip848"));
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = if epoch == 0 { 10_000 } else { -1 };
    r.subscribed_topic_names = topics.map(|t| t.iter().map(|n| TopicName(s(n))).collect());
    r.subscribed_topic_regex = regex.map(s);
    r.topic_partitions = owned.or_else(|| (epoch == 0).then(Vec::new));
    r
}

async fn beat(
    client: &mut Client,
    r: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    client.call(ApiKey::ConsumerGroupHeartbeat, 1, r).await
}

/// Topic id -> partitions of a heartbeat answer's assignment.
fn assigned(r: &ConsumerGroupHeartbeatResponse) -> BTreeMap<uuid::Uuid, Vec<i32>> {
    let assignment = r.assignment.as_ref().expect("an assignment");
    assignment
        .topic_partitions
        .iter()
        .map(|t| {
            let mut partitions = t.partitions.clone();
            partitions.sort_unstable();
            (t.topic_id, partitions)
        })
        .collect()
}

fn owned(topic_id: uuid::Uuid, partitions: &[i32]) -> Option<Vec<TopicPartitions>> {
    let mut t = TopicPartitions::default();
    t.topic_id = topic_id;
    t.partitions = partitions.to_vec();
    Some(vec![t])
}

async fn topic_id(client: &mut Client, name: &str) -> uuid::Uuid {
    let mut request = MetadataRequest::default();
    let mut topic = MetadataRequestTopic::default();
    topic.name = Some(TopicName(s(name)));
    request.topics = Some(vec![topic]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    let id = response.topics[0].topic_id;
    assert!(!id.is_nil(), "Metadata v12 carries the topic id");
    // And asked for by id alone, Metadata names it.
    let mut by_id = MetadataRequest::default();
    let mut topic = MetadataRequestTopic::default();
    topic.topic_id = id;
    by_id.topics = Some(vec![topic]);
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &by_id).await;
    assert_eq!(
        response.topics[0].name.as_ref().map(|n| n.0.as_str()),
        Some(name)
    );
    id
}

fn commit(member: &str, epoch: i32, offset: i64) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(s("orders"));
    t.partitions = vec![p];
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(s("kip848"));
    r.generation_id_or_member_epoch = epoch;
    r.member_id = s(member);
    r.topics = vec![t];
    r
}

fn fetch(member: &str, epoch: i32) -> OffsetFetchRequest {
    let mut t = OffsetFetchRequestTopics::default();
    t.name = TopicName(s("orders"));
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s("kip848"));
    g.member_id = Some(s(member));
    g.member_epoch = epoch;
    g.topics = Some(vec![t]);
    let mut r = OffsetFetchRequest::default();
    r.groups = vec![g];
    r
}

/// The two-member group of the first test (both at epoch 2) as the admin APIs see it,
/// and its commits at, and not at, a member's epoch.
async fn describe_commit_and_list(client: &mut Client) {
    // ConsumerGroupDescribe: the group, its epochs, members and the assignor.
    let mut describe = ConsumerGroupDescribeRequest::default();
    describe.group_ids = vec![GroupId(s("kip848")), GroupId(s("never-joined"))];
    let described: ConsumerGroupDescribeResponse = client
        .call(ApiKey::ConsumerGroupDescribe, 1, &describe)
        .await;
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!((group.group_epoch, group.assignment_epoch), (2, 2));
    assert_eq!(group.assignor_name.as_str(), "uniform");
    assert_eq!(group.members.len(), 2);
    assert!(group.members.iter().all(|m| m.member_epoch == 2
        && m.assignment.topic_partitions[0].topic_name.0.as_str() == "orders"));
    // Not a consumer group: GROUP_ID_NOT_FOUND, so Kafka's admin client falls back to
    // DescribeGroups.
    assert_eq!(described.groups[1].error_code, 69);

    // OffsetCommit v9 / OffsetFetch v9 at the member's epoch; a stale epoch is refused.
    let ok: OffsetCommitResponse = client
        .call(ApiKey::OffsetCommit, 9, &commit("a", 2, 7))
        .await;
    assert_eq!(ok.topics[0].partitions[0].error_code, 0);
    let stale: OffsetCommitResponse = client
        .call(ApiKey::OffsetCommit, 9, &commit("a", 1, 8))
        .await;
    assert_eq!(
        stale.topics[0].partitions[0].error_code, 113,
        "STALE_MEMBER_EPOCH"
    );
    let fetched: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &fetch("a", 2)).await;
    assert_eq!(fetched.groups[0].error_code, 0);
    assert_eq!(
        fetched.groups[0].topics[0].partitions[0].committed_offset,
        7
    );
    let fenced: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &fetch("z", 2)).await;
    assert_eq!(fenced.groups[0].error_code, 25, "UNKNOWN_MEMBER_ID");

    // ListGroups v5: by type, and by state (case-insensitive).
    let mut list = ListGroupsRequest::default();
    list.types_filter = vec![s("consumer")];
    list.states_filter = vec![s("stable")];
    let listed: ListGroupsResponse = client.call(ApiKey::ListGroups, 5, &list).await;
    assert_eq!(listed.groups.len(), 1, "{listed:?}");
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
    assert_eq!(listed.groups[0].group_state.as_str(), "Stable");
    list.types_filter = vec![s("classic")];
    let listed: ListGroupsResponse = client.call(ApiKey::ListGroups, 5, &list).await;
    assert!(listed.groups.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn members_share_partitions_by_topic_id_and_commit_at_their_epoch() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "orders", 4).await;
    let orders = topic_id(&mut client, "orders").await;

    // a joins alone: every partition.
    let a = beat(
        &mut client,
        &heartbeat("a", 0, Some(&["orders"]), None, None),
    )
    .await;
    assert_eq!((a.error_code, a.member_epoch), (0, 1), "{a:?}");
    assert_eq!(assigned(&a), BTreeMap::from([(orders, vec![0, 1, 2, 3])]));

    // b joins: nothing yet (a still owns everything); a is told to keep two.
    let b = beat(
        &mut client,
        &heartbeat("b", 0, Some(&["orders"]), None, None),
    )
    .await;
    assert_eq!((b.error_code, b.member_epoch), (0, 2), "{b:?}");
    assert!(assigned(&b).values().all(Vec::is_empty), "{b:?}");
    let a = beat(
        &mut client,
        &heartbeat("a", 1, None, None, owned(orders, &[0, 1, 2, 3])),
    )
    .await;
    assert_eq!(a.error_code, 0, "{a:?}");
    let kept = assigned(&a)[&orders].clone();
    assert_eq!(kept.len(), 2, "{a:?}");
    // Once a reports it revoked the rest, b gets them.
    let a = beat(
        &mut client,
        &heartbeat("a", a.member_epoch, None, None, owned(orders, &kept)),
    )
    .await;
    assert_eq!((a.error_code, a.member_epoch), (0, 2), "{a:?}");
    let b = beat(
        &mut client,
        &heartbeat("b", 2, None, None, owned(orders, &[])),
    )
    .await;
    assert_eq!(b.error_code, 0, "{b:?}");
    let mut both = kept.clone();
    both.extend(assigned(&b).get(&orders).cloned().unwrap_or_default());
    both.sort_unstable();
    assert_eq!(both, vec![0, 1, 2, 3]);

    describe_commit_and_list(&mut client).await;

    // Leaving: epoch -1 answered with -1.
    let left = beat(&mut client, &heartbeat("b", -1, None, None, None)).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1), "{left:?}");
    drop(client);
    broker.stop().await;
}

#[tokio::test]
async fn a_regex_subscription_reaches_a_topic_created_later() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "logs-a", 1).await;
    create_topic(&mut client, "other", 1).await;
    let joined = beat(&mut client, &heartbeat("r", 0, None, Some("logs-.*"), None)).await;
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let logs_a = topic_id(&mut client, "logs-a").await;
    assert_eq!(assigned(&joined), BTreeMap::from([(logs_a, vec![0])]));

    create_topic(&mut client, "logs-b", 2).await;
    let logs_b = topic_id(&mut client, "logs-b").await;
    // The coordinator learns of the topic from the broker's topic watch; the next
    // heartbeat carries the new assignment.
    let mut epoch = joined.member_epoch;
    let mut got = BTreeMap::new();
    for _ in 0..100 {
        let r = beat(
            &mut client,
            &heartbeat("r", epoch, None, None, owned(logs_a, &[0])),
        )
        .await;
        assert_eq!(r.error_code, 0, "{r:?}");
        epoch = r.member_epoch;
        if r.assignment.is_some() {
            got = assigned(&r);
            if got.len() == 2 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        got,
        BTreeMap::from([(logs_a, vec![0]), (logs_b, vec![0, 1])])
    );

    // A regex that does not compile is refused with INVALID_REGULAR_EXPRESSION.
    let mut bad = heartbeat("q", 0, None, Some("logs-("), None);
    bad.group_id = GroupId(s("kip848-bad"));
    let refused = beat(&mut client, &bad).await;
    assert_eq!(refused.error_code, 128, "{refused:?}");
    drop(client);
    broker.stop().await;
}
