//! `Log`: one partition. Appends, reads, rolls, flushes, close; retention and periodic
//! work are in `retention.rs`, opening in `recovery.rs`, fencing and lifting a fence in
//! `fence.rs`.

use crate::batch;
use crate::checkpoint::{self, Checkpoint, CleanerCheckpoint};
use crate::config::{Durability, LogConfig, TimestampType};
use crate::epoch::EpochCache;
use crate::error::{AppendError, BatchError, ReadError, StorageError};
use crate::file_cache::{FileCache, Files};
use crate::io::{Fs, RealFs, StorageFile};
use crate::offset::Offset;
use crate::producer::{self, AbortedTxn, Check, Marker, ProducerStateMap};
use crate::recovery;
use crate::segment::{Decompress, Segment};
use crate::txn_guard::{Admission, TxnAppend, Verifications};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A partition's log: segments sorted by base offset; the last one takes appends.
#[derive(Debug)]
pub struct Log {
    pub(crate) fs: Arc<dyn Fs>,
    /// Opens sealed segments' files on demand, within its bound (shared by the broker).
    pub(crate) cache: Arc<FileCache>,
    pub(crate) dir: PathBuf,
    pub(crate) config: LogConfig,
    /// Never empty; `segments[i].end_offset == segments[i + 1].base`.
    pub(crate) segments: Vec<Segment>,
    pub(crate) log_start_offset: Offset,
    /// Everything below is fsynced (in memory; persisted by `tick` and `close`).
    pub(crate) recovery_point: Offset,
    /// The recovery point last written to `partition.checkpoint`, and when.
    pub(crate) checkpointed_recovery_point: Offset,
    pub(crate) last_checkpoint_ms: i64,
    /// Records appended since the last flush (`flush.messages`).
    pub(crate) unflushed_records: u64,
    /// When the oldest unflushed append happened (`flush.ms`).
    pub(crate) first_unflushed_ms: Option<i64>,
    /// Set by any failed write or fsync; appends fail until `try_unfence` reopens the log.
    pub(crate) fenced: bool,
    /// A failed fsync (or reopen): bytes at or above `durable_offset` may be lost even though
    /// reads still see them, so lifting the fence cuts the log back to `durable_offset`.
    pub(crate) discard_pending: bool,
    /// A reopen started and failed: the in-memory segments may describe files recovery has
    /// changed, so reads are refused until a reopen succeeds.
    pub(crate) stale: bool,
    /// Bumped by every reopen; a `PendingSync` of an earlier generation is ignored.
    pub(crate) generation: u64,
    /// Everything below is fsynced (log bytes; indexes may lag): what acks=all waits for.
    /// `>= recovery_point`; moved by `flush`, fsynced appends and `group_sync`.
    pub(crate) durable_offset: Offset,
    /// Idempotent and transactional producers, open and aborted transactions: derived
    /// from the batches (`producer.rs`), rebuilt at open.
    pub(crate) producers: ProducerStateMap,
    /// KIP-890's verification guards and the transactional ids open transactions were
    /// verified under (`txn_guard.rs`): in memory only, reset by a reopen.
    pub(crate) verifications: Verifications,
    /// Where each leader epoch began (`epoch.rs`); the latest is stamped into appends.
    pub(crate) epochs: EpochCache,
    /// What the cleaner has done (`cleaner.checkpoint`): where the dirty section starts,
    /// below which offset gaps are expected, when recent cleans ran.
    pub(crate) cleaner: CleanerCheckpoint,
    /// When a tombstone the last clean kept for `delete.retention.ms` may go (in memory:
    /// after a restart the next dirty clean removes it).
    pub(crate) tombstones_due_ms: Option<i64>,
}

/// What `append` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// The append time stamped into the batches, or -1 for CreateTime topics.
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
    pub record_count: u32,
    pub bytes: u32,
    /// The batch was appended before (an idempotent producer's retry): nothing was
    /// written, and the offsets are the original ones.
    pub duplicate: bool,
}

/// A byte range of one segment file: whole batches, sendable without copying. Holding it
/// keeps the file open, so retention may unlink the segment meanwhile.
#[derive(Debug, Clone)]
pub struct ReadSlice {
    file: Arc<dyn StorageFile>,
    /// The segment file's id (`SegmentLog::id`), stable across cache evictions.
    segment: u64,
    pub position: u64,
    pub len: u32,
}

impl ReadSlice {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file descriptor for `sendfile`, for real files.
    #[must_use]
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.file.std_file().map(AsRawFd::as_raw_fd)
    }

    /// Copies the bytes into `buf` (resized to `len`), reusing its allocation.
    pub fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.resize(self.len as usize, 0);
        self.file.read_at(buf, self.position)
    }

    /// Visits the header of every batch in the slice, one positional read of
    /// `HEADER_BYTES` per batch (for callers that must look at codecs or timestamps
    /// without copying the records). A header that does not parse is `InvalidData`.
    pub fn for_each_header(&self, mut visit: impl FnMut(&batch::BatchHeader)) -> io::Result<()> {
        let mut header = [0u8; batch::HEADER_BYTES];
        let end = self.position + u64::from(self.len);
        let mut position = self.position;
        while position < end {
            self.file.read_at(&mut header, position)?;
            let parsed = batch::parse_header(&header)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            visit(&parsed);
            position += parsed.total_bytes() as u64;
        }
        Ok(())
    }

    /// Copies the bytes out (the fallback when zero-copy is not possible).
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len as usize];
        self.file.read_at(&mut buf, self.position)?;
        Ok(buf)
    }
}

/// What `write` feeds the producer state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Apply {
    /// No batch has a producer id.
    Nothing,
    /// Data batches (some with producer ids).
    Data,
    /// One transaction marker.
    Marker(Marker, i32),
    /// A leader's batches copied as they are (`replicated.rs`): data batches, and control
    /// batches whose marker is read from their record.
    Replicated,
}

/// What a validated append request holds.
struct Summary {
    records: u32,
    bytes: u32,
    /// Whether some batch carries a producer id (idempotent or transactional).
    has_producer: bool,
    /// Whether some batch is transactional with a producer id (client control batches are
    /// refused before storage).
    has_transactional: bool,
}

/// Who appends, for the transaction check (`txn_guard.rs`).
#[derive(Debug, Clone, Copy)]
enum Origin<'a> {
    /// The broker's own writers and tests: no verification.
    Trusted,
    /// A client: transactional batches only under this verified transaction.
    Client(Option<&'a TxnAppend<'a>>),
}

impl Log {
    /// Opens (creating if absent) the partition directory on the real filesystem.
    pub fn open(dir: &Path, config: LogConfig, now_ms: i64) -> Result<Log, StorageError> {
        Log::open_with(Arc::new(RealFs), dir, config, now_ms)
    }

    /// Opens over an injected filesystem; runs recovery (see `recovery.rs`).
    pub fn open_with(
        fs: Arc<dyn Fs>,
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Log, StorageError> {
        let cache = FileCache::new(crate::limits::SEGMENT_FILES_OPEN_PER_LOG_MAX);
        Log::open_shared(fs, &cache, dir, config, now_ms)
    }

    /// Like `open_with`, its sealed segments' files opened through `cache` (one per broker,
    /// so the broker's descriptors stay within the cache's bound plus one per partition).
    pub fn open_shared(
        fs: Arc<dyn Fs>,
        cache: &Arc<FileCache>,
        dir: &Path,
        config: LogConfig,
        now_ms: i64,
    ) -> Result<Log, StorageError> {
        config.validate()?;
        let files = Files {
            fs: Arc::clone(&fs),
            cache: Arc::clone(cache),
        };
        let recovered = recovery::recover(&files, dir, &config)?;
        let log_end = recovered
            .segments
            .last()
            .expect("recovery leaves a segment")
            .end_offset;
        let producers = producer::rebuild(
            fs.as_ref(),
            dir,
            &recovered.segments,
            recovered.log_start_offset,
        )?;
        let epochs = EpochCache::load(
            fs.as_ref(),
            dir,
            &recovered.segments,
            recovered.log_start_offset,
            log_end,
            recovered.clean,
        )?;
        tracing::info!(dir = %dir.display(), segments = recovered.segments.len(), log_start = %recovered.log_start_offset, %log_end, leader_epoch = epochs.current(), "opened log");
        Ok(Log {
            producers,
            verifications: Verifications::default(),
            epochs,
            cleaner: recovered.cleaner,
            tombstones_due_ms: None,
            fs,
            cache: files.cache,
            dir: dir.to_path_buf(),
            config,
            segments: recovered.segments,
            log_start_offset: recovered.log_start_offset,
            recovery_point: log_end,
            checkpointed_recovery_point: log_end,
            last_checkpoint_ms: now_ms,
            unflushed_records: 0,
            first_unflushed_ms: None,
            fenced: false,
            discard_pending: false,
            stale: false,
            generation: 0,
            durable_offset: log_end,
        })
    }

    #[must_use]
    pub fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    /// The next offset to be assigned (the high watermark on one node).
    #[must_use]
    pub fn log_end_offset(&self) -> Offset {
        self.active().end_offset
    }

    /// Bytes of all segments.
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.size_bytes)).sum()
    }

    #[must_use]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    #[must_use]
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    #[must_use]
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Applies to future appends, rolls and retention. An invalid config is refused and
    /// logged; use [`Log::try_set_config`] to get the error.
    pub fn set_config(&mut self, config: LogConfig) {
        if let Err(error) = self.try_set_config(config) {
            tracing::error!(dir = %self.dir.display(), %error, "refusing invalid log config");
        }
    }

    /// Like `set_config`, returning why a config is invalid.
    pub fn try_set_config(&mut self, config: LogConfig) -> Result<(), StorageError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// The filesystem and cache segments are opened with.
    pub(crate) fn files(&self) -> Files {
        Files {
            fs: Arc::clone(&self.fs),
            cache: Arc::clone(&self.cache),
        }
    }

    pub(crate) fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has a segment")
    }

    pub(crate) fn active_mut(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("a log always has a segment")
    }

    /// The current leader epoch (`epoch::UNDEFINED_EPOCH` if none began).
    #[must_use]
    pub fn leader_epoch(&self) -> i32 {
        self.epochs.current()
    }

    /// A new leadership of this log (the broker opened it): the next leader epoch begins at
    /// the log end, recorded durably before any append carries it. After a clean shutdown an
    /// epoch that holds no records is kept instead (nothing was read in it). Returns the
    /// epoch appends now carry.
    pub fn begin_next_leader_epoch(&mut self) -> Result<i32, StorageError> {
        let log_end = self.log_end_offset();
        if let Some(epoch) = self.epochs.reusable(log_end) {
            return Ok(epoch);
        }
        let next = self.epochs.current().saturating_add(1).max(0);
        self.epochs
            .begin(self.fs.as_ref(), &self.dir, next, log_end)?;
        Ok(next)
    }

    /// OffsetForLeaderEpoch: the largest epoch `<= requested` this log knows and the offset
    /// it ended at (the next epoch's start; the log end for the current one), or
    /// `(-1, -1)` for an epoch newer than any here.
    #[must_use]
    pub fn end_offset_for_leader_epoch(&self, requested: i32) -> (i32, i64) {
        self.epochs.end_offset_for(requested, self.log_end_offset())
    }

    /// The leader epoch `offset` was appended in (`-1` before every known epoch).
    #[must_use]
    pub fn leader_epoch_at(&self, offset: Offset) -> i32 {
        self.epochs.epoch_at(offset)
    }

    fn stamped_epoch(&self) -> i32 {
        match self.epochs.current() {
            crate::epoch::UNDEFINED_EPOCH => batch::PARTITION_LEADER_EPOCH,
            epoch => epoch,
        }
    }

    /// Validates, numbers and appends one or more concatenated batches, trusted as the
    /// broker's own (its internal logs, tests): a transactional batch needs no
    /// verification. Clients' batches go through [`Log::append_produced`].
    pub fn append(
        &mut self,
        batches: &mut [u8],
        durability: Durability,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_with(batches, durability, now_ms, Origin::Trusted)
    }

    /// Appends a client's batches (Produce, and the materialized transforms' runners, which
    /// produce as clients do): as [`Log::append`], and every transactional data batch must
    /// belong to `txn`, the transaction the coordinator verified
    /// ([`Log::start_txn_verification`]), else INVALID_TXN_STATE. With `txn` `None` no
    /// transactional batch is taken.
    pub fn append_produced(
        &mut self,
        batches: &mut [u8],
        durability: Durability,
        now_ms: i64,
        txn: Option<&TxnAppend<'_>>,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_with(batches, durability, now_ms, Origin::Client(txn))
    }

    /// Before a client's transactional append: whether it needs the coordinator's
    /// verification, and the guard to append with if so (`txn_guard.rs`). An epoch older
    /// than the producer's here is refused (INVALID_PRODUCER_EPOCH).
    pub fn start_txn_verification(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<Admission, AppendError> {
        self.verifications.start(
            &self.producers,
            transactional_id,
            producer_id,
            producer_epoch,
        )
    }

    fn append_with(
        &mut self,
        batches: &mut [u8],
        durability: Durability,
        now_ms: i64,
        origin: Origin<'_>,
    ) -> Result<AppendOutcome, AppendError> {
        if self.fenced {
            return Err(AppendError::Fenced);
        }
        let summary = self.validate(batches)?;
        if summary.has_producer
            && let Some(outcome) = self.check_producers(batches, origin)?
        {
            return Ok(outcome);
        }
        let base_offset = self.log_end_offset();
        let log_append_time_ms = match self.config.message_timestamp_type {
            TimestampType::LogAppendTime => now_ms,
            TimestampType::CreateTime => -1,
        };
        let last_offset = assign_offsets(
            batches,
            base_offset,
            self.stamped_epoch(),
            log_append_time_ms,
        );
        let apply = if summary.has_producer {
            Apply::Data
        } else {
            Apply::Nothing
        };
        self.write(batches, now_ms, apply)
            .map_err(|e| AppendError::Io(self.fence(e)))?;
        if let Origin::Client(Some(txn)) = origin
            && summary.has_transactional
        {
            self.verifications.appended(txn);
        }
        // From here the bytes are in the page cache: a failed fsync below loses them.
        assert_eq!(
            self.log_end_offset(),
            last_offset.plus(1),
            "append advanced the log end by its records"
        );
        self.unflushed_records += u64::from(summary.records);
        self.first_unflushed_ms.get_or_insert(now_ms);
        if self.unflushed_records >= self.config.flush_messages {
            self.flush()?;
        } else if durability == Durability::Fsync {
            self.sync_logs()?;
        }
        Ok(AppendOutcome {
            base_offset,
            last_offset,
            log_append_time_ms,
            log_start_offset: self.log_start_offset,
            record_count: summary.records,
            bytes: summary.bytes,
            duplicate: false,
        })
    }

    /// The producer checks of an append: `Some` (the original offsets) for a duplicate. A
    /// duplicate is answered before the transaction check, as Kafka does.
    fn check_producers(
        &self,
        batches: &[u8],
        origin: Origin<'_>,
    ) -> Result<Option<AppendOutcome>, AppendError> {
        let headers: Vec<batch::BatchHeader> = batch::iter_batches(batches)
            .map_while(Result::ok)
            .map(|(header, _)| header)
            .collect();
        match self.producers.check(&headers)? {
            Check::Append => {
                self.check_transactional(&headers, origin)?;
                Ok(None)
            }
            Check::Duplicate(original) => Ok(Some(AppendOutcome {
                base_offset: Offset(original.base_offset),
                last_offset: Offset(original.last_offset),
                log_append_time_ms: -1,
                log_start_offset: self.log_start_offset,
                record_count: 0,
                bytes: 0,
                duplicate: true,
            })),
        }
    }

    /// KIP-890: a client's transactional data batches must belong to the transaction the
    /// coordinator verified (`txn_guard.rs`).
    fn check_transactional(
        &self,
        headers: &[batch::BatchHeader],
        origin: Origin<'_>,
    ) -> Result<(), AppendError> {
        let Origin::Client(txn) = origin else {
            return Ok(());
        };
        // Kafka's `hasProducerId && isTransactional`: without a producer id a batch opens
        // no transaction.
        let transactional = headers
            .iter()
            .filter(|h| h.is_transactional() && h.producer_id != producer::NO_PRODUCER_ID);
        for header in transactional {
            let Some(txn) = txn else {
                return Err(AppendError::InvalidTxnState {
                    producer_id: header.producer_id,
                    reason: "a transactional batch without a verified transaction",
                });
            };
            self.verifications.admits(
                &self.producers,
                txn,
                header.producer_id,
                header.producer_epoch,
            )?;
        }
        Ok(())
    }

    /// Appends a transaction marker (COMMIT or ABORT) for `producer_id` at `epoch`: the
    /// coordinator's end of its transaction in this partition. Refused if the producer is
    /// at a newer epoch here.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: Marker,
        coordinator_epoch: i32,
        durability: Durability,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        if self.fenced {
            return Err(AppendError::Fenced);
        }
        self.producers.check_marker(producer_id, epoch)?;
        let mut bytes = batch::build_control_batch(
            producer_id,
            epoch,
            marker.type_code(),
            coordinator_epoch,
            now_ms,
        );
        let base_offset = self.log_end_offset();
        let last_offset = assign_offsets(&mut bytes, base_offset, self.stamped_epoch(), -1);
        self.write(&bytes, now_ms, Apply::Marker(marker, coordinator_epoch))
            .map_err(|e| AppendError::Io(self.fence(e)))?;
        self.verifications.marker_written(producer_id);
        self.unflushed_records += 1;
        self.first_unflushed_ms.get_or_insert(now_ms);
        if durability == Durability::Fsync {
            self.sync_logs()?;
        }
        Ok(AppendOutcome {
            base_offset,
            last_offset,
            log_append_time_ms: -1,
            log_start_offset: self.log_start_offset,
            record_count: 1,
            bytes: bytes.len() as u32,
            duplicate: false,
        })
    }

    /// The last stable offset: below it every transaction is decided (read_committed
    /// reads stop here).
    #[must_use]
    pub fn last_stable_offset(&self) -> Offset {
        self.producers.last_stable_offset(self.log_end_offset())
    }

    /// The oldest open transaction: its first offset (the last stable offset while it is
    /// open) and its producer id.
    #[must_use]
    pub fn first_open_transaction(&self) -> Option<(Offset, i64)> {
        self.producers
            .first_open_transaction()
            .map(|(first, producer_id)| (Offset(first), producer_id))
    }

    /// Aborted transactions overlapping `[from, upper)` (a read_committed fetch's list).
    #[must_use]
    pub fn aborted_transactions(&self, from: Offset, upper: Offset) -> Vec<AbortedTxn> {
        self.producers.aborted_between(from, upper)
    }

    /// The partition's producer state (DescribeProducers).
    #[must_use]
    pub fn producer_state(&self) -> &ProducerStateMap {
        &self.producers
    }

    /// Writes a producer-state snapshot at the log end (the state covers every batch).
    pub(crate) fn snapshot_producers(&self) -> io::Result<()> {
        producer::snapshot::write(
            self.fs.as_ref(),
            &self.dir,
            self.log_end_offset(),
            &self.producers,
        )
    }

    /// Checks every batch before anything is written.
    fn validate(&self, batches: &[u8]) -> Result<Summary, AppendError> {
        let limit = self.config.batch_bytes_limit();
        let (mut records, mut bytes) = (0u32, 0u32);
        let (mut has_producer, mut has_transactional) = (false, false);
        for item in batch::iter_batches(batches) {
            let (header, bytes_of_batch) = item.map_err(|e| too_large_or_invalid(e, limit))?;
            let batch_bytes = bytes_of_batch.len() as u32;
            if batch_bytes > limit {
                return Err(AppendError::TooLarge { batch_bytes, limit });
            }
            batch::validate(bytes_of_batch)?;
            records = records.saturating_add(header.records_count as u32);
            bytes = bytes.saturating_add(batch_bytes);
            has_producer |= header.producer_id != producer::NO_PRODUCER_ID;
            has_transactional |=
                header.is_transactional() && header.producer_id != producer::NO_PRODUCER_ID;
        }
        if records == 0 {
            return Err(BatchError::Empty.into());
        }
        Ok(Summary {
            records,
            bytes,
            has_producer,
            has_transactional,
        })
    }

    /// Writes numbered batches, rolling whenever the next one does not fit.
    /// The producer state takes each chunk's batches as soon as they are written, so a
    /// snapshot taken by a roll in the middle of an append covers every batch below it.
    pub(crate) fn write(&mut self, batches: &[u8], now_ms: i64, apply: Apply) -> io::Result<()> {
        let mut position = 0;
        while position < batches.len() {
            let first = batch::parse_header(&batches[position..]).expect("validated");
            if !self.active().can_take(&first, &self.config, now_ms) {
                self.roll()?;
            }
            let end = self.chunk_end(batches, position, now_ms);
            let config = self.config.clone();
            let chunk = &batches[position..end];
            self.active_mut().append(chunk, &config, now_ms)?;
            let marker = match apply {
                Apply::Nothing => {
                    position = end;
                    continue;
                }
                Apply::Replicated => {
                    for (header, bytes) in batch::iter_batches(chunk).map_while(Result::ok) {
                        let marker = header.is_control().then(|| {
                            batch::parse_control_record(bytes).and_then(|(code, epoch)| {
                                Marker::from_type_code(code).map(|m| (m, epoch))
                            })
                        });
                        self.producers.apply(&header, marker.flatten());
                    }
                    position = end;
                    continue;
                }
                Apply::Data => None,
                Apply::Marker(marker, coordinator_epoch) => Some((marker, coordinator_epoch)),
            };
            for (header, _) in batch::iter_batches(chunk).map_while(Result::ok) {
                self.producers.apply(&header, marker);
            }
            position = end;
        }
        Ok(())
    }

    /// End of the longest run of batches from `position` that the active segment takes
    /// (at least one: the caller rolled if the first did not fit).
    fn chunk_end(&self, batches: &[u8], position: usize, now_ms: i64) -> usize {
        let active = self.active();
        let mut end = position;
        let mut size = u64::from(active.size_bytes);
        let room = active.index_room();
        for (n, item) in batch::iter_batches(&batches[position..]).enumerate() {
            let (header, bytes) = item.expect("validated");
            let fits = size + bytes.len() as u64 <= u64::from(self.config.segment_bytes);
            let offsets_fit = header.last_offset() - active.base.value()
                <= crate::limits::SEGMENT_RELATIVE_OFFSET_MAX;
            if end > position
                && (!fits
                    || !offsets_fit
                    || n >= room
                    || active.is_due_to_roll(&self.config, now_ms))
            {
                break;
            }
            size += bytes.len() as u64;
            end += bytes.len();
        }
        end
    }

    /// Seals the active segment and starts a new one at the log end (directory fsynced).
    pub(crate) fn roll(&mut self) -> io::Result<()> {
        let base = self.log_end_offset();
        self.active_mut().seal()?;
        let segment = Segment::create(&self.files(), &self.dir, base, &self.config)?;
        self.fs.sync_dir(&self.dir)?;
        tracing::debug!(dir = %self.dir.display(), %base, "rolled segment");
        self.segments.push(segment);
        self.snapshot_producers()
    }

    /// Whole batches from the one containing `from`, up to `max_bytes` (at least one).
    pub fn read(&self, from: Offset, max_bytes: u32) -> Result<ReadSlice, ReadError> {
        if self.stale {
            return Err(ReadError::Io(io::Error::other(
                "the log is fenced and its reopen failed; reads wait for the next probe",
            )));
        }
        let (log_start, log_end) = (self.log_start_offset, self.log_end_offset());
        if from < log_start || from > log_end {
            return Err(ReadError::OffsetOutOfRange {
                requested: from,
                log_start,
                log_end,
            });
        }
        if from == log_end {
            let active = self.active();
            return Ok(ReadSlice {
                file: active.log_file()?,
                segment: active.log.id(),
                position: u64::from(active.size_bytes),
                len: 0,
            });
        }
        // A cleaned segment may hold nothing at or after `from` (removed records leave
        // gaps); the next segment then answers, as Kafka reads past a gap.
        for segment in &self.segments[self.segment_index_of(from)..] {
            let from = from.max(segment.base);
            if let Some((position, len)) = segment.read_range(from, max_bytes)? {
                return Ok(ReadSlice {
                    file: segment.log_file()?,
                    segment: segment.log.id(),
                    position: u64::from(position),
                    len,
                });
            }
        }
        unreachable!("the active segment holds every offset from its base to the log end")
    }

    /// Like `read`, but only batches below `upper` (a batch boundary: the last stable offset
    /// for read_committed fetches). Empty when `from >= upper`.
    pub fn read_below(
        &self,
        from: Offset,
        max_bytes: u32,
        upper: Offset,
    ) -> Result<ReadSlice, ReadError> {
        let mut slice = self.read(from, max_bytes)?;
        if upper >= self.log_end_offset() || slice.is_empty() {
            return Ok(slice);
        }
        if from >= upper {
            slice.len = 0;
            return Ok(slice);
        }
        // The slice's segment: the one holding `from`, or a later one past a cleaned gap.
        let slice_segment = self.segments[self.segment_index_of(from)..]
            .iter()
            .position(|s| s.log.id() == slice.segment)
            .map_or(usize::MAX, |i| i + self.segment_index_of(from));
        let upper_segment = self.segment_index_of(upper);
        if slice_segment > upper_segment {
            slice.len = 0;
        } else if upper_segment == slice_segment {
            let segment = &self.segments[upper_segment];
            let position = segment
                .locate(upper)?
                .map_or(segment.size_bytes, |(p, _)| p);
            let end = u64::from(position).max(slice.position);
            slice.len = slice.len.min((end - slice.position) as u32);
        }
        Ok(slice)
    }

    /// Index into `segments` of the segment holding `offset` (>= the first base).
    pub(crate) fn segment_index_of(&self, offset: Offset) -> usize {
        let after = self.segments.partition_point(|s| s.base <= offset);
        assert!(after > 0, "offset {offset} below the first segment");
        after - 1
    }

    /// The first offset whose record timestamp is >= `timestamp_ms`, with that timestamp
    /// (ListOffsets by time); `None` if every record is older.
    pub fn offset_for_timestamp(
        &self,
        timestamp_ms: i64,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        self.offset_for_timestamp_with(timestamp_ms, None)
    }

    /// Like `offset_for_timestamp`, exact in compressed batches too: `decompress` opens the
    /// batch holding the target (the storage engine itself links no codec).
    pub fn offset_for_timestamp_with(
        &self,
        timestamp_ms: i64,
        decompress: Option<Decompress<'_>>,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        if self.stale {
            return Err(StorageError::Fenced);
        }
        let first = self.segment_index_of(self.log_start_offset);
        for segment in self.segments[first..]
            .iter()
            .filter(|s| s.max_timestamp_ms >= timestamp_ms)
        {
            let found = segment.find_timestamp(timestamp_ms, self.log_start_offset, decompress)?;
            if let Some(found) = found {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The record with the largest timestamp and that timestamp (ListOffsets with timestamp
    /// -3, KIP-734), as Kafka finds it: the segment with the largest timestamp (the oldest of
    /// equals), its first batch reaching it, and in that batch the first record carrying it
    /// (Kafka's `offsetOfMaxTimestamp`; the batch's first offset when it is LogAppendTime, or
    /// compressed and `decompress` is `None`). `None` if no batch has a timestamp. The
    /// segments' largest timestamps come from their time indexes, sealed at every roll and
    /// rebuilt by recovery, so the answer survives both.
    pub fn max_timestamp_with(
        &self,
        decompress: Option<Decompress<'_>>,
    ) -> Result<Option<(Offset, i64)>, StorageError> {
        if self.stale {
            return Err(StorageError::Fenced);
        }
        let first = self.segment_index_of(self.log_start_offset);
        let newest = self.segments[first..]
            .iter()
            .filter(|s| s.max_timestamp_ms >= 0);
        let Some(segment) = newest.max_by_key(|s| (s.max_timestamp_ms, std::cmp::Reverse(s.base)))
        else {
            return Ok(None);
        };
        let found =
            segment.find_timestamp(segment.max_timestamp_ms, self.log_start_offset, decompress)?;
        Ok(found)
    }

    /// [`Log::max_timestamp_with`] without a codec.
    pub fn max_timestamp(&self) -> Result<Option<(Offset, i64)>, StorageError> {
        self.max_timestamp_with(None)
    }

    /// fsyncs the batches written since the last sync (acks=all), one fsync per segment
    /// touched. Indexes are left alone: they are rebuilt by recovery for everything past
    /// the recovery point, which only `flush` advances.
    fn sync_logs(&mut self) -> Result<(), AppendError> {
        let result = self
            .segments
            .iter_mut()
            .filter(|s| s.needs_sync)
            .try_for_each(Segment::sync_log);
        result.map_err(|e| AppendError::Io(self.fence_sync(e)))?;
        self.durable_offset = self.log_end_offset();
        Ok(())
    }

    /// fsyncs every segment written since the last flush; advances the recovery point.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        if self.fenced {
            return Err(StorageError::Fenced);
        }
        let result = self.segments.iter_mut().try_for_each(Segment::flush);
        result.map_err(|e| self.fence_sync(e))?;
        self.recovery_point = self.log_end_offset();
        self.durable_offset = self.recovery_point;
        self.unflushed_records = 0;
        self.first_unflushed_ms = None;
        Ok(())
    }

    /// Persists log start offset and recovery point (atomic write-and-rename).
    pub(crate) fn write_checkpoint(&mut self, now_ms: i64) -> Result<(), StorageError> {
        let checkpoint = Checkpoint {
            log_start_offset: self.log_start_offset,
            recovery_point: self.recovery_point,
        };
        checkpoint::write_checkpoint(self.fs.as_ref(), &self.dir, checkpoint)
            .map_err(|e| self.fence(e))?;
        self.checkpointed_recovery_point = self.recovery_point;
        self.last_checkpoint_ms = now_ms;
        Ok(())
    }

    /// Flushes, trims the active segment's indexes, persists the checkpoint and writes the
    /// clean-shutdown marker, so the next open trusts every segment without scanning.
    pub fn close(mut self) -> Result<(), StorageError> {
        self.flush()?;
        self.active_mut().seal().map_err(|e| self.fence(e))?;
        self.snapshot_producers().map_err(|e| self.fence(e))?;
        self.write_checkpoint(self.last_checkpoint_ms)?;
        let log_end = self.log_end_offset();
        checkpoint::write_clean_shutdown(self.fs.as_ref(), &self.dir, log_end)
            .map_err(|e| self.fence(e))?;
        tracing::info!(dir = %self.dir.display(), %log_end, "closed log cleanly");
        Ok(())
    }
}

/// A `batchLength` above every limit is a too-large batch (MESSAGE_TOO_LARGE), not a
/// malformed one.
fn too_large_or_invalid(error: BatchError, limit: u32) -> AppendError {
    match error {
        BatchError::BadLength {
            batch_length, max, ..
        } if batch_length > 0 && batch_length as u32 > max => AppendError::TooLarge {
            batch_bytes: (batch_length as u32)
                .saturating_add(crate::limits::BATCH_LOG_OVERHEAD_BYTES),
            limit,
        },
        other => AppendError::InvalidBatch(other),
    }
}

/// Rewrites base offsets (and leader epoch, and log-append time) of validated batches;
/// returns the last offset assigned.
fn assign_offsets(
    batches: &mut [u8],
    base_offset: Offset,
    leader_epoch: i32,
    log_append_time_ms: i64,
) -> Offset {
    let mut next = base_offset.value();
    let mut position = 0;
    while position < batches.len() {
        let header = batch::parse_header(&batches[position..]).expect("validated");
        let bytes = &mut batches[position..position + header.total_bytes()];
        batch::set_base_offset(bytes, next);
        batch::set_partition_leader_epoch(bytes, leader_epoch);
        if log_append_time_ms >= 0 {
            batch::set_log_append_time(bytes, log_append_time_ms);
        }
        next += i64::from(header.last_offset_delta) + 1;
        position += header.total_bytes();
    }
    Offset(next - 1)
}
