//! The records a runner hands to its state machine (`sluice_transform::Runner`): a source
//! record read from the log, or a plugin's output record with the output it is routed to.
//!
//! A record is an index into columns shared by every record of one read (or of one plugin
//! call's answer): a read is decoded once into columns, a call's answer is kept in the
//! columns the plugin returned, and an output batch is encoded straight from them, so a
//! record's key and value are not copied between the log and the plugin, nor between the
//! plugin and the output's encoder. The machine's clones (a record to dead-letter) share the
//! columns.

use std::borrow::Cow;
use std::sync::Arc;

use sluice_plugin_host::{ColumnarBatch, RecordView};
use sluice_transform::{OutputRecord, SourceRecord};

/// One record: a source record (`output` 0, unused) or a routed output record.
#[derive(Debug, Clone)]
pub struct Rec {
    columns: Arc<ColumnarBatch>,
    index: u32,
    /// The index of its first header in the columns (see `ColumnarBatch::record_at`).
    first_header: u32,
    /// Its key, value and header bytes (counted once, when the record is made).
    payload_bytes: u32,
    /// Its number of headers.
    headers: u32,
    /// Its source offset (an output record: the offset of the input it came from).
    pub offset: i64,
    /// The output it goes to (an index into the spec's outputs).
    pub output: u32,
    /// The output partition a partitioner plugin chose, if one places this output.
    pub partition: Option<u32>,
}

/// Bytes a record costs beyond its payload in a batch (length, attributes, deltas, lengths).
const RECORD_OVERHEAD_BYTES: u64 = 24;

impl Rec {
    /// Every record of `columns` whose offset is at least `from`, each routed to the output
    /// `outputs` gives it (source records: any).
    pub fn all(columns: ColumnarBatch, outputs: impl Fn(usize) -> u32, from: i64) -> Vec<Self> {
        let columns = Arc::new(columns);
        let mut records = Vec::with_capacity(columns.len());
        let mut first_header = 0u32;
        // Columns hold at most u32::MAX records, headers and bytes (their ends are u32).
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        for (i, r) in columns.records().enumerate() {
            let headers = r.headers();
            if r.offset >= from {
                let payload = r.key().map_or(0, <[u8]>::len)
                    + r.value().map_or(0, <[u8]>::len)
                    + headers
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>();
                records.push(Self {
                    columns: Arc::clone(&columns),
                    index: narrow(i),
                    first_header,
                    payload_bytes: narrow(payload),
                    headers: narrow(headers.len()),
                    offset: r.offset,
                    output: outputs(i),
                    partition: None,
                });
            }
            first_header = first_header.saturating_add(narrow(headers.len()));
        }
        records
    }

    /// The same record (sharing its columns), routed to `output`.
    pub fn routed_to(&self, output: u32) -> Self {
        Self {
            output,
            ..self.clone()
        }
    }

    /// The record, borrowed from its columns.
    pub fn view(&self) -> RecordView<'_> {
        self.columns
            .record_at(self.index as usize, self.first_header as usize)
            .expect("a record's index is inside its columns")
    }

    pub fn key(&self) -> Option<&[u8]> {
        self.view().key()
    }

    /// Appends this record to `batch`, with `extra` headers after its own.
    pub fn push_to(&self, batch: &mut ColumnarBatch, extra: &[(&[u8], &[u8])]) {
        let r = self.view();
        let mut headers: Vec<(&[u8], &[u8])> = r.headers().iter().collect();
        headers.extend_from_slice(extra);
        batch.push(r.offset, r.timestamp, r.key(), r.value(), &headers);
    }

    /// Key, value and header bytes: what the record adds to an output batch's payload.
    pub fn payload_bytes(&self) -> usize {
        self.payload_bytes as usize
    }

    fn bytes(&self) -> u64 {
        RECORD_OVERHEAD_BYTES + u64::from(self.payload_bytes) + u64::from(self.headers) * 4
    }

    /// Whether `self` and `other` are records of the same columns.
    fn shares_columns(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.columns, &other.columns)
    }
}

/// `records` as one batch, as the plugin and the encoder take them: the shared columns
/// themselves when `records` are all of them in order (a whole read, a whole answer), else a
/// copy.
pub fn to_batch(records: &[Rec]) -> Cow<'_, ColumnarBatch> {
    if let Some(first) = records.first()
        && first.columns.len() == records.len()
        && records
            .iter()
            .enumerate()
            .all(|(i, r)| r.index as usize == i && r.shares_columns(first))
    {
        return Cow::Borrowed(&first.columns);
    }
    let mut batch = ColumnarBatch::with_capacity(records.len(), 0);
    for r in records {
        r.push_to(&mut batch, &[]);
    }
    Cow::Owned(batch)
}

impl PartialEq for Rec {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.view(), other.view());
        (self.output, self.partition) == (other.output, other.partition)
            && (a.offset, a.timestamp, a.key(), a.value())
                == (b.offset, b.timestamp, b.key(), b.value())
            && a.headers().iter().eq(b.headers().iter())
    }
}

impl Eq for Rec {}

impl SourceRecord for Rec {
    fn offset(&self) -> i64 {
        self.offset
    }
    fn key(&self) -> Option<&[u8]> {
        Rec::key(self)
    }
    fn size_bytes(&self) -> u64 {
        self.bytes()
    }
}

impl OutputRecord for Rec {
    fn output(&self) -> u32 {
        self.output
    }
    fn key(&self) -> Option<&[u8]> {
        Rec::key(self)
    }
    fn size_bytes(&self) -> u64 {
        self.bytes()
    }
    fn source_offset(&self) -> i64 {
        self.offset
    }
    fn partition(&self) -> Option<u32> {
        self.partition
    }
}
