//! Decoder robustness (property-based fuzzing, runs in plain `cargo test`): arbitrary bytes
//! never panic the batch parser, validator or iterator; any flipped bit in the part of a
//! batch the CRC covers is rejected; record sections re-signed with a valid CRC but mangled
//! never panic validation; and a segment file with arbitrary bytes after valid batches
//! recovers exactly the valid prefix.

use proptest::prelude::*;
use sluice_storage::batch::{self, iter_batches, parse_header, pos, validate};
use sluice_storage::io::{FaultyFs, Fs};
use sluice_storage::testing::build_value_batch;
use sluice_storage::{Log, LogConfig, Offset};
use std::path::Path;
use std::sync::Arc;

fn resign(batch: &mut [u8]) {
    let crc = batch::compute_crc(batch);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_header(&bytes);
        let _ = validate(&bytes);
        let _ = batch::verify_crc(&bytes);
        for item in iter_batches(&bytes) {
            let _ = item;
        }
    }

    #[test]
    fn any_bit_flip_under_the_crc_is_rejected(
        records in 1usize..20, value_bytes in 0usize..200, at in any::<prop::sample::Index>(), bit in 0u8..8,
    ) {
        let mut b = build_value_batch(records, value_bytes, 9, 1_000);
        let at = pos::CRC + at.index(b.len() - pos::CRC);
        b[at] ^= 1 << bit;
        prop_assert!(validate(&b).is_err(), "flip at {} accepted", at);
    }

    #[test]
    fn mangled_records_with_a_valid_crc_never_panic(
        records in 1usize..20, value_bytes in 0usize..300,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let mut b = build_value_batch(records, value_bytes, 3, 1_000);
        let body = batch::HEADER_BYTES;
        for (at, byte) in edits {
            let at = body + at.index(b.len() - body);
            b[at] = byte;
        }
        resign(&mut b);
        let _ = validate(&b);
    }

    #[test]
    fn garbage_after_valid_batches_is_cut_on_recovery(
        batches in 1usize..8, garbage in prop::collection::vec(any::<u8>(), 1..300),
    ) {
        let fs = FaultyFs::new();
        let dir = Path::new("/fuzz/p-0");
        let mut bytes = Vec::new();
        let mut next = 0i64;
        for i in 0..batches {
            let mut b = build_value_batch(1 + i % 3, 20, i as u8, 1_000);
            batch::set_base_offset(&mut b, next);
            next += 1 + (i % 3) as i64;
            bytes.extend(b);
        }
        let valid = bytes.len();
        bytes.extend(&garbage);
        fs.create_dir_all(dir).unwrap();
        let file = fs.open(&dir.join("00000000000000000000.log"), true).unwrap();
        file.write_at(&bytes, 0).unwrap();
        let log = Log::open_with(Arc::new(fs.clone()), dir, LogConfig::default(), 0).unwrap();
        // Garbage could by chance continue the log only with a valid CRC: practically never.
        prop_assert_eq!(log.log_end_offset(), Offset(next));
        prop_assert_eq!(log.size_bytes(), valid as u64);
    }
}
