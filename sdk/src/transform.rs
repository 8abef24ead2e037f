//! What a transform writes its output records to, and which output each goes to.
//!
//! A transform may send each record it emits to one of several **outputs**: a
//! materialized transform writes one topic per output (`sluice transform deploy NAME
//! --from SOURCE --to FIRST --to SECOND`); a view has one output, itself, and keeps only
//! the records for it. [`Output::keep_to`] and [`Output::push_to`] name the output with the
//! reserved header `sluice.output` ([`OUTPUT_HEADER`]); [`Output::keep`] and
//! [`Output::push_at`] send to the first output. The host is to read the header and remove
//! it, so consumers never see it; the rules are `sluice_columns::output`'s, for the host to
//! share. **Not built in the broker yet** (`docs/design/materialized-transforms.md`): until
//! it is, a view passes the header through like any other and keeps every record.

use crate::batch::{BatchBuilder, Record};

pub use sluice_columns::output::{OUTPUT_HEADER, OUTPUT_NAME_BYTES_MAX, Target, TargetError};

/// The output of a transform call: records pushed here replace the input
/// batch, each remembering which input record it came from.
#[derive(Debug, Default)]
pub struct Output {
    builder: BatchBuilder,
    /// Index of the input record being transformed.
    source: i64,
    /// The `sluice.output` value being written (reused: no allocation per record).
    target_value: Vec<u8>,
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

    /// Emit the input record unchanged (to the first output, unless it carries
    /// `sluice.output` itself).
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

    /// Emit the input record to `target`: an output index (`1`) or name
    /// (`"orders-dlq"`). Its headers are kept, but for any `sluice.output` it carried.
    pub fn keep_to<'t>(&mut self, target: impl Into<Target<'t>>, record: &Record<'_>) {
        let headers: Vec<_> = record.headers().iter().collect();
        self.push_to(
            target,
            record.timestamp,
            record.key(),
            record.value(),
            &headers,
        );
    }

    /// Emit a new record to `target` (see [`Output::keep_to`]). A `sluice.output` header
    /// among `headers` is replaced. The first output ([`Target::FIRST`], index 0) gets no
    /// header: a record without one goes there.
    ///
    /// A name that is all digits reads as an index; a name that is not an output of the
    /// running transform, or not a topic name, fails the call in the host (a broken
    /// contract, under the transform's failure policy).
    pub fn push_to<'t>(
        &mut self,
        target: impl Into<Target<'t>>,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], &[u8])],
    ) {
        let target = target.into();
        let mut routed: Vec<(&[u8], &[u8])> = headers
            .iter()
            .copied()
            .filter(|(name, _)| *name != OUTPUT_HEADER.as_bytes())
            .collect();
        let mut value_buf = std::mem::take(&mut self.target_value);
        if target != Target::FIRST {
            target.write_value(&mut value_buf);
            routed.push((OUTPUT_HEADER.as_bytes(), &value_buf));
        }
        self.builder
            .push(self.source, timestamp, key, value, &routed);
        drop(routed);
        self.target_value = value_buf;
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

/// The output an emitted record goes to, as the host reads it: [`Target::FIRST`] without
/// a `sluice.output` header. For native tests of a transform.
///
/// # Errors
/// The header is there twice or names no output ([`Target::parse`]).
pub fn target_of<'a>(record: &Record<'a>) -> Result<Target<'a>, TargetError> {
    Target::of_headers(record.headers())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An emitted record: (source index, target as text, headers but `sluice.output`).
    type Emitted = (i64, String, Vec<(Vec<u8>, Vec<u8>)>);

    /// Runs `f` over the second of two input records, the one with `headers`, returning
    /// what it emitted.
    fn emitted(headers: &[(&[u8], &[u8])], f: impl Fn(&mut Output, &Record<'_>)) -> Vec<Emitted> {
        let mut input = BatchBuilder::new();
        input.push(40, 7, Some(b"k"), Some(b"v"), &[]);
        input.push(41, 8, Some(b"k"), Some(b"v"), headers);
        let mut out = Output::new();
        for (i, record) in input.batch().iter().enumerate() {
            out.begin(i);
            if i == 1 {
                f(&mut out, &record);
            }
        }
        let builder = out.into_builder();
        builder
            .batch()
            .iter()
            .map(|r| {
                assert_eq!(
                    (r.timestamp, r.key(), r.value()),
                    (8, Some(&b"k"[..]), Some(&b"v"[..]))
                );
                let target = target_of(&r).unwrap().to_string();
                let others = r
                    .headers()
                    .iter()
                    .filter(|(n, _)| *n != OUTPUT_HEADER.as_bytes())
                    .map(|(n, v)| (n.to_vec(), v.to_vec()))
                    .collect();
                (r.offset, target, others)
            })
            .collect()
    }

    fn h(name: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        (name.as_bytes().to_vec(), value.as_bytes().to_vec())
    }

    #[test]
    fn keep_to_names_the_output_and_keeps_the_other_headers() {
        let got = emitted(&[(b"trace", b"t1")], |out, r| out.keep_to(1, r));
        assert_eq!(got, [(1, "output 1".into(), vec![h("trace", "t1")])]);
        let got = emitted(&[], |out, r| out.keep_to("orders-dlq", r));
        assert_eq!(got, [(1, "output `orders-dlq`".into(), vec![])]);
    }

    #[test]
    fn the_first_output_needs_no_header() {
        let got = emitted(&[(b"trace", b"t1")], |out, r| out.keep_to(0, r));
        assert_eq!(got, [(1, "output 0".into(), vec![h("trace", "t1")])]);
        let got = emitted(&[(b"trace", b"t1")], |out, r| out.keep(r));
        assert_eq!(got, [(1, "output 0".into(), vec![h("trace", "t1")])]);
    }

    #[test]
    fn a_routing_header_the_input_carried_is_replaced_not_repeated() {
        let input: &[(&[u8], &[u8])] = &[(b"sluice.output", b"3"), (b"trace", b"t1")];
        let got = emitted(input, |out, r| out.keep_to(1, r));
        assert_eq!(got, [(1, "output 1".into(), vec![h("trace", "t1")])]);
        let got = emitted(input, |out, r| out.keep_to(Target::FIRST, r));
        assert_eq!(got, [(1, "output 0".into(), vec![h("trace", "t1")])]);
    }

    #[test]
    fn one_input_may_go_to_several_outputs() {
        let got = emitted(&[], |out, r| {
            out.keep_to(0, r);
            out.push_to(2, r.timestamp, r.key(), r.value(), &[(b"why", b"copy")]);
        });
        assert_eq!(
            got,
            [
                (1, "output 0".into(), vec![]),
                (1, "output 2".into(), vec![h("why", "copy")]),
            ]
        );
    }
}
