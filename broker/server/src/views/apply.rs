//! A view on fetched bytes: per stored batch, decode (decompress), one call of each stage for
//! the whole batch, and re-encode the kept records at their original offsets (same codec,
//! new CRC). What goes back for each source batch:
//! - every record kept and unchanged (filters only): the stored batch, byte for byte;
//! - some kept: a batch of those records over the original offset range;
//! - none kept (or the batch skipped under `skip`): an empty batch over the original range,
//!   merged with the empty ranges next to it, so a consumer moves past a fully filtered range
//!   in one fetch instead of stalling (Kafka leaves such batches after compaction).
//!
//! Control batches pass through unchanged. Blocking and CPU-bound: Fetch runs it on the
//! blocking pool.

use kafka_protocol::ResponseError;
use std::cell::RefCell;

use sluice_plugin_host::{CallError, View};
use sluice_storage::ReadSlice;
use sluice_storage::batch::{BatchHeader, iter_batches};

use crate::error::KafkaError;
use crate::records::{self, CodecError, DecompressLimit};

/// How far a stored batch may decompress before a view's plugins see it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: crate::limits::VIEW_DECOMPRESSED_BYTES_MAX,
    name: "VIEW_DECOMPRESSED_BYTES_MAX",
};

/// Reads `slice` (whole stored batches of `name`'s source partition) into this thread's
/// read buffer (kept between fetches, up to `READ_BUFFER_KEPT_BYTES_MAX`) and runs [`apply`].
pub fn apply_slice(view: &View, name: &str, slice: &ReadSlice) -> Result<Vec<u8>, KafkaError> {
    thread_local! {
        static READ: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    READ.with(|cell| {
        let mut buf = cell.take();
        let out = slice
            .read_into(&mut buf)
            .map_err(|e| {
                tracing::error!(view = name, error = %e, "read failed");
                KafkaError::new(ResponseError::KafkaStorageError, e.to_string())
            })
            .and_then(|()| apply(view, name, &buf));
        if buf.capacity() <= READ_BUFFER_KEPT_BYTES_MAX {
            cell.replace(buf);
        }
        out
    })
}

/// Most bytes of read buffer a thread keeps for its next view fetch; a bigger one is freed.
const READ_BUFFER_KEPT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Runs `view` over `bytes` (whole stored batches of `name`'s partition) and returns the
/// batches to send. A plugin failure under `fail` ends the output before the failed batch;
/// when that batch is the first, the fetch fails with UNKNOWN_SERVER_ERROR (Java and
/// librdkafka consumers report it and retry). A batch that does not decode is
/// KAFKA_STORAGE_ERROR (the log is damaged).
pub fn apply(view: &View, name: &str, bytes: &[u8]) -> Result<Vec<u8>, KafkaError> {
    let mut out = Out {
        bytes: Vec::with_capacity(bytes.len()),
        gap: EmptyRange::default(),
    };
    records::with_columns(|columns| {
        for item in iter_batches(bytes) {
            let (header, batch) = item.map_err(|e| storage_error(name, &CodecError::Invalid(e)))?;
            if header.is_control() {
                out.batch(batch);
                continue;
            }
            columns.clear();
            records::decode(batch, columns, DECOMPRESS_LIMIT)
                .map_err(|e| storage_error(name, &e))?;
            let kept = match view.apply(columns) {
                Ok(kept) => kept,
                Err(e) => return failed(name, &header, &e, &out),
            };
            if let Some(e) = &kept.skipped_because {
                tracing::warn!(
                    view = name,
                    skipped = kept.skipped_records,
                    "view plugin failed (on_error = skip): {e}"
                );
            }
            if kept.kept_len(columns) == 0 {
                out.gap.extend(&header, &mut out.bytes);
            } else if kept.changed.is_none() {
                out.batch(batch);
            } else {
                let encoded = records::encode_kept(&header, kept.kept(columns))
                    .map_err(|e| storage_error(name, &e))?;
                out.batch(&encoded);
            }
        }
        Ok(())
    })
    .or_else(|e: Stop| match e {
        Stop::Error(e) => Err(e),
        Stop::Early => Ok(()),
    })?;
    out.gap.flush(&mut out.bytes);
    Ok(out.bytes)
}

/// What the fetch gets back so far.
struct Out {
    bytes: Vec<u8>,
    gap: EmptyRange,
}

impl Out {
    /// Appends a batch to send, after the empty range before it.
    fn batch(&mut self, batch: &[u8]) {
        self.gap.flush(&mut self.bytes);
        self.bytes.extend_from_slice(batch);
    }
}

/// Why the batch loop stopped before the end.
enum Stop {
    /// The fetch fails.
    Error(KafkaError),
    /// The batches so far go out.
    Early,
}

impl From<KafkaError> for Stop {
    fn from(e: KafkaError) -> Self {
        Self::Error(e)
    }
}

/// A plugin failed under `fail` on the batch at `header`: the batches before it go out (the
/// consumer meets the error when it fetches from the failed batch), or, when it is the
/// first, the fetch fails.
fn failed(name: &str, header: &BatchHeader, e: &CallError, out: &Out) -> Result<(), Stop> {
    tracing::warn!(
        view = name,
        offset = header.base_offset,
        "view plugin failed (on_error = fail): {e}"
    );
    if out.bytes.is_empty() && out.gap.open.is_none() {
        return Err(Stop::Error(KafkaError::new(
            ResponseError::UnknownServerError,
            format!("view {name}: {e}"),
        )));
    }
    Err(Stop::Early)
}

/// Consecutive source batches with nothing kept, sent as one empty batch.
#[derive(Default)]
struct EmptyRange {
    /// The first batch's header and the range's last offset.
    open: Option<(BatchHeader, i64)>,
}

impl EmptyRange {
    /// Adds `header`'s range, first sending the open one if the two cannot merge.
    fn extend(&mut self, header: &BatchHeader, out: &mut Vec<u8>) {
        if let Some((first, last)) = &mut self.open
            && header.base_offset == *last + 1
            && header.last_offset() - first.base_offset <= i64::from(i32::MAX)
        {
            *last = header.last_offset();
            return;
        }
        self.flush(out);
        self.open = Some((*header, header.last_offset()));
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        if let Some((first, last)) = self.open.take() {
            out.extend_from_slice(&records::empty_batch(&first, last));
        }
    }
}

fn storage_error(name: &str, e: &CodecError) -> KafkaError {
    tracing::error!(view = name, "a stored batch does not decode: {e}");
    KafkaError::new(
        ResponseError::KafkaStorageError,
        format!("view {name}: a stored batch does not decode: {e}"),
    )
}
