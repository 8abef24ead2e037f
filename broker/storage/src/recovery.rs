//! Opening a partition directory: which segments are trusted, scanning the rest batch by
//! batch (length, offsets, CRC), truncating at the first bad byte, rebuilding indexes.
//!
//! Trust comes from two files (see `checkpoint.rs`): with a valid clean-shutdown marker
//! every segment is trusted; otherwise a segment is trusted only if it lies wholly below the
//! recovery point. Trusted segments are opened without reading their batches, so a log of
//! many clean segments opens in milliseconds.

use crate::batch::{self, HEADER_BYTES};
use crate::checkpoint::{self, Checkpoint, CleanerCheckpoint};
use crate::config::LogConfig;
use crate::error::StorageError;
use crate::file_cache::Files;
use crate::io::{Fs, StorageFile};
use crate::limits;
use crate::offset::Offset;
use crate::segment::{INDEX_EXT, LOG_EXT, Segment, TIME_INDEX_EXT, segment_path};
use std::io;
use std::path::Path;

/// What `recover` found.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub segments: Vec<Segment>,
    pub log_start_offset: Offset,
    /// The clean-shutdown marker vouched for the log end: nothing was lost.
    pub clean: bool,
    pub cleaner: CleanerCheckpoint,
}

/// The suffix of the files a clean writes before swapping them in.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";

/// Base offsets of `<20 digits>.log` files, sorted. Removes leftover temp files and
/// index files whose log is gone.
pub(crate) fn list_segments(fs: &dyn Fs, dir: &Path) -> io::Result<Vec<Offset>> {
    let names = fs.list(dir)?;
    let parse = |name: &str, ext: &str| -> Option<Offset> {
        let stem = name.strip_suffix(ext)?.strip_suffix('.')?;
        (stem.len() == limits::SEGMENT_NAME_DIGITS && stem.bytes().all(|b| b.is_ascii_digit()))
            .then(|| stem.parse().ok().map(Offset))
            .flatten()
    };
    let mut bases: Vec<Offset> = names.iter().filter_map(|n| parse(n, LOG_EXT)).collect();
    bases.sort_unstable();
    for name in &names {
        let orphan = [INDEX_EXT, TIME_INDEX_EXT]
            .iter()
            .any(|ext| parse(name, ext).is_some_and(|b| bases.binary_search(&b).is_err()));
        // `.tmp`: the temp names of versions before `io::durable`; `.cleaned`: a clean that
        // never reached its swap (`finish_swap` has run, so none is wanted).
        let leftover = crate::io::is_temp_name(name)
            || name.ends_with(".tmp")
            || name.ends_with(CLEANED_SUFFIX);
        if orphan || leftover {
            tracing::info!(dir = %dir.display(), file = %name, "removing leftover file");
            fs.remove(&dir.join(name))?;
        }
    }
    Ok(bases)
}

/// Opens every segment of `dir`, recovering what is not trusted. Leaves the log fully
/// synced, the checkpoint written and the clean-shutdown marker removed.
pub(crate) fn recover(
    files: &Files,
    dir: &Path,
    config: &LogConfig,
) -> Result<Recovered, StorageError> {
    let fs = files.fs.as_ref();
    if !fs.exists(dir)? {
        // A new partition: its directory entry (and its topic's, if that is new too) must
        // survive a crash like its segments do.
        crate::io::create_dir_durable(fs, dir)?;
    }
    finish_swap(fs, dir)?;
    let cleaner = checkpoint::read_cleaner_checkpoint(fs, dir)?;
    let bases = list_segments(fs, dir)?;
    let checkpoint = checkpoint::read_checkpoint(fs, dir).unwrap_or_else(|e| {
        tracing::warn!(dir = %dir.display(), error = %e, "ignoring corrupt checkpoint; recovering every segment");
        None
    });
    let clean_end = checkpoint::read_clean_shutdown(fs, dir)?;
    let mut clean = clean_end.is_some();
    let gaps_below = cleaner.gaps_below;
    let opening = Opening {
        config,
        checkpoint,
        gaps_below,
    };
    let mut segments = load(files, dir, &opening, &bases, clean)?;
    let log_end = segments.last().map(|s| s.end_offset);
    if let (Some(marker), Some(end)) = (clean_end, log_end)
        && marker != end
    {
        clean = false;
        tracing::warn!(dir = %dir.display(), %marker, %end, "clean-shutdown marker disagrees with the log; recovering");
        drop(segments);
        let bases = list_segments(fs, dir)?;
        segments = load(files, dir, &opening, &bases, false)?;
    }
    let (segments, log_start_offset) = finish(files, dir, config, segments, (checkpoint, clean))?;
    Ok(Recovered {
        segments,
        log_start_offset,
        clean,
        cleaner,
    })
}

/// Completes a swap the cleaner committed (`cleaner.swap` present): the old segments'
/// files go, the `.cleaned` files take their names. Idempotent, so a crash during it is
/// finished by the next open. Without a manifest any `.cleaned` file is a clean that
/// never committed, removed by `list_segments`.
pub(crate) fn finish_swap(fs: &dyn Fs, dir: &Path) -> Result<(), StorageError> {
    let Some(swap) = checkpoint::read_swap(fs, dir)? else {
        return Ok(());
    };
    tracing::info!(dir = %dir.display(), new_base = %swap.new_base, old = swap.old.len(), "finishing an interrupted cleaner swap");
    swap_in(fs, dir, swap.new_base, &swap.old)?;
    checkpoint::remove_swap(fs, dir)?;
    Ok(())
}

/// Removes the old segments' files (except those the cleaned files replace by rename) and
/// renames `<new_base>.<ext>.cleaned` to `<new_base>.<ext>`, then fsyncs the directory.
pub(crate) fn swap_in(fs: &dyn Fs, dir: &Path, new_base: Offset, old: &[Offset]) -> io::Result<()> {
    for &base in old.iter().filter(|&&b| b != new_base) {
        remove_segment_files(fs, dir, base)?;
    }
    for ext in [INDEX_EXT, TIME_INDEX_EXT, LOG_EXT] {
        let cleaned = segment_path(dir, new_base, &format!("{ext}{CLEANED_SUFFIX}"));
        if fs.exists(&cleaned)? {
            fs.rename(&cleaned, &segment_path(dir, new_base, ext))?;
        }
    }
    fs.sync_dir(dir)
}

/// What `load` needs besides the segment list.
struct Opening<'a> {
    config: &'a LogConfig,
    checkpoint: Option<Checkpoint>,
    /// Offset gaps below this are the cleaner's, not damage.
    gaps_below: Offset,
}

/// Trusted segments opened, the rest scanned; inconsistent tails deleted.
fn load(
    files: &Files,
    dir: &Path,
    opening: &Opening<'_>,
    bases: &[Offset],
    clean: bool,
) -> Result<Vec<Segment>, StorageError> {
    let (fs, config) = (files.fs.as_ref(), opening.config);
    let recovery_point = if clean {
        Offset(i64::MAX)
    } else {
        opening.checkpoint.map_or(Offset(0), |c| c.recovery_point)
    };
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let next = bases.get(i + 1).copied();
        if let Some(prev) = segments.last_mut()
            && prev.end_offset < base
            && prev.end_offset < opening.gaps_below
        {
            // The cleaner removed the segment's last records: it still spans to `base`.
            prev.end_offset = base;
        }
        if let Some(prev) = segments.last()
            && prev.end_offset != base
        {
            tracing::warn!(dir = %dir.display(), expected = %prev.end_offset, found = %base, "gap or overlap between segments; deleting the rest");
            delete_from(fs, dir, &bases[i..])?;
            break;
        }
        let trusted = match next {
            Some(next) => next <= recovery_point,
            None => clean,
        };
        if trusted {
            if let Some(segment) = Segment::open_trusted(files, dir, base, config, next)? {
                segments.push(segment);
                continue;
            }
            tracing::warn!(dir = %dir.display(), segment = %base, "index missing or inconsistent; rebuilding");
        }
        let (segment, complete) = scan(files, dir, base, config, opening.gaps_below)?;
        segments.push(segment);
        if !complete {
            delete_from(fs, dir, &bases[i + 1..])?;
            break;
        }
    }
    Ok(segments)
}

fn delete_from(fs: &dyn Fs, dir: &Path, bases: &[Offset]) -> io::Result<()> {
    for &base in bases {
        tracing::warn!(dir = %dir.display(), segment = %base, "deleting segment after the recovered end of the log");
        remove_segment_files(fs, dir, base)?;
    }
    Ok(())
}

/// Unlinks a segment's three files (those present).
fn remove_segment_files(fs: &dyn Fs, dir: &Path, base: Offset) -> io::Result<()> {
    for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
        match fs.remove(&segment_path(dir, base, ext)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Seals scanned non-last segments, syncs, creates a first segment if there is none, and
/// persists the checkpoint with `recovery_point = log end`. After a clean shutdown whose
/// segments all opened trusted, the directory and the checkpoint are already durable and
/// say the same: only the marker's removal is written (one fsync per partition at start,
/// not four).
fn finish(
    files: &Files,
    dir: &Path,
    config: &LogConfig,
    mut segments: Vec<Segment>,
    (checkpoint, clean): (Option<Checkpoint>, bool),
) -> Result<(Vec<Segment>, Offset), StorageError> {
    let fs = files.fs.as_ref();
    let checkpointed_start = checkpoint.map_or(Offset(0), |c| c.log_start_offset);
    let created = segments.is_empty();
    if created {
        segments.push(Segment::create(files, dir, checkpointed_start, config)?);
    }
    let unchanged = clean && !created && segments.iter().all(|s| !s.needs_sync);
    let last = segments.len() - 1;
    for segment in &mut segments[..last] {
        if segment.needs_sync {
            segment.seal()?;
        }
    }
    for segment in &mut segments {
        segment.flush()?;
    }
    let log_end = segments[last].end_offset;
    let mut log_start_offset = checkpointed_start.max(segments[0].base);
    if log_start_offset > log_end {
        tracing::warn!(dir = %dir.display(), %log_start_offset, %log_end, "log start offset past the recovered end; clamping");
        log_start_offset = log_end;
    }
    let recovered = Checkpoint {
        log_start_offset,
        recovery_point: log_end,
    };
    if !(unchanged && checkpoint == Some(recovered)) {
        fs.sync_dir(dir)?;
        checkpoint::write_checkpoint(fs, dir, recovered)?;
    }
    checkpoint::remove_clean_shutdown(fs, dir)?;
    Ok((segments, log_start_offset))
}

/// Why a scan stopped before the end of the file.
fn stop_reason(
    header: &batch::BatchHeader,
    expected: Offset,
    gaps_below: Offset,
    batch_bytes: &[u8],
) -> Option<String> {
    let cleaner_gap = header.base_offset > expected.value() && expected < gaps_below;
    if header.base_offset != expected.value() && !cleaner_gap {
        return Some(format!(
            "base offset {} where {expected} was expected",
            header.base_offset
        ));
    }
    if header.last_offset_delta < 0 {
        return Some(format!(
            "negative last offset delta {}",
            header.last_offset_delta
        ));
    }
    let computed = batch::compute_crc(batch_bytes);
    (computed != header.crc).then(|| {
        format!(
            "CRC mismatch: header {:#010x}, bytes {computed:#010x}",
            header.crc
        )
    })
}

/// Scans a segment batch by batch, rebuilding its indexes and truncating at the first bad
/// byte. Returns the segment and whether the whole file was good.
pub(crate) fn scan(
    files: &Files,
    dir: &Path,
    base: Offset,
    config: &LogConfig,
    gaps_below: Offset,
) -> Result<(Segment, bool), StorageError> {
    let mut segment = Segment::open_for_rebuild(files, dir, base, config)?;
    let log = segment.log_file()?;
    let file_bytes = log.len()?;
    let mut reader = ChunkReader::new(file_bytes.min(u64::from(limits::SEGMENT_BYTES_MAX)));
    let mut position: u64 = 0;
    let reason = loop {
        if position >= reader.file_bytes {
            break (position < file_bytes).then(|| "bytes past the segment size limit".to_owned());
        }
        match scan_one(&mut reader, &mut segment, position, (config, gaps_below))? {
            Ok(batch_bytes) => position += batch_bytes,
            Err(reason) => break Some(reason),
        }
    };
    if let Some(reason) = &reason {
        let truncated_bytes = file_bytes - position;
        tracing::warn!(dir = %dir.display(), segment = %base, position, truncated_bytes, reason = %reason, "truncating log");
    }
    segment.finish_rebuild(position as u32, file_bytes)?;
    tracing::info!(dir = %dir.display(), segment = %base, bytes = position, end_offset = %segment.end_offset, "recovered segment");
    Ok((segment, reason.is_none()))
}

/// Checks and indexes the batch at `position`: its size, or why the scan stops there.
fn scan_one(
    reader: &mut ChunkReader,
    segment: &mut Segment,
    position: u64,
    (config, gaps_below): (&LogConfig, Offset),
) -> io::Result<Result<u64, String>> {
    let log = segment.log_file()?; // the segment being scanned is held open
    let header = match reader
        .get(log.as_ref(), position, HEADER_BYTES)?
        .map(batch::parse_header)
    {
        None => return Ok(Err("partial batch header at the end".to_owned())),
        Some(Err(e)) => return Ok(Err(e.to_string())),
        Some(Ok(header)) => header,
    };
    let Some(batch_bytes) = reader.get(log.as_ref(), position, header.total_bytes())? else {
        return Ok(Err(format!(
            "batch of {} bytes cut off at the end",
            header.total_bytes()
        )));
    };
    if let Some(reason) = stop_reason(&header, segment.end_offset, gaps_below, batch_bytes) {
        return Ok(Err(reason));
    }
    let offsets_fit =
        header.last_offset() - segment.base.value() <= limits::SEGMENT_RELATIVE_OFFSET_MAX;
    if !offsets_fit || segment.index.is_full() || segment.time_index.is_full() {
        return Ok(Err("segment cannot index more batches".to_owned()));
    }
    segment.track_batch(position as u32, &header, config.index_interval_bytes)?;
    Ok(Ok(header.total_bytes() as u64))
}

/// Sequential reads in large chunks; hands out byte ranges that lie wholly in the file.
struct ChunkReader {
    buf: Vec<u8>,
    start: u64,
    len: usize,
    file_bytes: u64,
}

impl ChunkReader {
    fn new(file_bytes: u64) -> Self {
        let capacity = (limits::RECOVERY_READ_CHUNK_BYTES as u64)
            .min(file_bytes.max(HEADER_BYTES as u64)) as usize;
        ChunkReader {
            buf: vec![0u8; capacity],
            start: 0,
            len: 0,
            file_bytes,
        }
    }

    /// `len` bytes at `position`, or `None` if the file ends first.
    fn get(
        &mut self,
        file: &dyn StorageFile,
        position: u64,
        len: usize,
    ) -> io::Result<Option<&[u8]>> {
        if position + len as u64 > self.file_bytes {
            return Ok(None);
        }
        let in_buffer =
            position >= self.start && position + len as u64 <= self.start + self.len as u64;
        if !in_buffer {
            if len > self.buf.len() {
                self.buf.resize(len, 0);
            }
            let read = (self.file_bytes - position).min(self.buf.len() as u64) as usize;
            file.read_at(&mut self.buf[..read], position)?;
            (self.start, self.len) = (position, read);
        }
        let at = (position - self.start) as usize;
        Ok(Some(&self.buf[at..at + len]))
    }
}
