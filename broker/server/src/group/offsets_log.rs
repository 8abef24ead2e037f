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
#[cfg(feature = "fuzz")]
pub(crate) fn decode_chunk(
    bytes: Vec<u8>,
    out: &mut Vec<OffsetRecord>,
) -> Result<Option<i64>, crate::error::ServerError> {
    crate::compacted_log::decode_chunk(bytes, out)
}

/// Encodes records as RecordBatch v2 batches of bounded size (the fuzz seeds' log batches).
#[cfg(feature = "fuzz")]
pub(crate) fn encode_batches(
    records: &[&OffsetRecord],
    now_ms: i64,
) -> Result<Vec<u8>, crate::error::ServerError> {
    crate::compacted_log::encode_batches(records, now_ms)
}

#[cfg(test)]
mod tests {
    //! Append, reopen and compaction of the offsets log on a temp dir.
    use super::*;
    use crate::compacted_log::{Compaction, generation_dir};
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

    fn small_segments() -> Compaction {
        Compaction {
            segment_bytes: 512,
            delete_retention_ms: 0,
            check_interval_ms: 0,
            ..Compaction::default()
        }
    }

    fn tombstone(group: &str, partition: i32) -> OffsetRecord {
        OffsetRecord {
            value: None,
            ..commit(group, partition, 0)
        }
    }

    #[test]
    fn the_cleaner_keeps_the_latest_commit_per_key_and_drops_tombstoned_keys() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        assert!(loaded.is_empty());
        log.set_compaction(small_segments());
        log.append(&[&commit("gone", 0, 1)]).unwrap();
        for offset in 0..40_i64 {
            log.append(&[&commit("g", (offset % 2) as i32, offset)])
                .unwrap();
        }
        log.append(&[&tombstone("gone", 0)]).unwrap();
        for offset in 40..60_i64 {
            log.append(&[&commit("g", (offset % 2) as i32, offset)])
                .unwrap();
        }
        let mut removed = 0;
        while let Some(outcome) = log.clean().unwrap() {
            removed += outcome.records_removed;
        }
        assert!(removed >= 40, "superseded commits removed ({removed})");
        log.close().unwrap();
        let (log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        let store = sluice_group::OffsetStore::load(loaded.clone());
        assert!(
            store.group("gone").is_none(),
            "the tombstoned key stays gone"
        );
        let offsets: Vec<i64> = store
            .group("g")
            .unwrap()
            .values()
            .map(|c| c.offset)
            .collect();
        assert_eq!(offsets, vec![58, 59], "the latest commit of each partition");
        assert!(
            loaded.iter().all(|r| r.key != tombstone("gone", 0).key),
            "the tombstone itself went after delete.retention.ms (0 here): {loaded:?}"
        );
        assert!(loaded.len() < 20, "{} records replayed", loaded.len());
        log.close().unwrap();
    }

    #[test]
    fn a_data_dir_from_before_the_cleaner_opens_at_its_generation() {
        let dir = tempfile::tempdir().unwrap();
        let offsets_dir = dir.path().join(OFFSETS_DIR);
        std::fs::create_dir_all(&offsets_dir).unwrap();
        std::fs::write(offsets_dir.join("generation.json"), r#"{"generation":3}"#).unwrap();
        let (mut log, _) = OffsetsLog::open(dir.path(), true).unwrap();
        let a = commit("g", 0, 5);
        log.append(&[&a]).unwrap();
        log.close().unwrap();
        assert!(generation_dir(&offsets_dir, 3).exists());
        let (log, loaded) = OffsetsLog::open(dir.path(), true).unwrap();
        assert_eq!(loaded, vec![a]);
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
