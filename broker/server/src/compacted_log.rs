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
//! Compaction: the owner's snapshot (one record per live key) is written into `<DIR>/<N+1>/`,
//! fsynced and closed; then `generation.json` is replaced with
//! `sluice_storage::io::write_durable` (temp file, fsync, rename, fsync dir) to point at it,
//! and the old directory is removed (durably, like every directory change here). A crash
//! before the rename leaves the old generation live (the half-written new one is removed at
//! the next start); after it, the new one. Directories of other generations are removed at
//! start.
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
use sluice_storage::{Durability, Fs, Log, LogConfig, RealFs};

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

#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    generation: u64,
}

/// An open compacted log of `R` records.
#[derive(Debug)]
pub struct CompactedLog<R> {
    /// `data.dir/<R::DIR>`.
    data_dir: PathBuf,
    /// Generation of the live directory.
    generation: u64,
    /// `None` only while being swapped or after close.
    log: Option<Log>,
    /// fsync each append before it is acknowledged (`sluice.acks.all.fsync`).
    durability: Durability,
    /// Where the fenced state and lifted fences are reported (`/metrics`).
    fences: Arc<FenceMetrics>,
    /// The filesystem the log's segments live on: the real one, or a fault-injecting twin
    /// in tests (the generation pointer stays on the real filesystem).
    fs: Arc<dyn Fs>,
    /// What "now" is for the log's segments and record timestamps.
    clock: SharedClock,
    records: std::marker::PhantomData<fn() -> R>,
}

/// The storage settings of an internal log: never deleted by time or size (compaction
/// bounds it), segments and batches large enough for the biggest append.
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: limits::OFFSETS_SEGMENT_BYTES,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: sluice_storage::limits::BATCH_BYTES_MAX,
        segment_index_bytes: limits::INTERNAL_LOG_INDEX_BYTES,
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
        let log = Log::open_with(fs.clone(), &dir, log_config(), clock.now_ms())
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
                data_dir: data_dir.to_owned(),
                generation,
                log: Some(log),
                durability,
                fences: Arc::default(),
                fs,
                clock,
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

    fn reopen(&mut self) -> Result<(), ServerError> {
        if let Some(log) = self.log.take() {
            log.close().ok();
        }
        let dir = generation_dir(&self.data_dir, self.generation);
        let log = Log::open_with(self.fs.clone(), &dir, log_config(), self.clock.now_ms())
            .map_err(storage_error(format!("reopening {}", dir.display())))?;
        self.log = Some(log);
        Ok(())
    }

    /// Replaces the log with `snapshot` (the live records), as described in the module docs.
    pub fn compact(&mut self, snapshot: &[R]) -> Result<(), ServerError> {
        let next = self.generation + 1;
        let dir = generation_dir(&self.data_dir, next);
        if dir.exists() {
            storage_io::remove_dir_durable(&RealFs, &dir)
                .map_err(ServerError::io(format!("removing {}", dir.display())))?;
        }
        let mut fresh = Log::open_with(self.fs.clone(), &dir, log_config(), self.clock.now_ms())
            .map_err(storage_error(format!("creating {}", dir.display())))?;
        let refs: Vec<&R> = snapshot.iter().collect();
        if !refs.is_empty() {
            let mut bytes = encode_batches(&refs, self.clock.now_ms())?;
            fresh
                .append(&mut bytes, Durability::Fsync, self.clock.now_ms())
                .map_err(|e| ServerError::Io {
                    context: format!("writing {}", dir.display()),
                    source: std::io::Error::other(e),
                })?;
        }
        fresh
            .close()
            .map_err(storage_error(format!("closing {}", dir.display())))?;
        write_pointer(&self.data_dir, next)?;
        let old = self.generation;
        if let Some(log) = self.log.take() {
            log.close().ok();
        }
        self.generation = next;
        self.reopen()?;
        R::fenced_flag(&self.fences).store(false, Relaxed);
        let old_dir = generation_dir(&self.data_dir, old);
        if let Err(e) = storage_io::remove_dir_durable(&RealFs, &old_dir) {
            tracing::warn!(dir = %old_dir.display(), error = %e, "removing the old {} failed", R::NAME);
        }
        Ok(())
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

fn write_pointer(data_dir: &Path, generation: u64) -> Result<(), ServerError> {
    let path = data_dir.join(POINTER_FILE);
    let text = serde_json::to_string(&Pointer { generation }).unwrap_or_default();
    storage_io::write_durable(&RealFs, &path, text.as_bytes())
        .map_err(ServerError::io(format!("writing {}", path.display())))
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
