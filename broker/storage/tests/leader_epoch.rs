//! Leader epochs on real files: each leadership (`begin_next_leader_epoch`, called by the
//! broker whenever it opens a partition) starts a new epoch at the log end, appends carry
//! it, OffsetForLeaderEpoch answers from the cache, and the cache follows the log when a
//! torn tail is truncated, when the log start moves, and when its file is lost.

use sluice_storage::batch::iter_batches;
use sluice_storage::testing::build_value_batch;
use sluice_storage::{Durability, Log, LogConfig, Offset};
use std::path::Path;

fn open(dir: &Path) -> Log {
    Log::open(dir, LogConfig::default(), 0).unwrap()
}

/// Appends `batches` batches of two records each.
fn append(log: &mut Log, batches: usize) {
    for _ in 0..batches {
        let mut batch = build_value_batch(2, 10, 7, 1_000);
        log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
    }
}

/// The `partitionLeaderEpoch` of every batch in the log, in order.
fn stamped(log: &Log) -> Vec<i32> {
    let bytes = log
        .read(log.log_start_offset(), u32::MAX)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let mut epochs = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let (header, _) = iter_batches(rest).next().unwrap().unwrap();
        epochs.push(header.partition_leader_epoch);
        rest = &rest[header.total_bytes()..];
    }
    epochs
}

#[test]
fn every_leadership_with_appends_is_a_new_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    assert_eq!(log.leader_epoch(), -1, "no leadership yet");
    assert_eq!(log.begin_next_leader_epoch().unwrap(), 0);
    append(&mut log, 2); // offsets 0..4 in epoch 0
    log.close().unwrap();

    let mut log = open(dir.path());
    assert_eq!(log.leader_epoch(), 0, "the cache is read back");
    assert_eq!(log.begin_next_leader_epoch().unwrap(), 1);
    append(&mut log, 1); // offsets 4..6 in epoch 1
    assert_eq!(stamped(&log), vec![0, 0, 1]);
    assert_eq!(log.end_offset_for_leader_epoch(0), (0, 4));
    assert_eq!(log.end_offset_for_leader_epoch(1), (1, 6));
    assert_eq!(log.end_offset_for_leader_epoch(7), (-1, -1));
    assert_eq!(
        (
            log.leader_epoch_at(Offset(3)),
            log.leader_epoch_at(Offset(4))
        ),
        (0, 1)
    );
    log.close().unwrap();

    let mut log = open(dir.path());
    assert_eq!(log.begin_next_leader_epoch().unwrap(), 2);
    log.close().unwrap();
    let mut log = open(dir.path());
    assert_eq!(
        log.begin_next_leader_epoch().unwrap(),
        2,
        "an epoch with no records is kept, not bumped again"
    );
}

#[test]
fn a_truncated_tail_takes_its_epoch_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.begin_next_leader_epoch().unwrap();
    append(&mut log, 2); // epoch 0: 0..4
    log.close().unwrap();
    let mut log = open(dir.path());
    log.begin_next_leader_epoch().unwrap();
    let before = log.size_bytes();
    append(&mut log, 2); // epoch 1: 4..8
    drop(log); // a crash: no clean shutdown

    // The page cache lost epoch 1's batches (what a power cut does to unflushed data).
    let segment = dir.path().join(format!("{:020}.log", 0));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(before)
        .unwrap();
    let mut log = open(dir.path());
    assert_eq!(log.log_end_offset(), Offset(4));
    assert_eq!(
        log.leader_epoch(),
        1,
        "epoch 1 is still known, moved back to the end"
    );
    assert_eq!(
        log.begin_next_leader_epoch().unwrap(),
        2,
        "after a crash an epoch is never reused: its lost records may have been read"
    );
    append(&mut log, 3); // epoch 2: 4..10
    assert_eq!(
        log.end_offset_for_leader_epoch(1),
        (0, 4),
        "a reader at offset 8 in epoch 1 learns the log diverged at 4"
    );
    assert_eq!(log.end_offset_for_leader_epoch(0), (0, 4));
    assert_eq!(stamped(&log), vec![0, 0, 2, 2, 2]);
}

#[test]
fn the_cache_is_rebuilt_from_the_batches_and_follows_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.begin_next_leader_epoch().unwrap();
    append(&mut log, 1);
    log.close().unwrap();
    let mut log = open(dir.path());
    log.begin_next_leader_epoch().unwrap();
    append(&mut log, 1);
    log.close().unwrap();
    std::fs::remove_file(dir.path().join("leader-epoch.checkpoint")).unwrap();

    let mut log = open(dir.path());
    assert_eq!(log.leader_epoch(), 1, "rebuilt from partitionLeaderEpoch");
    assert_eq!(log.end_offset_for_leader_epoch(0), (0, 2));
    log.advance_log_start_offset(Offset(3), 0).unwrap();
    assert_eq!(
        log.end_offset_for_leader_epoch(0),
        (0, 3),
        "epoch 0 is below the log start: its answer is the first offset kept"
    );
    assert_eq!(log.leader_epoch_at(Offset(3)), 1);
}

#[test]
fn every_leader_epochs_corpus_file_replays_without_a_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/leader_epochs");
    let mut decoded = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        sluice_storage::fuzz::leader_epochs(&bytes);
        decoded += usize::from(sluice_storage::epoch::decode(&bytes).is_ok());
    }
    assert!(decoded >= 3, "the committed seeds decode");
}
