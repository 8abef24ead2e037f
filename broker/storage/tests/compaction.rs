//! Log compaction (`cleaner.rs`): the latest record of each key survives at its original
//! offset, the active segment is never touched, tombstones go after `delete.retention.ms`,
//! aborted transactions' records go while markers stay, small segments merge, a reopen
//! (clean or not) reads the cleaned log with its gaps, and a crash at every write and
//! fsync of a clean (each crash image reopened) loses nothing: every key's latest value is
//! still readable at its offset and every record read is one that was appended there.
//! Real files (tempdir) and the in-memory `FaultyFs`.

mod common;

use std::collections::BTreeMap;

use sluice_storage::batch::{HEADER_BYTES, iter_batches, verify_crc};
use sluice_storage::io::{CrashMode, FaultyFs};
use sluice_storage::record::{read_varint, read_varlong};
use sluice_storage::testing::{TestRecord, build_batch, set_producer};
use sluice_storage::{CleanupPolicy, Durability, Log, LogConfig, Marker, Offset};

const BUFFER: u64 = 1024 * 1024;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        segment_index_bytes: 384,
        cleanup_policy: CleanupPolicy::Compact,
        min_cleanable_dirty_ratio_ppm: 0,
        delete_retention_ms: 10_000,
        ..LogConfig::default()
    }
}

/// One record read back: (offset, key, value; `None` = tombstone).
type Row = (i64, Vec<u8>, Option<Vec<u8>>);

fn field(body: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let len = read_varint(body, at).unwrap();
    (len >= 0).then(|| {
        let bytes = body[*at..*at + len as usize].to_vec();
        *at += len as usize;
        bytes
    })
}

/// Every data record from the log start to the end, read as a consumer does (batch by
/// batch, CRCs checked), control batches skipped.
fn rows(log: &Log) -> Vec<Row> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let bytes = log.read(next, 1 << 20).unwrap().read_to_vec().unwrap();
        for item in iter_batches(&bytes) {
            let (header, batch) = item.unwrap();
            verify_crc(batch).unwrap();
            next = Offset(header.last_offset() + 1);
            if header.is_control() {
                continue;
            }
            let body = &batch[HEADER_BYTES..];
            let mut at = 0;
            for _ in 0..header.records_count {
                let len = read_varint(body, &mut at).unwrap() as usize;
                let end = at + len;
                at += 1;
                read_varlong(body, &mut at).unwrap();
                let delta = read_varint(body, &mut at).unwrap();
                let key = field(body, &mut at).expect("keyed");
                let value = field(body, &mut at);
                out.push((header.base_offset + i64::from(delta), key, value));
                at = end;
            }
        }
    }
    out
}

/// Appends one batch of `(key, value)` records at `now_ms`; returns the records with
/// their offsets.
fn append(log: &mut Log, records: &[(&str, Option<&str>)], now_ms: i64) -> Vec<Row> {
    let test: Vec<TestRecord<'_>> = records
        .iter()
        .map(|(k, v)| TestRecord {
            key: Some(k.as_bytes()),
            value: v.map(str::as_bytes),
            ..TestRecord::default()
        })
        .collect();
    let mut batch = build_batch(0, now_ms, &test);
    let base = log
        .append(&mut batch, Durability::Fsync, now_ms)
        .unwrap()
        .base_offset
        .value();
    records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            (
                base + i as i64,
                k.as_bytes().to_vec(),
                v.map(|v| v.as_bytes().to_vec()),
            )
        })
        .collect()
}

/// The latest row of each key among `rows`.
fn latest(rows: &[Row]) -> BTreeMap<Vec<u8>, Row> {
    rows.iter().map(|r| (r.1.clone(), r.clone())).collect()
}

/// Fills a log with 5 rounds of 8 keys (3 records a batch), then 2 records in the active
/// segment; returns what was appended.
fn fill(log: &mut Log) -> Vec<Row> {
    let mut appended = Vec::new();
    for round in 0..5 {
        for k in 0..8 {
            let (key, value) = (format!("k{k}"), format!("v{round}-{k}"));
            let other = format!("k{}", (k + 3) % 8);
            let batch = [
                (key.as_str(), Some(value.as_str())),
                (other.as_str(), Some(value.as_str())),
                (key.as_str(), Some(value.as_str())),
            ];
            appended.extend(append(log, &batch, 1_000 + round));
        }
    }
    log.tick(2_000).unwrap();
    appended
}

fn keys_are_latest(log: &Log, appended: &[Row]) {
    let read = rows(log);
    let want = latest(appended);
    for row in &read {
        assert!(
            appended.contains(row),
            "{row:?} was never appended at its offset"
        );
    }
    let got = latest(&read);
    assert_eq!(got, want, "the latest value of every key, at its offset");
}

#[test]
fn keeps_the_latest_record_per_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let appended = fill(&mut log);
    let active_tail = append(
        &mut log,
        &[("k0", Some("active")), ("k0", Some("active2"))],
        3_000,
    );
    let before = (log.segment_count(), log.size_bytes());
    let outcome = log.clean(3_000, BUFFER, None).unwrap().expect("dirty");
    assert!(
        outcome.records_removed > 0 && !outcome.abandoned,
        "{outcome:?}"
    );
    assert!(log.size_bytes() < before.1);
    let read = rows(&log);
    // The active segment (from `cleaned_to`) is untouched, duplicates and all.
    let sealed: Vec<Row> = read
        .iter()
        .filter(|r| r.0 < outcome.cleaned_to.value())
        .cloned()
        .collect();
    assert!(
        read.iter()
            .filter(|r| r.0 >= outcome.cleaned_to.value())
            .eq(appended
                .iter()
                .chain(&active_tail)
                .filter(|r| r.0 >= outcome.cleaned_to.value()))
    );
    let keys: Vec<&Vec<u8>> = sealed.iter().map(|r| &r.1).collect();
    let unique: std::collections::BTreeSet<_> = keys.iter().collect();
    assert_eq!(
        keys.len(),
        unique.len(),
        "one record per key below the active segment"
    );
    let mut all = appended.clone();
    all.extend(active_tail.clone());
    keys_are_latest(&log, &all);
    // Nothing more to clean until new data arrives.
    assert!(log.clean(3_000, BUFFER, None).unwrap().is_none());
    log.close().unwrap();
    let log = Log::open(dir.path(), config(), 4_000).unwrap();
    assert_eq!(rows(&log), read, "a clean reopen reads the cleaned log");
    drop(log);
    // Without the clean-shutdown marker and the recovery point, recovery scans the gaps.
    std::fs::remove_file(dir.path().join("partition.checkpoint")).unwrap();
    let log = Log::open(dir.path(), config(), 5_000).unwrap();
    assert_eq!(rows(&log), read, "recovery accepts the cleaner's gaps");
}

#[test]
fn cleaned_small_segments_merge() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let mut appended = fill(&mut log);
    log.clean(3_000, BUFFER, None).unwrap().expect("dirty");
    let after_first = log.segment_count();
    appended.extend(append(&mut log, &[("k0", Some("new")); 12], 3_000));
    appended.extend(append(&mut log, &[("k1", Some("new")); 12], 3_000));
    log.tick(3_000).unwrap();
    let outcome = log.clean(3_000, BUFFER, None).unwrap().expect("dirty");
    assert!(
        outcome.segments_after < outcome.segments_before,
        "{outcome:?}"
    );
    assert!(
        log.segment_count() < after_first + 2,
        "{after_first} {}",
        log.segment_count()
    );
    keys_are_latest(&log, &appended);
}

#[test]
fn a_delete_policy_log_is_never_cleaned_and_compact_skips_retention() {
    let dir = tempfile::tempdir().unwrap();
    let delete = LogConfig {
        cleanup_policy: CleanupPolicy::Delete,
        ..config()
    };
    let mut log = Log::open(dir.path(), delete, 0).unwrap();
    fill(&mut log);
    assert!(log.dirtiness(3_000).is_none());
    assert!(log.clean(3_000, BUFFER, None).unwrap().is_none());
    let compact = LogConfig {
        retention_ms: 1,
        ..config()
    };
    log.set_config(compact);
    let segments = log.segment_count();
    assert_eq!(
        log.enforce_retention(1_000_000).unwrap(),
        0,
        "compact alone keeps segments"
    );
    assert_eq!(log.segment_count(), segments);
    assert!(log.dirtiness(3_000).is_some());
}

#[test]
fn tombstones_go_after_delete_retention_ms() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let mut appended = fill(&mut log);
    appended.extend(append(&mut log, &[("k1", None), ("k2", None)], 3_000));
    append(&mut log, &[("pad", Some("x")); 8], 3_000);
    append(&mut log, &[("pad", Some("y")); 8], 3_000);
    log.tick(3_000).unwrap();
    log.clean(3_000, BUFFER, None).unwrap().expect("dirty");
    let tombstones = |log: &Log| rows(log).iter().filter(|r| r.2.is_none()).count();
    assert_eq!(
        tombstones(&log),
        2,
        "tombstones stay for delete.retention.ms"
    );
    assert!(
        rows(&log).iter().all(|r| r.1 != b"k1" || r.2.is_none()),
        "k1's values went"
    );
    assert!(log.dirtiness(3_000 + 5_000).is_none(), "not due yet");
    let due = log
        .dirtiness(3_000 + 10_000)
        .expect("due tombstones force a clean");
    assert!(due.forced);
    log.clean(3_000 + 10_000, BUFFER, None)
        .unwrap()
        .expect("forced");
    assert_eq!(tombstones(&log), 0, "removed after delete.retention.ms");
    assert!(rows(&log).iter().all(|r| r.1 != b"k1" && r.1 != b"k2"));
}

#[test]
fn aborted_transactions_go_and_markers_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let committed = append(&mut log, &[("a", Some("1")), ("b", Some("1"))], 1_000);
    let txn = |log: &mut Log, pid: i64, value: &str, marker: Marker| {
        let records = [TestRecord {
            key: Some(b"a"),
            value: Some(value.as_bytes()),
            ..TestRecord::default()
        }];
        let mut batch = build_batch(0, 1_000, &records);
        set_producer(&mut batch, pid, 0, 0, true);
        let at = log.append(&mut batch, Durability::Fsync, 1_000).unwrap();
        log.append_marker(pid, 0, marker, 0, Durability::Fsync, 1_000)
            .unwrap();
        at.base_offset.value()
    };
    txn(&mut log, 7, "aborted", Marker::Abort);
    let kept = txn(&mut log, 8, "committed", Marker::Commit);
    for _ in 0..4 {
        append(&mut log, &[("pad", Some("p")); 6], 1_000);
    }
    log.tick(2_000).unwrap();
    let markers_before = control_batches(&log);
    log.clean(2_000, BUFFER, None).unwrap().expect("dirty");
    let read = rows(&log);
    assert!(
        read.iter()
            .all(|r| r.2.as_deref() != Some(b"aborted".as_slice()))
    );
    assert!(read.contains(&(kept, b"a".to_vec(), Some(b"committed".to_vec()))));
    assert!(read.contains(&committed[1]), "b keeps its only value");
    assert!(!read.contains(&committed[0]), "a's older value went");
    assert_eq!(control_batches(&log), markers_before, "markers are kept");
}

fn control_batches(log: &Log) -> Vec<i64> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let bytes = log.read(next, 1 << 20).unwrap().read_to_vec().unwrap();
        for (header, _) in iter_batches(&bytes).map(Result::unwrap) {
            if header.is_control() {
                out.push(header.base_offset);
            }
            next = Offset(header.last_offset() + 1);
        }
    }
    out
}

#[test]
fn a_small_dedupe_buffer_cleans_a_prefix_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), config(), 0).unwrap();
    let appended = fill(&mut log);
    let first = log.clean(3_000, 400, None).unwrap().expect("dirty");
    assert!(first.cleaned_to < Offset(120), "{first:?}");
    let mut now = 3_000;
    while let Some(outcome) = log.clean(now, 400, None).unwrap() {
        assert!(outcome.cleaned_to > first.cleaned_to);
        now += 1;
    }
    keys_are_latest(&log, &appended);
}

#[test]
fn min_compaction_lag_keeps_young_segments_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let lagging = LogConfig {
        min_compaction_lag_ms: 60_000,
        ..config()
    };
    let mut log = Log::open(dir.path(), lagging, 0).unwrap();
    fill(&mut log);
    assert!(
        log.dirtiness(2_000).is_none(),
        "every segment is younger than the lag"
    );
    assert!(log.dirtiness(1_000_000).is_some());
}

/// A log on `fs`, filled; with what was appended.
fn faulty_log(fs: &FaultyFs) -> (Log, Vec<Row>) {
    let mut log = common::open_faulty(fs, "/data/c-0", config()).unwrap();
    let appended = fill(&mut log);
    (log, appended)
}

fn check_crash_image(fs: &FaultyFs, appended: &[Row], what: &str) {
    let opened = std::panic::catch_unwind(|| common::open_faulty(fs, "/data/c-0", config()));
    let log = match opened {
        Ok(Ok(log)) => log,
        Ok(Err(e)) => panic!("{what}: recovery failed: {e}"),
        Err(_) => panic!("{what}: recovery panicked"),
    };
    keys_are_latest(&log, appended);
    assert_eq!(
        log.log_end_offset(),
        Offset(appended.len() as i64),
        "{what}"
    );
}

#[test]
fn a_crash_at_every_write_and_fsync_of_a_clean_loses_nothing() {
    let reference = FaultyFs::new();
    let (mut log, appended) = faulty_log(&reference);
    let (writes, syncs) = (reference.writes(), reference.syncs());
    log.clean(3_000, BUFFER, None).unwrap().expect("dirty");
    let (clean_writes, clean_syncs) = (reference.writes() - writes, reference.syncs() - syncs);
    assert!(
        clean_writes > 3 && clean_syncs > 5,
        "{clean_writes} {clean_syncs}"
    );
    let modes = [
        CrashMode::DurableOnly,
        CrashMode::AllWritten,
        CrashMode::TornLastWrite,
    ];
    let mut images = 0;
    for n in 1..=clean_writes + clean_syncs {
        let fs = FaultyFs::new();
        let (mut log, appended) = faulty_log(&fs);
        if n <= clean_writes {
            fs.fail_nth_write(fs.writes() + n);
        } else {
            fs.fail_nth_sync(fs.syncs() + n - clean_writes);
        }
        let result = log.clean(3_000, BUFFER, None);
        for mode in modes {
            let what = format!("fault {n} ({result:?}), crash {mode:?}");
            check_crash_image(&fs.crash(mode), &appended, &what);
            images += 1;
        }
        if result.is_ok() {
            keys_are_latest(&log, &appended);
        }
    }
    for mode in modes {
        check_crash_image(&reference.crash(mode), &appended, "after a clean");
    }
    assert!(images >= 3 * (clean_writes + clean_syncs));
}

#[test]
fn tombstones_go_once_due_even_with_nothing_dirty() {
    let dir = tempfile::tempdir().unwrap();
    let rolling = LogConfig {
        segment_ms: 300,
        ..config()
    };
    let mut log = Log::open(dir.path(), rolling, 0).unwrap();
    append(&mut log, &[("a", Some("1")), ("b", Some("1"))], 1_000);
    append(&mut log, &[("a", None)], 1_000);
    append(&mut log, &[("c", Some("1"))], 1_000);
    log.tick(2_000).unwrap();
    log.clean(2_000, BUFFER, None).unwrap().expect("dirty");
    assert_eq!(rows(&log).iter().filter(|r| r.2.is_none()).count(), 1);
    assert!(log.dirtiness(2_500).is_none());
    log.clean(12_000, BUFFER, None)
        .unwrap()
        .expect("due tombstones");
    assert!(rows(&log).iter().all(|r| r.1 != b"a"), "{:?}", rows(&log));
}
