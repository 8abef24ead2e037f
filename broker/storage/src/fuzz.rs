//! The entry points of the storage fuzz targets (`tests/fuzz/`, docs/security.md "Fuzzing"),
//! replayed over the committed corpus by `tests/snapshot_corpus.rs`, `tests/leader_epoch.rs`
//! and `tests/replicated.rs`. Test scaffolding (feature `fuzz`): never in the broker binary.
//! Each takes arbitrary bytes and must never panic; what decodes must encode back.

use std::path::Path;
use std::sync::Arc;

use crate::io::FaultyFs;
use crate::{Log, LogConfig, Offset, batch, epoch, producer};

/// The `producer_snapshot` target: `data` as a snapshot file. One that decodes must survive
/// re-encoding unchanged (the decoder accepts only what the encoder can mean).
pub fn producer_snapshot(data: &[u8]) {
    if let Ok((offset, state)) = producer::snapshot::decode(data) {
        let again = producer::snapshot::encode(offset, &state);
        let (offset_again, state_again) =
            producer::snapshot::decode(&again).expect("re-encoded snapshot decodes");
        assert_eq!(
            (offset, &state),
            (offset_again, &state_again),
            "snapshot re-encodes differently"
        );
    }
}

/// The `leader_epochs` target: `data` as a `leader-epoch.checkpoint`. One that decodes must
/// encode back to the same bytes.
pub fn leader_epochs(data: &[u8]) {
    if let Ok(entries) = epoch::decode(data) {
        assert_eq!(
            epoch::encode(&entries),
            data,
            "a decoded epoch file re-encodes exactly"
        );
    }
}

/// The `replicated_append` target: `data` as the records of a leader's fetch answer, which a
/// follower appends as they are (`Log::append_replicated`) to an empty log on the in-memory
/// `FaultyFs`; again with its first batch's base offset set to 0 and its CRC fixed, so
/// mutations reach the contiguity, epoch and producer-state code. Never panics; a refusal
/// writes nothing; what is taken reads back byte for byte.
pub fn replicated_append(data: &[u8]) {
    append_to_empty(data);
    if data.len() >= batch::HEADER_BYTES {
        let mut fixed = data.to_vec();
        fixed[batch::pos::BASE_OFFSET..batch::pos::BASE_OFFSET + 8].fill(0);
        if let Ok(header) = batch::parse_header(&fixed) {
            let end = header.total_bytes().min(fixed.len());
            if end >= batch::HEADER_BYTES {
                let crc = batch::compute_crc(&fixed[..end]);
                fixed[batch::pos::CRC..batch::pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
            }
        }
        append_to_empty(&fixed);
    }
}

fn append_to_empty(data: &[u8]) {
    let fs = Arc::new(FaultyFs::new());
    let mut log = Log::open_with(fs, Path::new("/f/t-0"), LogConfig::default(), 0)
        .expect("an empty log opens");
    match log.append_replicated(data, 1_000) {
        Ok(taken) if taken.batches > 0 => {
            let back = log
                .read(Offset(0), u32::MAX)
                .and_then(|slice| Ok(slice.read_to_vec()?))
                .expect("what was appended reads back");
            assert_eq!(
                back, data,
                "a replicated append keeps the bytes as they are"
            );
            assert_eq!(taken.log_end_offset, log.log_end_offset());
        }
        _ => {
            assert_eq!(log.log_end_offset(), Offset(0), "a refusal writes nothing");
            assert!(log.leader_epochs().is_empty(), "a refusal assigns no epoch");
        }
    }
}
