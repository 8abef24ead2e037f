//! ListOffsets by time inside compressed batches: `Log::offset_for_timestamp_with` hands the
//! batch holding the target to the caller's decompressor and walks its records to the exact
//! first record at or after the time; without a decompressor (or when it declines) the
//! batch's first offset answers. The "codec" here is a byte reversal marked as gzip, so the
//! test needs no codec crate (the storage engine links none).

use sluice_storage::batch::{Compression, compute_crc, pos};
use sluice_storage::testing::{TestRecord, build_batch};
use sluice_storage::{Durability, Log, LogConfig, Offset};

/// A batch of `count` records 10 ms apart from `base_ms`, its records section "compressed"
/// by reversing it, flagged gzip.
fn reversed_batch(count: i64, base_ms: i64) -> Vec<u8> {
    let value = [7u8; 30];
    let records: Vec<TestRecord<'_>> = (0..count)
        .map(|d| TestRecord {
            timestamp_delta: d * 10,
            ..TestRecord::value(&value)
        })
        .collect();
    let mut batch = build_batch(0, base_ms, &records);
    batch[sluice_storage::batch::HEADER_BYTES..].reverse();
    batch[pos::ATTRIBUTES + 1] |= 1;
    let crc = compute_crc(&batch);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

fn unreverse(codec: Compression, payload: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
    assert_eq!(codec, Compression::Gzip);
    Ok(Some(payload.iter().rev().copied().collect()))
}

fn decline(_: Compression, _: &[u8]) -> std::io::Result<Option<Vec<u8>>> {
    Ok(None)
}

#[test]
fn compressed_batches_are_walked_to_the_exact_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), LogConfig::default(), 0).unwrap();
    for i in 0..5 {
        let mut batch = reversed_batch(10, 1_000 + i * 1_000);
        log.append(&mut batch, Durability::OsCache, 0).unwrap();
    }
    let exact = |ts| log.offset_for_timestamp_with(ts, Some(&unreverse)).unwrap();
    assert_eq!(exact(1_000), Some((Offset(0), 1_000)));
    assert_eq!(exact(1_035), Some((Offset(4), 1_040)));
    assert_eq!(exact(3_090), Some((Offset(29), 3_090)));
    assert_eq!(exact(3_091), Some((Offset(30), 4_000)));
    assert_eq!(exact(5_091), None);
    assert_eq!(
        log.offset_for_timestamp(3_035).unwrap(),
        Some((Offset(20), 3_090)),
        "without a decompressor: the batch's first offset and max timestamp"
    );
    assert_eq!(
        log.offset_for_timestamp_with(3_035, Some(&decline))
            .unwrap(),
        Some((Offset(20), 3_090))
    );
}
