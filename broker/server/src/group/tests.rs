//! The coordinator service on a temp dir, without sockets: commits are answered after their
//! append, the offsets log is compacted once it outgrows its live content, and a reopened
//! service sees exactly the committed offsets; a transaction's offsets
//! (`GroupHandle::commit_txn_offsets`) reach a group that does not exist yet and survive a
//! reopen.

use sluice_group::{
    CommitPartition, GroupConfig, OffsetCommitRequest, OffsetStore, Request, Response,
    TopicPartition,
};

use super::{GroupService, OffsetsLog};
use crate::compacted_log::Compaction;

fn commit(offset: i64) -> Request {
    let partitions = (0..3)
        .map(|partition| CommitPartition {
            tp: TopicPartition {
                topic: "t".into(),
                partition,
            },
            offset: offset + i64::from(partition),
            leader_epoch: -1,
            metadata: Some("m".into()),
        })
        .collect();
    Request::OffsetCommit(OffsetCommitRequest {
        group_id: "g".into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        partitions,
    })
}

/// The service over `log`, with no topics (these tests commit without consumer groups).
fn spawn(log: OffsetsLog, records: Vec<sluice_group::OffsetRecord>) -> GroupService {
    let (_, topics) = tokio::sync::watch::channel(Default::default());
    GroupService::spawn(
        GroupConfig::default(),
        log,
        records,
        topics,
        crate::clock::system(),
    )
    .unwrap()
}

#[tokio::test]
async fn the_offsets_log_is_compacted_and_reloads_the_same_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, records) = GroupService::open(dir.path(), false, crate::clock::system()).unwrap();
    log.set_compaction(Compaction {
        segment_bytes: 4 * 1024,
        check_interval_ms: 0,
        ..Compaction::default()
    });
    let service = spawn(log, records);
    for offset in 0..300 {
        let Some(Response::OffsetCommit(answer)) = service.handle.call(commit(offset)).await else {
            panic!("no commit answer");
        };
        assert!(answer.partitions.iter().all(|p| p.error.is_ok()));
    }
    let fetched = service
        .handle
        .fetch_offsets("g".into(), None, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        fetched.iter().map(|f| f.offset).collect::<Vec<_>>(),
        vec![299, 300, 301]
    );
    service.stop().await;
    assert!(
        dir.path()
            .join("consumer-offsets/0/cleaner.checkpoint")
            .exists(),
        "the log was never cleaned"
    );

    let (log, records) = GroupService::open(dir.path(), false, crate::clock::system()).unwrap();
    assert!(
        records.len() < 300 * 3,
        "compaction left {} records",
        records.len()
    );
    let store = OffsetStore::load(records);
    let offsets: Vec<i64> = store
        .group("g")
        .unwrap()
        .values()
        .map(|c| c.offset)
        .collect();
    assert_eq!(offsets, vec![299, 300, 301]);
    log.close().unwrap();
}

#[tokio::test]
async fn a_transactions_offsets_are_appended_then_visible_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (log, records) = GroupService::open(dir.path(), false, crate::clock::system()).unwrap();
    let service = spawn(log, records);
    let partitions: Vec<CommitPartition> = (0..2)
        .map(|partition| CommitPartition {
            tp: TopicPartition {
                topic: "t".into(),
                partition,
            },
            offset: 40 + i64::from(partition),
            leader_epoch: 3,
            metadata: Some("txn".into()),
        })
        .collect();
    let results = service
        .handle
        .commit_txn_offsets("app".into(), partitions)
        .await
        .expect("the coordinator answers");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r.error.is_ok()), "{results:?}");
    let fetched = service
        .handle
        .fetch_offsets("app".into(), None, None)
        .await
        .unwrap()
        .unwrap();
    let got: Vec<(i64, i32)> = fetched.iter().map(|f| (f.offset, f.leader_epoch)).collect();
    assert_eq!(got, [(40, 3), (41, 3)]);
    service.stop().await;

    let (log, records) = GroupService::open(dir.path(), false, crate::clock::system()).unwrap();
    let store = OffsetStore::load(records);
    let offsets: Vec<i64> = store
        .group("app")
        .unwrap()
        .values()
        .map(|c| c.offset)
        .collect();
    assert_eq!(offsets, [40, 41]);
    log.close().unwrap();
}
