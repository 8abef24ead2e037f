//! The entry points of the storage fuzz targets (`tests/fuzz/`, docs/security.md "Fuzzing"),
//! replayed over the committed corpus by `tests/snapshot_corpus.rs` and
//! `tests/leader_epoch.rs`. Test scaffolding (feature `fuzz`): never in the broker binary.
//! Each takes arbitrary bytes and must never panic; what decodes must encode back.

use crate::{epoch, producer};

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
