//! Fencing after a failed write or fsync, and the fence lifting by itself, over the
//! in-memory `FaultyFs` (its failed syncs lose the unsynced bytes as Linux can, and its
//! "disk full" switch fails every write and dirty sync with ENOSPC until turned off).
//!
//! Covered: an fsync failure fences and the next append is refused; nothing whose fsync
//! failed is durable after a crash, even when a later fsync of the file succeeds; the probe
//! keeps the fence while the disk is full and lifts it once space is back, after which
//! appends continue at the durable offset (a failed fsync) or after the last whole batch (a
//! failed write); retention deletes whole segments of a fenced log; a sync begun before a
//! reopen moves nothing; a full disk at a roll or a new log is an error, not a crash; an
//! index block reservation on a full disk fails before any byte of the append is written,
//! and an empty log reserves no index blocks.

mod common;

use sluice_storage::batch::iter_batches;
use sluice_storage::io::{CrashMode, FaultyFs, Fs};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{AppendError, Durability, Log, LogConfig, Offset, StorageError};
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/data/fenced-0";

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 512,
        index_interval_bytes: 128,
        segment_index_bytes: 384,
        ..LogConfig::default()
    }
}

fn open(fs: &FaultyFs, cfg: &LogConfig) -> Log {
    common::open_faulty(fs, DIR, cfg.clone()).unwrap()
}

fn append(log: &mut Log, fill: u8, durability: Durability) -> Result<Offset, AppendError> {
    let mut batch = build_value_batch(2, 40, fill, 1_000);
    log.append(&mut batch, durability, 1_000)
        .map(|o| o.base_offset)
}

/// The fill byte of every batch readable from the log start, in offset order, with the
/// offsets checked contiguous.
fn fills(log: &Log) -> Vec<u8> {
    let (mut out, mut next) = (Vec::new(), log.log_start_offset().value());
    while next < log.log_end_offset().value() {
        let bytes = log
            .read(Offset(next), 1 << 20)
            .unwrap()
            .read_to_vec()
            .unwrap();
        for item in iter_batches(&bytes) {
            let (header, batch) = item.unwrap();
            assert_eq!(header.base_offset, next, "offsets are contiguous");
            out.push(batch[batch.len() - 2]); // the last value byte (then 0 headers)
            next = header.last_offset() + 1;
        }
    }
    out
}

#[test]
fn a_failed_fsync_fences_and_its_bytes_are_not_durable_even_after_a_later_fsync() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config());
    append(&mut log, 1, Durability::Fsync).unwrap();
    fs.fail_nth_sync_losing_pages(1);
    assert!(matches!(
        append(&mut log, 2, Durability::Fsync),
        Err(AppendError::Io(_))
    ));
    assert!(log.is_fenced());
    assert!(matches!(
        append(&mut log, 3, Durability::Fsync),
        Err(AppendError::Fenced)
    ));
    assert_eq!(
        log.durable_offset(),
        Offset(2),
        "only the first batch was acked"
    );
    assert_eq!(
        fills(&log),
        [1, 2],
        "the page cache still shows the failed bytes"
    );

    // A naive retry: fsync the segment again. It succeeds, yet the bytes are gone.
    let segment = fs
        .open(&Path::new(DIR).join("00000000000000000000.log"), false)
        .unwrap();
    segment.sync().unwrap();
    let crashed = open(&fs.crash(CrashMode::AllWritten), &config());
    assert_eq!(
        fills(&crashed),
        [1],
        "the failed fsync lost batch 2: a retried fsync must never count as durable"
    );
}

#[test]
fn the_probe_lifts_the_fence_after_a_failed_fsync_and_appends_continue_at_the_durable_offset() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config());
    for fill in 1..=6 {
        append(&mut log, fill, Durability::Fsync).unwrap();
    }
    assert!(log.segment_count() > 1, "the cut spans a roll");
    append(&mut log, 7, Durability::OsCache).unwrap();
    append(&mut log, 8, Durability::OsCache).unwrap();
    fs.set_disk_full(true);
    let sync = log.begin_sync().unwrap();
    let result = sync.run();
    assert!(
        log.complete_sync(sync, result).is_err(),
        "the group fsync fails: ENOSPC"
    );
    assert!(log.is_fenced());
    assert!(
        log.try_unfence(2_000).is_err(),
        "the probe fails while the disk is full"
    );
    assert!(log.is_fenced());
    assert_eq!(
        fills(&log),
        [1, 2, 3, 4, 5, 6, 7, 8],
        "reads go on while fenced"
    );

    fs.set_disk_full(false);
    assert!(log.try_unfence(3_000).unwrap(), "the fence lifts");
    assert!(!log.is_fenced());
    assert_eq!(
        log.log_end_offset(),
        Offset(12),
        "cut back to the durable offset: 7 and 8 were never fsynced"
    );
    assert_eq!(log.durable_offset(), Offset(12));
    assert_eq!(append(&mut log, 9, Durability::Fsync).unwrap(), Offset(12));
    assert_eq!(fills(&log), [1, 2, 3, 4, 5, 6, 9]);
    assert!(!log.try_unfence(4_000).unwrap(), "nothing to lift");
    for mode in [CrashMode::DurableOnly, CrashMode::AllWritten] {
        let crashed = open(&fs.crash(mode), &config());
        assert_eq!(fills(&crashed), [1, 2, 3, 4, 5, 6, 9], "{mode:?}");
    }
    assert!(
        !fs.exists(&Path::new(DIR).join("fence-probe.tmp")).unwrap(),
        "the probe file is removed"
    );
}

#[test]
fn after_a_failed_write_the_fence_lifts_and_the_torn_batch_is_dropped() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config());
    append(&mut log, 1, Durability::Fsync).unwrap();
    append(&mut log, 2, Durability::OsCache).unwrap();
    fs.fail_nth_write(1);
    assert!(matches!(
        append(&mut log, 3, Durability::OsCache),
        Err(AppendError::Io(_))
    ));
    assert!(matches!(
        append(&mut log, 4, Durability::OsCache),
        Err(AppendError::Fenced)
    ));
    assert!(log.try_unfence(2_000).unwrap());
    assert_eq!(
        fills(&log),
        [1, 2],
        "written bytes kept, the torn batch cut off"
    );
    assert_eq!(append(&mut log, 5, Durability::Fsync).unwrap(), Offset(4));
    let crashed = open(&fs.crash(CrashMode::DurableOnly), &config());
    assert_eq!(fills(&crashed), [1, 2, 5]);
}

#[test]
fn retention_deletes_segments_of_a_fenced_log() {
    let fs = FaultyFs::new();
    let cfg = LogConfig {
        retention_bytes: 1_000,
        ..config()
    };
    let mut log = open(&fs, &cfg);
    for fill in 1..=12 {
        append(&mut log, fill, Durability::Fsync).unwrap();
    }
    let segments = log.segment_count();
    assert!(segments > 3);
    fs.set_disk_full(true);
    assert!(append(&mut log, 13, Durability::Fsync).is_err());
    assert!(log.is_fenced());
    let deleted = log.enforce_retention(5_000).unwrap();
    assert!(deleted > 0, "retention ran while fenced");
    assert_eq!(log.segment_count(), segments - deleted as usize);
    assert!(log.log_start_offset() > Offset(0));
    assert!(log.is_fenced(), "deleting does not lift the fence");
    fs.set_disk_full(false);
    assert!(log.try_unfence(6_000).unwrap());
    let start = log.log_start_offset().value();
    assert!(start > 0, "the new log start offset came back from disk");
    assert_eq!(log.log_end_offset(), Offset(24));
    assert_eq!(append(&mut log, 14, Durability::Fsync).unwrap(), Offset(24));
}

#[test]
fn a_sync_begun_before_the_reopen_moves_nothing() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config());
    append(&mut log, 1, Durability::OsCache).unwrap();
    let stale = log.begin_sync().unwrap();
    fs.fail_nth_write(1);
    assert!(append(&mut log, 2, Durability::OsCache).is_err());
    assert!(log.try_unfence(2_000).unwrap());
    assert_eq!(
        log.durable_offset(),
        Offset(2),
        "recovery synced what it kept"
    );
    let result = stale.run();
    assert_eq!(log.complete_sync(stale, result).unwrap(), Offset(2));
    assert!(!log.is_fenced());
}

#[test]
fn a_full_disk_at_a_roll_is_an_error_and_the_log_recovers_when_space_returns() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config());
    let mut acked = Vec::new();
    for fill in 1..=8 {
        append(&mut log, fill, Durability::Fsync).unwrap();
        acked.push(fill);
    }
    fs.set_disk_full(true);
    let mut failures = 0;
    for fill in 9..=20 {
        match append(&mut log, fill, Durability::Fsync) {
            Ok(_) => acked.push(fill),
            Err(AppendError::Io(_) | AppendError::Fenced) => failures += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!(failures, 12, "nothing is acknowledged on a full disk");
    let other = Log::open_with(Arc::new(fs.clone()), Path::new("/data/new-0"), config(), 0);
    assert!(
        matches!(other, Err(StorageError::Io(_))),
        "a new log's first checkpoint fails with an error on a full disk"
    );
    let mut reopen_attempts = 0;
    while reopen_attempts < 3 {
        assert!(matches!(log.try_unfence(2_000), Err(StorageError::Io(_))));
        reopen_attempts += 1;
    }
    fs.set_disk_full(false);
    assert!(log.try_unfence(3_000).unwrap());
    assert_eq!(fills(&log), acked);
    append(&mut log, 21, Durability::Fsync).unwrap();
    acked.push(21);
    let crashed = open(&fs.crash(CrashMode::DurableOnly), &config());
    assert_eq!(fills(&crashed), acked);
}

#[test]
fn an_index_reservation_on_a_full_disk_fails_before_the_append_writes_anything() {
    let fs = FaultyFs::new();
    let cfg = LogConfig {
        segment_index_bytes: 1024 * 1024,
        ..config()
    };
    let mut log = open(&fs, &cfg);
    let path = |ext: &str| Path::new(DIR).join(format!("00000000000000000000.{ext}"));
    for ext in ["index", "timeindex"] {
        assert_eq!(
            fs.reserved_bytes(&path(ext)).unwrap(),
            0,
            "{ext}: an empty log reserves no index blocks"
        );
    }
    fs.set_disk_full(true);
    assert!(matches!(
        append(&mut log, 1, Durability::Fsync),
        Err(AppendError::Io(_))
    ));
    assert!(log.is_fenced());
    assert_eq!(
        fs.open(&path("log"), false).unwrap().len().unwrap(),
        0,
        "the reservation failed first: no byte of the batch was written"
    );
    fs.set_disk_full(false);
    assert!(log.try_unfence(2_000).unwrap());
    assert_eq!(append(&mut log, 2, Durability::Fsync).unwrap(), Offset(0));
    let step = u64::from(sluice_storage::limits::INDEX_ALLOCATION_STEP_BYTES);
    let reserved = fs.reserved_bytes(&path("timeindex")).unwrap();
    assert!(
        reserved > 0 && reserved <= step,
        "one step reserved ahead of the time index's entries: {reserved}"
    );
    assert_eq!(fills(&log), [2]);
}
