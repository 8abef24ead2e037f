//! Committed offsets through the coordinator: the commit/persist/answer round trip,
//! OffsetFetch (named partitions and all partitions), generation checks on commit
//! (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID),
//! simple consumers, metadata and count limits, reload from the persisted log (with
//! tombstones), expiry by `offsets.retention.minutes` (Empty groups, simple consumers,
//! and topics a Stable consumer group no longer subscribes to) and the pending-persist cap.

mod common;

use common::*;
use sluice_group::subscription::encode_subscription_v0;
use sluice_group::{
    CommitPartition, Coordinator, ErrorCode, GroupConfig, GroupState, JoinGroupRequest,
    OffsetCommitRequest, OffsetRecord, Request, SplitMix64,
};

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

#[test]
fn commit_from_the_current_generation_is_persisted_then_visible() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    h.manual_persist = true;
    let rid = h.commit(generation, &ids[0], &[("t", 0, 10), ("t", 1, 20)]);
    assert!(h.pending(rid), "answered only after persistence");
    assert_eq!(h.fetched("t", 0), -1, "not visible before it is durable");
    let (id, records) = h.unacked.pop().unwrap();
    assert_eq!(records.len(), 2);
    let effects = h.c.persisted(id, Ok(()));
    h.apply(effects);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None, ErrorCode::None]);
    assert_eq!(
        (h.fetched("t", 0), h.fetched("t", 1), h.fetched("t", 2)),
        (10, 20, -1)
    );
    let all = h.c.fetch_offsets(GROUP, None).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[1].offset, all[1].leader_epoch, all[1].metadata.as_str()),
        (20, 1, "meta")
    );
}

#[test]
fn failed_persistence_answers_the_error_and_keeps_the_old_offset() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a"]);
    let first = h.commit(generation, &ids[0], &[("t", 0, 5)]);
    h.commit_errors(first);
    h.manual_persist = true;
    let rid = h.commit(generation, &ids[0], &[("t", 0, 10)]);
    let (id, _) = h.unacked.pop().unwrap();
    let effects = h.c.persisted(id, Err(ErrorCode::UnknownServerError));
    h.apply(effects);
    assert_eq!(h.commit_errors(rid), [ErrorCode::UnknownServerError]);
    assert_eq!(h.fetched("t", 0), 5);
}

#[test]
fn commit_generation_checks() {
    let mut h = Harness::new();
    let (ids, generation) = h.stable_group(&["a", "b"]);
    let stale = h.commit(generation - 1, &ids[0], &[("t", 0, 1)]);
    assert_eq!(h.commit_errors(stale), [ErrorCode::IllegalGeneration]);
    let unknown = h.commit(generation, "ghost", &[("t", 0, 1)]);
    assert_eq!(h.commit_errors(unknown), [ErrorCode::UnknownMemberId]);
    let simple = h.commit(-1, "", &[("t", 0, 1)]);
    assert_eq!(
        h.commit_errors(simple),
        [ErrorCode::UnknownMemberId],
        "only members commit to a live group"
    );

    let a = h.join(rejoin(&ids[0])); // PreparingRebalance: commits still allowed
    let during = h.commit(generation, &ids[1], &[("t", 0, 7)]);
    assert_eq!(h.commit_errors(during), [ErrorCode::None]);
    let b = h.join(rejoin(&ids[1]));
    let (a, _) = (h.join_response(a), h.join_response(b));
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    let completing = h.commit(a.generation_id, &ids[0], &[("t", 0, 8)]);
    assert_eq!(
        h.commit_errors(completing),
        [ErrorCode::RebalanceInProgress]
    );
    assert_eq!(h.fetched("t", 0), 7);
}

#[test]
fn fenced_static_member_cannot_commit() {
    let mut h = Harness::new();
    let s = h.join(static_member("s", "inst"));
    h.advance(3_000);
    let s = h.join_response(s);
    let rid = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: "old-id".into(),
        group_instance_id: Some("inst".into()),
        partitions: vec![CommitPartition {
            tp: tp("t", 0),
            offset: 1,
            leader_epoch: -1,
            metadata: None,
        }],
    }));
    assert_eq!(h.commit_errors(rid), [ErrorCode::FencedInstanceId]);
    assert!(!s.member_id.is_empty());
}

#[test]
fn simple_consumer_commits_create_an_offset_only_group() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("t", 0, 3)]);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None]);
    assert_eq!(h.fetched("t", 0), 3);
    let listed = h.c.list_groups();
    assert_eq!(
        (listed[0].state, listed[0].protocol_type.as_str()),
        (GroupState::Empty, "")
    );
    let stale = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: "gone".into(),
        generation_id: 4,
        member_id: "m".into(),
        group_instance_id: None,
        partitions: vec![],
    }));
    assert_eq!(h.commit_errors(stale), Vec::<ErrorCode>::new());
    assert!(
        h.c.group("gone").is_none(),
        "a generation for a missing group does not create it"
    );
}

#[test]
fn metadata_over_the_limit_fails_only_its_partition() {
    let mut h = Harness::new();
    let part = |p, metadata: &str| CommitPartition {
        tp: tp("t", p),
        offset: 1,
        leader_epoch: -1,
        metadata: Some(metadata.into()),
    };
    let rid = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: vec![part(0, &"m".repeat(4097)), part(1, &"m".repeat(4096))],
    }));
    assert_eq!(
        h.commit_errors(rid),
        [ErrorCode::OffsetMetadataTooLarge, ErrorCode::None]
    );
    assert_eq!((h.fetched("t", 0), h.fetched("t", 1)), (-1, 1));
}

#[test]
fn fetch_for_an_unknown_group_is_empty() {
    let h = Harness::new();
    assert_eq!(h.fetched("t", 0), -1);
    assert!(h.c.fetch_offsets("nobody", None).unwrap().is_empty());
    assert_eq!(
        h.c.fetch_offsets(&"g".repeat(256), None),
        Err(ErrorCode::InvalidGroupId)
    );
}

#[test]
fn reload_from_the_log_restores_offsets_and_honours_tombstones() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("t", 0, 1), ("t", 1, 2)]);
    h.commit_errors(rid);
    let rid = h.commit(-1, "", &[("t", 0, 5)]);
    h.commit_errors(rid);
    let other = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: "deleted".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: vec![CommitPartition {
            tp: tp("t", 0),
            offset: 9,
            leader_epoch: -1,
            metadata: None,
        }],
    }));
    h.commit_errors(other);
    let (results, effects) = h.c.delete_groups(&["deleted".into()]);
    assert_eq!(results[0].1, ErrorCode::None);
    h.apply(effects);

    // Through the bytes, as the server would read its log back.
    let bytes: Vec<(Vec<u8>, Option<Vec<u8>>)> = h
        .log
        .iter()
        .map(|r| (r.encode_key(), r.encode_value()))
        .collect();
    let records = bytes
        .iter()
        .map(|(k, v)| OffsetRecord::decode(k, v.as_deref()).unwrap());
    let mut c = Coordinator::new(
        GroupConfig::default(),
        Box::new(SplitMix64::new(1)),
        h.now_ms,
    )
    .unwrap();
    c.load(h.now_ms, records);
    assert_eq!(c.offsets(), h.c.offsets());
    assert_eq!(
        c.fetch_offsets(GROUP, None).unwrap(),
        h.c.fetch_offsets(GROUP, None).unwrap()
    );
    assert!(c.group("deleted").is_none());
    assert_eq!(
        c.group(GROUP).unwrap().state(),
        GroupState::Empty,
        "membership is soft state"
    );
    let mut compacted = Coordinator::new(
        GroupConfig::default(),
        Box::new(SplitMix64::new(1)),
        h.now_ms,
    )
    .unwrap();
    compacted.load(h.now_ms, c.snapshot());
    assert_eq!(compacted.offsets(), c.offsets());
    assert_eq!(c.snapshot().len(), 2, "one record per live key");
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention() {
    let mut h = Harness::new();
    let a = h.join(JoinGroupRequest {
        session_timeout_ms: 1_800_000,
        ..member("a")
    });
    h.advance(3_000);
    let a = h.join_response(a);
    let (ids, generation) = (vec![a.member_id.clone()], a.generation_id);
    let s = h.sync(generation, &ids[0], &[]);
    h.sync_response(s);
    let rid = h.commit(generation, &ids[0], &[("t", 0, 1)]);
    h.commit_errors(rid);
    for _ in 0..8 * 24 * 4 {
        h.advance(15 * 60 * 1000); // Stable: kept however old, as long as the member lives
        assert_eq!(h.heartbeat(generation, &ids[0]), ErrorCode::None);
    }
    assert_eq!(h.fetched("t", 0), 1);
    h.leave(&[(&ids[0], None)]);
    assert_eq!(h.state(), GroupState::Empty);
    h.advance(7 * DAY_MS - 1);
    assert_eq!(
        h.fetched("t", 0),
        1,
        "retention counts from when the group became Empty"
    );
    let logged = h.log.len();
    h.advance(600_000); // next retention check
    assert_eq!(h.fetched("t", 0), -1);
    assert_eq!(
        h.log[logged..],
        [OffsetRecord::offset_tombstone(GROUP, tp("t", 0))]
    );
    assert!(
        h.c.group(GROUP).is_none(),
        "an Empty group without offsets is removed"
    );
}

#[test]
fn simple_consumer_offsets_expire_from_the_commit_time() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("t", 0, 1)]);
    h.commit_errors(rid);
    h.advance(3 * DAY_MS);
    let rid = h.commit(-1, "", &[("t", 1, 1)]);
    h.commit_errors(rid);
    h.advance(4 * DAY_MS + 600_000);
    assert_eq!((h.fetched("t", 0), h.fetched("t", 1)), (-1, 1));
    h.advance(3 * DAY_MS + 600_000);
    assert_eq!(h.fetched("t", 1), -1);
}

#[test]
fn offsets_per_group_and_partitions_per_commit_are_capped() {
    let mut h = Harness::new();
    let max = sluice_group::limits::GROUP_OFFSETS_MAX as i32;
    let commit = |h: &mut Harness, partitions: Vec<i32>| {
        let partitions = partitions
            .into_iter()
            .map(|p| CommitPartition {
                tp: tp("t", p),
                offset: 0,
                leader_epoch: -1,
                metadata: None,
            })
            .collect();
        let rid = h.send(Request::OffsetCommit(OffsetCommitRequest {
            group_id: GROUP.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            partitions,
        }));
        h.commit_errors(rid)
    };
    assert!(
        commit(&mut h, (0..max).collect())
            .iter()
            .all(|e| *e == ErrorCode::None)
    );
    let over = commit(&mut h, vec![max, 0]);
    assert_eq!(
        over,
        [ErrorCode::InvalidCommitOffsetSize, ErrorCode::None],
        "existing partitions still commit"
    );
    let too_many = commit(&mut h, (0..=max).collect());
    assert!(too_many.iter().all(|e| *e == ErrorCode::InvalidRequest));
}

#[test]
fn commits_beyond_the_pending_persist_cap_are_refused_until_acknowledged() {
    let mut h = Harness::new();
    h.manual_persist = true;
    let max = sluice_group::limits::PENDING_PERSISTS_MAX;
    for _ in 0..max {
        h.commit(-1, "", &[("t", 0, 1)]);
    }
    let over = h.commit(-1, "", &[("t", 0, 2)]);
    assert_eq!(
        h.commit_errors(over),
        [ErrorCode::CoordinatorNotAvailable],
        "retriable: the log is behind"
    );
    let (id, records) = h.unacked.remove(0);
    h.log.extend(records);
    let effects = h.c.persisted(id, Ok(()));
    h.apply(effects);
    let next = h.commit(-1, "", &[("t", 0, 3)]);
    assert!(h.pending(next), "room again after an acknowledgement");
}

#[test]
fn a_stable_consumer_group_loses_offsets_of_topics_it_no_longer_subscribes_to() {
    let mut h = Harness::new();
    let subscribe = |topics: &[&str], member_id: &str| JoinGroupRequest {
        member_id: member_id.into(),
        session_timeout_ms: 1_800_000,
        protocols: protocols(&[("range", &encode_subscription_v0(topics))]),
        ..member("a")
    };
    let a = h.join(subscribe(&["old", "kept"], ""));
    h.advance(3_000);
    let a = h.join_response(a);
    let s = h.sync(1, &a.member_id, &[]);
    h.sync_response(s);
    let rid = h.commit(1, &a.member_id, &[("old", 0, 1), ("kept", 0, 1)]);
    h.commit_errors(rid);
    // The consumer drops "old" from its subscription: a rebalance to generation 2.
    let again = h.join(subscribe(&["kept"], &a.member_id));
    let again = h.join_response(again);
    let s = h.sync(again.generation_id, &a.member_id, &[]);
    h.sync_response(s);
    for _ in 0..7 * 24 * 4 + 1 {
        h.advance(15 * 60 * 1000);
        assert_eq!(
            h.heartbeat(again.generation_id, &a.member_id),
            ErrorCode::None
        );
    }
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!((h.fetched("old", 0), h.fetched("kept", 0)), (-1, 1));
}

#[test]
fn deleting_a_topic_drops_its_offsets_in_every_group_even_commits_in_flight() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("gone", 0, 1), ("kept", 0, 1)]);
    h.commit_errors(rid);
    h.manual_persist = true;
    let in_flight = h.commit(-1, "", &[("gone", 1, 5)]);
    let effects = h.c.delete_topic_offsets("gone");
    h.apply(effects);
    // The server appends in emission order: the in-flight commit, then the tombstones.
    for (id, records) in std::mem::take(&mut h.unacked) {
        h.log.extend(records);
        let effects = h.c.persisted(id, Ok(()));
        h.apply(effects);
    }
    assert_eq!(h.commit_errors(in_flight), [ErrorCode::None]);
    assert_eq!(
        (
            h.fetched("gone", 0),
            h.fetched("gone", 1),
            h.fetched("kept", 0)
        ),
        (-1, -1, 1)
    );
    let mut reloaded = Coordinator::new(
        GroupConfig::default(),
        Box::new(SplitMix64::new(1)),
        h.now_ms,
    )
    .unwrap();
    reloaded.load(h.now_ms, h.log.clone());
    assert_eq!(reloaded.offsets(), h.c.offsets());
}

#[test]
fn a_transforms_positions_never_expire() {
    let mut h = Harness::new();
    let group = format!(
        "{}orders-split",
        sluice_group::limits::NEVER_EXPIRING_GROUP_PREFIX
    );
    let rid = h.send(Request::OffsetCommit(OffsetCommitRequest {
        group_id: group.clone(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions: vec![CommitPartition {
            tp: tp("orders", 0),
            offset: 42,
            leader_epoch: -1,
            metadata: None,
        }],
    }));
    h.commit_errors(rid);
    // Far past offsets.retention.minutes (7 days) of an idle source.
    h.advance(30 * DAY_MS);
    let fetched = h.c.fetch_offsets(&group, Some(&[tp("orders", 0)])).unwrap();
    assert_eq!(fetched[0].offset, 42);
}
