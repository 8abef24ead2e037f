//! The Raft log of the metadata quorum on a `sluice_storage::Log`: openraft's
//! `RaftLogStorage` ([`MetaLogStore`]) and `RaftLogReader` ([`MetaLogReader`]).
//!
//! Layout of the store's directory: `log/` is the partition log (one record batch per entry,
//! offset = Raft index, `entry_codec.rs`), `quorum-state` the vote, committed log id and purge
//! mark (`quorum_state.rs`). So the Raft log inherits the partition log's recovery (a torn
//! last entry is cut off at open), fencing, and fault sweeps.
//!
//! openraft's storage rules, and how each holds:
//! - *Writes serialized, entries readable when `append` returns, no holes*: every call takes
//!   the one lock over the log; `append` refuses an entry whose index is not the log end, and
//!   the log assigns offsets contiguously from its end.
//! - *The flush callback fires only after the fsync*: `append` writes with
//!   `Durability::Fsync` and calls it after the log returns.
//! - *`save_vote` durable before it returns*: `quorum-state` goes through `write_durable`;
//!   `save_committed` likewise (so a restart re-applies up to it).
//! - *`truncate_after`*: `Log::truncate_to` (crash-safe, swept in the storage crate).
//! - *`purge`*: the purge mark is written to `quorum-state` first, then the log start offset
//!   advances (`advance_log_start_offset`, or `truncate_fully_and_start_at` when openraft
//!   purges past the last entry, after a snapshot install); `open` completes a purge a crash
//!   interrupted. The purge mark is `last_purged_log_id`.
//! - *Reads are atomic*: a read holds the lock; `limited_get_log_entries` stops after
//!   `LIMITED_READ_BYTES_MAX` (at least one entry).
//!
//! Storage calls block on disk, so each runs on tokio's blocking pool (the server's
//! Architecture Invariant), the reads of in-memory state too: they wait for the lock an
//! fsync may hold. Any I/O error is returned to openraft, which treats it as fatal
//! and stops this Raft instance; the log is fenced meanwhile (docs/design/cluster-brief.md §2.7: the
//! supervisor that rebuilds the instance is future work).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{IOFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use sluice_storage::{Durability, Fs, Log, LogConfig, Offset, RealFs};

use super::entry_codec;
use super::limits::{
    ENTRY_BATCH_BYTES_MAX, LIMITED_READ_BYTES_MAX, LOG_READ_CHUNK_BYTES, METADATA_SEGMENT_BYTES,
};
use super::quorum_state::QuorumState;
use super::types::{Entry, LogId, MetaTypes, Vote};

/// The partition log's directory inside the store's.
const LOG_DIR: &str = "log";

/// The metadata log's storage for openraft. Cheap to clone handles share one log.
#[derive(Debug, Clone)]
pub struct MetaLogStore {
    inner: Arc<Mutex<LogInner>>,
}

/// A reader of the same log (openraft's replication tasks read through these).
#[derive(Debug, Clone)]
pub struct MetaLogReader {
    inner: Arc<Mutex<LogInner>>,
}

#[derive(Debug)]
struct LogInner {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    log: Log,
    state: QuorumState,
    /// The last entry's log id, or the purge mark when the log is empty.
    last_log_id: Option<LogId>,
}

/// The metadata log's `Log` settings: never retention (only `purge` removes entries, and
/// openraft requires a log without holes), never compaction, small segments.
fn log_config() -> LogConfig {
    LogConfig {
        segment_bytes: METADATA_SEGMENT_BYTES,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: ENTRY_BATCH_BYTES_MAX,
        ..LogConfig::default()
    }
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since_epoch.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn storage_error(error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("metadata log: {error}"))
}

fn offset_of(index: u64) -> io::Result<Offset> {
    i64::try_from(index)
        .map(Offset)
        .map_err(|_| io::Error::other(format!("raft index {index} past the log's offsets")))
}

fn index_of(offset: Offset) -> u64 {
    u64::try_from(offset.value()).expect("log offsets are never negative")
}

impl MetaLogStore {
    /// Opens (creating) the store in `dir` on the real filesystem.
    pub fn open(dir: &Path) -> io::Result<MetaLogStore> {
        MetaLogStore::open_with(Arc::new(RealFs), dir)
    }

    /// Opens over an injected filesystem: recovers the log, loads `quorum-state`, completes
    /// an interrupted purge and checks the two agree.
    pub fn open_with(fs: Arc<dyn Fs>, dir: &Path) -> io::Result<MetaLogStore> {
        sluice_storage::io::create_dir_durable(fs.as_ref(), dir)?;
        let state = QuorumState::load(fs.as_ref(), dir)?;
        let log_dir = dir.join(LOG_DIR);
        let log = Log::open_with(Arc::clone(&fs), &log_dir, log_config(), now_ms())
            .map_err(storage_error)?;
        let mut inner = LogInner {
            fs,
            dir: dir.to_path_buf(),
            log,
            state,
            last_log_id: None,
        };
        inner.finish_purge()?;
        inner.last_log_id = inner.read_last_log_id()?.or(inner.state.purged);
        tracing::info!(dir = %dir.display(), log_start = %inner.log.log_start_offset(), log_end = %inner.log.log_end_offset(), vote = ?inner.state.vote, committed = ?inner.state.committed, "opened the metadata log");
        Ok(MetaLogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }
}

/// Runs `f` on the log under its lock, on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    inner: &Arc<Mutex<LogInner>>,
    f: impl FnOnce(&mut LogInner) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let inner = Arc::clone(inner);
    let task = tokio::task::spawn_blocking(move || f(&mut *lock(&inner)?));
    task.await.map_err(io::Error::other)?
}

fn lock(inner: &Mutex<LogInner>) -> io::Result<std::sync::MutexGuard<'_, LogInner>> {
    inner
        .lock()
        .map_err(|_| io::Error::other("metadata log lock poisoned by a panic"))
}

/// `[start, end)` of a range of indexes.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl LogInner {
    fn log_start(&self) -> u64 {
        index_of(self.log.log_start_offset())
    }

    fn log_end(&self) -> u64 {
        index_of(self.log.log_end_offset())
    }

    /// After a crash between writing the purge mark and moving the log start: moves it, so
    /// the log never starts before the entry after the purge mark. (It may start later: the
    /// first append to an empty log starts it at that entry's index.)
    fn finish_purge(&mut self) -> io::Result<()> {
        let purged_end = self.state.purged.map_or(0, |p| p.index + 1);
        if self.log_start() < purged_end {
            tracing::warn!(dir = %self.dir.display(), log_start = self.log_start(), purged_end, "completing an interrupted purge of the metadata log");
            self.move_start(purged_end)?;
        }
        assert!(
            self.log_start() >= purged_end,
            "the log starts after its purge mark"
        );
        Ok(())
    }

    /// Moves the log start to `start` (past the end too: the log is then emptied there).
    fn move_start(&mut self, start: u64) -> io::Result<()> {
        let offset = offset_of(start)?;
        let moved = if start <= self.log_end() {
            self.log
                .advance_log_start_offset(offset, now_ms())
                .map(|_| ())
        } else {
            self.log.truncate_fully_and_start_at(offset, now_ms())
        };
        moved.map_err(storage_error)
    }

    fn read_last_log_id(&self) -> io::Result<Option<LogId>> {
        let end = self.log_end();
        if end == self.log_start() {
            return Ok(None);
        }
        let last = self.read_entries(end - 1, end, None)?;
        Ok(last.last().map(|e| e.log_id))
    }

    /// Entries `[start, end)` clipped to the log; with a cap, stops once that many bytes
    /// were read (at least one entry). A missing entry inside is an error (a hole).
    fn read_entries(
        &self,
        start: u64,
        end: u64,
        cap_bytes: Option<usize>,
    ) -> io::Result<Vec<Entry>> {
        let (first, last) = (start.max(self.log_start()), end.min(self.log_end()));
        let (mut out, mut next, mut read_bytes) = (Vec::new(), first, 0usize);
        while next < last {
            let slice = self
                .log
                .read(offset_of(next)?, LOG_READ_CHUNK_BYTES)
                .map_err(storage_error)?;
            let bytes = slice.read_to_vec()?;
            if bytes.is_empty() {
                return Err(storage_error(format!(
                    "no entry at {next} below the end {last}"
                )));
            }
            read_bytes += bytes.len();
            for entry in entry_codec::decode(bytes)? {
                if entry.log_id.index < next {
                    continue;
                }
                if next >= last {
                    break;
                }
                if entry.log_id.index != next {
                    return Err(storage_error(format!(
                        "entry {} where {next} was expected (a hole)",
                        entry.log_id.index
                    )));
                }
                out.push(entry);
                next += 1;
            }
            if cap_bytes.is_some_and(|cap| read_bytes >= cap) {
                break;
            }
        }
        Ok(out)
    }

    fn append(&mut self, entries: Vec<Entry>) -> io::Result<()> {
        let Some(last) = entries.last().map(|e| e.log_id) else {
            return Ok(());
        };
        let first = entries[0].log_id.index;
        let purged_end = self.state.purged.map_or(0, |p| p.index + 1);
        if self.log_end() == self.log_start() && first != self.log_end() && first >= purged_end {
            // An empty log takes its first entry at any index after the purge mark.
            self.log
                .truncate_fully_and_start_at(offset_of(first)?, now_ms())
                .map_err(storage_error)?;
        }
        let (first_index, now) = (self.log_end(), now_ms());
        let mut batches = Vec::new();
        for (i, entry) in entries.iter().enumerate() {
            let expected = first_index + i as u64;
            if entry.log_id.index != expected {
                return Err(io::Error::other(format!(
                    "metadata log: entry {} appended where the log ends at {expected} (a hole)",
                    entry.log_id.index
                )));
            }
            batches.extend(entry_codec::encode(entry, now)?);
        }
        let outcome = self
            .log
            .append(&mut batches, Durability::Fsync, now)
            .map_err(storage_error)?;
        assert_eq!(
            (index_of(outcome.base_offset), index_of(outcome.last_offset)),
            (first_index, last.index),
            "offsets are the entries' indexes"
        );
        self.last_log_id = Some(last);
        Ok(())
    }

    fn truncate_after(&mut self, last_kept: Option<LogId>) -> io::Result<()> {
        let cut = last_kept.map_or(0, |l| l.index + 1);
        if cut < self.log_start() {
            return Err(io::Error::other(format!(
                "metadata log: truncate after {cut} below the log start {} (purged entries)",
                self.log_start()
            )));
        }
        if cut >= self.log_end() {
            return Ok(());
        }
        self.log
            .truncate_to(offset_of(cut)?, now_ms())
            .map_err(storage_error)?;
        self.last_log_id = if cut > self.log_start() {
            last_kept
        } else {
            self.state.purged
        };
        Ok(())
    }

    fn purge(&mut self, upto: LogId) -> io::Result<()> {
        if self.state.purged.is_some_and(|p| p.index >= upto.index) {
            return Ok(());
        }
        let mut next = self.state.clone();
        next.purged = Some(upto);
        next.store(self.fs.as_ref(), &self.dir)?;
        self.state = next;
        self.move_start(upto.index + 1)?;
        if self.log_end() == self.log_start()
            && self.last_log_id.is_none_or(|l| l.index < upto.index)
        {
            self.last_log_id = Some(upto);
        }
        Ok(())
    }

    fn save_state(&mut self, change: impl FnOnce(&mut QuorumState)) -> io::Result<()> {
        let mut next = self.state.clone();
        change(&mut next);
        next.store(self.fs.as_ref(), &self.dir)?;
        self.state = next;
        Ok(())
    }
}

impl RaftLogReader<MetaTypes> for MetaLogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = bounds(&range);
        blocking(&self.inner, move |log| log.read_entries(start, end, None)).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        blocking(&self.inner, |log| Ok(log.state.vote)).await
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<Entry>, io::Error> {
        blocking(&self.inner, move |log| {
            log.read_entries(start, end, Some(LIMITED_READ_BYTES_MAX))
        })
        .await
    }
}

impl RaftLogStorage<MetaTypes> for MetaLogStore {
    type LogReader = MetaLogReader;

    async fn get_log_state(&mut self) -> Result<LogState<MetaTypes>, io::Error> {
        blocking(&self.inner, |log| {
            Ok(LogState {
                last_purged_log_id: log.state.purged,
                last_log_id: log.last_log_id,
            })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        MetaLogReader {
            inner: Arc::clone(&self.inner),
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let vote = *vote;
        blocking(&self.inner, move |log| {
            log.save_state(|s| s.vote = Some(vote))
        })
        .await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        blocking(&self.inner, move |log| {
            log.save_state(|s| s.committed = committed)
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        blocking(&self.inner, |log| Ok(log.state.committed)).await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<MetaTypes>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        blocking(&self.inner, move |log| log.append(entries)).await?;
        callback.io_completed(Ok(()));
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        blocking(&self.inner, move |log| log.truncate_after(last_log_id)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        blocking(&self.inner, move |log| log.purge(log_id)).await
    }
}
