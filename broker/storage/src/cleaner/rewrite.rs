//! The two passes of a clean, without the partition lock: the offset map of the dirty
//! section, then the rewrite of every segment below the cleanable end into `.cleaned`
//! segments (fsynced, not yet swapped in).

use std::collections::HashMap;
use std::io;

use super::{CleanOutcome, CleanPlan, Cleaned, CleanedGroup, SegmentRef};
use crate::batch::{self, BatchHeader, HEADER_BYTES, LOG_OVERHEAD_BYTES, attr, pos};
use crate::error::StorageError;
use crate::limits;
use crate::offset::Offset;
use crate::record::{self, RecordView};
use crate::recovery::CLEANED_SUFFIX;
use crate::segment::{Decompress, Segment};

/// Cleaned batches buffered before one write to the `.cleaned` segment.
const WRITE_BUFFER_BYTES: usize = 1024 * 1024;

/// Key -> latest offset over the dirty section, within `bytes_max`.
struct OffsetMap {
    offsets: HashMap<Box<[u8]>, i64>,
    bytes: u64,
    bytes_max: u64,
}

impl OffsetMap {
    /// Whether a batch whose records take `body_bytes` (`count` of them) surely fits.
    fn has_room(&self, body_bytes: usize, count: i32) -> bool {
        let worst = body_bytes as u64
            + u64::from(count.max(0) as u32) * limits::CLEANER_MAP_ENTRY_OVERHEAD_BYTES;
        self.bytes + worst <= self.bytes_max
    }

    fn insert(&mut self, key: &[u8], offset: i64) {
        if let Some(latest) = self.offsets.get_mut(key) {
            *latest = offset;
            return;
        }
        self.bytes += key.len() as u64 + limits::CLEANER_MAP_ENTRY_OVERHEAD_BYTES;
        self.offsets.insert(key.into(), offset);
    }
}

/// What a batch's records are, for the cleaner.
enum Body<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
    /// Compressed and no codec at hand: kept whole, its keys unmapped.
    Opaque,
}

impl Body<'_> {
    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Body::Borrowed(b) => Some(b),
            Body::Owned(v) => Some(v),
            Body::Opaque => None,
        }
    }
}

fn body<'a>(header: &BatchHeader, bytes: &'a [u8], decompress: Option<Decompress<'_>>) -> Body<'a> {
    let section = &bytes[HEADER_BYTES..];
    match (header.compression(), decompress) {
        (batch::Compression::None, _) => Body::Borrowed(section),
        (codec, Some(decompress)) => match decompress(codec, section) {
            Ok(Some(records)) => Body::Owned(records),
            _ => Body::Opaque,
        },
        (_, None) => Body::Opaque,
    }
}

/// Visits every batch of a segment in order, reading `CLEANER_READ_CHUNK_BYTES` at a time
/// (a larger batch alone), until `visit` returns false.
fn for_each_batch(
    segment: &SegmentRef,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<bool, StorageError>,
) -> Result<(), StorageError> {
    let size = u64::from(segment.size_bytes);
    let mut position = 0u64;
    while position < size {
        let want = (size - position).min(u64::from(limits::CLEANER_READ_CHUNK_BYTES)) as usize;
        buf.resize(want, 0);
        segment.log.read_at(&mut buf[..want], position)?;
        let first = batch::parse_header(buf).map_err(|e| corrupt(segment, position, &e))?;
        if first.total_bytes() > want {
            buf.resize(first.total_bytes(), 0);
            segment.log.read_at(buf, position)?;
            if !visit(&first, buf)? {
                return Ok(());
            }
            position += first.total_bytes() as u64;
            continue;
        }
        let mut at = 0usize;
        while want - at >= HEADER_BYTES {
            let header = batch::parse_header(&buf[at..])
                .map_err(|e| corrupt(segment, position + at as u64, &e))?;
            if header.total_bytes() > want - at {
                break;
            }
            if !visit(&header, &buf[at..at + header.total_bytes()])? {
                return Ok(());
            }
            at += header.total_bytes();
        }
        position += at as u64;
    }
    Ok(())
}

fn corrupt(segment: &SegmentRef, position: u64, e: &dyn std::fmt::Display) -> StorageError {
    StorageError::Corrupt {
        what: format!("segment {} at {position}", segment.base),
        reason: e.to_string(),
    }
}

/// Consecutive segments below `end` whose sum fits one segment (`segment.bytes`, the index
/// capacity, relative offsets in u32): Kafka's `groupSegmentsBySize`.
fn group_segments(segments: &[SegmentRef], plan: &CleanPlan) -> Vec<Vec<SegmentRef>> {
    let index_capacity =
        (plan.config.segment_index_bytes / limits::TIME_INDEX_ENTRY_BYTES) as usize;
    let mut groups: Vec<Vec<SegmentRef>> = Vec::new();
    for segment in segments.iter().filter(|s| s.base < plan.end) {
        if let Some(group) = groups.last_mut() {
            let bytes: u64 = group.iter().map(|s| u64::from(s.size_bytes)).sum();
            let entries: usize = group.iter().map(|s| s.index_entries + 1).sum();
            let fits = bytes + u64::from(segment.size_bytes)
                <= u64::from(plan.config.segment_bytes)
                && entries + segment.index_entries + 1 < index_capacity
                && segment.end_offset.value() - group[0].base.value()
                    <= limits::SEGMENT_RELATIVE_OFFSET_MAX;
            if fits {
                group.push(segment.clone());
                continue;
            }
        }
        groups.push(vec![segment.clone()]);
    }
    groups
}

impl CleanPlan {
    /// Whether a data batch belongs to an aborted transaction.
    fn is_aborted(&self, header: &BatchHeader) -> bool {
        if !header.is_transactional() || header.is_control() {
            return false;
        }
        let from = self
            .aborted
            .partition_point(|t| t.last_offset < header.base_offset);
        self.aborted[from..]
            .iter()
            .any(|t| t.producer_id == header.producer_id && t.first_offset <= header.base_offset)
    }

    /// Step 2 of a clean: both passes; the `.cleaned` segments are fsynced on return.
    /// On error nothing of the log changed (the `.cleaned` files written are removed).
    pub fn run(
        self,
        dedupe_buffer_bytes: u64,
        decompress: Option<Decompress<'_>>,
    ) -> Result<Cleaned, StorageError> {
        let (map, end) = self.build_map(dedupe_buffer_bytes, decompress)?;
        let plan = CleanPlan { end, ..self };
        let mut outcome = CleanOutcome {
            segments_before: plan.segments.len() as u32,
            ..CleanOutcome::default()
        };
        let mut tombstones_due_ms = None;
        let mut groups = Vec::new();
        for old in group_segments(&plan.segments, &plan) {
            let mut rewrite = Rewrite {
                plan: &plan,
                map: &map,
                decompress,
                outcome: &mut outcome,
                tombstones_due_ms: &mut tombstones_due_ms,
            };
            match rewrite.group(&old) {
                Ok(segment) => groups.push(CleanedGroup { old, segment }),
                Err(e) => {
                    let bases = groups.iter().map(|g| g.segment.base).chain([old[0].base]);
                    super::discard(plan.fs.as_ref(), &plan.dir, bases);
                    return Err(e);
                }
            }
        }
        Ok(Cleaned {
            generation: plan.generation,
            groups,
            end: plan.end,
            tombstones_due_ms,
            outcome,
        })
    }

    /// Pass 1: the latest offset of each key in `[dirty_start, end)`, and the end actually
    /// covered (earlier than `end` when the dedupe buffer filled up).
    fn build_map(
        &self,
        bytes_max: u64,
        decompress: Option<Decompress<'_>>,
    ) -> Result<(OffsetMap, Offset), StorageError> {
        let mut map = OffsetMap {
            offsets: HashMap::new(),
            bytes: 0,
            bytes_max,
        };
        let mut covered = self.end;
        let mut buf = Vec::new();
        let dirty = self
            .segments
            .iter()
            .filter(|s| s.end_offset > self.dirty_start);
        for segment in dirty {
            let mut full = false;
            for_each_batch(segment, &mut buf, |header, bytes| {
                if header.base_offset < self.dirty_start.value() {
                    return Ok(true);
                }
                if header.base_offset >= self.end.value() {
                    return Ok(false);
                }
                if header.is_control() || self.is_aborted(header) {
                    return Ok(true);
                }
                let body = body(header, bytes, decompress);
                let Some(records) = body.bytes() else {
                    return Ok(true);
                };
                if !map.has_room(records.len(), header.records_count) {
                    full = true;
                    covered = Offset(header.base_offset);
                    return Ok(false);
                }
                for view in record::record_views(records, header.records_count) {
                    let view = view.map_err(|e| corrupt(segment, 0, &e))?;
                    if let Some(key) = view.key {
                        map.insert(key, header.base_offset + i64::from(view.offset_delta));
                    }
                }
                Ok(true)
            })?;
            if full {
                break;
            }
        }
        if covered <= self.dirty_start && self.dirty_start < self.end {
            return Err(StorageError::Io(io::Error::other(format!(
                "the first dirty batch of {} does not fit the cleaner's offset map \
                 (log.cleaner.dedupe.buffer.size = {bytes_max} bytes)",
                self.dir.display()
            ))));
        }
        Ok((map, covered))
    }
}

/// Pass 2 over one group.
struct Rewrite<'a, 'd> {
    plan: &'a CleanPlan,
    map: &'a OffsetMap,
    decompress: Option<Decompress<'d>>,
    outcome: &'a mut CleanOutcome,
    tombstones_due_ms: &'a mut Option<i64>,
}

impl Rewrite<'_, '_> {
    /// Writes the group's retained batches into `<first base>.log.cleaned` (+ indexes),
    /// sealed and fsynced.
    fn group(&mut self, old: &[SegmentRef]) -> Result<Segment, StorageError> {
        let plan = self.plan;
        let files = crate::file_cache::Files {
            fs: std::sync::Arc::clone(&plan.fs),
            cache: std::sync::Arc::clone(&plan.cache),
        };
        let mut segment = Segment::create_with_suffix(
            &files,
            &plan.dir,
            old[0].base,
            &plan.config,
            CLEANED_SUFFIX,
        )?;
        let (mut buf, mut out) = (Vec::new(), Vec::with_capacity(WRITE_BUFFER_BYTES));
        for source in old {
            self.outcome.bytes_read += u64::from(source.size_bytes);
            for_each_batch(source, &mut buf, |header, bytes| {
                self.batch(header, bytes, &mut out)?;
                if out.len() >= WRITE_BUFFER_BYTES {
                    segment.append(&out, &plan.config, plan.now_ms)?;
                    out.clear();
                }
                Ok(true)
            })?;
        }
        if !out.is_empty() {
            segment.append(&out, &plan.config, plan.now_ms)?;
        }
        segment.seal()?;
        segment.flush()?;
        self.outcome.bytes_written += u64::from(segment.size_bytes);
        Ok(segment)
    }

    /// Appends what is retained of one batch to `out`.
    fn batch(
        &mut self,
        header: &BatchHeader,
        bytes: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), StorageError> {
        let count = u64::from(header.records_count.max(0) as u32);
        if header.base_offset >= self.plan.end.value() || header.is_control() {
            out.extend_from_slice(bytes);
            self.outcome.records_kept += count;
            return Ok(());
        }
        if self.plan.is_aborted(header) {
            self.outcome.records_removed += count;
            return Ok(());
        }
        let body = body(header, bytes, self.decompress);
        let Some(records) = body.bytes() else {
            out.extend_from_slice(bytes);
            self.outcome.records_kept += count;
            return Ok(());
        };
        let mut kept: Vec<&[u8]> = Vec::new();
        for view in record::record_views(records, header.records_count) {
            let view = view.map_err(|e| StorageError::Corrupt {
                what: format!("batch at offset {}", header.base_offset),
                reason: e.to_string(),
            })?;
            if self.retains(header, &view) {
                kept.push(view.bytes);
            }
        }
        self.outcome.records_kept += kept.len() as u64;
        self.outcome.records_removed += count - kept.len() as u64;
        let unchanged = kept.len() as u64 == count && matches!(body, Body::Borrowed(_));
        if unchanged {
            out.extend_from_slice(bytes);
        } else if !kept.is_empty() {
            reencode(&bytes[..HEADER_BYTES], &kept, out);
        }
        Ok(())
    }

    /// Kafka's rule: the latest record of its key is kept; a tombstone only until
    /// `delete.retention.ms` after the clean that first covered it; a record without a key
    /// (which a compacted topic refuses on produce) is removed.
    fn retains(&mut self, header: &BatchHeader, view: &RecordView<'_>) -> bool {
        let offset = header.base_offset + i64::from(view.offset_delta);
        let Some(key) = view.key else {
            return false;
        };
        if self
            .map
            .offsets
            .get(key)
            .is_some_and(|&latest| latest > offset)
        {
            return false;
        }
        if !view.tombstone {
            return true;
        }
        let plan = self.plan;
        let first_cleaned = plan.cleaner.first_cleaned_ms(Offset(offset));
        let due = first_cleaned
            .unwrap_or(plan.now_ms)
            .saturating_add(plan.config.delete_retention_ms);
        if first_cleaned.is_some() && plan.now_ms >= due {
            return false;
        }
        *self.tombstones_due_ms = Some(self.tombstones_due_ms.map_or(due, |d| d.min(due)));
        true
    }
}

/// A batch of the retained records: the original header (base offset, last offset delta,
/// timestamps, producer id, epoch, base sequence, transactional bit) with the new record
/// count and length, no compression, and its CRC-32C recomputed.
fn reencode(header: &[u8], records: &[&[u8]], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(header);
    for r in records {
        out.extend_from_slice(r);
    }
    let batch = &mut out[start..];
    let batch_length = (batch.len() - LOG_OVERHEAD_BYTES) as i32;
    batch[pos::BATCH_LENGTH..pos::BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    let attributes = i16::from_be_bytes([batch[pos::ATTRIBUTES], batch[pos::ATTRIBUTES + 1]])
        & !attr::COMPRESSION_MASK;
    batch[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    let count = records.len() as i32;
    batch[pos::RECORDS_COUNT..pos::RECORDS_COUNT + 4].copy_from_slice(&count.to_be_bytes());
    let crc = batch::compute_crc(batch);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}
