//! Fault injection at every write and sync of the produce path, over the in-memory `FaultyFs`.
//!
//! The scenario is what the broker does for acks=all producers: appends under
//! `Durability::Fsync` and appends under `OsCache` acknowledged by a group commit
//! (`begin_sync`, `PendingSync::run`, `complete_sync`), across segment rolls (tiny segments)
//! and offset-index entries, with ticks that persist the checkpoint, then a clean close
//! (the clean-shutdown marker). After an error the scenario keeps going as the broker does
//! (the log is fenced, so every later call must fail). A run without faults counts the write
//! and sync operations (a write is a `write_at`, a `set_len` or an index block reservation,
//! `allocate`); then, for every operation index N, the scenario is rerun with
//! operation N failing as a torn write (full length, second half zeros), a short write (one
//! byte, or part of a batch header) or an fsync error (also one that loses the file's dirty
//! pages, as Linux may, so no later fsync writes them), the filesystem is crashed (durable
//! bytes only, all written bytes, all written with the last write torn) and reopened. Then:
//! recovery succeeds without panicking, every append acknowledged durable is at its offset
//! with its bytes, offsets are contiguous from 0, every batch present is one that was
//! appended, and the log takes appends at its end. docs/durability.md, "Fault injection",
//! reports the number of fault points.

mod common;

use sluice_storage::batch::{HEADER_BYTES, iter_batches, verify_crc};
use sluice_storage::io::{CrashMode, FaultyFs, WriteFault};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{Durability, Log, LogConfig, Offset};
use std::path::Path;

const DIR: &str = "/data/orders-0";
/// Appends in the scenario: enough for several segment rolls at `config().segment_bytes`.
const APPENDS: usize = 36;
const MODES: [CrashMode; 3] = [
    CrashMode::DurableOnly,
    CrashMode::AllWritten,
    CrashMode::TornLastWrite,
];
const WRITE_FAULTS: [WriteFault; 3] = [
    WriteFault::Torn,
    WriteFault::Short(1),
    WriteFault::Short(HEADER_BYTES / 2),
];

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 100,
        segment_index_bytes: 384,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn open(fs: &FaultyFs) -> Result<Log, sluice_storage::StorageError> {
    common::open_faulty(fs, DIR, config())
}

/// What the scenario did.
#[derive(Debug, Default)]
struct Outcome {
    /// Every batch handed to `append`, as it was after the call (base offset assigned).
    attempted: Vec<Vec<u8>>,
    /// (base offset, bytes) of every append acknowledged durable.
    acknowledged: Vec<(i64, Vec<u8>)>,
    /// Whether a call failed; every later append must fail too (the log is fenced).
    failed: bool,
}

impl Outcome {
    fn ack(&mut self, base: i64, bytes: Vec<u8>) {
        assert!(
            !self.failed,
            "an append was acknowledged after an I/O error (base {base})"
        );
        self.acknowledged.push((base, bytes));
    }
}

/// Appends, group commits, ticks and a close; stops only if the first open fails.
fn run_scenario(fs: &FaultyFs) -> Outcome {
    let mut out = Outcome::default();
    let Ok(mut log) = open(fs) else {
        out.failed = true;
        return out;
    };
    // OsCache appends waiting for a group commit: (base, last offset, bytes).
    let mut waiting: Vec<(i64, i64, Vec<u8>)> = Vec::new();
    let mut now_ms = 1_000;
    for i in 0..APPENDS {
        now_ms += 1;
        let mut batch = build_value_batch(1 + i % 3, 30 + (i * 53) % 170, i as u8, now_ms);
        let grouped = i % 2 == 1;
        let durability = if grouped {
            Durability::OsCache
        } else {
            Durability::Fsync
        };
        let result = log.append(&mut batch, durability, now_ms);
        out.attempted.push(batch.clone());
        match result {
            Ok(a) if grouped => waiting.push((a.base_offset.value(), a.last_offset.value(), batch)),
            Ok(a) => out.ack(a.base_offset.value(), batch),
            Err(_) => out.failed = true,
        }
        if grouped && i % 4 == 3 {
            group_commit(&mut log, &mut waiting, &mut out);
        }
        if i % 6 == 5 {
            // Past the checkpoint interval: the tick persists the recovery point.
            now_ms += 61_000;
            if log.tick(now_ms).is_err() {
                out.failed = true;
            }
        }
    }
    group_commit(&mut log, &mut waiting, &mut out);
    if log.close().is_err() {
        out.failed = true;
    }
    out
}

/// One group commit, as `server::group_commit` runs it; acknowledges what it covers.
fn group_commit(log: &mut Log, waiting: &mut Vec<(i64, i64, Vec<u8>)>, out: &mut Outcome) {
    let Some(pending) = log.begin_sync() else {
        if log.is_fenced() {
            out.failed = true;
        }
        return;
    };
    let result = pending.run();
    match log.complete_sync(pending, result) {
        Ok(durable) => {
            for (base, last, bytes) in std::mem::take(waiting) {
                if last < durable.value() {
                    out.ack(base, bytes);
                } else {
                    waiting.push((base, last, bytes));
                }
            }
        }
        Err(_) => out.failed = true,
    }
}

/// Reopens a crash image and checks it against what the scenario did.
fn check_recovered(fs: &FaultyFs, out: &Outcome, what: &str) {
    let opened = std::panic::catch_unwind(|| open(fs));
    let mut log = match opened {
        Ok(Ok(log)) => log,
        Ok(Err(e)) => panic!("{what}: recovery failed: {e}"),
        Err(_) => panic!("{what}: recovery panicked"),
    };
    assert_eq!(log.log_start_offset(), Offset(0), "{what}");
    let end = log.log_end_offset().value();
    let mut found = std::collections::BTreeMap::new();
    let mut next = 0;
    while next < end {
        let bytes = log.read(Offset(next), 1).unwrap().read_to_vec().unwrap();
        let (header, batch) = iter_batches(&bytes)
            .next()
            .unwrap_or_else(|| panic!("{what}: no batch at {next} below the end {end}"))
            .unwrap();
        verify_crc(batch).unwrap_or_else(|e| panic!("{what}: batch at {next}: {e}"));
        assert_eq!(
            header.base_offset, next,
            "{what}: offsets are not contiguous"
        );
        assert!(
            out.attempted.iter().any(|a| a[..] == batch[..]),
            "{what}: the batch at {next} was never appended"
        );
        found.insert(next, batch.to_vec());
        next = header.last_offset() + 1;
    }
    assert_eq!(next, end, "{what}: log end {end} is not a batch end");
    for (base, bytes) in &out.acknowledged {
        assert_eq!(
            found.get(base),
            Some(bytes),
            "{what}: the acknowledged append at {base} is lost or changed"
        );
    }
    let mut more = build_value_batch(2, 10, 0xee, 5_000);
    let appended = log.append(&mut more, Durability::Fsync, 5_000).unwrap();
    assert_eq!(
        appended.base_offset,
        Offset(end),
        "{what}: appends continue"
    );
}

fn check_all_modes(fs: &FaultyFs, out: &Outcome, what: &str) -> u64 {
    for mode in MODES {
        check_recovered(&fs.crash(mode), out, &format!("{what}, crash {mode:?}"));
    }
    MODES.len() as u64
}

/// The scenario's write and sync counts without faults, checked to cover what it claims.
fn reference() -> (u64, u64) {
    let fs = FaultyFs::new();
    let out = run_scenario(&fs);
    assert!(!out.failed, "the reference run has no faults");
    assert_eq!(out.acknowledged.len(), APPENDS, "every append acknowledged");
    let counts = (fs.writes(), fs.syncs());
    check_all_modes(&fs, &out, "no fault");
    let log = open(&fs).unwrap();
    assert!(log.segment_count() >= 4, "the scenario rolls segments");
    counts
}

#[test]
fn every_write_of_the_produce_path_fails_torn_or_short() {
    let (writes, _) = reference();
    assert!(writes > 150, "the scenario exercises writes ({writes})");
    let mut checked = 0;
    for fault in WRITE_FAULTS {
        for n in 1..=writes {
            let fs = FaultyFs::new();
            fs.fail_nth_write_as(n, fault);
            let out = run_scenario(&fs);
            assert!(
                out.failed,
                "write {n}/{writes} ({fault:?}) was not reported"
            );
            checked += check_all_modes(&fs, &out, &format!("write {n}/{writes} {fault:?}"));
        }
    }
    assert_eq!(checked, writes * 3 * 3);
    println!("fault points: {writes} writes x 3 write faults, {checked} crash images checked");
}

#[test]
fn every_sync_of_the_produce_path_fails() {
    let (_, syncs) = reference();
    assert!(syncs > 60, "the scenario exercises syncs ({syncs})");
    let mut checked = 0;
    for n in 1..=syncs {
        let fs = FaultyFs::new();
        fs.fail_nth_sync(n);
        let out = run_scenario(&fs);
        assert!(out.failed, "sync {n}/{syncs} was not reported");
        checked += check_all_modes(&fs, &out, &format!("sync {n}/{syncs} fails"));
    }
    println!("fault points: {syncs} syncs, {checked} crash images checked");
}

#[test]
fn every_sync_of_the_produce_path_fails_losing_its_dirty_pages() {
    let (_, syncs) = reference();
    let mut checked = 0;
    for n in 1..=syncs {
        let fs = FaultyFs::new();
        fs.fail_nth_sync_losing_pages(n);
        let out = run_scenario(&fs);
        assert!(out.failed, "sync {n}/{syncs} was not reported");
        checked += check_all_modes(&fs, &out, &format!("sync {n}/{syncs} fails, pages lost"));
    }
    println!("fault points: {syncs} syncs losing pages, {checked} crash images checked");
}

#[test]
fn a_failed_sync_that_loses_pages_is_not_undone_by_the_next_sync() {
    let fs = FaultyFs::new();
    let file = sluice_storage::Fs::open(&fs, Path::new("/f"), true).unwrap();
    sluice_storage::Fs::sync_dir(&fs, Path::new("/")).unwrap();
    file.write_at(&[1, 1], 0).unwrap();
    file.sync().unwrap();
    file.write_at(&[2, 2, 2], 0).unwrap();
    fs.fail_nth_sync_losing_pages(1);
    assert!(file.sync().is_err());
    file.write_at(&[3], 3).unwrap();
    file.sync().unwrap();
    let mut seen = [0u8; 4];
    file.read_at(&mut seen, 0).unwrap();
    assert_eq!(seen, [2, 2, 2, 3], "the page cache still has the bytes");
    for mode in [CrashMode::DurableOnly, CrashMode::AllWritten] {
        let crashed = fs.crash(mode);
        let file = sluice_storage::Fs::open(&crashed, Path::new("/f"), false).unwrap();
        let mut disk = [9u8; 4];
        file.read_at(&mut disk, 0).unwrap();
        assert_eq!(
            disk,
            [1, 1, 0, 3],
            "{mode:?}: the lost bytes never reached the disk"
        );
    }
}

#[test]
fn short_and_torn_writes_leave_what_they_say() {
    for (fault, kept) in [
        (WriteFault::FirstHalf, vec![1, 2, 0, 0]),
        (WriteFault::Short(1), vec![1, 0, 0, 0]),
        (WriteFault::Short(9), vec![1, 2, 3, 4]),
        (WriteFault::Torn, vec![1, 2, 0, 0]),
    ] {
        let fs = FaultyFs::new();
        let path = Path::new("/f");
        let file = sluice_storage::Fs::open(&fs, path, true).unwrap();
        file.write_at(&[0; 4], 0).unwrap();
        fs.fail_nth_write_as(1, fault);
        assert!(file.write_at(&[1, 2, 3, 4], 0).is_err(), "{fault:?}");
        let mut buf = [9u8; 4];
        file.read_at(&mut buf, 0).unwrap();
        assert_eq!(buf.to_vec(), kept, "{fault:?}");
        let grown = sluice_storage::Fs::open(&fs, Path::new("/g"), true).unwrap();
        fs.fail_nth_write_as(1, fault);
        assert!(grown.write_at(&[1, 2, 3, 4], 0).is_err());
        let expected_len = match fault {
            WriteFault::FirstHalf => 2,
            WriteFault::Short(n) => n.min(4) as u64,
            WriteFault::Torn => 4,
        };
        assert_eq!(grown.len().unwrap(), expected_len, "{fault:?} on append");
    }
}

#[test]
fn allocate_reserves_blocks_and_fails_when_full_or_told_to() {
    let fs = FaultyFs::new();
    let path = Path::new("/a");
    let file = sluice_storage::Fs::open(&fs, path, true).unwrap();
    file.set_len(100).unwrap();
    assert_eq!(fs.reserved_bytes(path).unwrap(), 0, "set_len is sparse");
    file.allocate(0, 40).unwrap();
    assert_eq!(fs.reserved_bytes(path).unwrap(), 40);
    assert_eq!(
        file.len().unwrap(),
        100,
        "inside the file: length unchanged"
    );
    fs.set_disk_full(true);
    file.allocate(10, 30).unwrap(); // already reserved: needs no space
    let full = file.allocate(40, 10).unwrap_err();
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC));
    fs.set_disk_full(false);
    fs.fail_nth_write(1);
    assert!(
        file.allocate(40, 10).is_err(),
        "the Nth write may be an allocation"
    );
    assert_eq!(
        fs.reserved_bytes(path).unwrap(),
        40,
        "a failed one reserves nothing"
    );
    file.allocate(40, 80).unwrap();
    assert_eq!(file.len().unwrap(), 120, "past the end it grows the file");
    assert_eq!(fs.reserved_bytes(path).unwrap(), 120);
    file.set_len(50).unwrap();
    assert_eq!(
        fs.reserved_bytes(path).unwrap(),
        50,
        "shrinking frees blocks"
    );
}
