//! A segment: `<base offset>.log` (batches back to back), its `.index` and `.timeindex`.
//! Appends, index bookkeeping, lookups and reads of one segment; opening a trusted segment
//! without scanning it. Scanning an untrusted one is in `recovery.rs`.

use crate::batch::{self, BatchHeader, HEADER_BYTES, NO_TIMESTAMP};
use crate::config::LogConfig;
use crate::file_cache::{Files, SegmentLog};
use crate::index::{IndexEntry, OffsetIndex};
use crate::io::{Fs, StorageFile};
use crate::limits;
use crate::offset::Offset;
use crate::time_index::{TimeEntry, TimeIndex};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";

/// `<dir>/<base offset, 20 digits>.<ext>`.
pub(crate) fn segment_path(dir: &Path, base: Offset, ext: &str) -> PathBuf {
    dir.join(format!(
        "{:0width$}.{ext}",
        base.value(),
        width = limits::SEGMENT_NAME_DIGITS
    ))
}

pub(crate) fn corrupt(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Opens a compressed batch's records section (the bytes after the header) for the exact
/// ListOffsets-by-time walk: `Ok(None)` when the caller will not (codec unknown, output over
/// its limit), then the batch's first offset answers.
pub type Decompress<'a> = &'a dyn Fn(batch::Compression, &[u8]) -> io::Result<Option<Vec<u8>>>;

#[derive(Debug)]
pub(crate) struct Segment {
    pub base: Offset,
    /// Held open while active or unsynced; otherwise opened through the `FileCache`.
    pub log: SegmentLog,
    /// Sealed: no more appends (its indexes are trimmed).
    pub sealed: bool,
    /// Bytes of whole batches; the file is never longer once opened.
    pub size_bytes: u32,
    /// One past the last offset in this segment (== `base` when empty).
    pub end_offset: Offset,
    pub index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Largest batch max timestamp seen (`NO_TIMESTAMP` if none).
    pub max_timestamp_ms: i64,
    pub offset_of_max_timestamp: Offset,
    bytes_since_index_entry: u32,
    /// When `segment.ms` starts counting: the first batch's timestamp or append time.
    pub rolling_base_ms: Option<i64>,
    /// Written since the last fsync.
    pub needs_sync: bool,
}

impl Segment {
    /// Creates an empty segment (truncating leftovers with the same name).
    pub fn create(
        files: &Files,
        dir: &Path,
        base: Offset,
        config: &LogConfig,
    ) -> io::Result<Segment> {
        Segment::create_with_suffix(files, dir, base, config, "")
    }

    /// Like `create`, each file name ending in `suffix` (the cleaner writes
    /// `<base>.log.cleaned` and its indexes before swapping them in).
    pub fn create_with_suffix(
        files: &Files,
        dir: &Path,
        base: Offset,
        config: &LogConfig,
        suffix: &str,
    ) -> io::Result<Segment> {
        let path = |ext: &str| segment_path(dir, base, &format!("{ext}{suffix}"));
        let log_path = path(LOG_EXT);
        let log = SegmentLog::pinned(files, &log_path, open_empty(files, &log_path)?);
        let (index, time_index) =
            empty_indexes(files, (&path(INDEX_EXT), &path(TIME_INDEX_EXT)), config)?;
        Ok(Segment::new(base, log, index, time_index))
    }

    fn new(base: Offset, log: SegmentLog, index: OffsetIndex, time_index: TimeIndex) -> Segment {
        Segment {
            base,
            log,
            sealed: false,
            size_bytes: 0,
            end_offset: base,
            index,
            time_index,
            max_timestamp_ms: NO_TIMESTAMP,
            offset_of_max_timestamp: base,
            bytes_since_index_entry: 0,
            rolling_base_ms: None,
            needs_sync: false,
        }
    }

    /// Opens a segment whose bytes are trusted (below the recovery point or after a clean
    /// shutdown) without scanning it. `None` if an index is missing or fails its sanity
    /// check; the caller then rebuilds by scanning. `next_base` is the following segment's
    /// base (`None` for the last segment, which is opened for appending).
    pub fn open_trusted(
        files: &Files,
        dir: &Path,
        base: Offset,
        config: &LogConfig,
        next_base: Option<Offset>,
    ) -> io::Result<Option<Segment>> {
        let fs = files.fs.as_ref();
        let log_path = segment_path(dir, base, LOG_EXT);
        let log = fs.open(&log_path, false)?;
        let Ok(size_bytes) = u32::try_from(log.len()?) else {
            return Ok(None);
        };
        let (index_path, time_path) = (
            segment_path(dir, base, INDEX_EXT),
            segment_path(dir, base, TIME_INDEX_EXT),
        );
        if !fs.exists(&index_path)? || !fs.exists(&time_path)? {
            return Ok(None);
        }
        let (index_file, time_file) = (fs.open(&index_path, false)?, fs.open(&time_path, false)?);
        let (index_len, time_len) = (index_file.len()?, time_file.len()?);
        if index_len % u64::from(limits::INDEX_ENTRY_BYTES) != 0
            || time_len % u64::from(limits::TIME_INDEX_ENTRY_BYTES) != 0
        {
            return Ok(None);
        }
        let (index_at, time_at) = ((&files.fs, &*index_path), (&files.fs, &*time_path));
        let (index, time_index) = if next_base.is_some() {
            (
                OffsetIndex::open_sealed(index_file, index_at)?,
                TimeIndex::open_sealed(time_file, time_at)?,
            )
        } else {
            let index_entries = (index_len / u64::from(limits::INDEX_ENTRY_BYTES)) as usize;
            let time_entries = (time_len / u64::from(limits::TIME_INDEX_ENTRY_BYTES)) as usize;
            let index = OffsetIndex::open_active(
                index_file,
                index_at,
                index_entries,
                config.segment_index_bytes,
            )?;
            let time_index = TimeIndex::open_active(
                time_file,
                time_at,
                time_entries,
                config.segment_index_bytes,
            )?;
            (index, time_index)
        };
        let mut segment = Segment::new(
            base,
            SegmentLog::pinned(files, &log_path, log),
            index,
            time_index,
        );
        segment.size_bytes = size_bytes;
        if !segment.finish_trusted_open(next_base)? {
            return Ok(None);
        }
        if next_base.is_some() {
            segment.sealed = true;
            segment.log.unpin(); // a sealed, trusted segment: opened again on its first read
        }
        Ok(Some(segment))
    }

    /// The `.log` file, open (the cache opens a sealed segment's on demand).
    pub fn log_file(&self) -> io::Result<Arc<dyn StorageFile>> {
        self.log.file()
    }

    /// Records a successful fsync of the log's bytes: a sealed segment's file is then
    /// released to the cache.
    pub fn mark_synced(&mut self) {
        self.needs_sync = false;
        if self.sealed {
            self.log.unpin();
        }
    }

    /// The segment's files now have their final names (a cleaned segment swapped in).
    pub fn renamed(mut self, files: &Files, dir: &Path) -> Segment {
        self.log = self
            .log
            .renamed(files, &segment_path(dir, self.base, LOG_EXT));
        self.index.renamed(&segment_path(dir, self.base, INDEX_EXT));
        self.time_index
            .renamed(&segment_path(dir, self.base, TIME_INDEX_EXT));
        self
    }

    /// Fills in the end offset and timestamps of a trusted segment; false if inconsistent.
    fn finish_trusted_open(&mut self, next_base: Option<Offset>) -> io::Result<bool> {
        if !self.index.is_sane(self.size_bytes)? {
            return Ok(false);
        }
        self.end_offset = match next_base {
            Some(next) => next,
            None => {
                let last_position = self.index.last().map_or(0, |e| e.position);
                self.bytes_since_index_entry = self.size_bytes - last_position;
                match self.scan_end_offset(last_position) {
                    Ok(end) => end,
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        };
        if self.end_offset < self.base {
            return Ok(false);
        }
        if let Some((first, last)) = self.time_index.ends()? {
            let relative_end = self.relative(self.end_offset.value()).unwrap_or(u32::MAX);
            if first.timestamp_ms > last.timestamp_ms || last.relative_offset >= relative_end.max(1)
            {
                return Ok(false);
            }
            self.max_timestamp_ms = last.timestamp_ms;
            self.offset_of_max_timestamp = self.base.plus(i64::from(last.relative_offset));
        }
        if next_base.is_none() && self.size_bytes > 0 {
            let mut header = [0u8; HEADER_BYTES];
            self.log_file()?.read_at(&mut header, 0)?;
            self.rolling_base_ms = batch::parse_header(&header)
                .ok()
                .map(|h| h.max_timestamp)
                .filter(|&ts| ts >= 0);
        }
        Ok(true)
    }

    /// Walks headers from `position` to the end of the log; the offset after the last batch.
    fn scan_end_offset(&self, position: u32) -> io::Result<Offset> {
        let mut end = self.base;
        self.scan_headers(position, |_, header| {
            end = Offset(header.last_offset() + 1);
            true
        })?;
        Ok(end)
    }

    /// `offset - base` as u32, if it fits.
    pub fn relative(&self, offset: i64) -> Option<u32> {
        u32::try_from(offset - self.base.value()).ok()
    }

    /// Whether `header` (already given its offset) may go into this segment.
    pub fn can_take(&self, header: &BatchHeader, config: &LogConfig, now_ms: i64) -> bool {
        if self.size_bytes == 0 {
            return true;
        }
        let fits = u64::from(self.size_bytes) + header.total_bytes() as u64
            <= u64::from(config.segment_bytes);
        let offsets_fit =
            header.last_offset() - self.base.value() <= limits::SEGMENT_RELATIVE_OFFSET_MAX;
        fits && offsets_fit
            && !self.index.is_full()
            && !self.time_index.is_full()
            && !self.is_due_to_roll(config, now_ms)
    }

    /// `segment.ms` has passed since the first append.
    pub fn is_due_to_roll(&self, config: &LogConfig, now_ms: i64) -> bool {
        self.size_bytes > 0
            && self
                .rolling_base_ms
                .is_some_and(|t| now_ms.saturating_sub(t) > config.segment_ms)
    }

    /// Writes already-validated, already-numbered batches at the end, then indexes them.
    /// The index blocks they may need are reserved first, so a full disk fails before any
    /// byte is written.
    pub fn append(&mut self, batches: &[u8], config: &LogConfig, now_ms: i64) -> io::Result<()> {
        let total = u32::try_from(batches.len()).map_err(io::Error::other)?;
        let entries_max = index_entries_max(
            self.bytes_since_index_entry,
            total,
            config.index_interval_bytes,
        );
        self.index.reserve(entries_max)?;
        // One more: the time index keeps a slot for the entry sealing writes.
        self.time_index.reserve(entries_max.saturating_add(1))?;
        assert!(
            !self.sealed && self.log.is_pinned(),
            "appends go to the active segment, held open"
        );
        self.log_file()?
            .write_at(batches, u64::from(self.size_bytes))?;
        self.needs_sync = true;
        let mut position = self.size_bytes;
        for item in batch::iter_batches(batches) {
            let (header, bytes) = item.expect("append: batches were validated");
            self.track_batch(position, &header, config.index_interval_bytes)?;
            position += bytes.len() as u32;
        }
        assert_eq!(
            position,
            self.size_bytes + total,
            "append: batch lengths add up"
        );
        self.size_bytes = position;
        self.rolling_base_ms.get_or_insert(now_ms);
        Ok(())
    }

    /// Index bookkeeping for a batch at `position` (append and recovery share it); an index
    /// entry reserves its blocks if `append` did not already.
    pub fn track_batch(
        &mut self,
        position: u32,
        header: &BatchHeader,
        index_interval_bytes: u32,
    ) -> io::Result<()> {
        // Contiguous as appended; a cleaned segment has gaps where records were removed.
        assert!(
            header.base_offset >= self.end_offset.value(),
            "offsets in a segment only grow"
        );
        if self.bytes_since_index_entry > index_interval_bytes {
            let relative_offset = self
                .relative(header.base_offset)
                .expect("relative offset fits u32");
            self.index.push(IndexEntry {
                relative_offset,
                position,
            })?;
            let relative_max = self
                .relative(self.offset_of_max_timestamp.value())
                .expect("fits u32");
            self.time_index.maybe_push(TimeEntry {
                timestamp_ms: self.max_timestamp_ms,
                relative_offset: relative_max,
            })?;
            self.bytes_since_index_entry = 0;
        }
        if header.max_timestamp > self.max_timestamp_ms {
            self.max_timestamp_ms = header.max_timestamp;
            self.offset_of_max_timestamp = Offset(header.last_offset());
        }
        self.bytes_since_index_entry += header.total_bytes() as u32;
        self.end_offset = Offset(header.last_offset() + 1);
        Ok(())
    }

    /// Visits the headers of batches from `position` (a batch start) to the end, in
    /// chunked reads, until `visit` returns false. A header that does not parse is
    /// `InvalidData`.
    pub fn scan_headers(
        &self,
        mut position: u32,
        mut visit: impl FnMut(u32, &BatchHeader) -> bool,
    ) -> io::Result<()> {
        let mut chunk = Vec::new(); // grown to what is read: a read at the tail stays small
        let (mut chunk_start, mut chunk_len) = (0u32, 0u32);
        let log = if position < self.size_bytes {
            Some(self.log_file()?)
        } else {
            None
        };
        while position < self.size_bytes {
            if position < chunk_start || position + HEADER_BYTES as u32 > chunk_start + chunk_len {
                chunk_len = (self.size_bytes - position).min(limits::READ_SCAN_CHUNK_BYTES);
                if chunk_len < HEADER_BYTES as u32 {
                    return Err(corrupt(format!(
                        "segment {}: partial header at {position}",
                        self.base
                    )));
                }
                if chunk.len() < chunk_len as usize {
                    chunk.resize(chunk_len as usize, 0);
                }
                log.as_ref()
                    .expect("opened: position < size_bytes")
                    .read_at(&mut chunk[..chunk_len as usize], u64::from(position))?;
                chunk_start = position;
            }
            let at = (position - chunk_start) as usize;
            let header = batch::parse_header(&chunk[at..at + HEADER_BYTES])
                .map_err(|e| corrupt(format!("segment {} at {position}: {e}", self.base)))?;
            if !visit(position, &header) {
                return Ok(());
            }
            position = position.saturating_add(header.total_bytes() as u32);
        }
        Ok(())
    }

    /// Position and length of the first batch with `last_offset >= target`; `None` when
    /// every batch ends before it (a cleaned segment whose last records were removed).
    pub(crate) fn locate(&self, target: Offset) -> io::Result<Option<(u32, u32)>> {
        let relative = self
            .relative(target.value())
            .expect("target is inside this segment");
        let hint = self
            .index
            .floor_by_offset(relative)
            .map_or(0, |e| e.position);
        let mut found = None;
        self.scan_headers(hint, |position, header| {
            if header.last_offset() >= target.value() {
                found = Some((position, header.total_bytes() as u32));
            }
            found.is_none()
        })?;
        Ok(found)
    }

    /// Whole batches from the one containing `target`, at most `max_bytes` but at least one;
    /// `None` when no batch of this segment ends at or after `target`.
    pub fn read_range(&self, target: Offset, max_bytes: u32) -> io::Result<Option<(u32, u32)>> {
        let Some((start, first_len)) = self.locate(target)? else {
            return Ok(None);
        };
        let available = self.size_bytes - start;
        if available <= max_bytes {
            return Ok(Some((start, available)));
        }
        let limit = start + max_bytes;
        let from = self
            .index
            .floor_by_position(limit)
            .map_or(start, |e| e.position.max(start));
        let mut end = from;
        self.scan_headers(from, |position, header| {
            let batch_end = position + header.total_bytes() as u32;
            if batch_end <= limit {
                end = batch_end;
            }
            batch_end <= limit
        })?;
        Ok(Some((start, (end - start).max(first_len))))
    }

    /// Final index entries, then trims both index files (the segment becomes read-only).
    pub fn seal(&mut self) -> io::Result<()> {
        let relative_offset = self
            .relative(self.offset_of_max_timestamp.value())
            .expect("fits u32");
        self.time_index.seal(TimeEntry {
            timestamp_ms: self.max_timestamp_ms,
            relative_offset,
        })?;
        self.index.seal()?;
        self.sealed = true;
        if !self.needs_sync {
            self.log.unpin();
        }
        Ok(())
    }

    /// fsyncs the log's bytes (not the indexes: see `Log::sync_logs`).
    pub fn sync_log(&mut self) -> io::Result<()> {
        if self.needs_sync {
            self.log_file()?.sync()?;
            self.mark_synced();
        }
        Ok(())
    }

    /// fsyncs the log, then both indexes.
    pub fn flush(&mut self) -> io::Result<()> {
        self.sync_log()?;
        self.index.flush()?;
        self.time_index.flush()
    }

    /// Unlinks the three files (open handles keep the bytes for readers).
    pub fn delete_files(&self, fs: &dyn Fs, dir: &Path) -> io::Result<()> {
        for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
            match fs.remove(&segment_path(dir, self.base, ext)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

impl Segment {
    /// Opens a segment's log for a recovery scan, with both indexes emptied for rebuilding.
    /// `size_bytes` starts at 0; the scanner feeds each good batch to `track_batch` and
    /// then calls `finish_rebuild`.
    pub fn open_for_rebuild(
        files: &Files,
        dir: &Path,
        base: Offset,
        config: &LogConfig,
    ) -> io::Result<Segment> {
        let log_path = segment_path(dir, base, LOG_EXT);
        let log = SegmentLog::pinned(files, &log_path, files.fs.open(&log_path, false)?);
        let (index, time_index) = empty_indexes(
            files,
            (
                &segment_path(dir, base, INDEX_EXT),
                &segment_path(dir, base, TIME_INDEX_EXT),
            ),
            config,
        )?;
        Ok(Segment::new(base, log, index, time_index))
    }

    /// Ends a rebuild: `valid_bytes` of whole good batches were tracked; cuts the file there.
    pub fn finish_rebuild(&mut self, valid_bytes: u32, file_bytes: u64) -> io::Result<()> {
        self.size_bytes = valid_bytes;
        if file_bytes != u64::from(valid_bytes) {
            self.log_file()?.set_len(u64::from(valid_bytes))?;
        }
        self.needs_sync = true;
        if self.size_bytes > 0 {
            let mut header = [0u8; HEADER_BYTES];
            self.log_file()?.read_at(&mut header, 0)?;
            self.rolling_base_ms = batch::parse_header(&header)
                .ok()
                .map(|h| h.max_timestamp)
                .filter(|&ts| ts >= 0);
        }
        Ok(())
    }
}

/// The most index entries appending `bytes` of batches can add when `carried` bytes were
/// written since the last entry: an entry goes before a batch only once more than
/// `index_interval_bytes` of earlier batches (each at least a header long) were written
/// since the previous one, so each entry uses up that many of the `carried + bytes`.
pub(crate) fn index_entries_max(carried: u32, bytes: u32, index_interval_bytes: u32) -> usize {
    let spacing = (u64::from(index_interval_bytes) + 1).max(HEADER_BYTES as u64);
    ((u64::from(carried) + u64::from(bytes)) / spacing) as usize
}

impl Segment {
    /// Batches this segment can still index (each batch adds at most one entry per index).
    pub fn index_room(&self) -> usize {
        let offsets = self.index.capacity() - self.index.len();
        let times = self
            .time_index
            .capacity()
            .saturating_sub(self.time_index.len() + 1);
        offsets.min(times)
    }
}

impl Segment {
    /// First record at or after `min_offset` whose timestamp is >= `target_ms`, with that
    /// timestamp; searched from the time index's hint. Exact for uncompressed batches, for
    /// LogAppendTime batches (every record has the batch's time) and for compressed ones
    /// `decompress` can open; otherwise the batch's first offset and max timestamp.
    pub fn find_timestamp(
        &self,
        target_ms: i64,
        min_offset: Offset,
        decompress: Option<Decompress<'_>>,
    ) -> io::Result<Option<(Offset, i64)>> {
        let hint_offset = self
            .time_index
            .floor_before(target_ms)
            .map_or(self.base, |e| self.base.plus(i64::from(e.relative_offset)));
        let hint_offset = hint_offset.max(min_offset).min(self.end_offset);
        let relative = self
            .relative(hint_offset.value())
            .expect("inside the segment");
        let start = self
            .index
            .floor_by_offset(relative)
            .map_or(0, |e| e.position);
        let mut found = None;
        self.scan_headers(start, |position, header| {
            if header.max_timestamp >= target_ms && header.last_offset() >= min_offset.value() {
                found = Some((position, *header));
            }
            found.is_none()
        })?;
        let Some((position, header)) = found else {
            return Ok(None);
        };
        let whole_batch = (
            header.base_offset.max(min_offset.value()),
            header.max_timestamp,
        );
        let compression = header.compression();
        let decompress = decompress.filter(|_| compression != batch::Compression::None);
        if (compression != batch::Compression::None && decompress.is_none())
            || header.timestamp_type() == crate::config::TimestampType::LogAppendTime
        {
            return Ok(Some((Offset(whole_batch.0), whole_batch.1)));
        }
        let mut bytes = vec![0u8; header.total_bytes()];
        self.log_file()?.read_at(&mut bytes, u64::from(position))?;
        let records = match decompress {
            None => bytes.split_off(HEADER_BYTES),
            Some(decompress) => match decompress(compression, &bytes[HEADER_BYTES..])? {
                Some(records) => records,
                None => return Ok(Some((Offset(whole_batch.0), whole_batch.1))),
            },
        };
        for record in crate::record::records(&records, header.records_count) {
            let record = match record {
                Ok(record) => record,
                // Compressed records were never walked on append: the producer's problem.
                Err(_) if compression != batch::Compression::None => break,
                Err(e) => return Err(corrupt(format!("segment {}: {e}", self.base))),
            };
            let (offset, timestamp) = (
                header.base_offset + i64::from(record.offset_delta),
                header.base_timestamp + record.timestamp_delta,
            );
            if offset >= min_offset.value() && timestamp >= target_ms {
                return Ok(Some((Offset(offset), timestamp)));
            }
        }
        Ok(Some((Offset(whole_batch.0), whole_batch.1)))
    }
}

/// `path` opened for writing and emptied (leftovers of the same name truncated).
fn open_empty(files: &Files, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
    let file = files.fs.open(path, true)?;
    file.set_len(0)?;
    Ok(file)
}

/// An active segment's offset and time indexes, empty (a new segment's, or a rebuild's).
fn empty_indexes(
    files: &Files,
    (index_path, time_path): (&Path, &Path),
    config: &LogConfig,
) -> io::Result<(OffsetIndex, TimeIndex)> {
    let index = OffsetIndex::open_active(
        open_empty(files, index_path)?,
        (&files.fs, index_path),
        0,
        config.segment_index_bytes,
    )?;
    let time_index = TimeIndex::open_active(
        open_empty(files, time_path)?,
        (&files.fs, time_path),
        0,
        config.segment_index_bytes,
    )?;
    Ok((index, time_index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FaultyFs;
    use crate::testing::build_value_batch;

    /// `append` reserves index room for a chunk with `index_entries_max`: no chunk may add
    /// more entries than it says, whatever the interval and the batch sizes.
    #[test]
    fn a_chunk_adds_no_more_index_entries_than_reserved_for() {
        for interval in [0, 1, 60, 61, 62, 128, 500, 4096] {
            let files = Files {
                fs: Arc::new(FaultyFs::new()),
                cache: crate::FileCache::new(1),
            };
            let config = LogConfig {
                index_interval_bytes: interval,
                ..LogConfig::default()
            };
            let mut segment = Segment::create(&files, Path::new("/p"), Offset(0), &config).unwrap();
            let mut next = 0i64;
            for chunk_batches in 1..40usize {
                let mut chunk = Vec::new();
                for i in 0..chunk_batches {
                    let mut b = build_value_batch(1 + i % 3, (i * 37 + chunk_batches) % 300, 1, 0);
                    batch::set_base_offset(&mut b, next);
                    next += 1 + (i % 3) as i64;
                    chunk.extend_from_slice(&b);
                }
                let bound = index_entries_max(
                    segment.bytes_since_index_entry,
                    chunk.len() as u32,
                    interval,
                );
                let (before, time_before) = (segment.index.len(), segment.time_index.len());
                segment.append(&chunk, &config, 0).unwrap();
                let added = segment.index.len() - before;
                assert!(
                    added <= bound,
                    "interval {interval}: {added} entries > {bound}"
                );
                assert!(segment.time_index.len() - time_before <= added);
            }
            assert!(
                interval > 500 || segment.index.len() > 0,
                "entries were added"
            );
        }
    }
}
