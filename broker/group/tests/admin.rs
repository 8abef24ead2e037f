//! The admin side of the coordinator: ListGroups, DescribeGroups (Kafka's summary shape),
//! DeleteGroups (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, tombstones), every state of the
//! classic state machine as seen from outside, and replay determinism.

mod common;

use common::*;
use sluice_group::{ErrorCode, GroupConfig, GroupState, OffsetRecord, RecordKey};

#[test]
fn list_and_describe_follow_the_state_machine() {
    let mut h = Harness::new();
    assert_eq!(
        h.c.describe_group(GROUP).state,
        GroupState::Dead,
        "a missing group is Dead"
    );
    let a = h.join(member("a"));
    let described = h.c.describe_group(GROUP);
    assert_eq!(
        (described.state, described.protocol.as_str()),
        (GroupState::PreparingRebalance, "")
    );
    assert_eq!(described.members.len(), 1);
    assert!(
        described.members[0].metadata.is_empty(),
        "no metadata unless Stable"
    );
    h.advance(3_000);
    let a = h.join_response(a);
    assert_eq!(
        h.c.describe_group(GROUP).state,
        GroupState::CompletingRebalance
    );
    let s = h.sync(1, &a.member_id, &[(&a.member_id, b"mine")]);
    h.sync_response(s);
    let d = h.c.describe_group(GROUP);
    assert_eq!(
        (
            d.error,
            d.state,
            d.protocol_type.as_str(),
            d.protocol.as_str()
        ),
        (ErrorCode::None, GroupState::Stable, "consumer", "range")
    );
    let m = &d.members[0];
    assert_eq!(
        (m.client_id.as_str(), m.client_host.as_str()),
        ("a", "/127.0.0.1")
    );
    assert_eq!(
        (&m.metadata[..], &m.assignment[..]),
        (&b"sub"[..], &b"mine"[..])
    );
    let listed = h.c.list_groups();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].group_id.as_str(),
            listed[0].protocol_type.as_str(),
            listed[0].state
        ),
        (GROUP, "consumer", GroupState::Stable)
    );
    assert_eq!(listed[0].state.as_str(), "Stable");
}

#[test]
fn delete_groups() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    let rid = h.commit(generation, &ids[0], &[("t", 0, 4)]);
    h.commit_errors(rid);
    let (results, effects) = h.c.delete_groups(&[GROUP.into(), "missing".into()]);
    assert_eq!(
        results,
        [
            (GROUP.into(), ErrorCode::NonEmptyGroup),
            ("missing".into(), ErrorCode::GroupIdNotFound)
        ]
    );
    assert!(effects.is_empty());

    h.leave(&[(&ids[0], None)]);
    let (results, effects) = h.c.delete_groups(&[GROUP.into()]);
    assert_eq!(results, [(GROUP.into(), ErrorCode::None)]);
    h.apply(effects);
    let tail = &h.log[h.log.len() - 2..];
    assert_eq!(tail[0], OffsetRecord::offset_tombstone(GROUP, tp("t", 0)));
    assert_eq!(
        tail[1],
        OffsetRecord {
            key: RecordKey::Group {
                group: GROUP.into()
            },
            value: None
        }
    );
    assert_eq!(h.state(), GroupState::Dead);
    assert_eq!(h.fetched("t", 0), -1);
    assert!(h.c.list_groups().is_empty());
    let (again, _) = h.c.delete_groups(&[GROUP.into()]);
    assert_eq!(again[0].1, ErrorCode::GroupIdNotFound);
}

#[test]
fn every_state_transition() {
    let mut h = Harness::no_delay();
    let a = h.join(member("a")); // Empty -> PreparingRebalance
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.advance(0); // PreparingRebalance -> CompletingRebalance
    let a = h.join_response(a);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let b = h.join(member("b")); // CompletingRebalance -> PreparingRebalance
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let a2 = h.join(rejoin(&a.member_id));
    let (a2, _b) = (h.join_response(a2), h.join_response(b));
    let s = h.sync(a2.generation_id, &a.member_id, &[]); // CompletingRebalance -> Stable
    h.sync_response(s);
    assert_eq!(h.state(), GroupState::Stable);
    let a3 = h.join(rejoin(&a.member_id)); // Stable -> PreparingRebalance (leader rejoins)
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    h.advance(REBALANCE_MS as u64); // b never rejoined nor heartbeated
    assert_eq!(h.join_response(a3).members.len(), 1);
    h.leave(&[(&a.member_id, None)]); // CompletingRebalance -> PreparingRebalance -> Empty
    assert_eq!(h.state(), GroupState::Empty);
    let (deleted, _) = h.c.delete_groups(&[GROUP.into()]); // Empty -> Dead
    assert_eq!(deleted[0].1, ErrorCode::None);
    assert_eq!(h.state(), GroupState::Dead);
}

#[test]
fn legal_moves_match_kafka() {
    use GroupState::*;
    let all = [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead];
    let legal: Vec<(GroupState, GroupState)> = all
        .iter()
        .flat_map(|a| all.iter().map(move |b| (*a, *b)))
        .filter(|(a, b)| a.can_move_to(*b))
        .collect();
    let want = [
        (Empty, PreparingRebalance),
        (Empty, Dead),
        (PreparingRebalance, Empty),
        (PreparingRebalance, CompletingRebalance),
        (PreparingRebalance, Dead),
        (CompletingRebalance, PreparingRebalance),
        (CompletingRebalance, Stable),
        (CompletingRebalance, Dead),
        (Stable, PreparingRebalance),
        (Stable, Dead),
    ];
    assert_eq!(legal, want);
}

#[test]
fn config_is_validated_not_clamped() {
    let bad = GroupConfig {
        session_timeout_min_ms: 10,
        session_timeout_max_ms: 5,
        ..GroupConfig::default()
    };
    assert!(bad.validate().is_err());
    let bad = GroupConfig {
        group_max_size: 0,
        ..GroupConfig::default()
    };
    assert!(bad.validate().is_err());
    assert!(GroupConfig::default().validate().is_ok());
}

/// Same inputs, same seed: same effects, byte for byte (what a simulator relies on).
#[test]
fn replay_is_deterministic() {
    let run = || {
        let mut h = Harness::new();
        let (ids, generation) = h.stable_group(&["a", "b", "c"]);
        let rid = h.commit(generation, &ids[0], &[("t", 0, 1)]);
        h.commit_errors(rid);
        h.advance(20_000);
        (ids, h.c.describe_group(GROUP), h.log.clone())
    };
    assert_eq!(run(), run());
}

#[test]
fn next_deadline_tracks_the_earliest_timer() {
    let mut h = Harness::new();
    let retention_check = h.c.next_deadline_ms().unwrap();
    assert_eq!(retention_check, h.now_ms + 600_000);
    h.join(member("a"));
    assert_eq!(
        h.c.next_deadline_ms(),
        Some(h.now_ms + 3_000),
        "the initial rebalance delay"
    );
}

/// The server moves the coordinator into one task: it must be `Send`.
#[test]
fn the_coordinator_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<sluice_group::Coordinator>();
}
