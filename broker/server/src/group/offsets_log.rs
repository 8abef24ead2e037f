//! The internal offsets log: committed offsets as records of one compacted internal log
//! (`crate::compacted_log`: Kafka's `__consumer_offsets`, one partition on a single node),
//! under `data.dir/consumer-offsets/`. Its layout, replay, compaction and fence handling are
//! the compacted log's; this file says how offset records are stored there.
//!
//! Records are RecordBatch v2 (encoded with `kafka-protocol`); a record's key and value are
//! [`OffsetRecord::encode_key`] / [`OffsetRecord::encode_value`] (a tombstone has no value).
//! An undecodable record is logged and skipped (it loses one commit, not the group).

use std::sync::atomic::AtomicBool;

use sluice_group::OffsetRecord;

use crate::compacted_log::{CompactedLog, CompactedRecord};
use crate::error::ServerError;
use crate::metrics::FenceMetrics;

/// The open offsets log.
pub type OffsetsLog = CompactedLog<OffsetRecord>;

impl CompactedRecord for OffsetRecord {
    const DIR: &'static str = "consumer-offsets";
    const NAME: &'static str = "offsets log";
    const SKIPS_UNDECODABLE: bool = true;

    fn encode_key(&self) -> Vec<u8> {
        OffsetRecord::encode_key(self)
    }

    fn encode_value(&self) -> Option<Vec<u8>> {
        OffsetRecord::encode_value(self)
    }

    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, String> {
        OffsetRecord::decode(key, value).map_err(|e| e.to_string())
    }

    fn fenced_flag(metrics: &FenceMetrics) -> &AtomicBool {
        &metrics.offsets_log_fenced
    }
}

/// Decodes the offsets records of one read of the log (whole batches) into `out`; returns
/// the offset of the last record, `None` if there was none. The `offsets_log` fuzz target's
/// entry: the bytes are the log's, but a damaged disk must not crash the broker.
pub(crate) fn decode_chunk(
    bytes: Vec<u8>,
    out: &mut Vec<OffsetRecord>,
) -> Result<Option<i64>, ServerError> {
    crate::compacted_log::decode_chunk(bytes, out)
}

/// Encodes records as RecordBatch v2 batches of bounded size.
pub(crate) fn encode_batches(
    records: &[&OffsetRecord],
    now_ms: i64,
) -> Result<Vec<u8>, ServerError> {
    crate::compacted_log::encode_batches(records, now_ms)
}

#[cfg(test)]
mod tests {
    //! Append, reopen and compaction of the offsets log on a temp dir.
    use super::*;
    use crate::compacted_log::generation_dir;
    use std::sync::Arc;

    const OFFSETS_DIR: &str = <OffsetRecord as CompactedRecord>::DIR;
    use sluice_group::{CommittedOffset, RecordKey, TopicPartition};

    fn commit(group: &str, partition: i32, offset: i64) -> OffsetRecord {
        OffsetRecord {
            key: RecordKey::Offset {
                group: group.into(),
                tp: TopicPartition {
                    topic: "t".into(),
                    partition,
                },
            },
            value: Some(CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 1,
            }),
        }
    }

    #[test]
    fn records_survive_reopen_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        assert!(loaded.is_empty());
        let a = commit("g", 0, 5);
        let b = commit("g", 0, 7);
        log.append(&[&a]).unwrap();
        log.append(&[&b]).unwrap();
        log.close().unwrap();
        let (mut log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        assert_eq!(loaded, vec![a, b.clone()]);
        log.compact(std::slice::from_ref(&b)).unwrap();
        let c = commit("g", 1, 3);
        log.append(&[&c]).unwrap();
        log.close().unwrap();
        let (log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        assert_eq!(loaded, vec![b, c]);
        assert!(!generation_dir(&dir.path().join(OFFSETS_DIR), 0).exists());
        log.close().unwrap();
    }

    #[test]
    fn a_failed_fsync_fences_the_log_and_the_next_append_probes_and_reopens_it() {
        use sluice_storage::io::{CrashMode, FaultyFs};
        use std::sync::atomic::Ordering::Relaxed;
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultyFs::new();
        let (mut log, _) =
            OffsetsLog::open_with_fs(dir.path(), true, Arc::new(fs.clone())).unwrap();
        let fences = Arc::new(crate::metrics::FenceMetrics::default());
        log.report_fences_to(fences.clone());
        let (a, b, c) = (commit("g", 0, 5), commit("g", 0, 7), commit("g", 0, 9));
        log.append(&[&a]).unwrap();
        fs.fail_nth_sync_losing_pages(1);
        assert!(log.append(&[&b]).is_err(), "the fsync failed");
        assert!(fences.offsets_log_fenced.load(Relaxed));
        fs.set_disk_full(true);
        assert!(
            log.append(&[&c]).is_err(),
            "the probe fails while the disk is full"
        );
        fs.set_disk_full(false);
        log.append(&[&c]).unwrap();
        assert!(!fences.offsets_log_fenced.load(Relaxed));
        assert_eq!(fences.lifted_total.load(Relaxed), 1);
        drop(log); // a crash: only what was fsynced survives
        let crashed = Arc::new(fs.crash(CrashMode::DurableOnly));
        let (_, loaded) = OffsetsLog::open_with_fs(dir.path(), true, crashed).unwrap();
        assert_eq!(
            loaded,
            vec![a, c],
            "b's fsync failed: cut off, never fsynced again; c, acknowledged after, survives"
        );
    }

    #[test]
    fn a_half_written_generation_is_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _) = OffsetsLog::open(dir.path(), false).unwrap();
        log.close().unwrap();
        let offsets_dir = dir.path().join(OFFSETS_DIR);
        std::fs::create_dir_all(generation_dir(&offsets_dir, 1)).unwrap();
        let (log, _) = OffsetsLog::open(dir.path(), false).unwrap();
        assert!(!generation_dir(&offsets_dir, 1).exists());
        log.close().unwrap();
    }
}
