//! Crash consistency by construction, over the in-memory `FaultyFs`.
//!
//! A fixed workload (appends of varied sizes, some fsynced, ticks, flushes, rolls through
//! tiny segments, a clean close) is run once without faults to count its syncs and writes.
//! Then, for every sync point and every write point, it is rerun with that operation
//! failing, and the filesystem is "crashed" three ways: only durable bytes survive, all
//! written bytes survive, or all survive but the last write is torn. After reopening:
//! every acknowledged (synced) batch is present and byte-identical, every batch present is
//! one that was appended (nothing after a torn write survives), offsets are contiguous
//! from 0, and the log takes new appends at its end. A second run of the workload keeps
//! `retention.bytes` small so ticks delete segments and move the log start offset under
//! the same faults; then offsets are contiguous from the recovered log start offset.

mod common;

use sluice_storage::batch::{iter_batches, verify_crc};
use sluice_storage::io::{CrashMode, FaultyFs};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{AppendError, Durability, Log, LogConfig, Offset};

const DIR: &str = "/data/events-0";
const APPENDS: usize = 40;
const MODES: [CrashMode; 3] = [
    CrashMode::DurableOnly,
    CrashMode::AllWritten,
    CrashMode::TornLastWrite,
];

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 128,
        segment_index_bytes: 384,
        ..LogConfig::default()
    }
}

/// The same, with size retention: ticks delete old segments and move the log start offset.
fn retention_config() -> LogConfig {
    LogConfig {
        retention_bytes: 2_500,
        ..config()
    }
}

/// What the workload did before it stopped (at its first error, or the end).
#[derive(Debug, Default)]
struct Outcome {
    /// Every batch handed to `append`, numbered, in offset order: (base offset, bytes).
    attempted: Vec<(i64, Vec<u8>)>,
    /// Offsets below this were acknowledged durable (Fsync append, flush, or close).
    durable_end: i64,
}

fn open(fs: &FaultyFs, cfg: &LogConfig) -> Result<Log, sluice_storage::StorageError> {
    common::open_faulty(fs, DIR, cfg.clone())
}

fn run_workload(fs: &FaultyFs, cfg: &LogConfig) -> Outcome {
    let mut out = Outcome::default();
    let Ok(mut log) = open(fs, cfg) else {
        return out;
    };
    for i in 0..APPENDS {
        let now_ms = 1_000 + i as i64;
        let mut batch = build_value_batch(1 + i % 4, 20 + (i * 37) % 200, i as u8, now_ms);
        let durability = if i % 3 == 0 {
            Durability::Fsync
        } else {
            Durability::OsCache
        };
        let base = log.log_end_offset().value();
        let result = log.append(&mut batch, durability, now_ms);
        out.attempted.push((base, batch));
        match result {
            Ok(_) if durability == Durability::Fsync => {
                out.durable_end = log.log_end_offset().value()
            }
            Ok(_) => {}
            Err(_) => return out,
        }
        if i % 7 == 6 && log.tick(now_ms).is_err() {
            return out;
        }
        if i % 11 == 10 {
            if log.flush().is_err() {
                return out;
            }
            out.durable_end = log.log_end_offset().value();
        }
    }
    let end = log.log_end_offset().value();
    if log.close().is_ok() {
        out.durable_end = end;
    }
    out
}

/// Reopens a crash image and checks the recovered log against what the workload did.
/// Without retention the log must start at 0; with it, at the start of an appended batch.
fn check_recovered(fs: &FaultyFs, cfg: &LogConfig, out: &Outcome, what: &str) {
    let mut log = open(fs, cfg).unwrap_or_else(|e| panic!("{what}: recovery failed: {e}"));
    let end = log.log_end_offset().value();
    assert!(
        end >= out.durable_end,
        "{what}: acknowledged offsets lost: end {end} < {}",
        out.durable_end
    );
    let mut next = log.log_start_offset().value();
    if cfg.retention_bytes < 0 {
        assert_eq!(next, 0, "{what}");
    }
    for (i, (base, expected)) in out.attempted.iter().enumerate() {
        if *base < next {
            continue;
        }
        if next == end {
            break;
        }
        assert_eq!(*base, next, "{what}: batch {i} base");
        let bytes = log.read(Offset(next), 1).unwrap().read_to_vec().unwrap();
        let (header, batch) = iter_batches(&bytes).next().unwrap().unwrap();
        verify_crc(batch).unwrap_or_else(|e| panic!("{what}: batch at {next}: {e}"));
        assert_eq!(
            batch,
            &expected[..],
            "{what}: batch at {next} differs from the one appended"
        );
        next = header.last_offset() + 1;
    }
    assert_eq!(
        next, end,
        "{what}: log end {end} is not the end of an appended batch"
    );
    let mut more = build_value_batch(2, 10, 0xee, 5_000);
    let appended = log.append(&mut more, Durability::Fsync, 5_000).unwrap();
    assert_eq!(
        appended.base_offset,
        Offset(end),
        "{what}: appends continue at the end"
    );
}

fn check_all_modes(fs: &FaultyFs, cfg: &LogConfig, out: &Outcome, what: &str) {
    for mode in MODES {
        check_recovered(&fs.crash(mode), cfg, out, &format!("{what}, {mode:?}"));
    }
}

/// Fails each sync of the workload in turn, crashes, checks.
fn every_sync_point(cfg: &LogConfig) {
    let reference = FaultyFs::new();
    let full = run_workload(&reference, cfg);
    assert_eq!(full.attempted.len(), APPENDS);
    let syncs = reference.syncs();
    assert!(syncs > 50, "workload exercises syncs ({syncs})");
    for n in 1..=syncs {
        let fs = FaultyFs::new();
        fs.fail_nth_sync(n);
        let out = run_workload(&fs, cfg);
        check_all_modes(&fs, cfg, &out, &format!("sync {n}/{syncs} fails"));
    }
}

/// Fails each write of the workload in turn, crashes, checks.
fn every_write_point(cfg: &LogConfig) {
    let reference = FaultyFs::new();
    run_workload(&reference, cfg);
    let writes = reference.writes();
    assert!(writes > 100, "workload exercises writes ({writes})");
    for n in 1..=writes {
        let fs = FaultyFs::new();
        fs.fail_nth_write(n);
        let out = run_workload(&fs, cfg);
        check_all_modes(&fs, cfg, &out, &format!("write {n}/{writes} fails"));
    }
}

#[test]
fn crash_at_every_sync_point() {
    every_sync_point(&config());
}

#[test]
fn crash_at_every_write_point() {
    every_write_point(&config());
}

#[test]
fn crash_at_every_sync_and_write_point_with_retention_deleting_segments() {
    let reference = FaultyFs::new();
    run_workload(&reference, &retention_config());
    let log = open(&reference, &retention_config()).unwrap();
    assert!(
        log.log_start_offset() > Offset(0),
        "retention ran in the workload"
    );
    every_sync_point(&retention_config());
    every_write_point(&retention_config());
}

#[test]
fn crash_after_clean_close_and_mid_run_without_faults() {
    let fs = FaultyFs::new();
    let out = run_workload(&fs, &config());
    check_all_modes(&fs, &config(), &out, "after close");
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config()).unwrap();
    let mut out = Outcome::default();
    for i in 0..25 {
        let mut batch = build_value_batch(3, 50, i, 1_000);
        let base = log.log_end_offset().value();
        log.append(&mut batch, Durability::OsCache, 1_000).unwrap();
        out.attempted.push((base, batch));
    }
    check_all_modes(&fs, &config(), &out, "mid-run, nothing synced");
}

#[test]
fn io_error_fences_the_log_until_reopened() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &config()).unwrap();
    let mut batch = build_value_batch(1, 10, 1, 0);
    log.append(&mut batch, Durability::Fsync, 0).unwrap();
    fs.fail_nth_sync(1);
    let mut batch = build_value_batch(1, 10, 2, 0);
    assert!(matches!(
        log.append(&mut batch, Durability::Fsync, 0),
        Err(AppendError::Io(_))
    ));
    assert!(log.is_fenced());
    let mut batch = build_value_batch(1, 10, 3, 0);
    assert!(matches!(
        log.append(&mut batch, Durability::OsCache, 0),
        Err(AppendError::Fenced)
    ));
    assert!(log.flush().is_err() && log.tick(0).is_err());
    assert!(
        log.read(Offset(0), 100).unwrap().len > 0,
        "reads still work"
    );
    drop(log);
    let mut log = open(&fs, &config()).unwrap();
    assert!(!log.is_fenced());
    let mut batch = build_value_batch(1, 10, 4, 0);
    log.append(&mut batch, Durability::Fsync, 0).unwrap();
}
