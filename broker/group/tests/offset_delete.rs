//! OffsetDelete (KIP-496): a group that does not exist; an Empty group's offsets deleted per
//! partition (the rest kept, the log replays to the same); a consumer group with members
//! keeps the offsets of the topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and
//! drops the others; a commit still waiting for its persist does not bring a deleted offset
//! back.

mod common;

use common::*;
use sluice_group::{ErrorCode, GroupState, OffsetStore};

/// A consumer-protocol subscription (version 0) to `topics`.
fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&i32::try_from(topics.len()).unwrap().to_be_bytes());
    for t in topics {
        out.extend_from_slice(&i16::try_from(t.len()).unwrap().to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

#[test]
fn a_group_that_does_not_exist_is_not_found() {
    let mut h = Harness::new();
    let (result, effects) = h.c.delete_offsets("nobody", &[tp("t", 0)]);
    assert_eq!(result, Err(ErrorCode::GroupIdNotFound));
    assert!(effects.is_empty());
}

#[test]
fn an_empty_groups_offsets_are_deleted_per_partition() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("t", 0, 5), ("t", 1, 6)]);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None, ErrorCode::None]);
    let (result, effects) = h.c.delete_offsets(GROUP, &[tp("t", 0), tp("t", 9)]);
    assert_eq!(
        result,
        Ok(vec![
            (tp("t", 0), ErrorCode::None),
            (tp("t", 9), ErrorCode::None)
        ])
    );
    h.apply(effects);
    assert_eq!((h.fetched("t", 0), h.fetched("t", 1)), (-1, 6));
    let replayed = OffsetStore::load(h.log.clone());
    assert_eq!(
        replayed,
        *h.c.offsets(),
        "the log replays to the same offsets"
    );
}

#[test]
fn a_consumer_group_keeps_the_offsets_of_the_topics_it_reads() {
    let mut h = Harness::new();
    let mut join = member("a");
    join.protocols = protocols(&[("range", &subscription(&["t"]))]);
    let rid = h.join(join);
    while h.pending(rid) {
        h.advance(1_000); // the initial rebalance delay
    }
    let joined = h.join_response(rid);
    let generation = joined.generation_id;
    let id = joined.member_id.clone();
    let assignment: &[u8] = b"assign";
    let sync = h.sync(generation, &id, &[(id.as_str(), assignment)]);
    assert!(!h.pending(sync));
    assert_eq!(h.state(), GroupState::Stable);
    let commit = h.commit(generation, &joined.member_id, &[("t", 0, 3), ("u", 0, 4)]);
    assert_eq!(h.commit_errors(commit), [ErrorCode::None, ErrorCode::None]);
    let (result, effects) = h.c.delete_offsets(GROUP, &[tp("t", 0), tp("u", 0)]);
    assert_eq!(
        result,
        Ok(vec![
            (tp("t", 0), ErrorCode::GroupSubscribedToTopic),
            (tp("u", 0), ErrorCode::None)
        ])
    );
    h.apply(effects);
    assert_eq!((h.fetched("t", 0), h.fetched("u", 0)), (3, -1));
}

#[test]
fn a_commit_waiting_for_its_persist_does_not_bring_a_deleted_offset_back() {
    let mut h = Harness::new();
    let rid = h.commit(-1, "", &[("t", 0, 5)]);
    assert_eq!(h.commit_errors(rid), [ErrorCode::None]);
    h.manual_persist = true;
    let later = h.commit(-1, "", &[("t", 0, 8)]);
    let (result, effects) = h.c.delete_offsets(GROUP, &[tp("t", 0)]);
    assert!(result.is_ok());
    h.apply(effects);
    for (id, records) in std::mem::take(&mut h.unacked) {
        h.log.extend(records);
        let more = h.c.persisted(id, Ok(()));
        h.apply(more);
    }
    assert!(!h.pending(later));
    assert_eq!(h.fetched("t", 0), -1);
    let replayed = OffsetStore::load(h.log.clone());
    assert_eq!(replayed, *h.c.offsets());
}
