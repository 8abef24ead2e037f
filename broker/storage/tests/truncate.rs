//! `Log::truncate_to` (Kafka's `truncateTo`): inside the active segment, across segment
//! boundaries (later segments deleted), at a segment's base and at the log start; what it
//! refuses (out of range, inside a batch, fenced); and that the offset index, the producer
//! state and the leader epoch cache follow the cut, in memory and after a reopen. Real files
//! in a temp dir (memory-mapped indexes) and `FaultyFs`. The crash behaviour is swept in
//! `truncate_fault_sweep.rs`.

mod common;

use sluice_storage::batch::iter_batches;
use sluice_storage::io::FaultyFs;
use sluice_storage::testing::{build_value_batch, producer_batch};
use sluice_storage::{AppendError, Durability, Log, LogConfig, Offset, StorageError};

fn tiny_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 100,
        segment_index_bytes: 384,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// Appends `n` batches of 2 records each (fsynced); returns their base offsets.
fn append_n(log: &mut Log, n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| {
            let mut batch = build_value_batch(2, 120, i as u8, 1_000 + i as i64);
            let outcome = log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
            outcome.base_offset.value()
        })
        .collect()
}

/// Base offsets of every batch from the log start to the end, read one by one.
fn bases(log: &Log) -> Vec<i64> {
    let (mut next, end) = (log.log_start_offset().value(), log.log_end_offset().value());
    let mut out = Vec::new();
    while next < end {
        let bytes = log.read(Offset(next), 1).unwrap().read_to_vec().unwrap();
        let (header, _) = iter_batches(&bytes).next().unwrap().unwrap();
        out.push(header.base_offset);
        next = header.last_offset() + 1;
    }
    out
}

#[test]
fn truncating_inside_the_active_segment_ends_the_log_there() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    let offsets = append_n(&mut log, 5);
    assert_eq!(
        log.truncate_to(Offset(offsets[3]), 2_000).unwrap(),
        Offset(offsets[3])
    );
    assert_eq!(log.log_end_offset(), Offset(offsets[3]));
    assert_eq!(bases(&log), offsets[..3]);
    assert!(log.read(Offset(offsets[3]), 1).unwrap().is_empty());
    let again = append_n(&mut log, 1);
    assert_eq!(again, [offsets[3]], "appends continue at the new end");
    drop(log);
    let log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(
        bases(&log),
        offsets[..4],
        "an unclean reopen sees the same log"
    );
}

#[test]
fn truncating_across_segments_deletes_the_later_ones() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    let offsets = append_n(&mut log, 20);
    let segments_before = log.segment_count();
    assert!(segments_before >= 5, "the batches span segments");
    let target = Offset(offsets[5]);
    log.truncate_to(target, 2_000).unwrap();
    assert!(log.segment_count() < segments_before);
    assert_eq!(bases(&log), offsets[..5]);
    let logs_on_disk = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert_eq!(
        logs_on_disk,
        log.segment_count(),
        "later segment files are gone"
    );
    let more = append_n(&mut log, 10);
    assert_eq!(more[0], target.value());
    log.close().unwrap();
    let log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    let mut expected = offsets[..5].to_vec();
    expected.extend(&more);
    assert_eq!(bases(&log), expected, "the regrown log reopens cleanly");
}

#[test]
fn truncating_at_a_segment_base_and_at_the_log_start() {
    let fs = FaultyFs::new();
    let mut log = common::open_faulty(&fs, "/d/t-0", tiny_segments()).unwrap();
    let offsets = append_n(&mut log, 12);
    // A batch at position 0 of its file begins a segment.
    let at_base = offsets[1..]
        .iter()
        .map(|&o| Offset(o))
        .find(|&o| log.read(o, 1).unwrap().position == 0)
        .expect("the batches span segments");
    let segments = log.segment_count();
    log.truncate_to(at_base, 2_000).unwrap();
    assert_eq!(log.log_end_offset(), at_base);
    assert!(log.segment_count() < segments);
    let again = append_n(&mut log, 1);
    assert_eq!(
        again,
        [at_base.value()],
        "the emptied segment takes appends"
    );
    log.truncate_to(Offset(0), 2_000).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(0), Offset(0))
    );
    assert!(bases(&log).is_empty());
    assert_eq!(append_n(&mut log, 1), [0]);
    drop(log);
    let log = common::open_faulty(&fs, "/d/t-0", tiny_segments()).unwrap();
    assert_eq!(bases(&log), [0]);
}

#[test]
fn truncate_refuses_outside_the_log_inside_a_batch_and_when_fenced() {
    let fs = FaultyFs::new();
    let mut log = common::open_faulty(&fs, "/d/t-0", tiny_segments()).unwrap();
    let offsets = append_n(&mut log, 6);
    let end = log.log_end_offset();
    assert_eq!(
        log.truncate_to(end, 0).unwrap(),
        end,
        "at the end: nothing to do"
    );
    assert!(matches!(
        log.truncate_to(end.plus(1), 0),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    log.advance_log_start_offset(Offset(offsets[2]), 0).unwrap();
    assert!(matches!(
        log.truncate_to(Offset(offsets[1]), 0),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let inside = Offset(offsets[3] + 1);
    match log.truncate_to(inside, 0) {
        Err(StorageError::NotBatchBoundary {
            requested,
            batch_base,
        }) => {
            assert_eq!((requested, batch_base), (inside, Offset(offsets[3])));
        }
        other => panic!("expected NotBatchBoundary, got {other:?}"),
    }
    assert_eq!(
        log.log_end_offset(),
        end,
        "a refused truncation changes nothing"
    );
    fs.fail_nth_sync(1);
    let mut batch = build_value_batch(1, 10, 1, 1);
    assert!(log.append(&mut batch, Durability::Fsync, 0).is_err());
    assert!(matches!(
        log.truncate_to(Offset(offsets[4]), 0),
        Err(StorageError::Fenced)
    ));
}

#[test]
fn the_producer_state_is_rebuilt_to_the_cut() {
    let fs = FaultyFs::new();
    let mut log = common::open_faulty(&fs, "/d/t-0", tiny_segments()).unwrap();
    let mut bases_of = Vec::new();
    for seq in 0..10 {
        let mut batch = producer_batch(7, 0, seq * 2, 2, false);
        let outcome = log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
        bases_of.push(outcome.base_offset);
    }
    log.tick(70_000).unwrap(); // a producer snapshot at the end, above the cut
    log.truncate_to(bases_of[4], 80_000).unwrap();
    let producer = log.producer_state().producer(7).unwrap();
    assert_eq!(
        producer.last_seq(),
        7,
        "the last batch kept ends at sequence 7"
    );
    let mut retry = producer_batch(7, 0, 8, 2, false);
    let outcome = log.append(&mut retry, Durability::Fsync, 80_000).unwrap();
    assert!(
        !outcome.duplicate,
        "a truncated batch is appended again, not a duplicate"
    );
    assert_eq!(outcome.base_offset, bases_of[4]);
    let mut gap = producer_batch(7, 0, 20, 2, false);
    assert!(matches!(
        log.append(&mut gap, Durability::Fsync, 80_000),
        Err(AppendError::OutOfOrderSequence { expected: 10, .. })
    ));
    drop(log);
    let log = common::open_faulty(&fs, "/d/t-0", tiny_segments()).unwrap();
    assert_eq!(log.producer_state().producer(7).unwrap().last_seq(), 9);
}

#[test]
fn the_leader_epoch_cache_forgets_the_epochs_truncated_away() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    assert_eq!(log.begin_next_leader_epoch().unwrap(), 0);
    let first = append_n(&mut log, 4);
    assert_eq!(log.begin_next_leader_epoch().unwrap(), 1);
    let second = append_n(&mut log, 4);
    assert_eq!(log.leader_epoch_at(Offset(second[0])), 1);
    log.truncate_to(Offset(second[0]), 2_000).unwrap();
    assert_eq!(log.leader_epoch(), 0, "epoch 1 began at the cut: forgotten");
    assert_eq!(log.end_offset_for_leader_epoch(0), (0, second[0]));
    drop(log);
    let log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    assert_eq!(log.leader_epoch(), 0, "and durably so");
    assert_eq!(log.leader_epoch_at(Offset(first[3])), 0);
}

#[test]
fn truncate_fully_and_start_at_moves_an_empty_log_past_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    append_n(&mut log, 12);
    log.truncate_fully_and_start_at(Offset(100), 2_000).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(100), Offset(100))
    );
    assert_eq!(log.segment_count(), 1);
    assert_eq!(append_n(&mut log, 2), [100, 102]);
    drop(log);
    let log = Log::open(dir.path(), tiny_segments(), 0).unwrap();
    assert_eq!(log.log_start_offset(), Offset(100));
    assert_eq!(bases(&log), [100, 102]);
}
