//! A compacted internal log: the broker's own records (committed offsets, transaction
//! state) in one storage-engine [`Log`], replayed at start and compacted by replacing it
//! with the live records. The record type says where it lives and how it is encoded
//! ([`CompactedRecord`]); the offsets log (`group/offsets_log.rs`) and the transaction log
//! (`txn/log.rs`) are this type over their records.
//!
//! On-disk layout under `data.dir` (beside `topics/`, so it never collides with a topic and
//! clients never see it in Metadata):
//! ```text
//! <DIR>/generation.json  {"generation": N}: which directory is live (the commit point;
//!                        absent = generation 0)
//! <DIR>/<N>/             the live log (a storage-engine partition directory)
//! ```
//!
//! Records are RecordBatch v2 (`internal_log`); a record's key and value are
//! [`CompactedRecord::encode_key`] / [`CompactedRecord::encode_value`] (a tombstone has no
//! value).
//!
//! Compaction is in place, by the storage engine's cleaner, the one that compacts
//! `cleanup.policy=compact` topics (`sluice_storage`'s `cleaner.rs`; docs/compaction.md): the
//! log is `compact`, so the cleaner keeps the latest record of each key and drops
//! tombstones `delete.retention.ms` after the clean that covered them, rewriting sealed
//! segments through the durable-write path (`.cleaned` files fsynced, a swap manifest,
//! recovery finishing a swap a crash interrupted). The owner calls [`CompactedLog::clean_if_due`]
//! after its appends; replay then reads each live key's latest record (and the tombstones
//! still kept) in offset order, which loads the same state as the uncleaned log did. Every
//! record type written here has one key per piece of state and writes a tombstone when it
//! goes (deleted groups, expired offsets and transactional ids), so nothing removed from
//! memory comes back at a replay.
//!
//! Generations: before the cleaner, compaction wrote a new `<DIR>/<N+1>/` and swapped
//! `generation.json`; a data dir from then is opened at its pointer's generation and cleaned
//! in place from there on. Directories of other generations (a swap a crash interrupted)
//! are removed at start.
//!
//! A failed write or fsync fences the log (the storage engine never retries an fsync); the
//! requests of that append fail with COORDINATOR_NOT_AVAILABLE, as Kafka answers a commit
//! whose append hit a storage error, so clients retry. The next append first calls
//! `Log::try_unfence`: a probe write and fsync, a cut back to the durable offset if an fsync
//! failed, and a reopen from disk; until that works every append fails the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sluice_storage::io as storage_io;
use sluice_storage::{CleanOutcome, CleanupPolicy, Durability, Fs, Log, LogConfig, RealFs};

use crate::clock::SharedClock;
use crate::error::ServerError;
use crate::metrics::FenceMetrics;
use crate::{internal_log, limits};

const POINTER_FILE: &str = "generation.json";

/// A record of a compacted internal log.
pub trait CompactedRecord: Sized {
    /// The log's directory under `data.dir`.
    const DIR: &'static str;
    /// The log's name in errors and logs ("offsets log").
    const NAME: &'static str;
    /// The record's key bytes.
    fn encode_key(&self) -> Vec<u8>;
    /// The record's value bytes; `None` for a tombstone.
    fn encode_value(&self) -> Option<Vec<u8>>;
    /// A record back from its key and value; an error names what is wrong.
    fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, String>;
    /// Where this log's fenced state is mirrored for `/metrics`.
    fn fenced_flag(metrics: &FenceMetrics) -> &AtomicBool;
    /// Whether a record that does not decode (a CRC-valid batch from a newer version, or a
    /// bug) is logged and skipped (`true`: losing it loses one commit) or makes the log
    /// refuse to load (`false`: skipping it would replay a wrong state).
    const SKIPS_UNDECODABLE: bool;
}

/// How a compacted internal log is cleaned (`limits::INTERNAL_LOG_*` by default; tests clean
/// small logs at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    /// Segment size, in bytes: the cleaner never touches the active segment.
    pub segment_bytes: u32,
    /// `delete.retention.ms`: how long a tombstone outlives the clean that covered it.
    pub delete_retention_ms: i64,
    /// Least time between two checks for a due clean, in ms.
    pub check_interval_ms: i64,
    /// The cleaner's offset map, in bytes.
    pub dedupe_buffer_bytes: u64,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            segment_bytes: limits::INTERNAL_LOG_SEGMENT_BYTES,
            delete_retention_ms: limits::INTERNAL_LOG_DELETE_RETENTION_MS,
            check_interval_ms: limits::INTERNAL_LOG_CLEAN_CHECK_MS,
            dedupe_buffer_bytes: limits::INTERNAL_LOG_DEDUPE_BUFFER_BYTES,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    generation: u64,
}

/// An open compacted log of `R` records.
#[derive(Debug)]
pub struct CompactedLog<R> {
    /// `None` only while being swapped or after close.
    log: Option<Log>,
    /// fsync each append before it is acknowledged (`sluice.acks.all.fsync`).
    durability: Durability,
    /// Where the fenced state and lifted fences are reported (`/metrics`).
    fences: Arc<FenceMetrics>,
    /// What "now" is for the log's segments and record timestamps.
    clock: SharedClock,
    compaction: Compaction,
    /// When `clean_if_due` next looks at the log's dirtiness, in ms of `clock`.
    next_clean_check_ms: i64,
    records: std::marker::PhantomData<fn() -> R>,
}

/// The storage settings of an internal log: compacted, never deleted by time or size (the
/// cleaner bounds it), batches as large as the biggest append.
fn log_config(compaction: &Compaction) -> LogConfig {
    LogConfig {
        segment_bytes: compaction.segment_bytes,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: sluice_storage::limits::BATCH_BYTES_MAX,
        segment_index_bytes: limits::INTERNAL_LOG_INDEX_BYTES,
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: compaction.delete_retention_ms,
        ..LogConfig::default()
    }
}

fn storage_error(context: String) -> impl FnOnce(sluice_storage::StorageError) -> ServerError {
    move |source| ServerError::Storage { context, source }
}

impl<R: CompactedRecord> CompactedLog<R> {
    /// Opens the live generation under `data_dir` (creating generation 0 on first start) and
    /// removes leftovers of other generations. Returns the log and its records in log order.
    pub fn open(data_dir: &Path, fsync: bool) -> Result<(Self, Vec<R>), ServerError> {
        Self::open_with(data_dir, fsync, Arc::new(RealFs), crate::clock::system())
    }

    /// Same, with the log's segments on `fs`.
    pub fn open_with_fs(
        data_dir: &Path,
        fsync: bool,
        fs: Arc<dyn Fs>,
    ) -> Result<(Self, Vec<R>), ServerError> {
        Self::open_with(data_dir, fsync, fs, crate::clock::system())
    }

    /// Same, reading the time (segment and record timestamps) from `clock`: the broker's, or
    /// a test's fixed one, so a fault sweep's runs write the same bytes.
    pub fn open_with(
        data_dir: &Path,
        fsync: bool,
        fs: Arc<dyn Fs>,
        clock: SharedClock,
    ) -> Result<(Self, Vec<R>), ServerError> {
        let data_dir = &data_dir.join(R::DIR);
        storage_io::create_dir_durable(&RealFs, data_dir)
            .map_err(ServerError::io(format!("creating {}", data_dir.display())))?;
        storage_io::remove_stale_temps(&RealFs, data_dir)
            .map_err(ServerError::io(format!("cleaning {}", data_dir.display())))?;
        let generation = read_pointer(data_dir)?;
        remove_other_generations::<R>(data_dir, generation);
        let dir = generation_dir(data_dir, generation);
        let compaction = Compaction::default();
        let log = Log::open_with(fs, &dir, log_config(&compaction), clock.now_ms())
            .map_err(storage_error(format!("opening {}", dir.display())))?;
        let records = read_all(&log)?;
        tracing::info!(dir = %dir.display(), records = records.len(), "loaded the {}", R::NAME);
        let durability = if fsync {
            Durability::Fsync
        } else {
            Durability::OsCache
        };
        Ok((
            Self {
                log: Some(log),
                durability,
                fences: Arc::default(),
                next_clean_check_ms: clock.now_ms().saturating_add(compaction.check_interval_ms),
                clock,
                compaction,
                records: std::marker::PhantomData,
            },
            records,
        ))
    }

    fn log_mut(&mut self) -> Result<&mut Log, ServerError> {
        self.log.as_mut().ok_or_else(|| ServerError::Io {
            context: format!("the {} is closed", R::NAME),
            source: std::io::Error::other("closed"),
        })
    }

    /// Reports the log's fence state to `fences` (the broker's metrics) from now on.
    pub fn report_fences_to(&mut self, fences: Arc<FenceMetrics>) {
        self.fences = fences;
    }

    /// Bytes of the log on disk.
    pub fn size_bytes(&self) -> u64 {
        self.log.as_ref().map_or(0, Log::size_bytes)
    }

    /// Appends batches of records (one call, one fsync under the fsync policy). After an
    /// I/O error the storage engine fences the log; the next append probes the disk and
    /// reopens the log from disk first (`Log::try_unfence`), or fails while it cannot.
    pub fn append(&mut self, records: &[&R]) -> Result<(), ServerError> {
        if records.is_empty() {
            return Ok(());
        }
        self.lift_fence()?;
        let now = self.clock.now_ms();
        let mut bytes = encode_batches(records, now)?;
        let durability = self.durability;
        let log = self.log_mut()?;
        let appended = log.append(&mut bytes, durability, now);
        let fenced = log.is_fenced();
        R::fenced_flag(&self.fences).store(fenced, Relaxed);
        appended.map_err(|e| ServerError::Io {
            context: format!("appending to the {}", R::NAME),
            source: std::io::Error::other(e),
        })?;
        Ok(())
    }

    /// Probes and reopens a fenced log; an error while the disk still fails.
    fn lift_fence(&mut self) -> Result<(), ServerError> {
        let now = self.clock.now_ms();
        let log = self.log_mut()?;
        let lifted = log
            .try_unfence(now)
            .map_err(storage_error(format!("lifting the {}'s fence", R::NAME)))?;
        if lifted {
            let log_end = log.log_end_offset();
            R::fenced_flag(&self.fences).store(false, Relaxed);
            self.fences.lifted_total.fetch_add(1, Relaxed);
            tracing::warn!(%log_end, "{} fence lifted: the probe write and fsync succeeded, the log was reopened from disk", R::NAME);
        }
        Ok(())
    }

    /// Cleans the log with `compaction` from now on (the segment size applies to the next
    /// roll).
    pub fn set_compaction(&mut self, compaction: Compaction) {
        self.compaction = compaction;
        self.next_clean_check_ms = self.clock.now_ms();
        if let Some(log) = self.log.as_mut() {
            log.set_config(log_config(&compaction));
        }
    }

    /// Whether `check_interval_ms` passed since the last look (cheap: no I/O, no lock), so
    /// an owner on an async task hops to the blocking pool only then.
    #[must_use]
    pub fn clean_check_due(&self) -> bool {
        self.clock.now_ms() >= self.next_clean_check_ms
    }

    /// Cleans the log if `check_interval_ms` passed since the last look and the cleaner
    /// finds it due; what the clean did, if one ran. The caller owns the log, so appends
    /// wait for the clean (a clean rewrites only what the dedupe buffer covers).
    pub fn clean_if_due(&mut self) -> Result<Option<CleanOutcome>, ServerError> {
        let now = self.clock.now_ms();
        if !self.clean_check_due() {
            return Ok(None);
        }
        self.next_clean_check_ms = now.saturating_add(self.compaction.check_interval_ms);
        self.clean()
    }

    /// Cleans the log now if the cleaner finds it due (its dirty ratio reached
    /// `min.cleanable.dirty.ratio`, or tombstones are due). The log is flushed first: the
    /// cleaner rewrites only segments below the recovery point, which fsynced appends do
    /// not move (with fsync on, the flush finds nothing unsynced but the point).
    pub fn clean(&mut self) -> Result<Option<CleanOutcome>, ServerError> {
        let now = self.clock.now_ms();
        let dedupe = self.compaction.dedupe_buffer_bytes;
        let log = self.log_mut()?;
        log.flush()
            .map_err(storage_error(format!("flushing the {}", R::NAME)))?;
        let cleaned = log.clean(now, dedupe, None);
        let fenced = log.is_fenced();
        R::fenced_flag(&self.fences).store(fenced, Relaxed);
        let outcome = cleaned.map_err(storage_error(format!("cleaning the {}", R::NAME)))?;
        if let Some(outcome) = &outcome {
            tracing::info!(
                read = outcome.bytes_read,
                written = outcome.bytes_written,
                removed = outcome.records_removed,
                cleaned_to = %outcome.cleaned_to,
                "cleaned the {}",
                R::NAME
            );
        }
        Ok(outcome)
    }

    /// Flushes and closes the log (clean-shutdown marker).
    pub fn close(mut self) -> Result<(), ServerError> {
        match self.log.take() {
            Some(log) if log.is_fenced() => {
                tracing::warn!(
                    "closing the fenced {} without flushing; it is recovered at the next start",
                    R::NAME
                );
                Ok(())
            }
            Some(log) => log
                .close()
                .map_err(storage_error(format!("closing the {}", R::NAME))),
            None => Ok(()),
        }
    }
}

pub(crate) fn generation_dir(data_dir: &Path, generation: u64) -> PathBuf {
    data_dir.join(generation.to_string())
}

fn read_pointer(data_dir: &Path) -> Result<u64, ServerError> {
    let path = data_dir.join(POINTER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str::<Pointer>(&text)
            .map(|p| p.generation)
            .map_err(|e| ServerError::Io {
                context: format!("parsing {}", path.display()),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(ServerError::io(format!("reading {}", path.display()))(e)),
    }
}

/// Removes directories of generations other than `live` (a half-written compaction, or an
/// old generation whose removal was interrupted).
fn remove_other_generations<R: CompactedRecord>(data_dir: &Path, live: u64) {
    let Ok(entries) = std::fs::read_dir(data_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u64>().is_ok_and(|g| g != live) {
            tracing::info!(dir = name, "removing a stale {} generation", R::NAME);
            if let Err(e) = storage_io::remove_dir_durable(&RealFs, &entry.path()) {
                tracing::warn!(dir = name, error = %e, "removing a stale {} failed", R::NAME);
            }
        }
    }
}

/// Every record of the log, in order (the storage engine has already checked every batch's
/// CRC; an undecodable record is skipped or refused, as `R::SKIPS_UNDECODABLE` says).
fn read_all<R: CompactedRecord>(log: &Log) -> Result<Vec<R>, ServerError> {
    internal_log::read_all(log, |bytes, out| {
        decode_chunk(bytes, out).map_err(|e| e.to_string())
    })
    .map_err(damaged::<R>)
}

/// Decodes the records of one read of the log (whole batches) into `out`; returns the
/// offset of the last record, `None` if there was none. Also the fuzz targets' entry for
/// these logs: the bytes are the log's, but a damaged disk must not crash the broker.
pub(crate) fn decode_chunk<R: CompactedRecord>(
    bytes: Vec<u8>,
    out: &mut Vec<R>,
) -> Result<Option<i64>, ServerError> {
    let mut last = None;
    for record in internal_log::decode(bytes).map_err(damaged::<R>)? {
        last = Some(record.offset);
        let Some(key) = record.key else { continue };
        match R::decode(&key, record.value.as_deref()) {
            Ok(decoded) => out.push(decoded),
            Err(e) if !R::SKIPS_UNDECODABLE => {
                return Err(damaged::<R>(format!(
                    "record at offset {}: {e}",
                    record.offset
                )));
            }
            Err(e) => {
                tracing::warn!(offset = record.offset, error = %e, "skipping an undecodable record of the {}", R::NAME)
            }
        }
    }
    Ok(last)
}

fn damaged<R: CompactedRecord>(reason: String) -> ServerError {
    ServerError::Io {
        context: format!("decoding the {}", R::NAME),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, reason),
    }
}

/// Encodes records as RecordBatch v2 batches of bounded size.
pub(crate) fn encode_batches<R: CompactedRecord>(
    records: &[&R],
    now_ms: i64,
) -> Result<Vec<u8>, ServerError> {
    let pairs: Vec<(Bytes, Option<Bytes>)> = records
        .iter()
        .map(|r| {
            (
                Bytes::from(r.encode_key()),
                r.encode_value().map(Bytes::from),
            )
        })
        .collect();
    internal_log::encode(&pairs, now_ms).map_err(|e| ServerError::Io {
        context: format!("encoding {} records", R::NAME),
        source: std::io::Error::other(e),
    })
}
