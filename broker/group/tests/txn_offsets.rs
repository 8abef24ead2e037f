//! A committed transaction's offsets (`Request::CommitTxnOffsets`, sent by the transaction
//! coordinator when a transaction commits): written without member or generation checks
//! into a group that does not exist, is Empty, is rebalancing or is Stable; visible only
//! after the persist; a failed persist leaves nothing; the per-partition checks of
//! OffsetCommit (metadata size, the group's offset cap) still apply; the log replays them.
//! The TxnOffsetCommit's own member fields (v3+, KIP-447) are checked when it arrives
//! (`Coordinator::check_txn_offset_commit`): unknown member, old generation, fenced instance.
//! Driven through the harness in `common/` (virtual clock, persists acknowledged by hand
//! where the test says so).

mod common;

use common::*;
use sluice_group::{
    Coordinator, ErrorCode, GroupConfig, GroupState, SplitMix64, TxnOffsetCommitMember,
};

#[test]
fn a_missing_group_is_created_and_sees_the_offsets_after_the_persist() {
    let mut h = Harness::new();
    h.manual_persist = true;
    let rid = h.commit_txn(GROUP, &[("t", 0, 10), ("t", 1, 20)]);
    assert!(h.pending(rid), "answered only after persistence");
    assert_eq!(
        h.state(),
        GroupState::Empty,
        "created as for a simple consumer"
    );
    assert_eq!(h.fetched("t", 0), -1, "not visible before it is durable");
    let (id, records) = h.unacked.pop().unwrap();
    assert_eq!(records.len(), 2);
    let effects = h.c.persisted(id, Ok(()));
    h.apply(effects);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None, ErrorCode::None]);
    let all = h.c.fetch_offsets(GROUP, None).unwrap();
    let got: Vec<(i64, i32, &str)> = all
        .iter()
        .map(|f| (f.offset, f.leader_epoch, f.metadata.as_str()))
        .collect();
    assert_eq!(got, [(10, 1, "txn"), (20, 1, "txn")]);
}

#[test]
fn a_stable_group_takes_the_offsets_and_keeps_its_members() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let rid = h.commit_txn(GROUP, &[("t", 0, 7)]);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None]);
    assert_eq!(h.fetched("t", 0), 7);
    assert_eq!(
        (h.state(), h.generation()),
        (GroupState::Stable, generation)
    );
    assert_eq!(h.heartbeat(generation, &ids[1]), ErrorCode::None);
    let later = h.commit(generation, &ids[0], &[("t", 0, 9)]);
    assert_eq!(h.commit_errors(later), [ErrorCode::None]);
    assert_eq!(h.fetched("t", 0), 9, "members commit over it as usual");
}

#[test]
fn a_rebalancing_group_takes_the_offsets_in_either_phase() {
    let mut h = Harness::new();
    let (ids, _) = h.stable_group(&["a", "b"]);
    let a = h.join(rejoin(&ids[0]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    let preparing = h.commit_txn(GROUP, &[("t", 0, 1)]);
    assert_eq!(h.commit_errors(preparing), [ErrorCode::None]);
    assert_eq!(h.fetched("t", 0), 1);
    let b = h.join(rejoin(&ids[1]));
    let (a, _) = (h.join_response(a), h.join_response(b));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let member = h.commit(a.generation_id, &ids[0], &[("t", 0, 2)]);
    assert_eq!(
        h.commit_errors(member),
        [ErrorCode::RebalanceInProgress],
        "a member may not commit now"
    );
    let completing = h.commit_txn(GROUP, &[("t", 0, 3)]);
    assert_eq!(
        h.commit_errors(completing),
        [ErrorCode::None],
        "a transaction may"
    );
    assert_eq!(h.fetched("t", 0), 3);
    assert_eq!(
        h.state(),
        GroupState::CompletingRebalance,
        "the rebalance goes on"
    );
}

#[test]
fn a_failed_persist_answers_the_error_and_leaves_nothing() {
    let mut h = Harness::new();
    let first = h.commit_txn(GROUP, &[("t", 0, 5)]);
    h.commit_errors(first);
    h.manual_persist = true;
    let rid = h.commit_txn(GROUP, &[("t", 0, 10), ("t", 1, 10)]);
    let (id, _) = h.unacked.pop().unwrap();
    let effects = h.c.persisted(id, Err(ErrorCode::CoordinatorNotAvailable));
    h.apply(effects);
    assert_eq!(
        h.commit_errors(rid),
        [ErrorCode::CoordinatorNotAvailable; 2],
        "retriable: the caller sends them again"
    );
    assert_eq!((h.fetched("t", 0), h.fetched("t", 1)), (5, -1));

    let mut fresh = Harness::new();
    fresh.manual_persist = true;
    let rid = fresh.commit_txn("new", &[("t", 0, 1)]);
    let (id, _) = fresh.unacked.pop().unwrap();
    let effects = fresh.c.persisted(id, Err(ErrorCode::UnknownServerError));
    fresh.apply(effects);
    assert_eq!(fresh.commit_errors(rid), [ErrorCode::UnknownServerError]);
    let fetched = fresh.c.fetch_offsets("new", None).unwrap();
    assert!(fetched.is_empty(), "{fetched:?}");
}

#[test]
fn the_per_partition_checks_of_offset_commit_apply() {
    let mut h = Harness::with_config(GroupConfig {
        offset_metadata_max_bytes: 2,
        ..GroupConfig::default()
    });
    let rid = h.commit_txn(GROUP, &[("t", 0, 1)]); // metadata "txn": 3 bytes
    assert_eq!(h.commit_errors(rid), [ErrorCode::OffsetMetadataTooLarge]);
    assert_eq!(h.fetched("t", 0), -1);
    let rid = h.commit_txn("", &[("t", 0, 1)]);
    assert_eq!(
        h.commit_errors(rid),
        [ErrorCode::InvalidGroupId],
        "TxnOffsetCommit needs a group id"
    );
    let long = "g".repeat(sluice_group::limits::GROUP_ID_BYTES_MAX + 1);
    let rid = h.commit_txn(&long, &[("t", 0, 1)]);
    assert_eq!(h.commit_errors(rid), [ErrorCode::InvalidGroupId]);
    h.check_all_answered();
}

#[test]
fn the_offsets_log_replays_to_the_same_offsets() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    let member = h.commit(generation, &ids[0], &[("t", 0, 4)]);
    h.commit_errors(member);
    let txn = h.commit_txn(GROUP, &[("t", 0, 6), ("u", 0, 8)]);
    h.commit_errors(txn);
    let other = h.commit_txn("other", &[("t", 0, 2)]);
    h.commit_errors(other);
    let mut reloaded = Coordinator::new(
        GroupConfig::default(),
        Box::new(SplitMix64::new(1)),
        h.now_ms,
    )
    .unwrap();
    reloaded.load(h.now_ms, h.log.clone());
    for group in [GROUP, "other"] {
        assert_eq!(
            reloaded.fetch_offsets(group, None).unwrap(),
            h.c.fetch_offsets(group, None).unwrap()
        );
    }
    assert_eq!(reloaded.fetch_offsets(GROUP, None).unwrap()[0].offset, 6);
}

/// TxnOffsetCommit's member fields (v3+, KIP-447), checked when the request arrives.
fn check(
    h: &Harness,
    generation: i32,
    member: &str,
    instance: Option<&str>,
) -> Result<(), ErrorCode> {
    let member = TxnOffsetCommitMember {
        group_id: GROUP.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: instance.map(Into::into),
    };
    h.c.check_txn_offset_commit(&member, &[])
}

#[test]
fn a_txn_offset_commit_names_a_current_member_and_generation() {
    let mut h = Harness::new();
    assert_eq!(check(&h, -1, "", None), Ok(()), "v0-v2: no group yet");
    assert_eq!(
        check(&h, 1, "m", None),
        Err(ErrorCode::IllegalGeneration),
        "a generation of a group that does not exist"
    );
    let (ids, generation) = h.stable_group(&["a", "b"]);
    assert_eq!(check(&h, generation, &ids[0], None), Ok(()));
    assert_eq!(check(&h, -1, "", None), Ok(()), "v0-v2 in a Stable group");
    assert_eq!(
        check(&h, generation, "gone", None),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        check(&h, generation - 1, &ids[1], None),
        Err(ErrorCode::IllegalGeneration)
    );
    assert_eq!(
        check(&h, -1, &ids[1], None),
        Err(ErrorCode::IllegalGeneration),
        "a member id with no generation"
    );
    h.join(rejoin(&ids[0]));
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        check(&h, generation, &ids[1], None),
        Ok(()),
        "the group's state is not enforced, only its generation"
    );
}

#[test]
fn a_txn_offset_commit_from_a_replaced_static_member_is_fenced() {
    let mut h = Harness::new();
    let first = h.join(static_member("a", "i-1"));
    h.advance(6_000);
    let old = h.join_response(first);
    let own = [(old.member_id.as_str(), &b"pa"[..])];
    let sync = h.sync(old.generation_id, &old.member_id, &own);
    assert_eq!(h.sync_response(sync).error, ErrorCode::None);
    assert_eq!(
        check(&h, old.generation_id, &old.member_id, Some("i-1")),
        Ok(())
    );
    assert_eq!(
        check(&h, old.generation_id, &old.member_id, Some("i-2")),
        Err(ErrorCode::UnknownMemberId),
        "an instance id the group does not know"
    );
    // The same instance restarts (a new member id replaces the old one).
    let new = h.join_now(static_member("a", "i-1"));
    assert_ne!(new.member_id, old.member_id);
    assert_eq!(
        check(&h, new.generation_id, &old.member_id, Some("i-1")),
        Err(ErrorCode::FencedInstanceId)
    );
    assert_eq!(
        check(&h, new.generation_id, &new.member_id, Some("i-1")),
        Ok(())
    );
}
