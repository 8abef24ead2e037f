//! Log basics on real files in a temp dir: append assigns contiguous offsets, reads return
//! whole batches from the one holding the offset, segments roll by size, a clean close
//! reopens without losing anything, an unclean drop recovers, and bad batches are rejected
//! with nothing written.

use sluice_storage::batch::{self, iter_batches};
use sluice_storage::testing::{TestRecord, build_batch, build_value_batch};
use sluice_storage::{AppendError, BatchError, Durability, Log, LogConfig, Offset, ReadError};

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Base offsets and record counts of the batches in `bytes`, checking each CRC.
fn batches_in(bytes: &[u8]) -> Vec<(i64, i32)> {
    iter_batches(bytes)
        .map(|b| {
            let (header, bytes) = b.unwrap();
            batch::verify_crc(bytes).unwrap();
            (header.base_offset, header.records_count)
        })
        .collect()
}

fn append_n(log: &mut Log, n: usize, records: usize) {
    for i in 0..n {
        let mut b = build_value_batch(records, 100, i as u8, 1_000 + i as i64);
        log.append(&mut b, Durability::OsCache, 1_000).unwrap();
    }
}

#[test]
fn append_assigns_offsets_and_read_returns_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    let mut b = build_value_batch(3, 10, 1, 5);
    let out = log.append(&mut b, Durability::OsCache, 0).unwrap();
    assert_eq!(
        (out.base_offset, out.last_offset, out.record_count),
        (Offset(0), Offset(2), 3)
    );
    let mut b = build_value_batch(2, 10, 2, 6);
    let out = log.append(&mut b, Durability::Fsync, 0).unwrap();
    assert_eq!((out.base_offset, out.last_offset), (Offset(3), Offset(4)));
    assert_eq!(log.log_end_offset(), Offset(5));

    let all = log.read(Offset(0), 1 << 20).unwrap().read_to_vec().unwrap();
    assert_eq!(batches_in(&all), vec![(0, 3), (3, 2)]);
    let mid = log.read(Offset(4), 1 << 20).unwrap().read_to_vec().unwrap();
    assert_eq!(batches_in(&mid), vec![(3, 2)]);
    let one = log.read(Offset(1), 1).unwrap().read_to_vec().unwrap();
    assert_eq!(batches_in(&one), vec![(0, 3)], "at least one whole batch");
    assert!(log.read(Offset(5), 100).unwrap().is_empty());
    assert!(matches!(
        log.read(Offset(6), 100),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn rolls_by_size_and_reads_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    append_n(&mut log, 100, 2);
    assert!(log.segment_count() > 5, "{} segments", log.segment_count());
    let mut next = 0;
    while next < 200 {
        let bytes = log.read(Offset(next), 1000).unwrap().read_to_vec().unwrap();
        let batches = batches_in(&bytes);
        assert_eq!(batches[0].0, next);
        next = batches
            .last()
            .map(|(base, n)| base + i64::from(*n))
            .unwrap();
    }
    assert_eq!(next, 200);
}

#[test]
fn clean_close_and_unclean_drop_both_reopen_with_all_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    append_n(&mut log, 50, 1);
    log.close().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(50));
    append_n(&mut log, 50, 1);
    drop(log); // no close: recovery scans from the recovery point
    let log = Log::open(dir.path(), small_config(), 0).unwrap();
    assert_eq!(log.log_end_offset(), Offset(100));
    for offset in [0, 37, 50, 99] {
        let bytes = log.read(Offset(offset), 1).unwrap().read_to_vec().unwrap();
        assert_eq!(batches_in(&bytes), vec![(offset, 1)]);
    }
}

#[test]
fn bad_batches_are_rejected_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small_config(), 0).unwrap();
    let good = build_batch(0, 1, &[TestRecord::value(b"x")]);
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 0xff;
    let mut both = [good.clone(), bad].concat();
    let err = log.append(&mut both, Durability::OsCache, 0).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::InvalidBatch(BatchError::CrcMismatch { .. })
        ),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), Offset(0));
    assert_eq!(log.size_bytes(), 0);
    let mut huge = build_value_batch(1, 5000, 0, 0);
    let err = log.append(&mut huge, Durability::OsCache, 0).unwrap_err();
    assert!(
        matches!(err, AppendError::TooLarge { limit: 4096, .. }),
        "{err}"
    );
    let mut claims_huge = build_value_batch(1, 10, 0, 0);
    claims_huge[8..12].copy_from_slice(&(200i32 << 20).to_be_bytes());
    let err = log
        .append(&mut claims_huge, Durability::OsCache, 0)
        .unwrap_err();
    assert!(matches!(err, AppendError::TooLarge { .. }), "{err}");
    let mut empty = Vec::new();
    assert!(matches!(
        log.append(&mut empty, Durability::OsCache, 0),
        Err(AppendError::InvalidBatch(BatchError::Empty))
    ));
}
