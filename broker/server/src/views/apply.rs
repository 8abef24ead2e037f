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
use sluice_plugin_host::{ColumnarBatch, View};
use sluice_storage::batch::{BatchHeader, iter_batches};

use crate::error::KafkaError;
use crate::records::{self, CodecError, DecompressLimit};

/// How far a stored batch may decompress before a view's plugins see it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: crate::limits::VIEW_DECOMPRESSED_BYTES_MAX,
    name: "VIEW_DECOMPRESSED_BYTES_MAX",
};

/// Runs `view` over `bytes` (whole stored batches of `name`'s partition) and returns the
/// batches to send. A plugin failure under `fail` ends the output before the failed batch;
/// when that batch is the first, the fetch fails with UNKNOWN_SERVER_ERROR (Java and
/// librdkafka consumers report it and retry). A batch that does not decode is
/// KAFKA_STORAGE_ERROR (the log is damaged).
pub fn apply(view: &View, name: &str, bytes: &[u8]) -> Result<Vec<u8>, KafkaError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut gap = EmptyRange::default();
    let mut columns = ColumnarBatch::new();
    for item in iter_batches(bytes) {
        let (header, batch) = item.map_err(|e| storage_error(name, &CodecError::Invalid(e)))?;
        if header.is_control() {
            gap.flush(&mut out);
            out.extend_from_slice(batch);
            continue;
        }
        columns.clear();
        records::decode(batch, &mut columns, DECOMPRESS_LIMIT)
            .map_err(|e| storage_error(name, &e))?;
        let kept = match view.apply(&columns) {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!(
                    view = name,
                    offset = header.base_offset,
                    "view plugin failed (on_error = fail): {e}"
                );
                // The batches before the failed one go out; the consumer meets the error
                // when it fetches from the failed batch.
                gap.flush(&mut out);
                if !out.is_empty() {
                    return Ok(out);
                }
                return Err(KafkaError::new(
                    ResponseError::UnknownServerError,
                    format!("view {name}: {e}"),
                ));
            }
        };
        if let Some(e) = &kept.skipped_because {
            tracing::warn!(
                view = name,
                skipped = kept.skipped_records,
                "view plugin failed (on_error = skip): {e}"
            );
        }
        let kept_len = kept.kept_len(&columns);
        if kept_len == 0 {
            gap.extend(&header, &mut out);
        } else if kept.changed.is_none() {
            gap.flush(&mut out);
            out.extend_from_slice(batch);
        } else {
            gap.flush(&mut out);
            let encoded = records::encode_kept(&header, kept.kept(&columns))
                .map_err(|e| storage_error(name, &e))?;
            out.extend_from_slice(&encoded);
        }
    }
    gap.flush(&mut out);
    Ok(out)
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
