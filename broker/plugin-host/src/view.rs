//! Views: a chain of filters and transforms a consumer's fetch runs
//! through, with the view's failure policy. Pure logic over
//! [`ColumnarBatch`]es; decoding and re-encoding Kafka record batches is
//! the broker's (it has the codecs).
//!
//! Per fetched batch the broker decompresses, builds one [`ColumnarBatch`]
//! (with the records' real offsets), calls [`View::apply`], and re-encodes
//! the records of the returned batch with their original offsets (new CRC,
//! same compression codec). Each stage is called once for the whole batch.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::batch::ColumnarBatch;
use crate::error::CallError;
use crate::pool::{Filter, Transform};

/// What a view does when a stage fails (trap, timeout, memory, guest
/// error, broken contract) on a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// The fetch of that partition fails with the error (the broker maps it
    /// to a Kafka error code); the consumer retries, and sees no record
    /// the view has not vetted.
    #[default]
    Fail,
    /// The failed batch's records are dropped from the response and
    /// counted; the consumer moves on past them.
    Skip,
}

impl FailurePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "fail",
            Self::Skip => "skip",
        }
    }
}

impl FromStr for FailurePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fail" => Ok(Self::Fail),
            "skip" => Ok(Self::Skip),
            other => Err(format!(
                "unknown failure policy `{other}`: expected `fail` or `skip`"
            )),
        }
    }
}

/// One stage of a view: a pooled filter or transform handle.
#[derive(Debug, Clone)]
pub enum Stage {
    Filter(Arc<Filter>),
    Transform(Arc<Transform>),
}

/// What one stage made of a batch.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "made once per batch and matched at once; boxing buys nothing"
)]
pub enum StageOutput {
    /// One keep flag per input record (a filter).
    Keep(Vec<bool>),
    /// The records that replace the input (a transform), with their input
    /// records' offsets and timestamps.
    Replace(ColumnarBatch),
}

/// Anything that can be a stage: the real [`Stage`], or a fake in tests.
pub trait Step {
    /// # Errors
    /// The stage's plugin call failed.
    fn run(&self, batch: &ColumnarBatch) -> Result<StageOutput, CallError>;
}

impl Step for Stage {
    fn run(&self, batch: &ColumnarBatch) -> Result<StageOutput, CallError> {
        match self {
            Self::Filter(f) => f.filter(batch).map(StageOutput::Keep),
            Self::Transform(t) => t.transform(batch).map(StageOutput::Replace),
        }
    }
}

/// The result of a view on one batch.
#[derive(Debug)]
pub struct ViewOutput {
    /// The kept (and transformed) records, with their original offsets
    /// and timestamps, in offset order; `None` when that is the input
    /// batch itself, every record kept and unchanged (no copy made).
    pub changed: Option<ColumnarBatch>,
    /// Records dropped because a stage failed under [`FailurePolicy::Skip`]
    /// (not the ones a filter dropped).
    pub skipped_records: u64,
    /// The failure that made the batch skipped, for the broker's log.
    pub skipped_because: Option<CallError>,
}

impl ViewOutput {
    /// The kept records: the changed batch, or `input` when nothing changed.
    #[must_use]
    pub fn kept<'a>(&'a self, input: &'a ColumnarBatch) -> &'a ColumnarBatch {
        self.changed.as_ref().unwrap_or(input)
    }

    /// Records kept.
    #[must_use]
    pub fn kept_len(&self, input: &ColumnarBatch) -> usize {
        self.kept(input).len()
    }
}

/// Counters of one view since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewStats {
    pub batches: u64,
    pub records_in: u64,
    pub records_out: u64,
    pub batches_failed: u64,
    pub records_skipped: u64,
}

/// A view: stages in order and a failure policy. Share it (`Arc`) across
/// the fetches of the view; each stage handle pools its instances.
#[derive(Debug)]
pub struct View {
    stages: Vec<Stage>,
    policy: FailurePolicy,
    stats: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    batches: AtomicU64,
    records_in: AtomicU64,
    records_out: AtomicU64,
    batches_failed: AtomicU64,
    records_skipped: AtomicU64,
}

impl View {
    #[must_use]
    pub fn new(stages: Vec<Stage>, policy: FailurePolicy) -> Self {
        Self {
            stages,
            policy,
            stats: Counters::default(),
        }
    }

    #[must_use]
    pub fn policy(&self) -> FailurePolicy {
        self.policy
    }

    #[must_use]
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Run `batch` through every stage. Blocking and CPU-bound, each plugin
    /// call bounded by `plugin.call.timeout.ms`: call it from
    /// `spawn_blocking` (or a dedicated pool) so a slow plugin stalls only
    /// the fetch that runs it.
    ///
    /// # Errors
    /// Under [`FailurePolicy::Fail`], the first stage failure. Under
    /// `Skip`, never: the batch's records are dropped and counted instead.
    pub fn apply(&self, batch: &ColumnarBatch) -> Result<ViewOutput, CallError> {
        let output = apply_with(&self.stages, self.policy, batch);
        self.count(batch, &output);
        output
    }

    /// Counters since the view was made.
    #[must_use]
    pub fn stats(&self) -> ViewStats {
        let s = &self.stats;
        ViewStats {
            batches: s.batches.load(Ordering::Relaxed),
            records_in: s.records_in.load(Ordering::Relaxed),
            records_out: s.records_out.load(Ordering::Relaxed),
            batches_failed: s.batches_failed.load(Ordering::Relaxed),
            records_skipped: s.records_skipped.load(Ordering::Relaxed),
        }
    }

    fn count(&self, input: &ColumnarBatch, output: &Result<ViewOutput, CallError>) {
        let s = &self.stats;
        s.batches.fetch_add(1, Ordering::Relaxed);
        s.records_in
            .fetch_add(input.len() as u64, Ordering::Relaxed);
        match output {
            Ok(o) => {
                s.records_out
                    .fetch_add(o.kept_len(input) as u64, Ordering::Relaxed);
                if o.skipped_because.is_some() {
                    s.batches_failed.fetch_add(1, Ordering::Relaxed);
                    s.records_skipped
                        .fetch_add(o.skipped_records, Ordering::Relaxed);
                }
            }
            Err(_) => {
                s.batches_failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The chain and the policy, over any [`Step`]s.
///
/// # Errors
/// Under [`FailurePolicy::Fail`], the first stage failure.
pub fn apply_with<S: Step>(
    stages: &[S],
    policy: FailurePolicy,
    batch: &ColumnarBatch,
) -> Result<ViewOutput, CallError> {
    match run_chain(stages, batch) {
        Ok(changed) => Ok(ViewOutput {
            changed,
            skipped_records: 0,
            skipped_because: None,
        }),
        Err(e) if policy == FailurePolicy::Skip => Ok(ViewOutput {
            changed: Some(ColumnarBatch::new()),
            skipped_records: batch.len() as u64,
            skipped_because: Some(e),
        }),
        Err(e) => Err(e),
    }
}

/// Each stage on the previous one's output; stops early once no record is
/// left (an empty batch is never sent to a plugin). `None`: the input,
/// unchanged.
fn run_chain<S: Step>(
    stages: &[S],
    input: &ColumnarBatch,
) -> Result<Option<ColumnarBatch>, CallError> {
    let mut current: Option<ColumnarBatch> = None;
    for stage in stages {
        let batch = current.as_ref().unwrap_or(input);
        if batch.is_empty() {
            break;
        }
        current = Some(match stage.run(batch)? {
            StageOutput::Keep(keep) if keep.iter().all(|&k| k) => continue,
            StageOutput::Keep(keep) => batch.select(&keep),
            StageOutput::Replace(replaced) => replaced,
        });
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Run = dyn Fn(&ColumnarBatch) -> Result<StageOutput, CallError>;

    /// A fake stage: a function of the batch.
    struct Fake(Box<Run>);

    impl Step for Fake {
        fn run(&self, batch: &ColumnarBatch) -> Result<StageOutput, CallError> {
            (self.0)(batch)
        }
    }

    fn even_offsets() -> Fake {
        Fake(Box::new(|b| {
            Ok(StageOutput::Keep(
                b.offsets().iter().map(|o| o % 2 == 0).collect(),
            ))
        }))
    }

    fn upper_values() -> Fake {
        Fake(Box::new(|b| {
            let mut out = ColumnarBatch::new();
            for r in b.records() {
                let value = r.value().map(<[u8]>::to_ascii_uppercase);
                out.push(r.offset, r.timestamp, r.key(), value.as_deref(), &[]);
            }
            Ok(StageOutput::Replace(out))
        }))
    }

    fn failing() -> Fake {
        Fake(Box::new(|_| {
            Err(CallError::Guest {
                plugin: "bad".into(),
                message: "no".into(),
            })
        }))
    }

    fn input() -> ColumnarBatch {
        let mut b = ColumnarBatch::new();
        for offset in 40..46 {
            b.push(offset, offset * 10, None, Some(b"abc"), &[(b"h", b"1")]);
        }
        b
    }

    fn values(b: &ColumnarBatch) -> Vec<(i64, Vec<u8>)> {
        b.records()
            .map(|r| (r.offset, r.value().unwrap_or_default().to_vec()))
            .collect()
    }

    #[test]
    fn filters_then_transforms_keep_offsets() {
        let stages = [even_offsets(), upper_values()];
        let out = apply_with(&stages, FailurePolicy::Fail, &input()).unwrap();
        assert_eq!(
            values(out.changed.as_ref().unwrap()),
            [
                (40, b"ABC".to_vec()),
                (42, b"ABC".to_vec()),
                (44, b"ABC".to_vec())
            ]
        );
        assert_eq!(out.skipped_records, 0);
        let no_stages: [Fake; 0] = [];
        let same = apply_with(&no_stages, FailurePolicy::Fail, &input()).unwrap();
        assert!(same.changed.is_none(), "nothing copied");
        assert_eq!(same.kept_len(&input()), 6);
    }

    #[test]
    fn an_empty_batch_reaches_no_plugin() {
        let drop_all = Fake(Box::new(|b| Ok(StageOutput::Keep(vec![false; b.len()]))));
        let stages = [drop_all, failing()];
        let out = apply_with(&stages, FailurePolicy::Fail, &input()).unwrap();
        assert_eq!(out.kept_len(&input()), 0);
        let empty = ColumnarBatch::new();
        let out = apply_with(&[failing()], FailurePolicy::Fail, &empty).unwrap();
        assert_eq!(out.kept_len(&empty), 0);
    }

    #[test]
    fn fail_returns_the_error_and_skip_counts_the_batch() {
        let stages = [even_offsets(), failing()];
        let err = apply_with(&stages, FailurePolicy::Fail, &input()).unwrap_err();
        assert!(matches!(err, CallError::Guest { .. }), "{err}");
        let out = apply_with(&stages, FailurePolicy::Skip, &input()).unwrap();
        assert_eq!(out.kept_len(&input()), 0);
        assert_eq!(out.skipped_records, 6);
        assert!(matches!(out.skipped_because, Some(CallError::Guest { .. })));
    }

    #[test]
    fn policies_parse_by_name() {
        assert_eq!("fail".parse(), Ok(FailurePolicy::Fail));
        assert_eq!("skip".parse(), Ok(FailurePolicy::Skip));
        let err = "drop".parse::<FailurePolicy>().unwrap_err();
        assert!(err.contains("`fail` or `skip`"), "{err}");
        assert_eq!(FailurePolicy::default().as_str(), "fail");
    }

    #[test]
    fn view_counts_batches_records_and_failures() {
        let view = View::new(Vec::new(), FailurePolicy::Skip);
        view.apply(&input()).unwrap();
        let stats = view.stats();
        assert_eq!(
            (stats.batches, stats.records_in, stats.records_out),
            (1, 6, 6)
        );
        view.count(
            &input(),
            &apply_with(&[failing()], FailurePolicy::Skip, &input()),
        );
        view.count(
            &input(),
            &apply_with(&[failing()], FailurePolicy::Fail, &input()),
        );
        let stats = view.stats();
        assert_eq!(stats.batches_failed, 2);
        assert_eq!(stats.records_skipped, 6);
        assert_eq!(stats.records_out, 6);
    }
}
