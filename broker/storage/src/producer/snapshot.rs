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

#[must_use]
pub fn encode(offset: Offset, state: &ProducerStateMap) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        32 + state.producers.len() * (PRODUCER_FIXED_BYTES + 2 * BATCH_BYTES)
            + state.aborted.len() * ABORTED_BYTES,
    );
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&offset.value().to_be_bytes());
    let mut producers: Vec<&ProducerEntry> = state.producers.values().collect();
    producers.sort_unstable_by_key(|e| e.producer_id);
    out.extend_from_slice(&(producers.len() as u32).to_be_bytes());
    for e in producers {
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.last_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
        out.push(e.batches.len() as u8);
        for b in &e.batches {
            out.extend_from_slice(&b.first_seq.to_be_bytes());
            out.extend_from_slice(&b.last_seq.to_be_bytes());
            out.extend_from_slice(&b.base_offset.to_be_bytes());
            out.extend_from_slice(&b.last_offset.to_be_bytes());
            out.extend_from_slice(&b.max_timestamp_ms.to_be_bytes());
        }
    }
    out.extend_from_slice(&(state.aborted.len() as u32).to_be_bytes());
    for t in &state.aborted {
        out.extend_from_slice(&t.producer_id.to_be_bytes());
        out.extend_from_slice(&t.first_offset.to_be_bytes());
        out.extend_from_slice(&t.last_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// A bounds-checked big-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let end = self.at.checked_add(N).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("cut off at byte {}", self.at))?;
        let out = self.bytes[self.at..end].try_into().expect("N bytes");
        self.at = end;
        Ok(out)
    }
    fn i64(&mut self) -> Result<i64, String> {
        self.take::<8>().map(i64::from_be_bytes)
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.take::<4>().map(i32::from_be_bytes)
    }
    fn u32(&mut self) -> Result<u32, String> {
        self.take::<4>().map(u32::from_be_bytes)
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.take::<2>().map(i16::from_be_bytes)
    }
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
    /// A count of items of at least `item_bytes` each, refused if the bytes cannot hold it.
    fn count(&mut self, item_bytes: usize, what: &str) -> Result<usize, String> {
        let count = self.u32()? as usize;
        if count.saturating_mul(item_bytes) > self.left() {
            return Err(format!(
                "{count} {what} cannot fit in {} bytes",
                self.left()
            ));
        }
        Ok(count)
    }
}

/// Decodes a snapshot (strictly: CRC, magic, version, counts bounded by the bytes).
pub fn decode(bytes: &[u8]) -> Result<(Offset, ProducerStateMap), String> {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return Err("shorter than its CRC".into());
    };
    let (body, crc) = bytes.split_at(body_len);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().expect("4 bytes")) {
        return Err("CRC mismatch".into());
    }
    let mut r = Reader { bytes: body, at: 0 };
    if r.u32()? != MAGIC {
        return Err("bad magic".into());
    }
    let version = r.take::<2>().map(u16::from_be_bytes)?;
    if version != VERSION {
        return Err(format!("unknown version {version}"));
    }
    let offset = Offset(r.i64()?);
    let mut state = ProducerStateMap::new();
    for _ in 0..r.count(PRODUCER_FIXED_BYTES, "producers")? {
        let entry = decode_producer(&mut r)?;
        if let Some(first) = entry.txn_first_offset {
            state.ongoing.insert(first, entry.producer_id);
        }
        state.producers.insert(entry.producer_id, entry);
    }
    let aborted = r.count(ABORTED_BYTES, "aborted transactions")?;
    state.aborted = VecDeque::with_capacity(aborted);
    for _ in 0..aborted {
        state.aborted.push_back(AbortedTxn {
            producer_id: r.i64()?,
            first_offset: r.i64()?,
            last_offset: r.i64()?,
        });
    }
    if r.left() != 0 {
        return Err(format!("{} trailing bytes", r.left()));
    }
    Ok((offset, state))
}

fn decode_producer(r: &mut Reader<'_>) -> Result<ProducerEntry, String> {
    let producer_id = r.i64()?;
    let epoch = r.i16()?;
    let coordinator_epoch = r.i32()?;
    let last_timestamp_ms = r.i64()?;
    let txn_first_offset = Some(r.i64()?).filter(|&o| o >= 0);
    let batches = usize::from(r.take::<1>()?[0]);
    if batches > limits::PRODUCER_BATCHES_RETAINED {
        return Err(format!("producer {producer_id} with {batches} batches"));
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
            first_seq: r.i32()?,
            last_seq: r.i32()?,
            base_offset: r.i64()?,
            last_offset: r.i64()?,
            max_timestamp_ms: r.i64()?,
        });
    }
    Ok(entry)
}
