//! What a transform writes its output records to.

use crate::batch::{BatchBuilder, Record};

/// The output of a transform call: records pushed here replace the input
/// batch, each remembering which input record it came from.
#[derive(Debug, Default)]
pub struct Output {
    builder: BatchBuilder,
    /// Index of the input record being transformed.
    source: i64,
}

impl Output {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Called by the SDK before each input record.
    #[doc(hidden)]
    pub fn begin(&mut self, source_index: usize) {
        self.source = source_index as i64;
    }

    /// Emit the input record unchanged.
    pub fn keep(&mut self, record: &Record<'_>) {
        let headers: Vec<_> = record.headers().iter().collect();
        self.push_at(record.timestamp, record.key(), record.value(), &headers);
    }

    /// Emit a new record with the given timestamp (ms since the epoch).
    pub fn push_at(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
    ) {
        self.builder
            .push(self.source, timestamp, key, value, headers);
    }

    /// The records emitted so far.
    #[must_use]
    pub fn builder(&self) -> &BatchBuilder {
        &self.builder
    }

    #[must_use]
    pub fn into_builder(self) -> BatchBuilder {
        self.builder
    }
}
