//! Producer-state snapshots: `<20-digit offset>.snapshot` beside the segments, the state
//! derived from every batch below that offset, so opening the log replays only the batches
//! after the newest snapshot. Written with `io::write_durable` at every roll, at the
//! periodic checkpoint and at close; the newest [`limits::PRODUCER_SNAPSHOTS_KEPT`] are
//! kept. A snapshot past the recovered log end (its batches were lost in a crash) is
//! deleted when the log opens; one that does not decode is skipped for an older one.
//!
//! Layout (big-endian), ending in a CRC-32C of everything before it:
//! `magic u32 "SLPS" | version u16 = 1 | offset i64 | producers u32 |`
//! per producer `id i64 | epoch i16 | coordinator_epoch i32 | last_timestamp i64 |
//! txn_first_offset i64 (-1: none) | batches u8 |` per batch `first_seq i32 | last_seq i32 |
//! base_offset i64 | last_offset i64 | max_timestamp i64`, then
//! `aborted u32 |` per aborted transaction `producer_id i64 | first_offset i64 | last_offset i64`
//! `| crc u32`.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use sluice_kafka::bytes::{ReadError, Reader, Writer};

use super::{AbortedTxn, BatchMeta, ProducerEntry, ProducerStateMap};
use crate::io::Fs;
use crate::limits;
use crate::offset::Offset;

pub(crate) const SNAPSHOT_EXT: &str = "snapshot";
const MAGIC: u32 = u32::from_be_bytes(*b"SLPS");
const VERSION: u16 = 1;
const PRODUCER_FIXED_BYTES: usize = 8 + 2 + 4 + 8 + 8 + 1;
const BATCH_BYTES: usize = 4 + 4 + 8 + 8 + 8;
const ABORTED_BYTES: usize = 24;

fn path_of(dir: &Path, offset: Offset) -> PathBuf {
    dir.join(format!(
        "{:0width$}.{SNAPSHOT_EXT}",
        offset.value(),
        width = limits::SEGMENT_NAME_DIGITS
    ))
}

/// Offsets of the snapshot files in `dir`, ascending.
pub(crate) fn list(fs: &dyn Fs, dir: &Path) -> io::Result<Vec<Offset>> {
    let mut offsets: Vec<Offset> = fs
        .list(dir)?
        .iter()
        .filter_map(|name| {
            let stem = name.strip_suffix(SNAPSHOT_EXT)?.strip_suffix('.')?;
            (stem.len() == limits::SEGMENT_NAME_DIGITS && stem.bytes().all(|b| b.is_ascii_digit()))
                .then(|| stem.parse().ok().map(Offset))
                .flatten()
        })
        .collect();
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes the snapshot at `offset` and removes all but the newest `PRODUCER_SNAPSHOTS_KEPT`.
pub(crate) fn write(
    fs: &dyn Fs,
    dir: &Path,
    offset: Offset,
    state: &ProducerStateMap,
) -> io::Result<()> {
    crate::io::write_durable(fs, &path_of(dir, offset), &encode(offset, state))?;
    let offsets = list(fs, dir)?;
    let old = offsets
        .len()
        .saturating_sub(limits::PRODUCER_SNAPSHOTS_KEPT);
    for &stale in &offsets[..old] {
        fs.remove(&path_of(dir, stale))?;
    }
    Ok(())
}

/// Removes every snapshot (not durably: the caller fsyncs `dir`), for
/// `Log::truncate_fully_and_start_at`.
pub(crate) fn remove_all(fs: &dyn Fs, dir: &Path) -> io::Result<()> {
    for offset in list(fs, dir)? {
        fs.remove(&path_of(dir, offset))?;
    }
    Ok(())
}

/// The newest snapshot at or below `log_end` that decodes, after deleting those above it.
pub(crate) fn load_newest(
    fs: &dyn Fs,
    dir: &Path,
    log_end: Offset,
) -> io::Result<Option<(Offset, ProducerStateMap)>> {
    let offsets = list(fs, dir)?;
    for &offset in offsets.iter().filter(|&&o| o > log_end) {
        tracing::info!(dir = %dir.display(), %offset, %log_end, "removing a producer snapshot past the log end");
        crate::io::remove_file_durable(fs, &path_of(dir, offset))?;
    }
    for &offset in offsets.iter().rev().filter(|&&o| o <= log_end) {
        let path = path_of(dir, offset);
        let file = fs.open(&path, false)?;
        if file.len()? > limits::PRODUCER_SNAPSHOT_BYTES_MAX {
            tracing::warn!(path = %path.display(), limit = limits::PRODUCER_SNAPSHOT_BYTES_MAX, "producer snapshot larger than PRODUCER_SNAPSHOT_BYTES_MAX; skipping it");
            continue;
        }
        let bytes = crate::io::read_all(file.as_ref())?;
        match decode(&bytes) {
            Ok((at, state)) if at == offset => return Ok(Some((offset, state))),
            Ok((at, _)) => {
                tracing::warn!(path = %path.display(), inner = %at, "producer snapshot names another offset; skipping it");
            }
            Err(reason) => {
                tracing::warn!(path = %path.display(), %reason, "corrupt producer snapshot; skipping it");
            }
        }
    }
    Ok(None)
}

/// Why a snapshot file is not used (it is skipped for an older one).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Fewer bytes than the CRC at its end.
    #[error("shorter than its CRC")]
    Short,
    /// The CRC-32C does not match the bytes before it.
    #[error("CRC mismatch")]
    Crc,
    /// Not a producer snapshot.
    #[error("bad magic")]
    Magic,
    /// A version this build does not read.
    #[error("unknown version {0}")]
    Version(u16),
    /// A producer with more batches than [`limits::PRODUCER_BATCHES_RETAINED`].
    #[error("producer {producer_id} with {batches} batches")]
    Batches {
        /// The producer.
        producer_id: i64,
        /// Its batch count.
        batches: usize,
    },
    /// A field cut short, a count the bytes cannot hold, or trailing bytes.
    #[error(transparent)]
    Read(#[from] ReadError),
}

#[must_use]
pub fn encode(offset: Offset, state: &ProducerStateMap) -> Vec<u8> {
    let mut w = Writer::with_capacity(
        32 + state.producers.len() * (PRODUCER_FIXED_BYTES + 2 * BATCH_BYTES)
            + state.aborted.len() * ABORTED_BYTES,
    );
    w.u32(MAGIC).u16(VERSION).i64(offset.value());
    let mut producers: Vec<&ProducerEntry> = state.producers.values().collect();
    producers.sort_unstable_by_key(|e| e.producer_id);
    w.count_u32(producers.len());
    for e in producers {
        w.i64(e.producer_id).i16(e.epoch).i32(e.coordinator_epoch);
        w.i64(e.last_timestamp_ms)
            .i64(e.txn_first_offset.unwrap_or(-1));
        w.u8(e.batches.len() as u8);
        for b in &e.batches {
            w.i32(b.first_seq).i32(b.last_seq);
            w.i64(b.base_offset)
                .i64(b.last_offset)
                .i64(b.max_timestamp_ms);
        }
    }
    w.count_u32(state.aborted.len());
    for t in &state.aborted {
        w.i64(t.producer_id).i64(t.first_offset).i64(t.last_offset);
    }
    let crc = crc32c::crc32c(w.as_slice());
    w.u32(crc);
    w.into_bytes()
}

/// Decodes a snapshot (strictly: CRC, magic, version, counts bounded by the bytes).
pub fn decode(bytes: &[u8]) -> Result<(Offset, ProducerStateMap), SnapshotError> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err(SnapshotError::Short);
    };
    let (body, crc) = bytes.split_at(body_len);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
        return Err(SnapshotError::Crc);
    }
    let mut r = Reader::new(body);
    if r.u32("magic")? != MAGIC {
        return Err(SnapshotError::Magic);
    }
    let version = r.u16("version")?;
    if version != VERSION {
        return Err(SnapshotError::Version(version));
    }
    let offset = Offset(r.i64("offset")?);
    let mut state = ProducerStateMap::new();
    for _ in 0..r.count_u32("producers", PRODUCER_FIXED_BYTES)? {
        let entry = decode_producer(&mut r)?;
        if let Some(first) = entry.txn_first_offset {
            state.ongoing.insert(first, entry.producer_id);
        }
        state.producers.insert(entry.producer_id, entry);
    }
    let aborted = r.count_u32("aborted transactions", ABORTED_BYTES)?;
    state.aborted = VecDeque::with_capacity(aborted);
    for _ in 0..aborted {
        state.aborted.push_back(AbortedTxn {
            producer_id: r.i64("producer id")?,
            first_offset: r.i64("first offset")?,
            last_offset: r.i64("last offset")?,
        });
    }
    r.finish()?;
    Ok((offset, state))
}

fn decode_producer(r: &mut Reader<'_>) -> Result<ProducerEntry, SnapshotError> {
    let producer_id = r.i64("producer id")?;
    let epoch = r.i16("epoch")?;
    let coordinator_epoch = r.i32("coordinator epoch")?;
    let last_timestamp_ms = r.i64("last timestamp")?;
    let txn_first_offset = Some(r.i64("transaction first offset")?).filter(|&o| o >= 0);
    let batches = usize::from(r.u8("batches")?);
    if batches > limits::PRODUCER_BATCHES_RETAINED {
        return Err(SnapshotError::Batches {
            producer_id,
            batches,
        });
    }
    let mut entry = ProducerEntry {
        producer_id,
        epoch,
        batches: VecDeque::with_capacity(batches),
        txn_first_offset,
        coordinator_epoch,
        last_timestamp_ms,
    };
    for _ in 0..batches {
        entry.batches.push_back(BatchMeta {
            first_seq: r.i32("first sequence")?,
            last_seq: r.i32("last sequence")?,
            base_offset: r.i64("base offset")?,
            last_offset: r.i64("last offset")?,
            max_timestamp_ms: r.i64("max timestamp")?,
        });
    }
    Ok(entry)
}
