//! Transform calls: the same instance discipline as every kind (own `Store`, deadline and
//! memory limit per call, discarded on any error: `call.rs`), plus the checks a transform's
//! output needs before the broker re-encodes it: well-formed columns, each output record
//! naming the input record it came from, and its output (the reserved header
//! `sluice.output`, `sluice_columns::output`).
//!
//! Two callers, one plugin binary:
//! - a **view** (fetch time, [`TransformInstance::transform`]) shows its first output only:
//!   records routed elsewhere are dropped, and what is left is at most one record per input
//!   record, in order (a fetch cannot return two records at one offset);
//! - a **materialized transform** ([`TransformInstance::transform_routed`]) gets every
//!   record with the index of the output it goes to: zero, one or several records per input
//!   record, in input order.
//!
//! Both remove the routing header from the records they return, and strip it from the input
//! before the plugin sees it, so a producer cannot steer a record by writing the header: only
//! the plugin routes.

use sluice_columns::output::{OUTPUT_HEADER, Target};
use wasmtime::Store;

use crate::batch::ColumnarBatch;
use crate::bindings::{Param, RecordBatch, TransformBindings, on_api};
use crate::call::{GuestResult, Instance, Kind};
use crate::compile::{KindPre, PluginVersion};
use crate::error::CallError;
use crate::state::HostState;

/// The transform kind (WIT world `transform`).
#[derive(Debug)]
pub enum TransformKind {}

impl Kind for TransformKind {
    type Bindings = TransformBindings;
    const NAME: &'static str = "transform";

    fn instantiate(
        version: &PluginVersion,
        store: &mut Store<HostState>,
    ) -> Option<wasmtime::Result<TransformBindings>> {
        match &version.pre {
            KindPre::Transform(pre) => Some(pre.instantiate(store)),
            _ => None,
        }
    }

    fn init(
        b: &TransformBindings,
        store: &mut Store<HostState>,
        params: &[Param],
    ) -> GuestResult<()> {
        on_api!(b, TransformBindings, sluice_plugin_transform_api, |api| api
            .call_init(store, params))
    }
}

/// One live, initialised instance of a transform plugin. Not shared: callers check one out
/// of a [`crate::Transform`] handle.
pub type TransformInstance = Instance<TransformKind>;

impl Instance<TransformKind> {
    /// The transformed batch as a view shows it: the records routed to the first output, at
    /// most one per input record, in order, each carrying the **input** record's offset and
    /// timestamp (a transform rewrites key, value and headers; a record keeps its place in
    /// the log). Input records without an output are dropped.
    ///
    /// # Errors
    /// A trap, a timeout, memory exhaustion, a guest error, or an output
    /// that breaks the contract (malformed columns, an output naming no
    /// input record, two outputs for one input, out of order, a malformed
    /// routing header). The instance must be dropped afterwards.
    pub fn transform(&mut self, batch: &ColumnarBatch) -> Result<ColumnarBatch, CallError> {
        let output = self.transform_call(batch)?;
        place(batch, output).map_err(|message| self.contract(message))
    }

    /// The transformed batch as a materialized transform writes it: every output record
    /// with the output it goes to (an index into `outputs`, the transform's output topics
    /// in order), the input record's offset (which record it came from) and the plugin's
    /// timestamp (the input's where the plugin gave none).
    ///
    /// # Errors
    /// As [`Self::transform`], except that several records per input record are allowed;
    /// a routing header naming no output of `outputs` breaks the contract.
    pub fn transform_routed(
        &mut self,
        batch: &ColumnarBatch,
        outputs: &[&str],
    ) -> Result<Routed, CallError> {
        let output = self.transform_call(batch)?;
        route(batch, output, Outputs::Topics(outputs)).map_err(|message| self.contract(message))
    }

    /// One call on `batch` without routing headers.
    fn transform_call(&mut self, batch: &ColumnarBatch) -> Result<RecordBatch, CallError> {
        let stripped = without_output_header(batch);
        let input = stripped.as_ref().unwrap_or(batch);
        self.call(|b, store| {
            on_api!(b, TransformBindings, sluice_plugin_transform_api, |api| api
                .call_transform(store, &input.columns))
        })
    }
}

/// A materialized transform's output: records and, per record, its output.
#[derive(Debug, Clone, Default)]
pub struct Routed {
    /// The output records, in input order, each with the offset of the input record it
    /// came from; no record carries the routing header.
    pub batch: ColumnarBatch,
    /// Per record of `batch`, the index of its output.
    pub outputs: Vec<u32>,
}

/// The outputs a routing header may name.
#[derive(Debug, Clone, Copy)]
enum Outputs<'a> {
    /// A view: only the first output is shown; any other target is routed away.
    View,
    /// A materialized transform's output topics, in order.
    Topics(&'a [&'a str]),
}

/// The output index of a view record routed away from the view.
const ROUTED_AWAY: u32 = u32::MAX;

impl Outputs<'_> {
    fn resolve(self, target: Target<'_>) -> Result<u32, String> {
        match (self, target) {
            (Self::View, Target::Index(0)) => Ok(0),
            (Self::View, _) => Ok(ROUTED_AWAY),
            (Self::Topics(topics), Target::Index(i)) if (i as usize) < topics.len() => Ok(i),
            (Self::Topics(topics), Target::Name(name)) => topics
                .iter()
                .position(|t| *t == name)
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| {
                    format!("header {OUTPUT_HEADER} names {target}, which is not one of {topics:?}")
                }),
            (Self::Topics(topics), target) => Err(format!(
                "header {OUTPUT_HEADER} names {target}, but the transform has {} outputs",
                topics.len()
            )),
        }
    }
}

/// Whether a record's header is the routing header.
fn is_output_header(name: &[u8]) -> bool {
    name == OUTPUT_HEADER.as_bytes()
}

/// `batch` without routing headers, or `None` when no record carries one (no copy).
fn without_output_header(batch: &ColumnarBatch) -> Option<ColumnarBatch> {
    let carries = |r: &crate::RecordView<'_>| r.headers().iter().any(|(n, _)| is_output_header(n));
    if !batch.records().any(|r| carries(&r)) {
        return None;
    }
    let mut out = ColumnarBatch::with_capacity(batch.len(), batch.capacity_bytes());
    let mut headers = Vec::new();
    for r in batch.records() {
        headers.clear();
        headers.extend(r.headers().iter().filter(|(n, _)| !is_output_header(n)));
        out.push(r.offset, r.timestamp, r.key(), r.value(), &headers);
    }
    Some(out)
}

/// Check a transform's output against its input and route each record: the output's
/// `offsets` are input record indices (what the SDK's `Output` writes), non-decreasing; each
/// record's output is read from its routing header, which is removed. The records get their
/// input record's offset, and its timestamp where the plugin wrote none (-1); a view's
/// records always take the input's timestamp ([`place`]).
fn route(
    input: &ColumnarBatch,
    output: RecordBatch,
    outputs: Outputs<'_>,
) -> Result<Routed, String> {
    let mut output = ColumnarBatch::from_guest(output)?;
    let mut targets = Vec::with_capacity(output.len());
    let mut carried = false;
    let mut previous = 0i64;
    for (i, r) in output.records().enumerate() {
        let source = r.offset;
        if source < 0 || source as u64 >= input.len() as u64 {
            return Err(format!(
                "output record {i} names input record {source}, but the batch has {} records",
                input.len()
            ));
        }
        if source < previous {
            return Err(format!(
                "output record {i} names input record {source} after input record {previous}: \
                 outputs must be in input order"
            ));
        }
        previous = source;
        carried |= r.headers().iter().any(|(n, _)| is_output_header(n));
        let target =
            Target::of_headers(r.headers()).map_err(|e| format!("output record {i}: {e}"))?;
        targets.push(
            outputs
                .resolve(target)
                .map_err(|e| format!("output record {i}: {e}"))?,
        );
    }
    let keep_timestamp = |t: i64| matches!(outputs, Outputs::Topics(_)) && t >= 0;
    if carried {
        strip_output_headers(&mut output);
    }
    // Keys and values stay in the guest's columns as they are; each record takes its input
    // record's offset, and its timestamp where the plugin wrote none.
    let c = &mut output.columns;
    for i in 0..c.offsets.len() {
        let source = c.offsets[i] as usize;
        c.offsets[i] = input.columns.offsets[source];
        if !keep_timestamp(c.timestamps[i]) {
            c.timestamps[i] = input.columns.timestamps[source];
        }
    }
    Ok(Routed {
        batch: output,
        outputs: targets,
    })
}

/// Removes the routing header from every record of `batch`: only the header columns are
/// rebuilt (keys and values are not copied).
fn strip_output_headers(batch: &mut ColumnarBatch) {
    let c = &batch.columns;
    let mut counts = Vec::with_capacity(c.header_counts.len());
    let mut bytes = Vec::with_capacity(c.header_bytes.len());
    let mut ends = Vec::with_capacity(c.header_ends.len());
    for r in batch.records() {
        let mut count = 0u32;
        for (name, value) in r.headers().iter().filter(|(n, _)| !is_output_header(n)) {
            bytes.extend_from_slice(name);
            ends.push(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
            bytes.extend_from_slice(value);
            ends.push(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
            count += 1;
        }
        counts.push(count);
    }
    let c = &mut batch.columns;
    c.header_counts = counts;
    c.header_bytes = bytes;
    c.header_ends = ends;
}

/// [`route`] to named outputs, for the fuzz entry point.
#[cfg(any(test, feature = "fuzz"))]
pub(crate) fn route_for_fuzz(
    input: &ColumnarBatch,
    output: RecordBatch,
    outputs: &[&str],
) -> Result<Routed, String> {
    route(input, output, Outputs::Topics(outputs))
}

/// A view's rule on a transform's output: the records routed to the first output, at most
/// one per input record, strictly in input order, each with its input record's offset and
/// timestamp.
pub(crate) fn place(input: &ColumnarBatch, output: RecordBatch) -> Result<ColumnarBatch, String> {
    let routed = route(input, output, Outputs::View)?;
    // Input offsets increase strictly, so two kept records of one input record share an
    // offset.
    let mut previous: Option<i64> = None;
    let kept = routed.batch.offsets().iter().zip(&routed.outputs);
    for (i, (&offset, _)) in kept.enumerate().filter(|(_, (_, o))| **o == 0) {
        if previous == Some(offset) {
            return Err(format!(
                "output record {i} is a second output for the input record at offset {offset}: \
                 at most one output per input, in input order"
            ));
        }
        previous = Some(offset);
    }
    if routed.outputs.iter().all(|&o| o == 0) {
        return Ok(routed.batch);
    }
    let keep: Vec<bool> = routed.outputs.iter().map(|&o| o == 0).collect();
    Ok(routed.batch.select(&keep))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Header;

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

    /// Output records naming input records `sources`, each routed by the header value
    /// (`None`: no header), with timestamp `ts`.
    fn routed_output(records: &[(i64, Option<&str>)], ts: i64) -> RecordBatch {
        let mut b = ColumnarBatch::new();
        for &(s, target) in records {
            let mut headers: Vec<Header<'_>> = vec![(b"keep", b"me")];
            if let Some(t) = target {
                headers.push((OUTPUT_HEADER.as_bytes(), t.as_bytes()));
            }
            b.push(s, ts, Some(b"k"), Some(b"v"), &headers);
        }
        b.columns
    }

    fn headers_of(batch: &ColumnarBatch) -> Vec<Vec<Vec<u8>>> {
        batch
            .records()
            .map(|r| r.headers().iter().map(|(n, _)| n.to_vec()).collect())
            .collect()
    }

    #[test]
    fn materialized_outputs_route_by_index_or_name_and_lose_the_header() {
        let topics = ["eu", "us", "dlq"];
        let out = routed_output(
            &[
                (0, None),
                (0, Some("2")),
                (1, Some("us")),
                (2, Some("eu")),
                (2, Some("1")),
            ],
            55,
        );
        let routed = route(&input(), out, Outputs::Topics(&topics)).unwrap();
        assert_eq!(routed.outputs, [0, 2, 1, 0, 1]);
        assert_eq!(routed.batch.offsets(), [100, 100, 101, 102, 102]);
        assert!(
            routed.batch.records().all(|r| r.timestamp == 55),
            "the plugin's timestamps"
        );
        assert!(
            headers_of(&routed.batch)
                .iter()
                .all(|h| h == &[b"keep".to_vec()])
        );
        // No timestamp from the plugin: the input's.
        let routed = route(
            &input(),
            routed_output(&[(1, None)], -1),
            Outputs::Topics(&topics),
        );
        assert_eq!(routed.unwrap().batch.records().next().unwrap().timestamp, 8);
    }

    #[test]
    fn routing_to_an_output_the_transform_lacks_breaks_the_contract() {
        let topics = ["eu", "us"];
        for (target, why) in [
            ("2", "has 2 outputs"),
            ("asia", "not one of"),
            ("", "is empty"),
            ("a b", "not an output name"),
        ] {
            let err = route(
                &input(),
                routed_output(&[(0, Some(target))], 1),
                Outputs::Topics(&topics),
            )
            .unwrap_err();
            assert!(err.contains(why), "{target:?}: {err}");
        }
        let mut twice = ColumnarBatch::new();
        let h = OUTPUT_HEADER.as_bytes();
        twice.push(0, 1, None, None, &[(h, b"0"), (h, b"1")]);
        let err = route(&input(), twice.columns, Outputs::Topics(&topics)).unwrap_err();
        assert!(err.contains("more than once"), "{err}");
    }

    #[test]
    fn a_view_shows_the_first_output_only() {
        let out = routed_output(
            &[(0, Some("1")), (1, None), (2, Some("0")), (2, Some("dlq"))],
            3,
        );
        let placed = place(&input(), out).unwrap();
        assert_eq!(placed.offsets(), [101, 102]);
        assert!(
            placed.records().all(|r| r.timestamp != 3),
            "a view keeps the input's time"
        );
        assert!(headers_of(&placed).iter().all(|h| h == &[b"keep".to_vec()]));
        // Two records of one input both for the view: still a breach.
        let err = place(&input(), routed_output(&[(1, None), (1, Some("0"))], 3)).unwrap_err();
        assert!(err.contains("at most one output per input"), "{err}");
    }

    #[test]
    fn the_routing_header_is_stripped_from_the_input() {
        let mut b = ColumnarBatch::new();
        b.push(5, 1, None, Some(b"a"), &[(b"x", b"1")]);
        assert!(
            without_output_header(&b).is_none(),
            "no copy without the header"
        );
        b.push(
            6,
            2,
            None,
            Some(b"b"),
            &[(OUTPUT_HEADER.as_bytes(), b"1"), (b"y", b"2")],
        );
        let stripped = without_output_header(&b).unwrap();
        assert_eq!(stripped.offsets(), [5, 6]);
        assert_eq!(
            headers_of(&stripped),
            [vec![b"x".to_vec()], vec![b"y".to_vec()]]
        );
    }
}
