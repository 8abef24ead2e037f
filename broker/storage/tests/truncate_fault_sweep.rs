//! Fault injection at every write and sync of `Log::truncate_to`, over `FaultyFs`, in the
//! style of `fault_sweep.rs`.
//!
//! Setup (no faults): fsynced appends across several small segments, an idempotent
//! producer's batches among them, a second leader epoch, a tick that persists the recovery
//! point and a producer snapshot above the cut. Then, with faults armed: `truncate_to` an
//! offset inside an early sealed segment (so later segments are deleted), a few fsynced
//! appends after it, and a clean close. A run without faults counts that phase's writes and
//! syncs; then each one fails in turn (torn write, short writes, a failed fsync, one that
//! loses its dirty pages) and the filesystem is crashed three ways (durable bytes only, all
//! written, all written with the last write torn) and reopened. Then recovery succeeds;
//! the log is exactly the log before the truncation, or the log cut at the offset followed
//! by some of the later appends (all of those acknowledged, and only after the truncation
//! itself returned); never a lost record below the offset, never a torn tail; each batch's
//! leader epoch is what the epoch cache says; the producer state ends at the producer's last
//! batch in the log, and its next sequence appends.

mod common;

use sluice_storage::batch::{HEADER_BYTES, iter_batches, verify_crc};
use sluice_storage::io::{CrashMode, FaultyFs, WriteFault};
use sluice_storage::testing::{build_value_batch, producer_batch};
use sluice_storage::{Durability, Log, LogConfig, Offset};

const DIR: &str = "/data/meta-0";
const PRODUCER: i64 = 7;
const SETUP_APPENDS: usize = 18;
/// The index of the setup batch the truncation cuts at.
const CUT_AT: usize = 5;
const LATER_APPENDS: usize = 3;
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
        // Sparse: a segment's index has no entry past the cut, so only the lowered recovery
        // point (never its index's sanity check) keeps a crashed cut segment from being
        // trusted with its old end (shown to fail without it).
        index_interval_bytes: 4096,
        segment_index_bytes: 384,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

fn open(fs: &FaultyFs) -> Result<Log, sluice_storage::StorageError> {
    common::open_faulty(fs, DIR, config())
}

/// Batch `i` of the setup: every third one the producer's (two records each).
fn setup_batch(i: usize) -> Vec<u8> {
    if i.is_multiple_of(3) {
        producer_batch(PRODUCER, 0, (i / 3 * 2) as i32, 2, false)
    } else {
        build_value_batch(1 + i % 2, 60 + (i * 37) % 140, i as u8, 1_000 + i as i64)
    }
}

/// The log before the truncation, as the setup left it (running: no clean close).
struct Setup {
    log: Log,
    /// (base offset, bytes as written) of every setup batch.
    batches: Vec<(i64, Vec<u8>)>,
    cut: Offset,
}

fn setup(fs: &FaultyFs) -> Setup {
    let mut log = open(fs).unwrap();
    log.begin_next_leader_epoch().unwrap();
    let mut batches = Vec::new();
    for i in 0..SETUP_APPENDS {
        if i == CUT_AT + 3 {
            log.begin_next_leader_epoch().unwrap();
        }
        let mut batch = setup_batch(i);
        let outcome = log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
        batches.push((outcome.base_offset.value(), batch));
    }
    // Past the checkpoint interval: the recovery point and a producer snapshot at the end.
    log.tick(70_000).unwrap();
    let cut = Offset(batches[CUT_AT].0);
    Setup { log, batches, cut }
}

/// What the faulted phase did.
#[derive(Debug, Default)]
struct Outcome {
    truncated: bool,
    /// Every later batch handed to `append` (base offset assigned).
    attempted: Vec<Vec<u8>>,
    acknowledged: Vec<(i64, Vec<u8>)>,
    failed: bool,
}

/// The producer's next batch after a log whose last producer batch ended at `last_seq`.
fn next_producer_batch(last_seq: i32) -> Vec<u8> {
    producer_batch(PRODUCER, 0, last_seq + 1, 2, false)
}

fn run_faulted(mut log: Log, cut: Offset) -> Outcome {
    let mut out = Outcome::default();
    match log.truncate_to(cut, 80_000) {
        Ok(end) => {
            assert_eq!(end, cut, "the cut is a batch boundary");
            out.truncated = true;
        }
        Err(_) => {
            out.failed = true;
            return out;
        }
    }
    for i in 0..LATER_APPENDS {
        let last_seq = log
            .producer_state()
            .producer(PRODUCER)
            .map_or(-1, |p| p.last_seq());
        let mut batch = if i == 0 {
            next_producer_batch(last_seq)
        } else {
            build_value_batch(2, 90, 0xa0 + i as u8, 9_000)
        };
        let result = log.append(&mut batch, Durability::Fsync, 80_000);
        out.attempted.push(batch.clone());
        match result {
            Ok(a) if !out.failed => out.acknowledged.push((a.base_offset.value(), batch)),
            Ok(_) => panic!("an append was acknowledged after an I/O error"),
            Err(_) => out.failed = true,
        }
    }
    if log.close().is_err() {
        out.failed = true;
    }
    out
}

/// Every batch of a reopened log as (base offset, bytes), each checked for its CRC, for
/// contiguity and for the leader epoch the cache gives its offset.
fn read_all(log: &Log, what: &str) -> Vec<(i64, Vec<u8>)> {
    let end = log.log_end_offset().value();
    let (mut next, mut found) = (0, Vec::new());
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
        assert_eq!(
            log.leader_epoch_at(Offset(next)),
            header.partition_leader_epoch,
            "{what}: the epoch cache disagrees with the batch at {next}"
        );
        found.push((next, batch.to_vec()));
        next = header.last_offset() + 1;
    }
    found
}

fn check_recovered(
    fs: &FaultyFs,
    setup: &[(i64, Vec<u8>)],
    cut: Offset,
    out: &Outcome,
    what: &str,
) {
    let opened = std::panic::catch_unwind(|| open(fs));
    let mut log = match opened {
        Ok(Ok(log)) => log,
        Ok(Err(e)) => panic!("{what}: recovery failed: {e}"),
        Err(_) => panic!("{what}: recovery panicked"),
    };
    let found = read_all(&log, what);
    let below = setup.iter().filter(|(base, _)| *base < cut.value()).count();
    assert!(
        found.len() >= below,
        "{what}: records below the cut were lost"
    );
    assert_eq!(
        found[..below],
        setup[..below],
        "{what}: records below the cut changed"
    );
    let before = found[..] == setup[..];
    if before {
        assert!(
            !out.truncated,
            "{what}: an acknowledged truncation was undone"
        );
    } else {
        for (i, (_, batch)) in found[below..].iter().enumerate() {
            assert!(
                out.attempted.get(i).is_some_and(|a| a[..] == batch[..]),
                "{what}: the batch {i} after the cut is neither the old log nor a later append"
            );
        }
        for (base, bytes) in &out.acknowledged {
            assert!(
                found.iter().any(|(b, x)| b == base && x == bytes),
                "{what}: the acknowledged append at {base} is lost"
            );
        }
    }
    let last_seq = found
        .iter()
        .filter_map(|(_, b)| iter_batches(b).next()?.ok())
        .filter(|(h, _)| h.producer_id == PRODUCER)
        .map(|(h, _)| h.base_sequence + h.last_offset_delta)
        .next_back()
        .unwrap_or(-1);
    let state = log
        .producer_state()
        .producer(PRODUCER)
        .map_or(-1, |p| p.last_seq());
    assert_eq!(
        state, last_seq,
        "{what}: producer state does not end at the log's last batch"
    );
    let end = log.log_end_offset();
    let mut more = next_producer_batch(last_seq);
    let appended = log.append(&mut more, Durability::Fsync, 90_000).unwrap();
    assert_eq!(appended.base_offset, end, "{what}: appends continue");
}

fn check_all_modes(
    fs: &FaultyFs,
    setup: &[(i64, Vec<u8>)],
    cut: Offset,
    out: &Outcome,
    what: &str,
) -> u64 {
    for mode in MODES {
        let what = format!("{what}, crash {mode:?}");
        check_recovered(&fs.crash(mode), setup, cut, out, &what);
    }
    MODES.len() as u64
}

/// Runs the setup, arms `arm`, runs the faulted phase and checks every crash image.
fn sweep_one(arm: impl FnOnce(&FaultyFs), what: &str) -> (Outcome, u64) {
    let fs = FaultyFs::new();
    let Setup { log, batches, cut } = setup(&fs);
    arm(&fs);
    let out = run_faulted(log, cut);
    let checked = check_all_modes(&fs, &batches, cut, &out, what);
    (out, checked)
}

/// The faulted phase's write and sync counts without faults.
fn reference() -> (u64, u64) {
    let fs = FaultyFs::new();
    let Setup { log, batches, cut } = setup(&fs);
    let segments_before = log.segment_count();
    let (writes, syncs) = (fs.writes(), fs.syncs());
    let out = run_faulted(log, cut);
    assert!(
        !out.failed && out.truncated,
        "the reference run has no faults"
    );
    assert_eq!(out.acknowledged.len(), LATER_APPENDS);
    let counts = (fs.writes() - writes, fs.syncs() - syncs);
    check_all_modes(&fs, &batches, cut, &out, "no fault");
    let log = open(&fs).unwrap();
    assert!(
        segments_before >= 4,
        "the setup spans segments ({segments_before})"
    );
    assert!(
        log.segment_count() < segments_before,
        "the truncation deleted segments"
    );
    counts
}

#[test]
fn every_write_of_a_truncation_fails_torn_or_short() {
    let (writes, _) = reference();
    assert!(writes > 10, "the truncation exercises writes ({writes})");
    let mut checked = 0;
    for fault in WRITE_FAULTS {
        for n in 1..=writes {
            let what = format!("write {n}/{writes} {fault:?}");
            let (out, images) = sweep_one(|fs| fs.fail_nth_write_as(n, fault), &what);
            assert!(out.failed, "{what} was not reported");
            checked += images;
        }
    }
    println!(
        "truncation fault points: {writes} writes x 3 write faults, {checked} crash images checked"
    );
}

#[test]
fn every_sync_of_a_truncation_fails() {
    let (_, syncs) = reference();
    assert!(syncs > 10, "the truncation exercises syncs ({syncs})");
    let mut checked = 0;
    for n in 1..=syncs {
        let what = format!("sync {n}/{syncs} fails");
        let (out, images) = sweep_one(|fs| fs.fail_nth_sync(n), &what);
        assert!(out.failed, "{what} was not reported");
        checked += images;
        let what = format!("sync {n}/{syncs} fails, pages lost");
        let (out, images) = sweep_one(|fs| fs.fail_nth_sync_losing_pages(n), &what);
        assert!(out.failed, "{what} was not reported");
        checked += images;
    }
    println!(
        "truncation fault points: {syncs} syncs (plain and losing pages), {checked} crash images checked"
    );
}
