//! Producer state through the `Log`: duplicates answered with their original offsets, and
//! the state rebuilt after a clean close, after a crash (no snapshot of the tail), and
//! from snapshots when segments roll.

use sluice_storage::io::{CrashMode, FaultyFs};
use sluice_storage::testing::producer_batch;
use sluice_storage::{AppendError, Durability, Fs, Log, LogConfig, Marker, Offset};
use std::path::Path;
use std::sync::Arc;

fn open(fs: &FaultyFs, config: &LogConfig) -> Log {
    Log::open_with(
        Arc::new(fs.clone()) as Arc<dyn Fs>,
        Path::new("/p"),
        config.clone(),
        0,
    )
    .unwrap()
}

fn append(log: &mut Log, batch: &[u8]) -> Result<(Offset, bool), AppendError> {
    let mut bytes = batch.to_vec();
    let outcome = log.append(&mut bytes, Durability::Fsync, 1_000)?;
    Ok((outcome.base_offset, outcome.duplicate))
}

#[test]
fn a_retry_after_a_crash_or_a_restart_is_still_a_duplicate() {
    for (clean, segment_bytes) in [(true, 1 << 20), (false, 1 << 20), (false, 300), (true, 300)] {
        let fs = FaultyFs::new();
        let config = LogConfig {
            segment_bytes,
            ..LogConfig::default()
        };
        let mut log = open(&fs, &config);
        append(&mut log, &producer_batch(-1, -1, -1, 2, false)).unwrap();
        let mut sent = Vec::new();
        for seq in (0..30).step_by(3) {
            let batch = producer_batch(5, 0, seq, 3, false);
            let (offset, dup) = append(&mut log, &batch).unwrap();
            assert!(!dup);
            sent.push((batch, offset));
        }
        let end = log.log_end_offset();
        let fs = if clean {
            log.close().unwrap();
            fs
        } else {
            // As kill -9: every append was fsynced, no snapshot covers the tail.
            fs.crash(CrashMode::DurableOnly)
        };
        let mut log = open(&fs, &config);
        assert_eq!(
            log.log_end_offset(),
            end,
            "clean={clean} segment_bytes={segment_bytes}"
        );
        for (batch, offset) in sent.iter().rev().take(5) {
            assert_eq!(
                append(&mut log, batch).unwrap(),
                (*offset, true),
                "clean={clean}"
            );
        }
        assert_eq!(log.log_end_offset(), end, "duplicates append nothing");
        let gap = append(&mut log, &producer_batch(5, 0, 31, 1, false)).unwrap_err();
        assert!(
            matches!(gap, AppendError::OutOfOrderSequence { expected: 30, .. }),
            "{gap}"
        );
        assert!(
            !append(&mut log, &producer_batch(5, 0, 30, 1, false))
                .unwrap()
                .1
        );
    }
}

#[test]
fn markers_end_transactions_and_the_state_survives_a_crash() {
    let fs = FaultyFs::new();
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let mut log = open(&fs, &config);
    let (aborted_at, _) = append(&mut log, &producer_batch(1, 0, 0, 2, true)).unwrap();
    let (open_at, _) = append(&mut log, &producer_batch(2, 0, 0, 2, true)).unwrap();
    assert_eq!(log.last_stable_offset(), aborted_at);
    let marker = log
        .append_marker(1, 0, Marker::Abort, 0, Durability::Fsync, 2_000)
        .unwrap();
    assert_eq!(log.last_stable_offset(), open_at);
    for _ in 0..5 {
        append(&mut log, &producer_batch(-1, -1, -1, 3, false)).unwrap();
    }
    let refused = log.append_marker(1, -1, Marker::Commit, 0, Durability::Fsync, 2_000);
    assert!(matches!(
        refused,
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    let end = log.log_end_offset();
    let fs = fs.crash(CrashMode::DurableOnly);
    drop(log);
    let mut log = open(&fs, &config);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        log.last_stable_offset(),
        open_at,
        "the open transaction is still open"
    );
    let aborted = log.aborted_transactions(Offset(0), end);
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (1, aborted_at.value(), marker.base_offset.value())
    );
    log.append_marker(2, 0, Marker::Commit, 0, Durability::Fsync, 3_000)
        .unwrap();
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
}

#[test]
fn a_roll_in_the_middle_of_an_append_snapshots_the_batches_before_it() {
    let fs = FaultyFs::new();
    let config = LogConfig {
        segment_bytes: 200,
        ..LogConfig::default()
    };
    let mut log = open(&fs, &config);
    let first = producer_batch(5, 0, 0, 3, false);
    let mut all = first.clone();
    all.extend(producer_batch(5, 0, 3, 3, false));
    all.extend(producer_batch(5, 0, 6, 3, false));
    let segments_before = log.segment_count();
    append(&mut log, &all).unwrap();
    assert!(log.segment_count() > segments_before, "the append rolled");
    let fs = fs.crash(CrashMode::DurableOnly);
    drop(log);
    let mut log = open(&fs, &config);
    assert_eq!(
        append(&mut log, &first).unwrap(),
        (Offset(0), true),
        "the first batch is still known"
    );
    assert!(
        !append(&mut log, &producer_batch(5, 0, 9, 1, false))
            .unwrap()
            .1
    );
}

#[test]
fn batches_appended_together_are_checked_in_order_and_retried_together() {
    let fs = FaultyFs::new();
    let mut log = open(&fs, &LogConfig::default());
    let mut both = producer_batch(5, 0, 0, 3, false);
    both.extend(producer_batch(5, 0, 3, 3, false));
    assert_eq!(append(&mut log, &both).unwrap(), (Offset(0), false));
    assert_eq!(
        append(&mut log, &both).unwrap(),
        (Offset(0), true),
        "a retry of both is answered with the first one's offsets"
    );
    assert_eq!(
        append(&mut log, &producer_batch(5, 0, 6, 1, false)).unwrap(),
        (Offset(6), false)
    );
    let mut gap = producer_batch(5, 0, 7, 1, false);
    gap.extend(producer_batch(5, 0, 9, 1, false));
    assert!(matches!(
        append(&mut log, &gap),
        Err(AppendError::OutOfOrderSequence { sequence: 9, .. })
    ));
    assert_eq!(
        log.log_end_offset(),
        Offset(7),
        "nothing of a refused append is written"
    );
}
