//! The consumer group protocol (KIP-848) against the coordinator on a virtual clock:
//! scenario tests (join, split, revocation before reassignment, leave, static members,
//! session and revocation timeouts, topics growing, offset commits with member epochs (and
//! a transaction's TxnOffsetCommit, KIP-447),
//! the group id namespace shared with classic groups, both assignors) and a seeded
//! simulation whose clients behave like Kafka's Java consumer (revoke, then report;
//! adopt assignments; rejoin with epoch 0 when fenced; crash; leave; static members
//! bounce) and check, after every step, that no partition is owned by two live clients
//! and, once they go quiet, that every partition is owned by exactly one member and the
//! group is Stable. A regex subscription resolves to the topics its member may describe
//! only, again when that changes.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use sluice_group::consumer::assignor;
use sluice_group::{
    Assignment, CommitPartition, ConsumerGroupState, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse, ErrorCode, GroupConfig, OffsetCommitRequest, Request, Response,
    SplitMix64, TopicPartition, TxnOffsetCommitMember,
};

const SESSION: u64 = 45_000;

fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
}

fn harness(list: &[(&str, i32)]) -> Harness {
    let mut h = Harness::new();
    h.c.update_topics(h.now_ms, topics(list));
    h
}

fn join(member_id: &str, names: &[&str]) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|n| (*n).to_owned()).collect()),
        owned: Some(Assignment::new()),
        client_id: "java".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeatRequest::default()
    }
}

fn beat(member_id: &str, epoch: i32, owned: Option<&Assignment>) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: GROUP.into(),
        member_id: member_id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.cloned(),
        client_id: "java".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeatRequest::default()
    }
}

fn send(h: &mut Harness, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
    let rid = h.send(Request::ConsumerGroupHeartbeat(Box::new(req)));
    match h.take(rid) {
        Some(Response::ConsumerGroupHeartbeat(r)) => r,
        other => panic!("expected a heartbeat answer, got {other:?}"),
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

fn all(topic: &str, n: i32) -> Assignment {
    Assignment::from([(topic.to_owned(), (0..n).collect())])
}

#[test]
fn two_members_split_without_overlap_and_one_takes_over_after_leave() {
    let mut h = harness(&[("t", 4)]);
    let a = send(&mut h, join("a", &["t"]));
    assert_eq!((a.error, a.member_epoch), (ErrorCode::None, 1));
    assert_eq!(a.assignment.as_ref().map(count), Some(4));
    let a_owned = a.assignment.unwrap();

    let b = send(&mut h, join("b", &["t"]));
    assert_eq!(b.member_epoch, 2);
    // Nothing for b yet: a still owns everything.
    assert_eq!(b.assignment.as_ref().map(count), Some(0));

    // a must revoke two partitions first; it stays at epoch 1 meanwhile.
    let a2 = send(&mut h, beat("a", 1, Some(&a_owned)));
    assert_eq!(a2.member_epoch, 1);
    let a_kept = a2.assignment.expect("the revocation is announced");
    assert_eq!(count(&a_kept), 2);

    // b asks again before a acknowledged: still nothing.
    let b2 = send(&mut h, beat("b", 2, Some(&Assignment::new())));
    assert!(b2.assignment.is_none_or(|x| count(&x) == 0));

    // a reports the revocation done and moves to epoch 2.
    let a3 = send(&mut h, beat("a", 1, Some(&a_kept)));
    assert_eq!(a3.member_epoch, 2);
    let b3 = send(&mut h, beat("b", 2, Some(&Assignment::new())));
    let b_owned = b3.assignment.expect("b gets the released partitions");
    assert_eq!(count(&b_owned), 2);
    assert!(a_kept["t"].is_disjoint(&b_owned["t"]));
    let g = h.c.consumer_group(GROUP).unwrap();
    assert_eq!(g.state(), ConsumerGroupState::Stable);

    // a leaves; b gets all four at the next epoch.
    let left = send(&mut h, beat("a", -1, None));
    assert_eq!((left.error, left.member_epoch), (ErrorCode::None, -1));
    let b4 = send(&mut h, beat("b", 2, Some(&b_owned)));
    assert_eq!(b4.member_epoch, 3);
    assert_eq!(b4.assignment, Some(all("t", 4)));
}

#[test]
fn epochs_are_checked() {
    let mut h = harness(&[("t", 2)]);
    let a = send(&mut h, join("a", &["t"]));
    let owned = a.assignment.unwrap();
    let ahead = send(&mut h, beat("a", 5, Some(&owned)));
    assert_eq!(ahead.error, ErrorCode::FencedMemberEpoch);
    assert_eq!(
        send(&mut h, beat("nobody", 1, None)).error,
        ErrorCode::UnknownMemberId
    );
    // b joins: a moves to epoch 2 after revoking; a's epoch-1 heartbeat with a subset
    // of its assignment is still accepted (the answer may have been lost).
    send(&mut h, join("b", &["t"]));
    let a2 = send(&mut h, beat("a", 1, Some(&owned)));
    let kept = a2.assignment.unwrap();
    let a3 = send(&mut h, beat("a", 1, Some(&kept)));
    assert_eq!(a3.member_epoch, 2);
    let lost = send(&mut h, beat("a", 1, Some(&kept)));
    assert_eq!((lost.error, lost.member_epoch), (ErrorCode::None, 2));
    let stale = send(&mut h, beat("a", 1, Some(&owned)));
    assert_eq!(stale.error, ErrorCode::FencedMemberEpoch);
    // A fenced member rejoins with epoch 0; its partitions are free again.
    let rejoined = send(&mut h, join("a", &["t"]));
    assert_eq!(rejoined.error, ErrorCode::None);
    assert!(rejoined.member_epoch > 0);
}

#[test]
fn invalid_requests_are_refused() {
    let mut h = harness(&[("t", 2)]);
    let mut no_subscription = join("a", &[]);
    no_subscription.subscribed_topic_names = None;
    assert_eq!(
        send(&mut h, no_subscription).error,
        ErrorCode::InvalidRequest
    );
    let mut unknown = join("a", &["t"]);
    unknown.server_assignor = Some("sticky".into());
    assert_eq!(send(&mut h, unknown).error, ErrorCode::UnsupportedAssignor);
    let mut no_timeout = join("a", &["t"]);
    no_timeout.rebalance_timeout_ms = -1;
    assert_eq!(send(&mut h, no_timeout).error, ErrorCode::InvalidRequest);
    assert_eq!(
        send(&mut h, beat("", 3, None)).error,
        ErrorCode::InvalidRequest
    );
    // An empty member id on a join: the coordinator picks one.
    let picked = send(&mut h, join("", &["t"]));
    assert!(picked.member_id.is_some_and(|id| !id.is_empty()));
}

#[test]
fn static_member_keeps_its_partitions_while_away() {
    let mut h = harness(&[("t", 4)]);
    let mut ja = join("a1", &["t"]);
    ja.instance_id = Some("inst-a".into());
    let a = send(&mut h, ja.clone());
    let owned = a.assignment.unwrap();
    let mut away = beat("a1", -2, None);
    away.instance_id = Some("inst-a".into());
    assert_eq!(send(&mut h, away).member_epoch, -2);
    // Another member joins: it gets nothing, the partitions stay with the static member.
    let b = send(&mut h, join("b", &["t"]));
    assert_eq!(b.assignment.map(|x| count(&x)), Some(0));
    // The instance comes back under a new member id and gets its partitions back.
    ja.member_id = "a2".into();
    let back = send(&mut h, ja.clone());
    assert_eq!(back.error, ErrorCode::None);
    assert_eq!(back.member_id.as_deref(), Some("a2"));
    assert!(
        back.assignment
            .is_some_and(|x| x["t"].is_subset(&owned["t"]))
    );
    // While it is active, the same instance id cannot join again.
    ja.member_id = "a3".into();
    assert_eq!(send(&mut h, ja).error, ErrorCode::UnreleasedInstanceId);
}

#[test]
fn session_timeout_removes_a_member_and_reassigns() {
    let mut h = harness(&[("t", 4)]);
    let a = send(&mut h, join("a", &["t"]));
    let b = send(&mut h, join("b", &["t"]));
    let a_owned = a.assignment.unwrap();
    let a_kept = send(&mut h, beat("a", 1, Some(&a_owned)))
        .assignment
        .unwrap();
    send(&mut h, beat("a", 1, Some(&a_kept)));
    let b_owned = send(&mut h, beat("b", b.member_epoch, Some(&Assignment::new())))
        .assignment
        .unwrap();
    assert_eq!(count(&b_owned), 2);
    // b keeps heartbeating, a goes silent.
    let (mut b_owned, mut epoch) = (b_owned, b.member_epoch);
    for _ in 0..10 {
        h.advance(SESSION / 9);
        let r = send(&mut h, beat("b", epoch, Some(&b_owned)));
        epoch = r.member_epoch;
        b_owned = r.assignment.unwrap_or(b_owned);
    }
    let g = h.c.consumer_group(GROUP).unwrap();
    assert!(!g.members().contains_key("a"));
    assert_eq!(b_owned, all("t", 4));
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let mut h = harness(&[("t", 4)]);
    let a = send(&mut h, join("a", &["t"]));
    let a_owned = a.assignment.unwrap();
    send(&mut h, join("b", &["t"]));
    send(&mut h, beat("a", 1, Some(&a_owned))); // asked to revoke two
    // a keeps heartbeating but never revokes: after the rebalance timeout it is removed.
    for _ in 0..40 {
        h.advance(1_000);
        if send(&mut h, beat("a", 1, Some(&a_owned))).error != ErrorCode::None {
            break;
        }
        send(&mut h, beat("b", 2, Some(&Assignment::new())));
    }
    let g = h.c.consumer_group(GROUP).unwrap();
    assert!(
        !g.members().contains_key("a"),
        "a outlived its rebalance timeout"
    );
}

#[test]
fn added_partitions_start_a_new_epoch() {
    let mut h = harness(&[("t", 2)]);
    let a = send(&mut h, join("a", &["t"]));
    let owned = a.assignment.unwrap();
    assert_eq!(count(&owned), 2);
    let now = h.now_ms;
    h.c.update_topics(now, topics(&[("t", 3)]));
    let a2 = send(&mut h, beat("a", 1, Some(&owned)));
    assert_eq!(a2.member_epoch, 2);
    assert_eq!(a2.assignment, Some(all("t", 3)));
    // A topic created later that the member subscribes to is assigned too.
    let mut sub = beat("a", 2, Some(&all("t", 3)));
    sub.subscribed_topic_names = Some(vec!["t".into(), "later".into()]);
    // A changed subscription bumps the group epoch (as Kafka), even for a missing topic.
    assert_eq!(send(&mut h, sub).member_epoch, 3);
    let now = h.now_ms;
    h.c.update_topics(now, topics(&[("t", 3), ("later", 1)]));
    let a3 = send(&mut h, beat("a", 3, Some(&all("t", 3))));
    assert_eq!(a3.member_epoch, 4);
    assert_eq!(a3.assignment.unwrap()["later"], BTreeSet::from([0]));
}

#[test]
fn range_assignor_is_used_when_members_ask_for_it() {
    let mut h = harness(&[("t", 3), ("u", 3)]);
    let mut a = join("a", &["t", "u"]);
    a.server_assignor = Some(assignor::RANGE.into());
    let mut b = join("b", &["t", "u"]);
    b.server_assignor = Some(assignor::RANGE.into());
    send(&mut h, a);
    send(&mut h, b);
    let g = h.c.consumer_group(GROUP).unwrap();
    assert_eq!(g.assignor(), assignor::RANGE);
    assert_eq!(g.target("a").unwrap()["t"], BTreeSet::from([0, 1]));
    assert_eq!(g.target("a").unwrap()["u"], BTreeSet::from([0, 1]));
    assert_eq!(g.target("b").unwrap()["t"], BTreeSet::from([2]));
}

fn commit(member_id: &str, epoch: i32) -> Request {
    commit_partition(member_id, epoch, 0)
}

fn commit_partition(member_id: &str, epoch: i32, partition: i32) -> Request {
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: epoch,
        member_id: member_id.into(),
        group_instance_id: None,
        partitions: vec![CommitPartition {
            tp: TopicPartition {
                topic: "t".into(),
                partition,
            },
            offset: 7,
            leader_epoch: -1,
            metadata: None,
        }],
    })
}

fn commit_error(h: &mut Harness, request: Request) -> ErrorCode {
    let rid = h.send(request);
    match h.take(rid) {
        Some(Response::OffsetCommit(r)) => r.partitions[0].error,
        other => panic!("expected a commit answer, got {other:?}"),
    }
}

#[test]
fn offset_commits_carry_the_member_epoch() {
    let mut h = harness(&[("t", 2)]);
    send(&mut h, join("a", &["t"]));
    assert_eq!(commit_error(&mut h, commit("a", 1)), ErrorCode::None);
    assert_eq!(
        commit_error(&mut h, commit("a", 0)),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        commit_error(&mut h, commit("x", 1)),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(
        commit_error(&mut h, commit("", -1)),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(h.c.check_member_epoch(GROUP, "a", 1), Ok(()));
    assert_eq!(
        h.c.check_member_epoch(GROUP, "a", 2),
        Err(ErrorCode::StaleMemberEpoch)
    );
    assert_eq!(h.c.check_member_epoch(GROUP, "", -1), Ok(()));
    let tp = TopicPartition {
        topic: "t".into(),
        partition: 0,
    };
    let fetched = h.c.fetch_offsets(GROUP, Some(&[tp])).unwrap();
    assert_eq!(fetched[0].offset, 7);
    // Once the group is empty, the admin client may commit.
    send(&mut h, beat("a", -1, None));
    assert_eq!(commit_error(&mut h, commit("", -1)), ErrorCode::None);
}

/// TxnOffsetCommit (KIP-447) from a consumer-protocol member carries its epoch: a stale one
/// is ILLEGAL_GENERATION (Kafka maps STALE_MEMBER_EPOCH so for transactional commits), an
/// unknown member UNKNOWN_MEMBER_ID, and no member at all only once the group is empty.
#[test]
fn a_txn_offset_commit_names_a_consumer_group_member_at_its_epoch() {
    let mut h = harness(&[("t", 2)]);
    send(&mut h, join("a", &["t"]));
    let check = |h: &Harness, member: &str, epoch: i32| {
        let member = TxnOffsetCommitMember {
            group_id: GROUP.into(),
            generation_id: epoch,
            member_id: member.into(),
            group_instance_id: None,
        };
        h.c.check_txn_offset_commit(&member, &[])
    };
    assert_eq!(check(&h, "a", 1), Ok(()));
    assert_eq!(check(&h, "a", 2), Err(ErrorCode::IllegalGeneration));
    assert_eq!(check(&h, "x", 1), Err(ErrorCode::UnknownMemberId));
    assert_eq!(check(&h, "", -1), Err(ErrorCode::UnknownMemberId));
    send(&mut h, beat("a", -1, None));
    assert_eq!(check(&h, "", -1), Ok(()), "the group is empty");
}

/// KIP-1251: a member commits at the epoch it knows while the heartbeat that acknowledged
/// its revocation moves it to the next one. The partitions it kept were assigned at the
/// older epoch, so the commit is its own; the one it gave up is not.
#[test]
fn a_commit_at_the_epoch_before_a_revocation_keeps_the_partitions_still_owned() {
    let mut h = harness(&[("t", 2)]);
    let a = send(&mut h, join("a", &["t"]));
    assert_eq!(a.member_epoch, 1);
    send(&mut h, join("b", &["t"]));
    let revoking = send(&mut h, beat("a", 1, Some(&a.assignment.unwrap())));
    let kept = revoking.assignment.unwrap();
    let kept_partition = *kept["t"].first().unwrap();
    let given_up = 1 - kept_partition;
    let acked = send(&mut h, beat("a", 1, Some(&kept)));
    assert_eq!(acked.member_epoch, 2);
    assert_eq!(
        commit_error(&mut h, commit_partition("a", 1, kept_partition)),
        ErrorCode::None
    );
    assert_eq!(
        commit_error(&mut h, commit_partition("a", 1, given_up)),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        commit_error(&mut h, commit_partition("a", 3, kept_partition)),
        ErrorCode::StaleMemberEpoch
    );
    // b got the given-up partition at epoch 2: an epoch-1 commit for it is not b's.
    let b = send(&mut h, beat("b", 2, Some(&BTreeMap::new())));
    assert_eq!(b.error, ErrorCode::None);
    assert_eq!(
        commit_error(&mut h, commit_partition("b", 1, given_up)),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        commit_error(&mut h, commit_partition("b", 2, given_up)),
        ErrorCode::None
    );
}

#[test]
fn classic_and_consumer_groups_share_the_namespace() {
    let mut h = harness(&[("t", 2)]);
    send(&mut h, join("a", &["t"]));
    let rid = h.send(Request::JoinGroup(member("classic")));
    match h.take(rid) {
        Some(Response::JoinGroup(r)) => assert_eq!(r.error, ErrorCode::InconsistentGroupProtocol),
        other => panic!("{other:?}"),
    }
    let (results, _) = h.c.delete_groups(&[GROUP.to_owned()]);
    assert_eq!(results[0].1, ErrorCode::NonEmptyGroup);
    let listed = h.c.list_groups();
    assert_eq!(listed[0].consumer_state, Some(ConsumerGroupState::Stable));
    assert_eq!(h.c.describe_group(GROUP).error, ErrorCode::GroupIdNotFound);
    // Empty again: a classic member may take the group over.
    send(&mut h, beat("a", -1, None));
    let rid = h.send(Request::JoinGroup(member("classic")));
    h.advance(10_000);
    assert!(h.answered.contains(&rid));
    assert!(h.c.consumer_group(GROUP).is_none());
    // Now a classic group with a member: a consumer-protocol join is refused.
    assert_eq!(
        send(&mut h, join("b", &["t"])).error,
        ErrorCode::GroupIdNotFound
    );
}

#[test]
fn heartbeat_after_restart_gets_unknown_member_id() {
    let mut h = harness(&[("t", 2)]);
    assert_eq!(
        send(&mut h, beat("a", 3, None)).error,
        ErrorCode::UnknownMemberId
    );
}

// ---- simulation ----

#[derive(Debug, Clone)]
struct SimClient {
    id: String,
    instance_id: Option<String>,
    /// None: not in the group.
    epoch: Option<i32>,
    owned: Assignment,
    /// An assignment received but not yet reconciled (revocations done first).
    pending: Option<Assignment>,
}

struct Sim {
    h: Harness,
    rng: SplitMix64,
    clients: Vec<SimClient>,
    topics: BTreeMap<String, i32>,
    /// Assignments that took partitions away from a client (so the test is not vacuous).
    revocations: usize,
}

impl Sim {
    fn new(seed: u64, n: usize) -> Self {
        let mut h = Harness::with_config(GroupConfig::default());
        let topics = topics(&[("t", 4), ("u", 3)]);
        h.c.update_topics(h.now_ms, topics.clone());
        let clients = (0..n)
            .map(|i| SimClient {
                id: format!("m{i}"),
                instance_id: (i % 3 == 0).then(|| format!("inst-{i}")),
                epoch: None,
                owned: Assignment::new(),
                pending: None,
            })
            .collect();
        Self {
            h,
            rng: SplitMix64::new(seed),
            clients,
            topics,
            revocations: 0,
        }
    }

    fn pick(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n
    }

    /// One heartbeat of client `i`, as the Java consumer does it.
    fn heartbeat(&mut self, i: usize) {
        let c = self.clients[i].clone();
        // Reconcile first: drop revoked partitions, then take the new ones.
        if let Some(next) = self.clients[i].pending.take() {
            self.clients[i].owned = next;
        }
        let owned = self.clients[i].owned.clone();
        let mut req = match c.epoch {
            None => join(&c.id, &["t", "u"]),
            Some(epoch) => beat(&c.id, epoch, Some(&owned)),
        };
        req.instance_id.clone_from(&c.instance_id);
        if c.epoch.is_none() && self.pick(4) == 0 {
            req.server_assignor = Some(assignor::RANGE.into());
        }
        let r = send(&mut self.h, req);
        let me = &mut self.clients[i];
        match r.error {
            ErrorCode::None => {
                me.epoch = Some(r.member_epoch);
                if let Some(a) = r.assignment {
                    // Revocations happen before the next heartbeat reports them; new
                    // partitions are taken only together with them (keep the
                    // intersection now, the rest at the next reconciliation).
                    let kept = intersect(&me.owned, &a);
                    self.revocations += usize::from(kept != me.owned);
                    me.owned = kept;
                    me.pending = Some(a);
                }
            }
            ErrorCode::FencedMemberEpoch | ErrorCode::UnknownMemberId => {
                me.epoch = None;
                me.owned.clear();
                me.pending = None;
            }
            ErrorCode::UnreleasedInstanceId => {}
            other => panic!("unexpected heartbeat error {other:?}"),
        }
    }

    fn leave(&mut self, i: usize, crash: bool) {
        let c = self.clients[i].clone();
        if let (Some(_), false) = (c.epoch, crash) {
            let epoch = if c.instance_id.is_some() { -2 } else { -1 };
            let mut req = beat(&c.id, epoch, None);
            req.instance_id.clone_from(&c.instance_id);
            send(&mut self.h, req);
        }
        let me = &mut self.clients[i];
        me.epoch = None;
        me.owned.clear();
        me.pending = None;
        if c.instance_id.is_some() {
            // A bounced static member comes back with a new member id.
            me.id = format!("{}x", c.id);
        }
    }

    fn step(&mut self) {
        let i = usize::try_from(self.pick(self.clients.len() as u64)).unwrap();
        match self.pick(40) {
            0 => self.leave(i, false),
            1 => self.leave(i, true),
            2 => {
                let topic = if self.pick(2) == 0 { "t" } else { "u" };
                let n = self.topics[topic];
                if n < 8 {
                    self.topics.insert(topic.to_owned(), n + 1);
                    let now = self.h.now_ms;
                    self.h.c.update_topics(now, self.topics.clone());
                }
            }
            3..=6 => {
                let ms = self.pick(3_000);
                self.h.advance(ms);
            }
            _ => self.heartbeat(i),
        }
        self.check_disjoint();
    }

    /// No partition is owned by two clients (what the clients themselves believe).
    fn check_disjoint(&self) {
        let mut seen: BTreeMap<(String, i32), &str> = BTreeMap::new();
        for c in &self.clients {
            for (t, ps) in &c.owned {
                for &p in ps {
                    if let Some(other) = seen.insert((t.clone(), p), &c.id) {
                        panic!("{t}-{p} owned by {other} and {}", c.id);
                    }
                }
            }
        }
    }

    /// Everyone heartbeats until nothing changes; then every partition has one owner.
    fn settle(&mut self) {
        for _ in 0..50 {
            for i in 0..self.clients.len() {
                self.heartbeat(i);
                self.check_disjoint();
            }
            self.h.advance(1_000);
        }
        let g = self.h.c.consumer_group(GROUP).expect("the group exists");
        assert_eq!(g.state(), ConsumerGroupState::Stable, "{g:#?}");
        let live = self.clients.iter().filter(|c| c.epoch.is_some()).count();
        assert_eq!(g.members().len(), live);
        for (topic, &n) in &self.topics {
            for p in 0..n {
                let owners = self
                    .clients
                    .iter()
                    .filter(|c| c.owned.get(topic).is_some_and(|s| s.contains(&p)));
                assert_eq!(owners.count(), 1, "{topic}-{p} after settling");
            }
        }
    }
}

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .filter_map(|(t, ps)| {
            let both: BTreeSet<i32> = b
                .get(t)
                .map(|q| ps.intersection(q).copied().collect())
                .unwrap_or_default();
            (!both.is_empty()).then(|| (t.clone(), both))
        })
        .collect()
}

#[test]
fn simulation_never_double_assigns_and_settles() {
    let mut revocations = 0;
    for seed in 0..40 {
        let mut sim = Sim::new(seed, 2 + usize::try_from(seed % 4).unwrap());
        for _ in 0..400 {
            sim.step();
        }
        sim.settle();
        revocations += sim.revocations;
    }
    assert!(
        revocations > 40,
        "only {revocations} revocations in 40 seeds"
    );
}

/// A regex matcher (prefix `*` patterns) whose authorizer lets `User:tenant-b` describe
/// only the topics in `visible`, shared with the test so it can "revoke" and "grant".
#[derive(Debug)]
struct AclMatcher {
    visible: std::sync::Arc<std::sync::Mutex<BTreeSet<String>>>,
}

impl sluice_group::TopicMatcher for AclMatcher {
    fn is_valid(&self, _regex: &str) -> bool {
        true
    }
    fn matches(&self, regex: &str, topic: &str) -> bool {
        regex
            .strip_suffix(".*")
            .map_or(regex == topic, |prefix| topic.starts_with(prefix))
    }
    fn may_describe(&self, principal: &str, client_host: &str, topic: &str) -> bool {
        assert_eq!((principal, client_host), ("User:tenant-b", "/127.0.0.1"));
        self.visible.lock().unwrap().contains(topic)
    }
}

#[test]
fn a_regex_resolves_only_to_topics_its_member_may_describe() {
    let mut h = harness(&[("a-orders", 2), ("b-orders", 1)]);
    let visible = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::from([
        "b-orders".to_owned()
    ])));
    h.c.set_topic_matcher(Box::new(AclMatcher {
        visible: visible.clone(),
    }));
    let mut req = join("", &[]);
    req.subscribed_topic_names = None;
    req.subscribed_topic_regex = Some(".*".into());
    req.principal = "User:tenant-b".into();
    let first = send(&mut h, req);
    assert_eq!(first.error, ErrorCode::None);
    let id = first.member_id.clone().unwrap();
    assert_eq!(
        first.assignment,
        Some(all("b-orders", 1)),
        "a-orders is not describable"
    );
    // A topic created later that the member may not describe is never assigned.
    h.c.update_topics(
        h.now_ms,
        topics(&[("a-orders", 2), ("b-orders", 1), ("a-new", 3)]),
    );
    let mut again = beat(&id, first.member_epoch, first.assignment.as_ref());
    again.principal = "User:tenant-b".into();
    let answer = send(&mut h, again);
    assert!(answer.assignment.is_none(), "nothing new: {answer:?}");
    // Granted: the next resolution includes it; revoked again: it goes.
    visible.lock().unwrap().insert("a-new".to_owned());
    h.c.resolve_subscriptions_again(h.now_ms);
    let mut after = beat(&id, answer.member_epoch, first.assignment.as_ref());
    after.principal = "User:tenant-b".into();
    let granted = send(&mut h, after);
    let owned = granted.assignment.clone().unwrap();
    assert!(
        owned.contains_key("a-new") && !owned.contains_key("a-orders"),
        "{owned:?}"
    );
    visible.lock().unwrap().remove("a-new");
    h.c.resolve_subscriptions_again(h.now_ms);
    let mut revoked = beat(&id, granted.member_epoch, Some(&owned));
    revoked.principal = "User:tenant-b".into();
    let answer = send(&mut h, revoked);
    assert_eq!(answer.assignment, Some(all("b-orders", 1)));
}
