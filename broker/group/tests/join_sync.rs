//! JoinGroup and SyncGroup through the coordinator's public API on a virtual clock:
//! the happy path for 1 and 3 members, the initial rebalance delay, leader election and
//! assignment relay, the MEMBER_ID_REQUIRED handshake, protocol selection, request-level
//! errors, rejoins during a rebalance and the cooperative (client-driven) protocol.

mod common;

use common::*;
use sluice_group::{
    ErrorCode, GroupConfig, GroupState, JoinGroupRequest, Request, SyncGroupRequest,
};

#[test]
fn one_member_joins_after_the_initial_delay_and_syncs() {
    let mut h = Harness::new();
    let rid = h.join(member("solo"));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.advance(2_999);
    assert!(h.pending(rid), "the initial rebalance delay holds the join");
    h.advance(1);
    let join = h.join_response(rid);
    assert_eq!(join.error, ErrorCode::None);
    assert_eq!(
        (join.generation_id, join.leader.as_str()),
        (1, join.member_id.as_str())
    );
    assert!(join.member_id.starts_with("solo-"));
    assert_eq!(join.protocol_name.as_deref(), Some("range"));
    assert_eq!(join.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(join.members.len(), 1);
    assert_eq!(&join.members[0].metadata[..], b"sub");
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(
        h.heartbeat(1, &join.member_id),
        ErrorCode::None,
        "heartbeat is fine while completing"
    );

    let sync = h.sync(1, &join.member_id, &[(&join.member_id, b"all")]);
    let sync = h.sync_response(sync);
    assert_eq!(
        (sync.error, &sync.assignment[..]),
        (ErrorCode::None, &b"all"[..])
    );
    assert_eq!(sync.protocol_name.as_deref(), Some("range"));
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.heartbeat(1, &join.member_id), ErrorCode::None);
}

#[test]
fn three_members_leader_gets_members_and_assignment_is_relayed_to_all() {
    let mut h = Harness::new();
    let a = h.join(member("a"));
    h.advance(1_000);
    let b = h.join(member("b"));
    h.advance(1_000);
    let c = h.join(member("c"));
    h.advance(1_000); // t=3000: a member arrived during the delay: wait one more delay
    assert!(h.pending(a) && h.pending(b) && h.pending(c));
    h.advance(3_000);
    let (a, b, c) = (h.join_response(a), h.join_response(b), h.join_response(c));
    assert_eq!(a.leader, a.member_id, "the first member leads");
    for r in [&a, &b, &c] {
        assert_eq!(
            (r.error, r.generation_id, r.leader.as_str()),
            (ErrorCode::None, 1, a.member_id.as_str())
        );
    }
    assert_eq!(a.members.len(), 3);
    assert!(
        b.members.is_empty() && c.members.is_empty(),
        "only the leader sees the members"
    );

    let b_sync = h.sync(1, &b.member_id, &[]);
    let c_sync = h.sync(1, &c.member_id, &[]);
    assert!(
        h.pending(b_sync) && h.pending(c_sync),
        "followers wait for the leader"
    );
    let a_sync = h.sync(
        1,
        &a.member_id,
        &[(&a.member_id, b"p0"), (&b.member_id, b"p1")],
    );
    assert_eq!(&h.sync_response(a_sync).assignment[..], b"p0");
    assert_eq!(&h.sync_response(b_sync).assignment[..], b"p1");
    let c_sync = h.sync_response(c_sync);
    assert_eq!(c_sync.error, ErrorCode::None);
    assert!(
        c_sync.assignment.is_empty(),
        "a member the leader left out gets an empty assignment"
    );
    assert_eq!(h.state(), GroupState::Stable);
    let again = h.sync(1, &b.member_id, &[]);
    assert_eq!(
        &h.sync_response(again).assignment[..],
        b"p1",
        "a Stable group answers syncs at once"
    );
}

#[test]
fn initial_delay_is_bounded_by_the_rebalance_timeout() {
    let mut h = Harness::new();
    let short = |n| JoinGroupRequest {
        rebalance_timeout_ms: 5_000,
        ..member(n)
    };
    let a = h.join(short("a"));
    h.advance(2_000);
    let _b = h.join(short("b"));
    h.advance(2_000); // t=4000: extended by min(3000, 2000 remaining) to t=5000
    let _c = h.join(short("c"));
    h.advance(999);
    assert!(h.pending(a));
    h.advance(1);
    assert_eq!(h.join_response(a).members.len(), 3);
}

#[test]
fn member_id_required_handshake() {
    let mut h = Harness::no_delay();
    let first = h.join_now(JoinGroupRequest {
        require_known_member_id: true,
        supports_skip_assignment: false,
        ..member("rd")
    });
    assert_eq!(first.error, ErrorCode::MemberIdRequired);
    assert!(first.member_id.starts_with("rd-"));
    assert_eq!(
        h.state(),
        GroupState::Empty,
        "a pending member is not a member"
    );
    let rid = h.join(JoinGroupRequest {
        require_known_member_id: true,
        supports_skip_assignment: false,
        ..rejoin(&first.member_id)
    });
    h.advance(0);
    let joined = h.join_response(rid);
    assert_eq!(
        (joined.error, joined.member_id),
        (ErrorCode::None, first.member_id)
    );
}

#[test]
fn pending_member_expires_after_its_session_timeout() {
    let mut h = Harness::no_delay();
    let first = h.join_now(JoinGroupRequest {
        require_known_member_id: true,
        supports_skip_assignment: false,
        ..member("rd")
    });
    h.advance(SESSION_MS as u64);
    let late = h.join_now(rejoin(&first.member_id));
    assert_eq!(late.error, ErrorCode::UnknownMemberId);
}

#[test]
fn pending_member_expires_after_a_shorter_rebalance_timeout() {
    let rebalance_timeout_ms = SESSION_MS / 4;
    let rejoin_after = |wait_ms: u64| {
        let mut h = Harness::no_delay();
        let first = h.join_now(JoinGroupRequest {
            require_known_member_id: true,
            supports_skip_assignment: false,
            rebalance_timeout_ms,
            ..member("rd")
        });
        h.advance(wait_ms);
        let rid = h.join(JoinGroupRequest {
            rebalance_timeout_ms,
            ..rejoin(&first.member_id)
        });
        h.advance(0);
        h.join_response(rid).error
    };
    assert_eq!(
        rejoin_after(rebalance_timeout_ms as u64 - 1),
        ErrorCode::None
    );
    assert_eq!(
        rejoin_after(rebalance_timeout_ms as u64),
        ErrorCode::UnknownMemberId,
        "expired with the rebalance timeout, long before the session timeout"
    );
}

#[test]
fn protocol_with_most_votes_among_common_ones_is_selected() {
    let mut h = Harness::no_delay();
    let with = |n, p: &[(&str, &[u8])]| JoinGroupRequest {
        protocols: protocols(p),
        ..member(n)
    };
    let a = h.join(with("a", &[("range", b"a"), ("roundrobin", b"a")]));
    let _b = h.join(with("b", &[("range", b"b"), ("roundrobin", b"b")]));
    let _c = h.join(with("c", &[("roundrobin", b"c"), ("range", b"c")]));
    h.advance(0);
    let a = h.join_response(a);
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    let mut h = Harness::no_delay();
    let a = h.join(with("a", &[("range", b"a"), ("roundrobin", b"a")]));
    let _b = h.join(with("b", &[("roundrobin", b"b")]));
    h.advance(0);
    let a = h.join_response(a);
    assert_eq!(
        a.protocol_name.as_deref(),
        Some("roundrobin"),
        "only protocols all members support"
    );
    assert_eq!(
        &a.members[0].metadata[..],
        b"a",
        "metadata of the selected protocol"
    );
}

#[test]
fn inconsistent_group_protocol() {
    let mut h = Harness::no_delay();
    let empty = h.join_now(JoinGroupRequest {
        protocols: vec![],
        ..member("a")
    });
    assert_eq!(empty.error, ErrorCode::InconsistentGroupProtocol);
    h.join(member("a"));
    let other_type = h.join_now(JoinGroupRequest {
        protocol_type: "connect".into(),
        ..member("b")
    });
    assert_eq!(other_type.error, ErrorCode::InconsistentGroupProtocol);
    let no_common = h.join_now(JoinGroupRequest {
        protocols: protocols(&[("sticky", b"")]),
        ..member("b")
    });
    assert_eq!(no_common.error, ErrorCode::InconsistentGroupProtocol);
}

#[test]
fn request_level_join_errors() {
    let mut h = Harness::new();
    let no_group = h.join_now(JoinGroupRequest {
        group_id: String::new(),
        ..member("a")
    });
    assert_eq!(no_group.error, ErrorCode::InvalidGroupId);
    let short = h.join_now(JoinGroupRequest {
        session_timeout_ms: 5_999,
        ..member("a")
    });
    assert_eq!(short.error, ErrorCode::InvalidSessionTimeout);
    let long = h.join_now(JoinGroupRequest {
        session_timeout_ms: 1_800_001,
        ..member("a")
    });
    assert_eq!(long.error, ErrorCode::InvalidSessionTimeout);
    let negative = h.join_now(JoinGroupRequest {
        rebalance_timeout_ms: -1,
        ..member("a")
    });
    assert_eq!(negative.error, ErrorCode::InvalidRequest);
    let huge_id = h.join_now(JoinGroupRequest {
        client_id: "x".repeat(256),
        ..member("a")
    });
    assert_eq!(huge_id.error, ErrorCode::InvalidRequest);
    let unknown = h.join_now(rejoin("ghost"));
    assert_eq!(
        unknown.error,
        ErrorCode::UnknownMemberId,
        "a member id for a group that does not exist"
    );
    assert_eq!(h.state(), GroupState::Dead, "no group was created");
}

#[test]
fn group_max_size_reached() {
    let mut h = Harness::with_config(GroupConfig {
        group_max_size: 2,
        ..GroupConfig::default()
    });
    h.stable_group(&["a", "b"]);
    let third = h.join_now(member("c"));
    assert_eq!(third.error, ErrorCode::GroupMaxSizeReached);
    assert_eq!(
        h.state(),
        GroupState::Stable,
        "a refused member does not disturb the group"
    );
}

#[test]
fn follower_rejoining_unchanged_gets_current_generation_without_rebalance() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let again = h.join_now(rejoin(&ids[1]));
    assert_eq!(
        (again.error, again.generation_id),
        (ErrorCode::None, generation)
    );
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn leader_or_changed_member_rejoin_starts_a_rebalance_others_learn_by_heartbeat() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let a = h.join(rejoin(&ids[0]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(generation, &ids[1]),
        ErrorCode::RebalanceInProgress
    );
    let stale = h.sync(generation, &ids[1], &[]);
    assert_eq!(h.sync_response(stale).error, ErrorCode::RebalanceInProgress);
    let b = h.join(rejoin(&ids[1]));
    let (a, b) = (h.join_response(a), h.join_response(b));
    assert_eq!(
        (a.generation_id, b.generation_id),
        (generation + 1, generation + 1),
        "all rejoined: done at once"
    );
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    assert_eq!(
        h.heartbeat(generation, &ids[1]),
        ErrorCode::IllegalGeneration
    );
}

#[test]
fn retried_join_supersedes_the_first() {
    let mut h = Harness::new();
    let (ids, _) = h.stable_group(&["a", "b"]);
    let first = h.join(rejoin(&ids[0]));
    let second = h.join(rejoin(&ids[0]));
    assert_eq!(h.join_response(first).error, ErrorCode::RebalanceInProgress);
    assert!(h.pending(second));
}

#[test]
fn join_during_completing_rebalance_cancels_waiting_syncs() {
    let mut h = Harness::no_delay();
    let a = h.join(member("a"));
    let b = h.join(member("b"));
    h.advance(0);
    let (a, b) = (h.join_response(a), h.join_response(b));
    let b_sync = h.sync(1, &b.member_id, &[]);
    let same = h.join_now(rejoin(&a.member_id));
    assert_eq!(
        (same.error, same.generation_id),
        (ErrorCode::None, 1),
        "unchanged rejoin while completing"
    );
    let c = h.join(member("c"));
    assert_eq!(
        h.sync_response(b_sync).error,
        ErrorCode::RebalanceInProgress
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let a2 = h.join(rejoin(&a.member_id));
    let b2 = h.join(rejoin(&b.member_id));
    for rid in [a2, b2, c] {
        assert_eq!(h.join_response(rid).generation_id, 2);
    }
}

#[test]
fn sync_errors() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let wrong_gen = h.sync(generation + 1, &ids[0], &[]);
    assert_eq!(
        h.sync_response(wrong_gen).error,
        ErrorCode::IllegalGeneration
    );
    let unknown = h.sync(generation, "ghost", &[]);
    assert_eq!(h.sync_response(unknown).error, ErrorCode::UnknownMemberId);
    let other_protocol = h.send(Request::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: ids[0].clone(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("roundrobin".into()),
        assignments: vec![],
    }));
    assert_eq!(
        h.sync_response(other_protocol).error,
        ErrorCode::InconsistentGroupProtocol
    );
    let no_group = h.send(Request::SyncGroup(SyncGroupRequest {
        group_id: "nope".into(),
        generation_id: 1,
        member_id: ids[0].clone(),
        group_instance_id: None,
        protocol_type: None,
        protocol_name: None,
        assignments: vec![],
    }));
    assert_eq!(h.sync_response(no_group).error, ErrorCode::UnknownMemberId);
}

#[test]
fn heartbeat_errors() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    assert_eq!(
        h.heartbeat(generation - 1, &ids[0]),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(h.heartbeat(generation, "ghost"), ErrorCode::UnknownMemberId);
    let other = h.send(Request::Heartbeat(sluice_group::HeartbeatRequest {
        group_id: "nope".into(),
        generation_id: 1,
        member_id: ids[0].clone(),
        group_instance_id: None,
    }));
    assert!(matches!(
        h.take(other),
        Some(sluice_group::Response::Heartbeat(r)) if r.error == ErrorCode::UnknownMemberId
    ));
}

/// Cooperative rebalancing is driven by the clients (KIP-429): members rejoin with their
/// owned partitions in the subscription metadata, the leader revokes some, and the members
/// that lost partitions rejoin for a second round. The broker only relays bytes.
#[test]
fn cooperative_rebalance_relays_owned_partitions_over_two_rounds() {
    let mut h = Harness::new();
    let coop = |n: &str, owned: &[u8]| JoinGroupRequest {
        protocols: protocols(&[("cooperative-sticky", owned)]),
        ..member(n)
    };
    let a = h.join(coop("a", b"owned:"));
    h.advance(3_000);
    let a = h.join_response(a);
    let s = h.sync(1, &a.member_id, &[(&a.member_id, b"t-0,t-1")]);
    h.sync_response(s);

    // b arrives; a rejoins with what it owns; the leader revokes t-1 from a.
    let b = h.join(coop("b", b"owned:"));
    let a1 = h.join(JoinGroupRequest {
        member_id: a.member_id.clone(),
        ..coop("a", b"owned:t-0,t-1")
    });
    let (a1, b1) = (h.join_response(a1), h.join_response(b));
    assert_eq!(a1.generation_id, 2);
    let owned: Vec<&[u8]> = a1.members.iter().map(|m| &m.metadata[..]).collect();
    assert!(
        owned.contains(&&b"owned:t-0,t-1"[..]),
        "owned partitions reach the leader verbatim"
    );
    let b_sync = h.sync(2, &b1.member_id, &[]);
    let a_sync = h.sync(
        2,
        &a.member_id,
        &[(&a.member_id, b"t-0"), (&b1.member_id, b"")],
    );
    assert_eq!(&h.sync_response(a_sync).assignment[..], b"t-0");
    assert!(h.sync_response(b_sync).assignment.is_empty());

    // a revoked t-1 and rejoins: second round gives t-1 to b.
    let a2 = h.join(JoinGroupRequest {
        member_id: a.member_id.clone(),
        ..coop("a", b"owned:t-0")
    });
    assert_eq!(
        h.heartbeat(2, &b1.member_id),
        ErrorCode::RebalanceInProgress
    );
    let b2 = h.join(JoinGroupRequest {
        member_id: b1.member_id.clone(),
        ..coop("b", b"owned:")
    });
    assert_eq!(h.join_response(a2).generation_id, 3);
    assert_eq!(h.join_response(b2).generation_id, 3);
    let b_sync = h.sync(3, &b1.member_id, &[]);
    let a_sync = h.sync(
        3,
        &a.member_id,
        &[(&a.member_id, b"t-0"), (&b1.member_id, b"t-1")],
    );
    h.sync_response(a_sync);
    assert_eq!(&h.sync_response(b_sync).assignment[..], b"t-1");
}

#[test]
fn a_full_group_still_takes_back_its_restarting_static_member() {
    let mut h = Harness::with_config(GroupConfig {
        group_max_size: 1,
        ..GroupConfig::default()
    });
    let s = h.join(static_member("s", "inst"));
    h.advance(3_000);
    let s = h.join_response(s);
    let sync = h.sync(1, &s.member_id, &[(&s.member_id, b"p")]);
    h.sync_response(sync);
    let back = h.join_now(static_member("s", "inst"));
    assert_eq!((back.error, back.generation_id), (ErrorCode::None, 1));
    let other = h.join_now(static_member("t", "other"));
    assert_eq!(other.error, ErrorCode::GroupMaxSizeReached);
}

#[test]
fn five_hundred_members_rebalance_together() {
    let mut h = Harness::new();
    let names: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (ids, generation) = h.stable_group(&refs);
    assert_eq!((ids.len(), generation), (500, 1));
    let described = h.c.describe_group(GROUP);
    assert_eq!(described.members.len(), 500);
    assert!(
        described
            .members
            .iter()
            .all(|m| m.assignment.starts_with(b"assign-"))
    );
}
