//! The leader epoch cache: at which offset each leader epoch began, so that a client that
//! read up to some offset in epoch `E` can ask where `E` ended here (OffsetForLeaderEpoch)
//! and detect a truncation (KIP-101, KIP-320).
//!
//! `leader-epoch.checkpoint` beside the segments, written with `io::write_durable`:
//! `"SLEP" | version u16 = 1 | reserved u16 = 0 | count u32 | count x (epoch i32,
//! start_offset i64) | crc u32` (CRC-32C of the bytes before it). Epochs strictly increase
//! and start offsets never decrease. The file is only ever trusted up to the log: at open
//! (and after a reopen) entries starting past the log end are dropped (the records of that
//! epoch were lost with a torn tail) are moved back to it, never forgotten, so the next
//! epoch is still newer than every epoch a reader may have seen; those wholly below the log
//! start are folded into one starting at the log start. A file that is missing (a log
//! written before epochs were kept) or does not decode is rebuilt from the batches'
//! `partitionLeaderEpoch` fields.

use crate::batch::BatchHeader;
use crate::error::StorageError;
use crate::io::{self, Fs};
use crate::limits::LEADER_EPOCH_ENTRIES_MAX;
use crate::offset::Offset;
use crate::segment::Segment;
use std::path::Path;

pub(crate) const EPOCH_FILE: &str = "leader-epoch.checkpoint";
const MAGIC: &[u8; 4] = b"SLEP";
const VERSION: u16 = 1;
/// Magic, version, reserved, count.
const HEAD_BYTES: usize = 12;
const ENTRY_BYTES: usize = 12;
const CRC_BYTES: usize = 4;

/// Kafka's "no epoch" / "no offset" answer (`UNDEFINED_EPOCH`, `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_OFFSET: i64 = -1;

/// One leader epoch and the first offset appended in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: Offset,
}

/// The in-memory cache; entries sorted by epoch and start offset, at most
/// `LEADER_EPOCH_ENTRIES_MAX`.
#[derive(Debug, Default, Clone)]
pub(crate) struct EpochCache {
    entries: Vec<EpochEntry>,
    /// The log was opened after a clean shutdown: nothing appended in the latest epoch can
    /// have been lost, so a leadership that finds it empty may keep it.
    clean: bool,
}

impl EpochCache {
    /// Reads (or rebuilds) the cache of the log in `dir` and fits it to `[log_start, log_end]`.
    pub(crate) fn load(
        fs: &dyn Fs,
        dir: &Path,
        segments: &[Segment],
        log_start: Offset,
        log_end: Offset,
        clean: bool,
    ) -> Result<EpochCache, StorageError> {
        let read = crate::checkpoint::read_optional(fs, &dir.join(EPOCH_FILE))?;
        let entries = match read.as_deref().map(decode) {
            Some(Ok(entries)) => entries,
            Some(Err(error)) => {
                tracing::warn!(dir = %dir.display(), %error, "rebuilding the leader epoch cache from the batches");
                scan(segments)?
            }
            None => scan(segments)?,
        };
        let mut cache = EpochCache { entries, clean };
        cache.truncate_tail(log_end);
        cache.truncate_head(log_start);
        Ok(cache)
    }

    /// The latest epoch, or `UNDEFINED_EPOCH` if none began.
    pub(crate) fn current(&self) -> i32 {
        self.entries.last().map_or(UNDEFINED_EPOCH, |e| e.epoch)
    }

    /// The latest epoch if a new leadership may keep it: it holds no records and the log
    /// was shut down cleanly (after a crash, records of it may have been lost and read).
    pub(crate) fn reusable(&self, log_end: Offset) -> Option<i32> {
        let latest = self.entries.last()?;
        (self.clean && latest.start_offset == log_end).then_some(latest.epoch)
    }

    /// Records (durably, before any append in it) that `epoch` begins at `start` (the log
    /// end). Entries starting at or after `start` held no records and are replaced.
    pub(crate) fn begin(
        &mut self,
        fs: &dyn Fs,
        dir: &Path,
        epoch: i32,
        start: Offset,
    ) -> Result<(), StorageError> {
        if epoch <= self.current() {
            return Err(StorageError::Corrupt {
                what: EPOCH_FILE.to_owned(),
                reason: format!(
                    "leader epoch {epoch} is not after the current {}",
                    self.current()
                ),
            });
        }
        let mut next = self.clone();
        next.entries.retain(|e| e.start_offset < start);
        next.entries.push(EpochEntry {
            epoch,
            start_offset: start,
        });
        self.persist(fs, dir, next)
    }

    /// Makes `next` the cache, at most `LEADER_EPOCH_ENTRIES_MAX` entries (the oldest go),
    /// once written durably.
    fn persist(&mut self, fs: &dyn Fs, dir: &Path, mut next: Self) -> Result<(), StorageError> {
        let excess = next.entries.len().saturating_sub(LEADER_EPOCH_ENTRIES_MAX);
        next.entries.drain(..excess);
        io::write_durable(fs, &dir.join(EPOCH_FILE), &encode(&next.entries))?;
        *self = next;
        Ok(())
    }

    /// Kafka's `LeaderEpochFileCache.assign`, for replication: `epoch` begins at `start`
    /// (a leader's new epoch at its log end, or a follower's first batch of an epoch it
    /// copies). Nothing changes when the latest entry is that epoch starting at or before
    /// `start`; otherwise the tail entries of a newer epoch, or starting at or after `start`,
    /// are dropped first (an epoch this broker began on its own at its log end, or a
    /// leadership that appended nothing: the cluster's epochs override them), and `epoch`
    /// begins at `start` unless the latest entry left is `epoch` itself (it goes on). The
    /// cache is persisted before returning. (Kafka also drops an entry of `epoch` itself
    /// there, losing where it began; keeping it answers OffsetForLeaderEpoch exactly.)
    pub(crate) fn assign(
        &mut self,
        fs: &dyn Fs,
        dir: &Path,
        epoch: i32,
        start: Offset,
    ) -> Result<(), StorageError> {
        let needed = self
            .entries
            .last()
            .is_none_or(|e| e.epoch != epoch || start < e.start_offset);
        if !needed || epoch < 0 || start.value() < 0 {
            return Ok(());
        }
        let mut next = self.clone();
        while next
            .entries
            .last()
            .is_some_and(|e| e.epoch > epoch || e.start_offset >= start)
        {
            next.entries.pop();
        }
        if next.entries.last().map(|e| e.epoch) != Some(epoch) {
            next.entries.push(EpochEntry {
                epoch,
                start_offset: start,
            });
        }
        next.clean = false;
        self.persist(fs, dir, next)
    }

    /// Every entry, oldest first.
    pub(crate) fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Moves entries that begin past `log_end` back to it (their records are gone, their
    /// epochs stay known so none is reused).
    pub(crate) fn truncate_tail(&mut self, log_end: Offset) {
        for e in &mut self.entries {
            e.start_offset = e.start_offset.min(log_end);
        }
    }

    /// Kafka's `truncateFromEnd`, for `Log::truncate_to`: forgets the epochs that begin at or
    /// after `end` (their records were truncated away), persisting the cache if any went.
    pub(crate) fn truncate_from_end(
        &mut self,
        fs: &dyn Fs,
        dir: &Path,
        end: Offset,
    ) -> Result<(), StorageError> {
        if self.entries.iter().all(|e| e.start_offset < end) {
            return Ok(());
        }
        let mut next = self.clone();
        next.entries.retain(|e| e.start_offset < end);
        next.clean = false;
        io::write_durable(fs, &dir.join(EPOCH_FILE), &encode(&next.entries))?;
        *self = next;
        Ok(())
    }

    /// Folds the entries wholly below `log_start` into one that begins there.
    pub(crate) fn truncate_head(&mut self, log_start: Offset) {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= log_start)
            .count();
        if below > 0 {
            self.entries.drain(..below - 1);
            self.entries[0].start_offset = log_start;
        }
    }

    /// Kafka's `endOffsetFor`: the epoch at or below `requested` that this log knows and the
    /// offset where it ended (the start of the next epoch, or `log_end` for the latest).
    pub(crate) fn end_offset_for(&self, requested: i32, log_end: Offset) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        }
        if self.current() == requested {
            return (requested, log_end.value());
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_OFFSET);
        };
        let floor = self.entries.iter().rev().find(|e| e.epoch <= requested);
        let epoch = floor.map_or(requested, |f| f.epoch);
        (epoch, higher.start_offset.value())
    }

    /// The epoch `offset` was appended in, or `UNDEFINED_EPOCH` if before every entry.
    pub(crate) fn epoch_at(&self, offset: Offset) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map_or(UNDEFINED_EPOCH, |e| e.epoch)
    }
}

/// The cache from the batches: an entry wherever `partitionLeaderEpoch` rises. When the
/// first and last batches carry the same epoch (every log from before epochs were kept:
/// they stamped 0; the internal logs, which never begin one) that is the only entry, read
/// from two headers instead of every one.
fn scan(segments: &[Segment]) -> Result<Vec<EpochEntry>, StorageError> {
    let filled = |s: &&Segment| s.size_bytes > 0;
    let (Some(first), Some(last)) = (segments.iter().find(filled), segments.iter().rfind(filled))
    else {
        return Ok(Vec::new());
    };
    let header_at = |segment: &Segment, position: u32| -> Result<BatchHeader, StorageError> {
        let mut found = None;
        segment.scan_headers(position, |_, header| {
            found = Some(*header);
            false
        })?;
        found.ok_or_else(|| StorageError::Corrupt {
            what: format!("segment {}", segment.base),
            reason: format!("no batch at {position}"),
        })
    };
    let head = header_at(first, 0)?;
    let tail = match last.locate(Offset(last.end_offset.value() - 1))? {
        Some((position, _)) => Some(header_at(last, position)?),
        None => None,
    };
    if tail.is_some_and(|t| t.partition_leader_epoch == head.partition_leader_epoch) {
        return Ok(vec![EpochEntry {
            epoch: head.partition_leader_epoch.max(0),
            start_offset: Offset(head.base_offset),
        }]);
    }
    let mut entries: Vec<EpochEntry> = Vec::new();
    for segment in segments {
        segment.scan_headers(0, |_, header: &BatchHeader| {
            let epoch = header.partition_leader_epoch;
            if epoch > entries.last().map_or(UNDEFINED_EPOCH, |e| e.epoch) {
                entries.push(EpochEntry {
                    epoch,
                    start_offset: Offset(header.base_offset),
                });
                if entries.len() > LEADER_EPOCH_ENTRIES_MAX {
                    entries.remove(0);
                }
            }
            true
        })?;
    }
    Ok(entries)
}

pub(crate) fn encode(entries: &[EpochEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD_BYTES + entries.len() * ENTRY_BYTES + CRC_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    let count = u32::try_from(entries.len()).expect("bounded by LEADER_EPOCH_ENTRIES_MAX");
    out.extend_from_slice(&count.to_be_bytes());
    for e in entries {
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.start_offset.value().to_be_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a `leader-epoch.checkpoint`; an error names what is wrong. The count is checked
/// against the file's length and `LEADER_EPOCH_ENTRIES_MAX` before anything is allocated.
pub fn decode(bytes: &[u8]) -> Result<Vec<EpochEntry>, StorageError> {
    let bad = |reason: String| StorageError::Corrupt {
        what: EPOCH_FILE.to_owned(),
        reason,
    };
    if bytes.len() < HEAD_BYTES + CRC_BYTES {
        return Err(bad(format!("{} bytes, shorter than a header", bytes.len())));
    }
    let (body, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    if crc32c::crc32c(body).to_be_bytes() != crc {
        return Err(bad("CRC mismatch".to_owned()));
    }
    if &body[..4] != MAGIC || body[4..6] != VERSION.to_be_bytes() {
        return Err(bad("bad magic or version".to_owned()));
    }
    // Reserved: written as zero, refused otherwise (a file that decodes re-encodes exactly;
    // the leader_epochs fuzz target found this one).
    if body[6..8] != [0, 0] {
        return Err(bad("reserved bytes are not zero".to_owned()));
    }
    let count = u32::from_be_bytes(body[8..12].try_into().expect("4 bytes")) as usize;
    if count > LEADER_EPOCH_ENTRIES_MAX || body.len() != HEAD_BYTES + count * ENTRY_BYTES {
        return Err(bad(format!(
            "{count} entries in {} bytes (at most {LEADER_EPOCH_ENTRIES_MAX}, LEADER_EPOCH_ENTRIES_MAX)",
            bytes.len()
        )));
    }
    let entries: Vec<EpochEntry> = body[HEAD_BYTES..]
        .chunks_exact(ENTRY_BYTES)
        .map(|c| EpochEntry {
            epoch: i32::from_be_bytes(c[..4].try_into().expect("4 bytes")),
            start_offset: Offset(i64::from_be_bytes(c[4..].try_into().expect("8 bytes"))),
        })
        .collect();
    let ordered = entries
        .windows(2)
        .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset);
    if !ordered
        || entries
            .iter()
            .any(|e| e.epoch < 0 || e.start_offset.value() < 0)
    {
        return Err(bad("entries out of order or negative".to_owned()));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        EpochCache {
            entries: entries
                .iter()
                .map(|&(epoch, start)| EpochEntry {
                    epoch,
                    start_offset: Offset(start),
                })
                .collect(),
            clean: true,
        }
    }

    #[test]
    fn end_offsets_follow_kafkas_rules() {
        let c = cache(&[(1, 0), (3, 10), (4, 25)]);
        let end = Offset(40);
        assert_eq!(
            c.end_offset_for(4, end),
            (4, 40),
            "the latest epoch ends at the log end"
        );
        assert_eq!(c.end_offset_for(3, end), (3, 25));
        assert_eq!(
            c.end_offset_for(2, end),
            (1, 10),
            "an unknown epoch maps to the one below"
        );
        assert_eq!(
            c.end_offset_for(0, end),
            (0, 0),
            "below every epoch: the first start"
        );
        assert_eq!(
            c.end_offset_for(5, end),
            (-1, -1),
            "a future epoch is undefined"
        );
        assert_eq!(c.end_offset_for(-1, end), (-1, -1));
        assert_eq!((c.epoch_at(Offset(9)), c.epoch_at(Offset(10))), (1, 3));
    }

    #[test]
    fn truncation_keeps_the_cache_inside_the_log() {
        let mut c = cache(&[(1, 0), (3, 10), (4, 25)]);
        c.truncate_tail(Offset(20));
        assert_eq!(
            c.entries,
            cache(&[(1, 0), (3, 10), (4, 20)]).entries,
            "epoch 4 kept at the end"
        );
        assert_eq!(c.end_offset_for(3, Offset(20)), (3, 20));
        c.truncate_head(Offset(12));
        assert_eq!(c.entries, cache(&[(3, 12), (4, 20)]).entries);
    }

    #[test]
    fn encoding_round_trips_and_refuses_damage() {
        let c = cache(&[(0, 0), (2, 7)]);
        let bytes = encode(&c.entries);
        assert_eq!(decode(&bytes).unwrap(), c.entries);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode(&damaged).is_err(), "flip at {at} accepted");
        }
        let mut huge = bytes[..HEAD_BYTES].to_vec();
        huge[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&huge).is_err());
    }
}
