//! Damage to real files, then reopen: a flipped byte in the middle or at the tail of the
//! active segment (after an unclean shutdown) truncates the log at that batch; garbage
//! after the last batch is cut; a truncated, deleted or nonsensical index is rebuilt; a
//! corrupt checkpoint makes recovery scan everything. Reads afterwards return exactly the
//! surviving batches, and appends continue at the new end.

use sluice_storage::batch::{iter_batches, verify_crc};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{Durability, Log, LogConfig, Offset};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn big_segment_config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Appends `n` batches of 2 records (offsets 2i, 2i+1) with 100-byte values.
fn fill(dir: &Path, cfg: &LogConfig, n: usize) -> Log {
    let mut log = Log::open(dir, cfg.clone(), 0).unwrap();
    for i in 0..n {
        let mut batch = build_value_batch(2, 100, i as u8, 1_000 + i as i64);
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    log
}

/// Every batch from log start to log end, one read per batch, CRC-checked: base offsets.
fn all_bases(log: &Log) -> Vec<i64> {
    let mut bases = Vec::new();
    let mut next = log.log_start_offset().value();
    while next < log.log_end_offset().value() {
        let bytes = log.read(Offset(next), 1).unwrap().read_to_vec().unwrap();
        let (header, batch) = iter_batches(&bytes).next().unwrap().unwrap();
        verify_crc(batch).unwrap();
        assert_eq!(header.base_offset, next);
        bases.push(next);
        next = header.last_offset() + 1;
    }
    bases
}

fn segment_file(dir: &Path, base: i64, ext: &str) -> PathBuf {
    dir.join(format!("{base:020}.{ext}"))
}

fn patch(path: &Path, position: u64, bytes: &[u8]) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(bytes, position)
        .unwrap();
}

fn expect_bases(log: &Log, batches: usize) {
    assert_eq!(
        all_bases(log),
        (0..batches as i64).map(|i| 2 * i).collect::<Vec<_>>()
    );
}

#[test]
fn flipped_byte_in_the_middle_of_the_active_segment_truncates_there() {
    let dir = tempfile::tempdir().unwrap();
    let log = fill(dir.path(), &big_segment_config(), 50);
    let slice = log.read(Offset(40), 1).unwrap();
    drop(log); // unclean
    patch(
        &segment_file(dir.path(), 0, "log"),
        slice.position + 70,
        &[0xAB],
    );
    let mut log = Log::open(dir.path(), big_segment_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(40));
    expect_bases(&log, 20);
    let len = std::fs::metadata(segment_file(dir.path(), 0, "log"))
        .unwrap()
        .len();
    assert_eq!(len, slice.position, "file cut at the bad batch");
    let mut batch = build_value_batch(1, 10, 0, 0);
    assert_eq!(
        log.append(&mut batch, Durability::OsCache, 0)
            .unwrap()
            .base_offset,
        Offset(40)
    );
}

#[test]
fn flipped_byte_at_the_tail_drops_only_the_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    drop(fill(dir.path(), &big_segment_config(), 30));
    let path = segment_file(dir.path(), 0, "log");
    let len = std::fs::metadata(&path).unwrap().len();
    patch(&path, len - 1, &[0xFF]);
    let log = Log::open(dir.path(), big_segment_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(58));
    expect_bases(&log, 29);
}

#[test]
fn garbage_after_the_last_batch_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    drop(fill(dir.path(), &big_segment_config(), 30));
    let path = segment_file(dir.path(), 0, "log");
    let len = std::fs::metadata(&path).unwrap().len();
    patch(&path, len, &[0x5A; 37]);
    let log = Log::open(dir.path(), big_segment_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(60));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    expect_bases(&log, 30);
}

/// Bases of the segments in `dir`, sorted.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .into_string()
                .ok()?
                .strip_suffix(".log")?
                .parse()
                .ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn truncated_indexes_are_rebuilt_or_still_valid() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), &config(), 100).close().unwrap();
    let bases = segment_bases(dir.path());
    assert!(bases.len() > 4);
    let ragged = segment_file(dir.path(), bases[1], "index");
    OpenOptions::new()
        .write(true)
        .open(&ragged)
        .unwrap()
        .set_len(13)
        .unwrap();
    let shorter = segment_file(dir.path(), bases[2], "index");
    OpenOptions::new()
        .write(true)
        .open(&shorter)
        .unwrap()
        .set_len(8)
        .unwrap();
    let active = segment_file(dir.path(), *bases.last().unwrap(), "timeindex");
    OpenOptions::new()
        .write(true)
        .open(&active)
        .unwrap()
        .set_len(5)
        .unwrap();
    let log = Log::open(dir.path(), config(), 0).unwrap();
    expect_bases(&log, 100);
    assert_eq!(
        std::fs::metadata(&ragged).unwrap().len() % 8,
        0,
        "ragged index rebuilt"
    );
    assert_eq!(
        log.offset_for_timestamp(1_099).unwrap(),
        Some((Offset(198), 1_099))
    );
}

#[test]
fn deleted_indexes_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), &config(), 100).close().unwrap();
    let bases = segment_bases(dir.path());
    for base in [bases[0], bases[3], *bases.last().unwrap()] {
        std::fs::remove_file(segment_file(dir.path(), base, "index")).unwrap();
        std::fs::remove_file(segment_file(dir.path(), base, "timeindex")).unwrap();
    }
    let log = Log::open(dir.path(), config(), 0).unwrap();
    expect_bases(&log, 100);
    assert!(segment_file(dir.path(), bases[3], "index").exists());
    assert_eq!(
        log.offset_for_timestamp(1_050).unwrap(),
        Some((Offset(100), 1_050))
    );
}

#[test]
fn index_pointing_past_the_log_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), &config(), 100).close().unwrap();
    let bases = segment_bases(dir.path());
    let index = segment_file(dir.path(), bases[1], "index");
    let len = std::fs::metadata(&index).unwrap().len();
    assert!(len >= 8);
    patch(&index, len - 4, &u32::MAX.to_be_bytes());
    let log = Log::open(dir.path(), config(), 0).unwrap();
    expect_bases(&log, 100);
}

#[test]
fn corrupt_checkpoint_makes_recovery_scan_everything() {
    let dir = tempfile::tempdir().unwrap();
    let log = fill(dir.path(), &config(), 60);
    drop(log);
    patch(&dir.path().join("partition.checkpoint"), 10, &[0xEE]);
    let log = Log::open(dir.path(), config(), 0).unwrap();
    expect_bases(&log, 60);
    let log_end = log.log_end_offset();
    drop(log);
    let log = Log::open(dir.path(), config(), 0).unwrap();
    assert_eq!(
        log.log_end_offset(),
        log_end,
        "the checkpoint was rewritten"
    );
}
