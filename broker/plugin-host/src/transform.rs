//! Transform calls (fetch time): the same instance discipline as the other
//! kinds (own `Store`, deadline and memory limit per call, discarded on any
//! error), plus the checks a transform's output needs before the broker
//! re-encodes it: well-formed columns, and each output record naming the
//! input record it replaces.

use std::sync::Arc;

use crate::batch::ColumnarBatch;
use crate::bindings::RecordBatch;
use crate::bindings::{TransformBindings as Bindings, on_api};
use crate::call::Instance;
use crate::compile::{KindPre, PluginVersion};
use crate::engine::PluginEngine;
use crate::error::CallError;

/// One live, initialised instance of a transform plugin. Not shared:
/// callers check one out of a [`crate::Transform`] handle.
#[derive(Debug)]
pub struct TransformInstance(Instance<Bindings>);

impl TransformInstance {
    /// Instantiate `version` in a fresh store and call its `init`.
    ///
    /// # Errors
    /// Not a transform, instantiation failures, anything `init` does wrong.
    pub fn new(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        Instance::new(
            engine,
            version,
            "transform",
            |v, store| match &v.pre {
                KindPre::Transform(pre) => Some(pre.instantiate(store)),
                _ => None,
            },
            |b, store, params| {
                on_api!(b, TransformBindings, sluice_plugin_transform_api, |api| api
                    .call_init(store, params))
            },
            params,
        )
        .map(Self)
    }

    /// The version this instance runs.
    pub fn version(&self) -> &Arc<PluginVersion> {
        &self.0.version
    }

    /// Whether its memory has grown large enough to retire it (`call.rs`).
    pub(crate) fn grown_large(&self) -> bool {
        self.0.grown_large()
    }

    /// The transformed batch: at most one output record per input record,
    /// in order, each carrying the **input** record's offset and timestamp
    /// (a transform rewrites key, value and headers; a record keeps its
    /// place in the log). Input records without an output are dropped.
    ///
    /// # Errors
    /// A trap, a timeout, memory exhaustion, a guest error, or an output
    /// that breaks the contract (malformed columns, an output naming no
    /// input record, two outputs for one input, out of order). The
    /// instance must be dropped afterwards.
    pub fn transform(&mut self, batch: &ColumnarBatch) -> Result<ColumnarBatch, CallError> {
        let output = self.0.call(|b, store| {
            on_api!(b, TransformBindings, sluice_plugin_transform_api, |api| api
                .call_transform(store, &batch.columns))
        })?;
        place(batch, output).map_err(|message| self.0.contract(message))
    }
}

/// Check a transform's output against its input and give each output
/// record its input record's offset and timestamp. The output's `offsets`
/// are input record indices (what the SDK's `Output` writes), strictly
/// increasing: a fetch cannot return two records at one offset.
pub(crate) fn place(input: &ColumnarBatch, output: RecordBatch) -> Result<ColumnarBatch, String> {
    let mut output = ColumnarBatch::from_guest(output)?;
    let mut previous: Option<i64> = None;
    for i in 0..output.len() {
        let source = output.columns.offsets[i];
        if source < 0 || source as u64 >= input.len() as u64 {
            return Err(format!(
                "output record {i} names input record {source}, but the batch has {} records",
                input.len()
            ));
        }
        if previous.is_some_and(|p| source <= p) {
            return Err(format!(
                "output record {i} names input record {source} after input record {}: \
                 at most one output per input, in input order",
                previous.unwrap_or_default()
            ));
        }
        previous = Some(source);
        let source = source as usize;
        output.columns.offsets[i] = input.columns.offsets[source];
        output.columns.timestamps[i] = input.columns.timestamps[source];
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> ColumnarBatch {
        let mut b = ColumnarBatch::new();
        for (offset, ts) in [(100, 7), (101, 8), (102, 9)] {
            b.push(offset, ts, None, Some(b"v"), &[]);
        }
        b
    }

    fn output(sources: &[i64]) -> RecordBatch {
        let mut b = ColumnarBatch::new();
        for &s in sources {
            b.push(s, -1, Some(b"k"), Some(b"new"), &[(b"h", b"x")]);
        }
        b.columns
    }

    #[test]
    fn outputs_take_their_inputs_offset_and_timestamp() {
        let placed = place(&input(), output(&[0, 2])).unwrap();
        let got: Vec<_> = placed.records().map(|r| (r.offset, r.timestamp)).collect();
        assert_eq!(got, [(100, 7), (102, 9)]);
        assert_eq!(placed.records().next().unwrap().value(), Some(&b"new"[..]));
        assert!(place(&input(), output(&[])).unwrap().is_empty());
    }

    #[test]
    fn outputs_that_break_the_contract_are_named() {
        let err = place(&input(), output(&[3])).unwrap_err();
        assert!(err.contains("names input record 3"), "{err}");
        let err = place(&input(), output(&[-1])).unwrap_err();
        assert!(err.contains("names input record -1"), "{err}");
        let err = place(&input(), output(&[1, 1])).unwrap_err();
        assert!(err.contains("at most one output per input"), "{err}");
        let err = place(&input(), output(&[2, 0])).unwrap_err();
        assert!(err.contains("in input order"), "{err}");
        let mut bad = output(&[0]);
        bad.value_ends[0] = 99;
        assert!(place(&input(), bad).unwrap_err().contains("value-ends"));
    }
}
