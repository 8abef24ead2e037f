//! Group commit (`Log::begin_sync` / `PendingSync::run` / `Log::complete_sync`) over the
//! fault-injecting `FaultyFs`: one sync covers every append before it and none after it;
//! appends land while a sync is pending; the synced bytes survive a crash that keeps only
//! durable bytes; a failed group fsync fences the log and leaves the durable offset where
//! the last successful sync put it; syncs span rolled segments.

mod common;

use sluice_storage::io::{CrashMode, FaultyFs};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{AppendError, Durability, Log, LogConfig, Offset};

const DIR: &str = "/data/acks-all-0";

fn open(fs: &FaultyFs, config: LogConfig) -> Log {
    common::open_faulty(fs, DIR, config).unwrap()
}

fn append(log: &mut Log, records: usize) -> Offset {
    let mut batch = build_value_batch(records, 50, b'x', 1_000);
    log.append(&mut batch, Durability::OsCache, 1_000)
        .unwrap()
        .last_offset
}

#[test]
fn one_sync_covers_every_append_before_it_and_none_after() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, LogConfig::default());
    assert!(
        log.begin_sync().is_none(),
        "nothing to sync in an empty log"
    );
    append(&mut log, 2);
    append(&mut log, 3);
    let pending = log.begin_sync().expect("five records to sync");
    assert_eq!(pending.target(), Offset(5));
    append(&mut log, 1); // lands while the fsync runs
    let syncs = fs.syncs();
    let result = pending.run();
    assert_eq!(fs.syncs(), syncs + 1, "one fsync for one segment");
    assert_eq!(log.complete_sync(pending, result).unwrap(), Offset(5));
    assert_eq!(log.durable_offset(), Offset(5));
    let next = log.begin_sync().expect("the append made during the sync");
    assert_eq!(next.target(), Offset(6));
    let result = next.run();
    log.complete_sync(next, result).unwrap();
    assert_eq!(log.durable_offset(), Offset(6));
    assert!(log.begin_sync().is_none());

    drop(log);
    let crashed = fs.crash(CrashMode::DurableOnly);
    let reopened = open(&crashed, LogConfig::default());
    assert_eq!(
        reopened.log_end_offset(),
        Offset(6),
        "synced records survive"
    );
}

#[test]
fn a_failed_group_fsync_fences_and_keeps_the_earlier_durable_offset() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, LogConfig::default());
    append(&mut log, 4);
    let first = log.begin_sync().unwrap();
    let result = first.run();
    log.complete_sync(first, result).unwrap();
    append(&mut log, 2);
    let second = log.begin_sync().unwrap();
    fs.fail_nth_sync(1);
    let result = second.run();
    assert!(result.is_err());
    assert!(log.complete_sync(second, result).is_err());
    assert!(log.is_fenced());
    assert_eq!(
        log.durable_offset(),
        Offset(4),
        "waiters below 4 succeeded; the rest fail"
    );
    assert!(log.begin_sync().is_none(), "a fenced log never syncs again");
    let mut batch = build_value_batch(1, 10, b'y', 1_000);
    assert!(matches!(
        log.append(&mut batch, Durability::OsCache, 1_000),
        Err(AppendError::Fenced)
    ));
}

#[test]
fn a_sync_spans_segments_rolled_since_the_last_one() {
    let fs = FaultyFs::new();
    let config = LogConfig {
        segment_bytes: 1024,
        ..LogConfig::default()
    };
    let mut log = open(&fs, config.clone());
    for _ in 0..20 {
        append(&mut log, 2);
    }
    assert!(log.segment_count() > 2);
    let pending = log.begin_sync().unwrap();
    let result = pending.run();
    log.complete_sync(pending, result).unwrap();
    assert_eq!(log.durable_offset(), Offset(40));
    drop(log);
    let reopened = open(&fs.crash(CrashMode::DurableOnly), config);
    assert_eq!(reopened.log_end_offset(), Offset(40));
}

#[test]
fn flush_and_fsync_appends_move_the_durable_offset_too() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, LogConfig::default());
    append(&mut log, 3);
    log.flush().unwrap();
    assert_eq!(log.durable_offset(), Offset(3));
    let mut batch = build_value_batch(2, 10, b'y', 1_000);
    log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
    assert_eq!(log.durable_offset(), Offset(5));
    assert!(log.begin_sync().is_none());
}
