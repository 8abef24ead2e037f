//! Membership over time on a virtual clock: session-timeout expiry, the rebalance timeout
//! kicking members that do not rejoin, the pending-sync timeout, the new-member join
//! timeout, LeaveGroup (single, batched v3, by instance id) and static membership
//! (KIP-345: restart without rebalance, FENCED_INSTANCE_ID, kept through rebalances).

mod common;

use common::*;
use sluice_group::{ErrorCode, GroupState, JoinGroupRequest, Request, SyncGroupRequest};

#[test]
fn session_timeout_removes_a_silent_member_and_the_rest_take_over() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    for _ in 0..3 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(generation, &ids[0]), ErrorCode::None);
    }
    h.advance(1_000); // b silent for 10 s
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(generation, &ids[0]),
        ErrorCode::RebalanceInProgress
    );
    let a = h.join(rejoin(&ids[0]));
    let a = h.join_response(a);
    assert_eq!(
        (a.generation_id, a.members.len()),
        (generation + 1, 1),
        "b's partitions go to a"
    );
    assert_eq!(h.heartbeat(generation, &ids[1]), ErrorCode::UnknownMemberId);
    let s = h.sync(a.generation_id, &ids[0], &[(&ids[0], b"everything")]);
    assert_eq!(&h.sync_response(s).assignment[..], b"everything");
}

#[test]
fn heartbeats_and_commits_keep_a_member_alive() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    h.advance(9_000);
    h.commit(generation, &ids[0], &[("t", 0, 1)]);
    h.advance(9_000);
    assert_eq!(h.heartbeat(generation, &ids[0]), ErrorCode::None);
    assert_eq!(h.state(), GroupState::Stable);
}

#[test]
fn rebalance_timeout_kicks_members_that_do_not_rejoin() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let a = h.join(rejoin(&ids[0]));
    for _ in 0..9 {
        h.advance(3_000);
        assert_eq!(
            h.heartbeat(generation, &ids[1]),
            ErrorCode::RebalanceInProgress
        );
    }
    assert!(h.pending(a));
    h.advance(3_000); // 30 s rebalance timeout
    let a = h.join_response(a);
    assert_eq!((a.generation_id, a.members.len()), (generation + 1, 1));
    assert_eq!(h.heartbeat(generation, &ids[1]), ErrorCode::UnknownMemberId);
}

#[test]
fn rebalance_with_nobody_rejoining_empties_the_group() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    h.leave(&[(&ids[1], None)]);
    for _ in 0..10 {
        h.advance(3_000); // a heartbeats but never rejoins
        h.heartbeat(generation, &ids[0]);
    }
    assert_eq!(h.state(), GroupState::Empty);
    assert_eq!(
        h.generation(),
        generation + 1,
        "the empty generation counts too"
    );
    assert_eq!(h.heartbeat(generation, &ids[0]), ErrorCode::UnknownMemberId);
}

#[test]
fn pending_sync_timeout_removes_members_that_never_sync() {
    let mut h = Harness::no_delay();
    let a = h.join(member("a"));
    let b = h.join(member("b"));
    h.advance(0);
    let (a, b) = (h.join_response(a), h.join_response(b));
    let s = h.sync(
        1,
        &a.member_id,
        &[(&a.member_id, b"x"), (&b.member_id, b"y")],
    );
    h.sync_response(s);
    assert_eq!(h.state(), GroupState::Stable);
    for _ in 0..10 {
        h.advance(3_000);
        h.heartbeat(1, &a.member_id);
        h.heartbeat(1, &b.member_id);
    }
    assert_eq!(
        h.state(),
        GroupState::PreparingRebalance,
        "b never synced within the rebalance timeout"
    );
    assert!(h.c.group(GROUP).unwrap().member(&b.member_id).is_none());
}

#[test]
fn a_new_member_stuck_in_a_long_rebalance_is_dropped_after_five_minutes() {
    let mut h = Harness::new();
    let long = |r: JoinGroupRequest| JoinGroupRequest {
        rebalance_timeout_ms: 600_000,
        ..r
    };
    let a = h.join(long(member("a")));
    h.advance(3_000);
    let a = h.join_response(a);
    let s = h.sync(1, &a.member_id, &[]);
    h.sync_response(s);
    let c = h.join(long(member("c")));
    for _ in 0..100 {
        h.advance(3_000);
        assert_eq!(h.heartbeat(1, &a.member_id), ErrorCode::RebalanceInProgress);
    }
    let c = h.join_response(c);
    assert_eq!(
        c.error,
        ErrorCode::UnknownMemberId,
        "told to retry with a fresh join"
    );
}

#[test]
fn leave_group_single_and_last_member() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let left = h.leave(&[(&ids[1], None)]);
    assert_eq!(
        (left.error, left.members[0].error),
        (ErrorCode::None, ErrorCode::None)
    );
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let a = h.join(rejoin(&ids[0]));
    assert_eq!(h.join_response(a).generation_id, generation + 1);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
}

#[test]
fn leave_group_batched_v3() {
    let mut h = Harness::new();
    let a = h.join(member("a"));
    let b = h.join(member("b"));
    let s = h.join(static_member("s", "inst-1"));
    h.advance(6_000);
    let (a, b, s) = (h.join_response(a), h.join_response(b), h.join_response(s));
    let left = h.leave(&[
        (&b.member_id, None),
        ("", Some("inst-1")),
        ("ghost", None),
        ("", Some("nobody")),
    ]);
    let errors: Vec<ErrorCode> = left.members.iter().map(|m| m.error).collect();
    let none = ErrorCode::None;
    assert_eq!(
        errors,
        [
            none,
            none,
            ErrorCode::UnknownMemberId,
            ErrorCode::UnknownMemberId
        ]
    );
    let group = h.c.group(GROUP).unwrap();
    assert_eq!(
        group.member_ids().collect::<Vec<_>>(),
        [a.member_id.as_str()]
    );
    assert!(group.member(&s.member_id).is_none());
}

#[test]
fn leave_errors() {
    let mut h = Harness::new();
    let nothing = h.leave(&[("x", None)]);
    assert_eq!(
        (nothing.error, nothing.members[0].error),
        (ErrorCode::None, ErrorCode::UnknownMemberId)
    );
    let s = h.join(static_member("s", "inst"));
    h.advance(3_000);
    let s = h.join_response(s);
    let fenced = h.leave(&[("impostor", Some("inst"))]);
    assert_eq!(fenced.members[0].error, ErrorCode::FencedInstanceId);
    assert!(h.c.group(GROUP).unwrap().member(&s.member_id).is_some());
}

#[test]
fn static_member_restart_keeps_its_assignment_without_rebalance() {
    let mut h = Harness::new();
    let a = h.join(static_member("a", "inst-a"));
    let b = h.join(static_member("b", "inst-b"));
    h.advance(6_000);
    let (a, b) = (h.join_response(a), h.join_response(b));
    let b_sync = h.sync(1, &b.member_id, &[]);
    let a_sync = h.sync(
        1,
        &a.member_id,
        &[(&a.member_id, b"pa"), (&b.member_id, b"pb")],
    );
    h.sync_response(a_sync);
    h.sync_response(b_sync);

    h.advance(5_000); // the leader restarts within its session timeout
    let back = h.join_now(static_member("a", "inst-a"));
    assert_eq!((back.error, back.generation_id), (ErrorCode::None, 1));
    assert_ne!(
        back.member_id, a.member_id,
        "a new member id replaces the old one"
    );
    assert_eq!(
        back.leader, a.member_id,
        "the old leader id: the restarted leader does not reassign"
    );
    assert!(back.members.is_empty());
    assert_eq!(h.state(), GroupState::Stable, "no rebalance");
    assert_eq!(
        h.c.group(GROUP).unwrap().leader(),
        Some(back.member_id.as_str())
    );
    let s = h.sync(1, &back.member_id, &[]);
    assert_eq!(&h.sync_response(s).assignment[..], b"pa");
    assert_eq!(h.heartbeat(1, &b.member_id), ErrorCode::None);

    assert_eq!(
        h.heartbeat_static(1, &a.member_id, Some("inst-a")),
        ErrorCode::FencedInstanceId
    );
    assert_eq!(h.heartbeat(1, &a.member_id), ErrorCode::UnknownMemberId);
    let old_join = h.join_now(JoinGroupRequest {
        member_id: a.member_id.clone(),
        ..static_member("a", "inst-a")
    });
    assert_eq!(old_join.error, ErrorCode::FencedInstanceId);
    let old_sync = h.send(Request::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: a.member_id.clone(),
        group_instance_id: Some("inst-a".into()),
        protocol_type: None,
        protocol_name: None,
        assignments: vec![],
    }));
    assert_eq!(h.sync_response(old_sync).error, ErrorCode::FencedInstanceId);
}

#[test]
fn a_static_leader_restarting_at_v9_learns_the_members_and_skips_the_assignment() {
    let mut h = Harness::new();
    let a = h.join(static_member("a", "inst-a"));
    let b = h.join(static_member("b", "inst-b"));
    h.advance(6_000);
    let (a, b) = (h.join_response(a), h.join_response(b));
    let b_sync = h.sync(1, &b.member_id, &[]);
    let a_sync = h.sync(
        1,
        &a.member_id,
        &[(&a.member_id, b"pa"), (&b.member_id, b"pb")],
    );
    h.sync_response(a_sync);
    h.sync_response(b_sync);

    h.advance(5_000);
    let back = h.join_now(JoinGroupRequest {
        supports_skip_assignment: true,
        ..static_member("a", "inst-a")
    });
    assert_eq!((back.error, back.generation_id), (ErrorCode::None, 1));
    assert_eq!(back.leader, back.member_id, "KIP-814: the current leader");
    assert!(back.skip_assignment);
    let mut seen: Vec<&str> = back.members.iter().map(|m| m.member_id.as_str()).collect();
    seen.sort_unstable();
    let mut expected = vec![back.member_id.as_str(), b.member_id.as_str()];
    expected.sort_unstable();
    assert_eq!(seen, expected, "the leader learns every member");
    assert_eq!(h.state(), GroupState::Stable, "no rebalance");
    let s = h.sync(1, &back.member_id, &[]);
    assert_eq!(&h.sync_response(s).assignment[..], b"pa");

    // A follower restarting at v9: the current leader, no members, nothing skipped.
    let b_back = h.join_now(JoinGroupRequest {
        supports_skip_assignment: true,
        ..static_member("b", "inst-b")
    });
    assert_eq!(b_back.leader, back.member_id);
    assert!(!b_back.skip_assignment && b_back.members.is_empty());
    let s = h.sync(1, &b_back.member_id, &[]);
    assert_eq!(&h.sync_response(s).assignment[..], b"pb");
}

#[test]
fn static_member_restart_with_new_metadata_rebalances() {
    let mut h = Harness::new();
    let a = h.join(static_member("a", "inst-a"));
    h.advance(3_000);
    let a = h.join_response(a);
    let s = h.sync(1, &a.member_id, &[]);
    h.sync_response(s);
    let new_sub = protocols(&[("range", b"new-sub")]);
    let back = h.join(JoinGroupRequest {
        protocols: new_sub,
        ..static_member("a", "inst-a")
    });
    assert_eq!(
        h.state(),
        GroupState::CompletingRebalance,
        "the only member rejoined: completes at once"
    );
    let back = h.join_response(back);
    assert_eq!(
        (back.generation_id, &back.members[0].metadata[..]),
        (2, &b"new-sub"[..])
    );
    let rr = protocols(&[("roundrobin", b"")]);
    let other = h.join_now(JoinGroupRequest {
        protocols: rr,
        ..static_member("a", "inst-a")
    });
    assert_eq!(
        other.error,
        ErrorCode::InconsistentGroupProtocol,
        "the old member's protocols still count"
    );
}

#[test]
fn static_member_that_does_not_rejoin_is_kept_through_a_rebalance() {
    let mut h = Harness::new();
    let a = h.join(member("a"));
    let s = h.join(static_member("s", "inst"));
    h.advance(6_000);
    let (a, s) = (h.join_response(a), h.join_response(s));
    let sa = h.sync(
        1,
        &a.member_id,
        &[(&a.member_id, b"pa"), (&s.member_id, b"ps")],
    );
    let ss = h.sync(1, &s.member_id, &[]);
    h.sync_response(sa);
    h.sync_response(ss);
    let a2 = h.join(rejoin(&a.member_id));
    for _ in 0..10 {
        h.advance(3_000);
        h.heartbeat_static(1, &s.member_id, Some("inst"));
    }
    let a2 = h.join_response(a2);
    assert_eq!(a2.generation_id, 2);
    let in_leader_view: Vec<&str> = a2.members.iter().map(|m| m.member_id.as_str()).collect();
    assert!(
        in_leader_view.contains(&s.member_id.as_str()),
        "static members stay for the leader to assign"
    );
    assert_eq!(
        a2.members
            .iter()
            .find(|m| m.member_id == s.member_id)
            .unwrap()
            .group_instance_id
            .as_deref(),
        Some("inst")
    );
    assert!(h.c.group(GROUP).unwrap().member(&s.member_id).is_some());
}

#[test]
fn static_member_expires_by_session_timeout() {
    let mut h = Harness::new();
    let s = h.join(static_member("s", "inst"));
    h.advance(3_000);
    let s = h.join_response(s);
    let sync = h.sync(1, &s.member_id, &[]);
    h.sync_response(sync);
    h.advance(SESSION_MS as u64);
    assert_eq!(h.state(), GroupState::Empty);
    let fresh = h.join(static_member("s", "inst"));
    h.advance(3_000);
    assert_eq!(
        h.join_response(fresh).generation_id,
        3,
        "a fresh member after expiry"
    );
}

#[test]
fn a_pending_member_holds_the_join_until_it_joins_leaves_or_expires() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    let handshake = |h: &mut Harness| {
        let r = h.join_now(JoinGroupRequest {
            require_known_member_id: true,
            supports_skip_assignment: false,
            ..member("p")
        });
        assert_eq!(r.error, ErrorCode::MemberIdRequired);
        r.member_id
    };
    // Leaves: the join completes at once.
    let pending = handshake(&mut h);
    let a = h.join(rejoin(&ids[0]));
    assert!(
        h.pending(a),
        "every member rejoined, but a pending member may still join"
    );
    let left = h.leave(&[(&pending, None)]);
    assert_eq!(left.members[0].error, ErrorCode::None);
    assert_eq!(h.join_response(a).generation_id, generation + 1);
    let s = h.sync(generation + 1, &ids[0], &[]);
    h.sync_response(s);
    // Expires after its session timeout: the join completes then.
    let _pending = handshake(&mut h);
    let a = h.join(rejoin(&ids[0]));
    h.advance(SESSION_MS as u64 - 1);
    assert!(h.pending(a));
    h.advance(1);
    assert_eq!(h.join_response(a).generation_id, generation + 2);
}
