//! Fault injection at every write and sync of the offsets log, over the in-memory `FaultyFs`.
//!
//! The scenario is what the group coordinator's writer does under `sluice.acks.all.fsync`:
//! offset commits appended one call at a time (each acknowledged when `append` returns Ok),
//! one clean in the middle (the storage cleaner in place: segments small enough that a dozen
//! commits seal several, rewritten into a `.cleaned` segment, swapped in through its
//! manifest, the cleaner checkpoint written), and a clean close. The log's segments live on
//! a `FaultyFs` (`OffsetsLog::open_with`, with a fixed clock); the generation pointer on a
//! real temp dir. A run without faults counts the write and sync
//! operations; then, for every operation index N, the scenario is rerun with operation N
//! failing as a torn write, a short write or an fsync error; after the failure the scenario
//! keeps committing as the writer does. The filesystem is crashed (durable bytes only, all
//! written, last write torn) and the log reopened: it opens, every acknowledged commit is
//! replayed (in order, bytes equal), and nothing is replayed that was never committed.
//! docs/durability.md, "Fault injection", reports the number of fault points.

use std::path::Path;
use std::sync::Arc;

use sluice_group::{CommittedOffset, OffsetRecord, RecordKey, TopicPartition};
use sluice_server::compacted_log::Compaction;
use sluice_server::group::OffsetsLog;
use sluice_storage::io::{CrashMode, FaultyFs, WriteFault};

/// Commits in the scenario (the clean runs after half of them).
const COMMITS: i64 = 24;
const MODES: [CrashMode; 3] = [
    CrashMode::DurableOnly,
    CrashMode::AllWritten,
    CrashMode::TornLastWrite,
];
/// Segment size of the scenario's log: a few commits per segment, so the clean has sealed
/// segments to merge.
const SEGMENT_BYTES: u32 = 512;
const WRITE_FAULTS: [WriteFault; 3] = [
    WriteFault::Torn,
    WriteFault::Short(1),
    WriteFault::Short(30),
];

fn commit(i: i64) -> OffsetRecord {
    OffsetRecord {
        key: RecordKey::Offset {
            group: format!("g{}", i % 2),
            tp: TopicPartition {
                topic: "orders".into(),
                partition: (i % 3) as i32,
            },
        },
        value: Some(CommittedOffset {
            offset: 100 + i,
            leader_epoch: -1,
            metadata: format!("m{i}"),
            commit_timestamp_ms: 1_000 + i,
        }),
    }
}

/// What the scenario did.
#[derive(Debug, Default)]
struct Outcome {
    /// Every commit handed to `append` (acknowledged or not).
    attempted: Vec<OffsetRecord>,
    /// Commits whose `append` returned Ok, in order.
    acknowledged: Vec<OffsetRecord>,
    /// What the clean removed, if it ran.
    removed: Option<u64>,
    failed: bool,
}

/// The latest record per key of `records`, in key order.
fn live(records: &[OffsetRecord]) -> Vec<OffsetRecord> {
    let mut latest = std::collections::BTreeMap::new();
    for r in records {
        latest.insert(r.key.clone(), r.clone());
    }
    latest.into_values().collect()
}

/// One instant for every run: with the system clock, a millisecond tick between two appends
/// adds a time-index entry, so the nth write of a faulted run was not always the reference
/// run's nth write (and a fault could land in a different operation).
fn fixed_clock() -> sluice_server::SharedClock {
    sluice_server::ManualClock::new(1_700_000_000_000)
}

fn run_scenario(data_dir: &Path, fs: &FaultyFs) -> Outcome {
    let mut out = Outcome::default();
    let Ok((mut log, _)) =
        OffsetsLog::open_with(data_dir, true, Arc::new(fs.clone()), fixed_clock())
    else {
        out.failed = true;
        return out;
    };
    log.set_compaction(Compaction {
        segment_bytes: SEGMENT_BYTES,
        delete_retention_ms: 0,
        check_interval_ms: 0,
        ..Compaction::default()
    });
    for i in 0..COMMITS {
        let record = commit(i);
        out.attempted.push(record.clone());
        match log.append(&[&record]) {
            Ok(()) => out.acknowledged.push(record),
            Err(_) => out.failed = true,
        }
        if i == COMMITS / 2 {
            match log.clean() {
                Ok(outcome) => out.removed = outcome.map(|o| o.records_removed),
                Err(_) => out.failed = true,
            }
        }
    }
    if log.close().is_err() {
        out.failed = true;
    }
    out
}

/// Reopens a crash image: every acknowledged commit is replayed after what preceded it.
fn check_recovered(data_dir: &Path, fs: FaultyFs, out: &Outcome, what: &str) {
    let opened = std::panic::catch_unwind(|| {
        OffsetsLog::open_with(data_dir, true, Arc::new(fs), fixed_clock())
    });
    let (log, replayed) = match opened {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => panic!("{what}: the offsets log does not open: {e}"),
        Err(_) => panic!("{what}: opening the offsets log panicked"),
    };
    log.close().ok();
    for r in &replayed {
        let known = out.attempted.contains(r);
        assert!(known, "{what}: replayed {r:?}, never committed");
    }
    // Replay keeps the latest record per key: for each key, the latest acknowledged commit
    // or a commit attempted after it (written, its answer lost to the fault) must be live.
    let position = |r: &OffsetRecord| out.attempted.iter().position(|a| a == r);
    let got = live(&replayed);
    for record in live(&out.acknowledged) {
        let acked_at = position(&record);
        let survivor = got.iter().find(|r| r.key == record.key);
        assert!(
            survivor.is_some_and(|r| position(r) >= acked_at),
            "{what}: acknowledged commit {record:?} lost (replayed {survivor:?})"
        );
    }
}

fn check_all_modes(fs: &FaultyFs, out: &Outcome, what: &str, data_dir: &Path) -> u64 {
    // The pointer file is real and only read at open; the crash images are the segments'.
    for mode in MODES {
        check_recovered(
            data_dir,
            fs.crash(mode),
            out,
            &format!("{what}, crash {mode:?}"),
        );
    }
    MODES.len() as u64
}

fn reference() -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultyFs::new();
    let out = run_scenario(dir.path(), &fs);
    assert!(!out.failed, "the reference run has no faults");
    assert_eq!(out.acknowledged.len() as i64, COMMITS);
    let removed = out.removed.expect("the reference run cleans");
    assert!(removed > 0, "the clean removed superseded commits");
    let counts = (fs.writes(), fs.syncs());
    check_all_modes(&fs, &out, "no fault", dir.path());
    counts
}

#[test]
fn every_write_of_the_offsets_log_fails_torn_or_short() {
    let (writes, _) = reference();
    assert!(writes > 60, "the scenario exercises writes ({writes})");
    let (mut checked, mut unreported) = (0, 0);
    for fault in WRITE_FAULTS {
        for n in 1..=writes {
            let dir = tempfile::tempdir().unwrap();
            let fs = FaultyFs::new();
            fs.fail_nth_write_as(n, fault);
            let out = run_scenario(dir.path(), &fs);
            unreported += u64::from(!out.failed);
            let what = format!("write {n}/{writes} {fault:?}");
            checked += check_all_modes(&fs, &out, &what, dir.path());
        }
    }
    assert_eq!(checked, writes * 3 * 3);
    assert_eq!(unreported, 0, "write faults were not reported");
    println!(
        "offsets log fault points: {writes} writes x 3 write faults, {checked} crash images checked"
    );
}

#[test]
fn every_sync_of_the_offsets_log_fails() {
    let (_, syncs) = reference();
    assert!(syncs > 25, "the scenario exercises syncs ({syncs})");
    let (mut checked, mut unreported) = (0, 0);
    for n in 1..=syncs {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultyFs::new();
        fs.fail_nth_sync(n);
        let out = run_scenario(dir.path(), &fs);
        unreported += u64::from(!out.failed);
        checked += check_all_modes(&fs, &out, &format!("sync {n}/{syncs} fails"), dir.path());
    }
    assert_eq!(unreported, 0, "sync faults were not reported");
    println!("offsets log fault points: {syncs} syncs, {checked} crash images checked");
}

#[test]
fn every_sync_of_the_offsets_log_fails_losing_its_dirty_pages() {
    let (_, syncs) = reference();
    let mut checked = 0;
    for n in 1..=syncs {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultyFs::new();
        fs.fail_nth_sync_losing_pages(n);
        let out = run_scenario(dir.path(), &fs);
        let what = format!("sync {n}/{syncs} fails, pages lost");
        checked += check_all_modes(&fs, &out, &what, dir.path());
    }
    println!(
        "offsets log fault points: {syncs} syncs losing pages, {checked} crash images checked"
    );
}
