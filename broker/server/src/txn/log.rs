//! The transaction log: the coordinator's [`TxnRecord`]s (Kafka's `__transaction_state`,
//! one partition on a single node) in a compacted internal log (`crate::compacted_log`)
//! under `data.dir/transaction-state/`. Keys and values are `sluice_txn`'s byte layout
//! (docs/format.md). A record that does not decode refuses the load: replaying the log
//! without it could resurrect a finished transaction or reuse producer ids.

use std::sync::atomic::AtomicBool;

use sluice_txn::TxnRecord;

use crate::compacted_log::{CompactedLog, CompactedRecord};
use crate::metrics::FenceMetrics;

/// The open transaction log.
pub type TxnLog = CompactedLog<TxnRecord>;

impl CompactedRecord for TxnRecord {
    const DIR: &'static str = "transaction-state";
    const NAME: &'static str = "transaction log";
    const SKIPS_UNDECODABLE: bool = false;

    fn encode_key(&self) -> Vec<u8> {
        TxnRecord::encode_key(self)
    }

    fn encode_value(&self) -> Option<Vec<u8>> {
        TxnRecord::encode_value(self)
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, String> {
        TxnRecord::decode(key, value).map_err(|e| e.to_string())
    }

    fn fenced_flag(metrics: &FenceMetrics) -> &AtomicBool {
        &metrics.txn_log_fenced
    }
}

/// Decodes the transaction records of one read of the log (whole batches): the
/// `txn_log` fuzz target's entry (a damaged disk must give an error, never a crash).
#[cfg(any(test, feature = "fuzz"))]
pub(crate) fn decode_chunk(
    bytes: Vec<u8>,
    out: &mut Vec<TxnRecord>,
) -> Result<Option<i64>, crate::error::ServerError> {
    crate::compacted_log::decode_chunk(bytes, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_txn::{ProducerId, TxnMetadata, TxnState};

    fn metadata(id: &str, state: TxnState) -> TxnRecord {
        TxnRecord::Metadata(TxnMetadata {
            transactional_id: id.into(),
            producer_id: ProducerId(7),
            last_producer_id: ProducerId::NONE,
            producer_epoch: 3,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: Vec::new(),
            pending_offsets: Vec::new(),
            txn_start_ms: 10,
            last_update_ms: 20,
        })
    }

    #[test]
    fn records_survive_reopen_and_a_clean() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, loaded) = TxnLog::open(dir.path(), true).unwrap();
        assert!(loaded.is_empty());
        let block = TxnRecord::ProducerIdBlock {
            next_producer_id: 1000,
        };
        let ongoing = metadata("t", TxnState::Ongoing);
        let done = metadata("t", TxnState::CompleteCommit);
        log.append(&[&block, &ongoing]).unwrap();
        log.append(&[&done]).unwrap();
        log.close().unwrap();
        let (mut log, loaded) = TxnLog::open(dir.path(), true).unwrap();
        assert_eq!(loaded, vec![block.clone(), ongoing, done.clone()]);
        log.set_compaction(crate::compacted_log::Compaction {
            segment_bytes: 256,
            check_interval_ms: 0,
            ..Default::default()
        });
        // Enough later records of another id to seal the segments holding `ongoing`.
        let other = metadata("u", TxnState::Empty);
        for _ in 0..8 {
            log.append(&[&other]).unwrap();
        }
        let removed = log.clean().unwrap().map_or(0, |o| o.records_removed);
        assert!(removed >= 1, "the superseded records went");
        log.close().unwrap();
        let (log, loaded) = TxnLog::open(dir.path(), true).unwrap();
        assert_eq!(
            &loaded[..2],
            &[block, done],
            "the latest per key, in log order"
        );
        assert!(loaded[2..].iter().all(|r| *r == other));
        log.close().unwrap();
    }

    #[test]
    fn an_undecodable_record_refuses_the_load() {
        // A valid batch (CRC and all) whose record's key is a layout from the future.
        let pairs = [(bytes::Bytes::from_static(b"\x00\x63future"), None)];
        let bytes = crate::internal_log::encode(&pairs, 1).unwrap();
        let err = decode_chunk(bytes, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("transaction log"), "{err}");
    }
}
