//! Periodic work and offsets, on real files and on `FaultyFs`: rolls by `segment.ms`,
//! retention by time and by size (whole segments, log start offset advanced and
//! persisted, readers keep deleted segments), explicit log start offset moves,
//! `flush.messages` / `flush.ms`, LogAppendTime, ListOffsets by timestamp and by the largest
//! timestamp (KIP-734: across rolls, clean and unclean reopens), and that a
//! cleanly closed log reopens without scanning its segments.

use sluice_storage::batch::iter_batches;
use sluice_storage::io::FaultyFs;
use sluice_storage::testing::{TestRecord, build_batch, build_value_batch};
use sluice_storage::{Durability, Log, LogConfig, Offset, ReadError, StorageError, TimestampType};
use std::path::Path;
use std::sync::Arc;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

fn append(log: &mut Log, records: usize, timestamp_ms: i64, now_ms: i64) -> Offset {
    let mut batch = build_value_batch(records, 100, 7, timestamp_ms);
    log.append(&mut batch, Durability::OsCache, now_ms)
        .unwrap()
        .base_offset
}

fn segment_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count()
}

#[test]
fn segment_ms_rolls_on_append_and_on_tick() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: 1_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    append(&mut log, 1, 0, 0);
    append(&mut log, 1, 500, 500);
    assert_eq!(log.segment_count(), 1);
    append(&mut log, 1, 2_000, 2_000);
    assert_eq!(
        log.segment_count(),
        2,
        "rolled on append once segment.ms passed"
    );
    assert!(!log.tick(2_500).unwrap().rolled);
    assert!(
        log.tick(3_001).unwrap().rolled,
        "tick rolls an old active segment"
    );
    assert_eq!(log.segment_count(), 3);
    assert!(
        !log.tick(10_000).unwrap().rolled,
        "an empty active segment does not roll"
    );
    assert_eq!(segment_files(dir.path()), 3);
}

#[test]
fn retention_by_time_deletes_old_segments_and_persists_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 10_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
    for ts in [1_000, 1_000, 2_000, 2_000, 2_000, 50_000, 50_000, 50_000] {
        append(&mut log, 4, ts, ts);
    }
    let segments = log.segment_count();
    assert!(segments >= 3, "{segments}");
    let first_fresh = log.offset_for_timestamp(50_000).unwrap().unwrap().0;
    let slice = log.read(Offset(0), 100).unwrap();
    let outcome = log.tick(20_000).unwrap();
    assert!(outcome.deleted_segments > 0);
    assert!(outcome.log_start_offset <= first_fresh && outcome.log_start_offset > Offset(0));
    assert_eq!(log.log_start_offset(), outcome.log_start_offset);
    assert!(matches!(
        log.read(Offset(0), 100),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert!(
        !slice.read_to_vec().unwrap().is_empty(),
        "a held slice outlives its deleted segment"
    );
    assert_eq!(segment_files(dir.path()), log.segment_count());
    let start = log.log_start_offset();
    drop(log);
    let log = Log::open(dir.path(), cfg, 0).unwrap();
    assert_eq!(log.log_start_offset(), start);
}

#[test]
fn retention_by_time_rolls_and_deletes_an_expired_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 10_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    append(&mut log, 1, 1_000, 1_000);
    let outcome = log.tick(100_000).unwrap();
    assert!(outcome.rolled);
    assert_eq!(outcome.deleted_segments, 1);
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(1), Offset(1))
    );
    assert!(log.read(Offset(1), 100).unwrap().is_empty());
}

#[test]
fn retention_by_size_keeps_at_least_retention_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_bytes: 2_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    for i in 0..40 {
        append(&mut log, 2, i, i);
    }
    let before = log.size_bytes();
    assert!(before > 4_000);
    let outcome = log.tick(100).unwrap();
    assert!(outcome.deleted_segments > 0);
    assert!(
        log.size_bytes() >= 2_000 && log.size_bytes() < before,
        "{}",
        log.size_bytes()
    );
    assert_eq!(
        log.tick(101).unwrap().deleted_segments,
        0,
        "stable once within the limit"
    );
    let start = log.log_start_offset();
    let first = log.read(start, 1).unwrap().read_to_vec().unwrap();
    assert_eq!(
        iter_batches(&first).next().unwrap().unwrap().0.base_offset,
        start.value()
    );
}

#[test]
fn advance_log_start_offset_is_persisted_and_bounds_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    for i in 0..30 {
        append(&mut log, 2, i, i);
    }
    let segments = log.segment_count();
    assert_eq!(
        log.advance_log_start_offset(Offset(3), 0).unwrap(),
        Offset(3)
    );
    assert_eq!(log.segment_count(), segments);
    assert!(matches!(
        log.read(Offset(2), 10),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    let bytes = log.read(Offset(3), 1).unwrap().read_to_vec().unwrap();
    assert_eq!(
        iter_batches(&bytes).next().unwrap().unwrap().0.base_offset,
        2,
        "the batch holding offset 3"
    );
    assert_eq!(
        log.advance_log_start_offset(Offset(1), 0).unwrap(),
        Offset(3),
        "never backwards"
    );
    assert_eq!(
        log.advance_log_start_offset(Offset(41), 0).unwrap(),
        Offset(41)
    );
    assert!(
        log.segment_count() < segments,
        "whole segments below the start are deleted"
    );
    assert!(matches!(
        log.advance_log_start_offset(Offset(61), 0),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    log.close().unwrap();
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(41), Offset(60))
    );
}

#[test]
fn flush_messages_and_flush_ms_trigger_fsyncs() {
    let fs = FaultyFs::new();
    let cfg = LogConfig {
        flush_messages: 5,
        flush_ms: 1_000,
        ..config()
    };
    let mut log = Log::open_with(Arc::new(fs.clone()), Path::new("/d/t-0"), cfg, 0).unwrap();
    let syncs = fs.syncs();
    for _ in 0..4 {
        append(&mut log, 1, 0, 0);
    }
    assert_eq!(
        fs.syncs(),
        syncs,
        "OsCache appends below flush.messages do not fsync"
    );
    append(&mut log, 1, 0, 0);
    assert!(fs.syncs() > syncs, "the 5th record triggers a flush");
    append(&mut log, 1, 0, 100);
    assert!(!log.tick(500).unwrap().flushed);
    assert!(
        log.tick(1_100).unwrap().flushed,
        "flush.ms after the oldest unflushed append"
    );
    assert!(!log.tick(5_000).unwrap().flushed, "nothing left to flush");
}

#[test]
fn log_append_time_stamps_batches() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    let mut batch = build_value_batch(2, 10, 1, 5);
    let outcome = log.append(&mut batch, Durability::OsCache, 777).unwrap();
    assert_eq!(outcome.log_append_time_ms, 777);
    let bytes = log.read(Offset(0), 1000).unwrap().read_to_vec().unwrap();
    let (header, _) = iter_batches(&bytes).next().unwrap().unwrap();
    assert_eq!(
        (header.max_timestamp, header.timestamp_type()),
        (777, TimestampType::LogAppendTime)
    );
    assert_eq!(
        log.offset_for_timestamp(700).unwrap(),
        Some((Offset(0), 777))
    );
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let value = [0u8; 60];
    for i in 0..40i64 {
        let records: Vec<TestRecord<'_>> = (0..3)
            .map(|d| TestRecord {
                timestamp_delta: d * 10,
                ..TestRecord::value(&value)
            })
            .collect();
        let mut batch = build_batch(0, 1_000 + i * 100, &records);
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    assert!(log.segment_count() > 3);
    assert_eq!(
        log.offset_for_timestamp(0).unwrap(),
        Some((Offset(0), 1_000))
    );
    assert_eq!(
        log.offset_for_timestamp(1_005).unwrap(),
        Some((Offset(1), 1_010))
    );
    assert_eq!(
        log.offset_for_timestamp(2_515).unwrap(),
        Some((Offset(47), 2_520))
    );
    assert_eq!(
        log.offset_for_timestamp(2_521).unwrap(),
        Some((Offset(48), 2_600))
    );
    assert_eq!(
        log.offset_for_timestamp(4_920).unwrap(),
        Some((Offset(119), 4_920))
    );
    assert_eq!(log.offset_for_timestamp(4_921).unwrap(), None);
    assert_eq!(log.max_timestamp().unwrap(), Some((Offset(119), 4_920)));
    log.close().unwrap();
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        log.offset_for_timestamp(2_515).unwrap(),
        Some((Offset(47), 2_520)),
        "after reopen"
    );
}

#[test]
fn clean_reopen_does_not_scan_segments_but_unclean_scans_only_the_tail() {
    let fs = FaultyFs::new();
    let dir = Path::new("/d/t-0");
    let mut log = Log::open_with(Arc::new(fs.clone()), dir, config(), 0).unwrap();
    for i in 0..200 {
        append(&mut log, 2, i, i);
    }
    log.flush().unwrap();
    let (segments, size) = (log.segment_count(), log.size_bytes());
    assert!(segments > 50);
    log.close().unwrap();
    let before = fs.log_bytes_read();
    let log = Log::open_with(Arc::new(fs.clone()), dir, config(), 0).unwrap();
    let read = fs.log_bytes_read() - before;
    assert!(read < 2 * 1024, "clean open read {read} bytes of {size}");
    assert_eq!(log.segment_count(), segments);
    drop(log); // unclean: recovery point = log end, so only the active segment is scanned
    let before = fs.log_bytes_read();
    let log = Log::open_with(Arc::new(fs.clone()), dir, config(), 0).unwrap();
    let read = fs.log_bytes_read() - before;
    assert!(read <= 2 * 1024, "unclean open read {read} bytes of {size}");
    assert_eq!(log.log_end_offset(), Offset(400));
}

#[test]
fn tick_without_retention_leaves_retention_to_enforce_retention() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_ms: 10_000,
        segment_ms: 1_000_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), cfg, 0).unwrap();
    for _ in 0..12 {
        append(&mut log, 4, 1_000, 1_000);
    }
    let segments = log.segment_count();
    assert!(segments > 2);
    let outcome = log.tick_without_retention(100_000).unwrap();
    assert_eq!((outcome.rolled, outcome.deleted_segments), (false, 0));
    assert_eq!(log.segment_count(), segments);
    assert_eq!(
        log.enforce_retention(100_000).unwrap() as usize,
        segments,
        "all expired, active rolled first"
    );
    assert_eq!(log.log_start_offset(), log.log_end_offset());
    assert_eq!(log.enforce_retention(100_001).unwrap(), 0);
}

/// Lines of /proc/self/maps naming a file under `dir`.
fn mappings_under(dir: &Path) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|l| l.contains(dir.to_str().unwrap()))
        .count()
}

#[test]
fn sealed_indexes_are_mapped_only_when_first_used() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    for i in 0..100 {
        append(&mut log, 2, i, i);
    }
    assert!(log.segment_count() > 20);
    log.close().unwrap();
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        mappings_under(dir.path()),
        2,
        "only the active .index and .timeindex"
    );
    let bytes = log.read(Offset(3), 1).unwrap().read_to_vec().unwrap();
    assert_eq!(
        iter_batches(&bytes).next().unwrap().unwrap().0.base_offset,
        2
    );
    assert!(
        mappings_under(dir.path()) <= 3,
        "a lookup maps that segment's index at most"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn segments_left_below_a_persisted_log_start_offset_are_deleted_by_retention() {
    let (x, y) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut log = Log::open(x.path(), config(), 0).unwrap();
    for i in 0..30 {
        append(&mut log, 2, i, i);
    }
    log.close().unwrap();
    copy_dir(x.path(), y.path());
    let mut log = Log::open(x.path(), config(), 0).unwrap();
    log.advance_log_start_offset(Offset(41), 0).unwrap();
    log.close().unwrap();
    // y: the new log start offset is persisted, but the segments below it are still there,
    // as after a crash between the checkpoint and the unlinks.
    std::fs::copy(
        x.path().join("partition.checkpoint"),
        y.path().join("partition.checkpoint"),
    )
    .unwrap();
    let mut log = Log::open(y.path(), config(), 0).unwrap();
    assert_eq!(log.log_start_offset(), Offset(41));
    let before = log.segment_count();
    let deleted = log.enforce_retention(0).unwrap() as usize;
    assert!(deleted > 0);
    assert_eq!(log.segment_count(), before - deleted);
    assert_eq!(segment_files(y.path()), log.segment_count());
    assert_eq!(log.log_start_offset(), Offset(41));
    let bytes = log.read(Offset(41), 1).unwrap().read_to_vec().unwrap();
    assert_eq!(
        iter_batches(&bytes).next().unwrap().unwrap().0.base_offset,
        40
    );
}

/// Batch `i`'s three records: timestamps `base`, `base + peak`, `base + 5`.
fn peaked_batch(base_ms: i64, peak_delta: i64) -> Vec<u8> {
    let value = [0u8; 60];
    let records: Vec<TestRecord<'_>> = [0, peak_delta, 5]
        .into_iter()
        .map(|d| TestRecord {
            timestamp_delta: d,
            ..TestRecord::value(&value)
        })
        .collect();
    build_batch(0, base_ms, &records)
}

#[test]
fn max_timestamp_is_the_first_record_carrying_the_largest_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(log.max_timestamp().unwrap(), None, "an empty log");
    // 30 batches of 3 records; the peak (9_000) is in the middle record of batch 4, and
    // batch 20 (a later segment) reaches it again: the first one wins, as in Kafka.
    for i in 0..30i64 {
        let peak = match i {
            4 | 20 => 9_000 - 1_000 - i * 100,
            _ => 1,
        };
        let mut batch = peaked_batch(1_000 + i * 100, peak);
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    assert!(
        log.segment_count() > 3,
        "the peaks are in different segments"
    );
    let expected = Some((Offset(4 * 3 + 1), 9_000));
    assert_eq!(log.max_timestamp().unwrap(), expected);
    log.close().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        log.max_timestamp().unwrap(),
        expected,
        "after a clean reopen"
    );
    // A new peak in the active segment, then an unclean drop: recovery rebuilds it.
    let mut batch = peaked_batch(5_000, 5_000);
    log.append(&mut batch, Durability::OsCache, 0).unwrap();
    assert_eq!(log.max_timestamp().unwrap(), Some((Offset(91), 10_000)));
    drop(log);
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        log.max_timestamp().unwrap(),
        Some((Offset(91), 10_000)),
        "after an unclean reopen"
    );
}
