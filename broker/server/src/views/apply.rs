//! A view on fetched bytes: per stored batch, decode (decompress), one call of each stage for
//! the whole batch, and re-encode the kept records at their original offsets (same codec,
//! new CRC). What goes back for each source batch:
//! - every record kept and unchanged (filters only): the stored batch, byte for byte;
//! - some kept: a batch of those records over the original offset range;
//! - none kept (or the batch skipped under `skip`): an empty batch over the original range,
//!   merged with the empty ranges next to it, so a consumer moves past a fully filtered range
//!   in one fetch instead of stalling (Kafka leaves such batches after compaction).
//!
//! Control batches pass through unchanged, and a re-encoded batch keeps its source's producer
//! id, epoch, base sequence and attributes (transactional flag), so a consumer matches it
//! to its transaction.
//!
//! Under read_committed the fetch reads only below the source's last stable offset and hands
//! in the aborted transactions it overlaps: a batch of an aborted transaction (its producer's,
//! from the transaction's first offset to its ABORT marker) goes out as an empty range
//! without being decoded, so no plugin ever sees aborted records. (The fetch still returns
//! the aborted list, as for a topic; the client finds nothing left to drop.)
//!
//! Blocking and CPU-bound: Fetch runs it on the blocking pool.

use kafka_protocol::ResponseError;
use std::cell::RefCell;
use std::collections::HashMap;

use sluice_plugin_host::{CallError, View};
use sluice_storage::batch::{BatchHeader, iter_batches};
use sluice_storage::{AbortedTxn, ReadSlice};

use crate::error::KafkaError;
use crate::records::{self, CodecError, DecompressLimit};

/// How far a stored batch may decompress before a view's plugins see it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: crate::limits::VIEW_DECOMPRESSED_BYTES_MAX,
    name: "VIEW_DECOMPRESSED_BYTES_MAX",
};

/// Reads `slice` (whole stored batches of `name`'s source partition) into this thread's
/// read buffer (kept between fetches, up to `READ_BUFFER_KEPT_BYTES_MAX`) and runs [`apply`].
pub fn apply_slice(
    view: &View,
    name: &str,
    slice: &ReadSlice,
    aborted: &[AbortedTxn],
) -> Result<Vec<u8>, KafkaError> {
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
            .and_then(|()| apply(view, name, &buf, aborted));
        if buf.capacity() <= READ_BUFFER_KEPT_BYTES_MAX {
            cell.replace(buf);
        }
        out
    })
}

/// Most bytes of read buffer a thread keeps for its next view fetch; a bigger one is freed.
const READ_BUFFER_KEPT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Runs `view` over `bytes` (whole stored batches of `name`'s partition) and returns the
/// batches to send; the batches of the `aborted` transactions (read_committed; empty
/// otherwise) are dropped unseen. A plugin failure under `fail` ends the output before the failed batch;
/// when that batch is the first, the fetch fails with UNKNOWN_SERVER_ERROR (Java and
/// librdkafka consumers report it and retry). A batch that does not decode is
/// KAFKA_STORAGE_ERROR (the log is damaged).
pub fn apply(
    view: &View,
    name: &str,
    bytes: &[u8],
    aborted: &[AbortedTxn],
) -> Result<Vec<u8>, KafkaError> {
    let aborted = Aborted::new(aborted);
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
            if aborted.contains(&header) {
                out.gap.extend(&header, &mut out.bytes);
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

/// A read_committed fetch's aborted transactions, by producer id: (first offset, offset of
/// the ABORT marker). At most `ABORTED_TXNS_PER_READ_MAX` entries (the storage bound).
/// Shared with materialized transforms, which read their sources read_committed.
pub(crate) struct Aborted(HashMap<i64, Vec<(i64, i64)>>);

impl Aborted {
    pub(crate) fn new(list: &[AbortedTxn]) -> Self {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for t in list {
            by_producer
                .entry(t.producer_id)
                .or_default()
                .push((t.first_offset, t.last_offset));
        }
        Self(by_producer)
    }

    /// Whether `header` is a data batch of one of the aborted transactions.
    pub(crate) fn contains(&self, header: &BatchHeader) -> bool {
        header.is_transactional()
            && self.0.get(&header.producer_id).is_some_and(|ranges| {
                ranges.iter().any(|&(first, marker)| {
                    first <= header.base_offset && header.base_offset < marker
                })
            })
    }
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

#[cfg(test)]
mod tests {
    use sluice_storage::batch::{parse_header, set_base_offset};
    use sluice_storage::testing::producer_batch;

    use super::*;

    fn header(
        producer_id: i64,
        base_offset: i64,
        count: usize,
        transactional: bool,
    ) -> BatchHeader {
        let mut bytes = producer_batch(producer_id, 0, 0, count, transactional);
        set_base_offset(&mut bytes, base_offset);
        parse_header(&bytes).unwrap()
    }

    #[test]
    fn only_data_batches_inside_an_aborted_transaction_of_their_producer_are_dropped() {
        let txn = |first_offset, last_offset| AbortedTxn {
            producer_id: 7,
            first_offset,
            last_offset,
        };
        let aborted = Aborted::new(&[txn(10, 20), txn(30, 40)]);
        assert!(aborted.contains(&header(7, 10, 2, true)));
        assert!(aborted.contains(&header(7, 35, 1, true)));
        assert!(
            !aborted.contains(&header(7, 21, 2, true)),
            "a later transaction"
        );
        assert!(!aborted.contains(&header(7, 5, 2, true)), "an earlier one");
        assert!(
            !aborted.contains(&header(8, 12, 1, true)),
            "another producer"
        );
        assert!(
            !aborted.contains(&header(7, 12, 1, false)),
            "not transactional"
        );
        assert!(!Aborted::new(&[]).contains(&header(7, 12, 1, true)));
    }
}
