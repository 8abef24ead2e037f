//! The records a runner hands to its state machine (`sluice_transform::Runner`): a source
//! record read from the log, or a plugin's output record with the output it is routed to.
//! Payloads are `Bytes`, so the machine's clones (a record to dead-letter) share them.

use bytes::Bytes;
use sluice_plugin_host::{ColumnarBatch, RecordView};
use sluice_transform::{OutputRecord, SourceRecord};

/// One record: a source record (`output` 0, unused) or a routed output record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// Its source offset (an output record: the offset of the input it came from).
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(Bytes, Bytes)>,
    /// The output it goes to (an index into the spec's outputs).
    pub output: u32,
    /// The output partition a partitioner plugin chose, if one places this output.
    pub partition: Option<u32>,
}

/// Bytes a record costs beyond its payload in a batch (length, attributes, deltas, lengths).
const RECORD_OVERHEAD_BYTES: u64 = 24;

impl Rec {
    /// A copy of a record of a batch, routed to `output`.
    pub fn copy(r: &RecordView<'_>, output: u32) -> Self {
        Self {
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key().map(Bytes::copy_from_slice),
            value: r.value().map(Bytes::copy_from_slice),
            headers: r
                .headers()
                .iter()
                .map(|(k, v)| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))
                .collect(),
            output,
            partition: None,
        }
    }

    /// Appends this record to `batch`, with `extra` headers after its own.
    pub fn push_to(&self, batch: &mut ColumnarBatch, extra: &[(&[u8], &[u8])]) {
        let mut headers: Vec<(&[u8], &[u8])> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_ref()))
            .collect();
        headers.extend_from_slice(extra);
        batch.push(
            self.offset,
            self.timestamp,
            self.key.as_deref(),
            self.value.as_deref(),
            &headers,
        );
    }

    fn bytes(&self) -> u64 {
        let len = |b: &Option<Bytes>| b.as_ref().map_or(0, |b| b.len() as u64);
        let headers: u64 = self
            .headers
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64 + 4)
            .sum();
        RECORD_OVERHEAD_BYTES + len(&self.key) + len(&self.value) + headers
    }
}

/// A batch of `records`, as the plugin and the encoder take them.
pub fn to_batch<'a>(records: impl ExactSizeIterator<Item = &'a Rec>) -> ColumnarBatch {
    let mut batch = ColumnarBatch::with_capacity(records.len(), 0);
    for r in records {
        r.push_to(&mut batch, &[]);
    }
    batch
}

impl SourceRecord for Rec {
    fn offset(&self) -> i64 {
        self.offset
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
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
        self.key.as_deref()
    }
    fn size_bytes(&self) -> u64 {
        self.bytes()
    }
    fn partition(&self) -> Option<u32> {
        self.partition
    }
}
