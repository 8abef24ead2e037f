//! Rebuilding producer state when a log opens: the newest snapshot, then every batch from
//! its offset to the log end (headers only, plus the one record of each control batch).

use std::io;
use std::path::Path;

use super::{Marker, ProducerStateMap, snapshot};
use crate::batch::{self, BatchHeader, HEADER_BYTES};
use crate::io::Fs;
use crate::offset::Offset;
use crate::segment::Segment;

/// Control batches are one small record; a longer one is not a marker we wrote.
const CONTROL_BATCH_BYTES_MAX: usize = 256;

/// The producer state of the log made of `segments` (from `log_start`): the newest usable
/// snapshot, with the batches after it replayed.
pub(crate) fn rebuild(
    fs: &dyn Fs,
    dir: &Path,
    segments: &[Segment],
    log_start: Offset,
) -> io::Result<ProducerStateMap> {
    let log_end = segments.last().map_or(log_start, |s| s.end_offset);
    let (from, mut state) = match snapshot::load_newest(fs, dir, log_end)? {
        Some((offset, state)) => (offset.max(log_start), state),
        None => (log_start, ProducerStateMap::new()),
    };
    let mut replayed = 0u64;
    for segment in segments
        .iter()
        .filter(|s| s.end_offset > from && s.size_bytes > 0)
    {
        let start = if segment.base >= from {
            0
        } else {
            match segment.locate(from)? {
                Some((position, _)) => position,
                None => continue, // a cleaned segment with nothing left at or after `from`
            }
        };
        let mut failed = None;
        segment.scan_headers(start, |position, header| {
            if let Err(e) = replay(segment, position, header, &mut state) {
                failed = Some(e);
                return false;
            }
            replayed += 1;
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    state.truncate_head(log_start);
    if replayed > 0 {
        tracing::info!(dir = %dir.display(), %from, %log_end, batches = replayed, producers = state.producers.len(), "rebuilt producer state");
    }
    Ok(state)
}

fn replay(
    segment: &Segment,
    position: u32,
    header: &BatchHeader,
    state: &mut ProducerStateMap,
) -> io::Result<()> {
    if !header.is_control() {
        state.apply(header, None);
        return Ok(());
    }
    let len = header
        .total_bytes()
        .clamp(HEADER_BYTES, CONTROL_BATCH_BYTES_MAX);
    let mut bytes = vec![0u8; len];
    segment
        .log_file()?
        .read_at(&mut bytes, u64::from(position))?;
    match batch::parse_control_record(&bytes)
        .and_then(|(code, epoch)| Marker::from_type_code(code).map(|m| (m, epoch)))
    {
        Some(marker) => state.apply(header, Some(marker)),
        None => {
            tracing::warn!(segment = %segment.base, offset = header.base_offset, "control batch that is not a transaction marker; ignored");
        }
    }
    Ok(())
}
