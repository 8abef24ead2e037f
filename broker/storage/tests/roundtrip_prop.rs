//! Property test on real files: for random batch sizes, segment sizes and index intervals,
//! and random reads (offset, max_bytes), before and after a clean or unclean reopen, every
//! read returns whole CRC-valid batches starting with the one that holds the offset,
//! contiguous, byte-identical to what was appended, and within max_bytes unless it is a
//! single batch.

use proptest::prelude::*;
use sluice_storage::batch::{iter_batches, verify_crc};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{Durability, Log, LogConfig, Offset};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy)]
enum Reopen {
    No,
    Clean,
    Unclean,
}

fn check_read(log: &Log, appended: &BTreeMap<i64, Vec<u8>>, from: i64, max_bytes: u32) {
    let bytes = log
        .read(Offset(from), max_bytes)
        .unwrap()
        .read_to_vec()
        .unwrap();
    let batches: Vec<_> = iter_batches(&bytes).map(Result::unwrap).collect();
    assert!(
        !batches.is_empty(),
        "a read below the log end returns a batch"
    );
    let first = batches[0].0;
    assert!(
        first.base_offset <= from && from <= first.last_offset(),
        "first batch holds {from}"
    );
    assert!(
        bytes.len() <= max_bytes as usize || batches.len() == 1,
        "max_bytes respected"
    );
    let mut next = first.base_offset;
    for (header, batch) in &batches {
        verify_crc(batch).unwrap();
        assert_eq!(header.base_offset, next, "contiguous");
        assert_eq!(&appended[&next][..], *batch, "read back what was appended");
        next = header.last_offset() + 1;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn reads_return_what_was_appended(
        batches in prop::collection::vec((1usize..6, 0usize..400), 1..60),
        segment_bytes in prop::sample::select(vec![512u32, 1024, 4096, 1 << 20]),
        index_interval_bytes in prop::sample::select(vec![0u32, 64, 512, 4096]),
        reads in prop::collection::vec((0.0f64..1.0, 1u32..6000), 1..20),
        reopen in prop::sample::select(vec![Reopen::No, Reopen::Clean, Reopen::Unclean]),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig { segment_bytes, index_interval_bytes, ..LogConfig::default() };
        let mut log = Log::open(dir.path(), cfg.clone(), 0).unwrap();
        let mut appended = BTreeMap::new();
        for (i, (records, value_bytes)) in batches.iter().enumerate() {
            let mut batch = build_value_batch(*records, *value_bytes, i as u8, i as i64);
            if batch.len() > segment_bytes as usize {
                continue;
            }
            let outcome = log.append(&mut batch, Durability::OsCache, 0).unwrap();
            appended.insert(outcome.base_offset.value(), batch);
        }
        let log = match reopen {
            Reopen::No => log,
            Reopen::Clean => { log.close().unwrap(); Log::open(dir.path(), cfg, 0).unwrap() }
            Reopen::Unclean => { drop(log); Log::open(dir.path(), cfg, 0).unwrap() }
        };
        let end = log.log_end_offset().value();
        let expected_end = appended.iter().next_back().map_or(0, |(base, b)| {
            base + i64::from(iter_batches(b).next().unwrap().unwrap().0.last_offset_delta) + 1
        });
        prop_assert_eq!(end, expected_end);
        for (fraction, max_bytes) in reads {
            let from = (fraction * end as f64) as i64;
            if from < end {
                check_read(&log, &appended, from, max_bytes);
            }
        }
        prop_assert!(log.read(Offset(end), 100).unwrap().is_empty());
    }
}
