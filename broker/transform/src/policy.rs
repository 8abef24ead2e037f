//! The bisect planner of the failure policies (docs/design/materialized-transforms.md,
//! "Failure policies"): a failed call on records `[0, n)` is retried on halves, recursively,
//! until the failing records are single records, at most [`TRANSFORM_BISECT_CALLS_MAX`]
//! extra calls per batch. Past the bound, what remains unresolved is failed as a whole.
//!
//! [`Bisect`] is a small state machine the runner drives, one call at a time:
//!
//! ```
//! use sluice_transform::policy::Bisect;
//!
//! let poison = 3; // the plugin fails on any call that includes record 3
//! let mut bisect = Bisect::new(8);
//! while let Some(range) = bisect.next_call() {
//!     let ok = !range.contains(&poison);
//!     bisect.on_result(range, ok);
//! }
//! assert_eq!(bisect.failed_ranges(), &[3..4]);
//! assert_eq!(bisect.succeeded_ranges(), &[0..2, 2..3, 4..8]);
//! assert_eq!(bisect.calls(), 7);
//! ```
//!
//! Ranges are resolved left to right (depth first, left half first), so the succeeded and
//! failed ranges come out in input order, and the outputs of succeeded calls can be kept in
//! the order their ranges are reported.

use std::ops::Range;

use crate::limits::TRANSFORM_BISECT_CALLS_MAX;

/// Plans the calls that isolate the failing records of one batch of `n` records.
#[derive(Debug, Clone)]
pub struct Bisect {
    /// Ranges still to call; the last is the leftmost (called next).
    todo: Vec<Range<usize>>,
    /// The range handed out by `next_call` and not yet answered.
    in_flight: Option<Range<usize>>,
    /// Ranges whose call succeeded, in input order.
    succeeded: Vec<Range<usize>>,
    /// Ranges that failed for good (single records, or unresolved past the bound), in order.
    failed: Vec<Range<usize>>,
    /// Calls handed out so far, the first included.
    calls: u32,
    /// Calls handed out or queued, the first included: splitting is allowed while the
    /// extra ones stay within `extra_calls_max`.
    planned: u32,
    /// The bound on extra calls.
    extra_calls_max: u32,
}

impl Bisect {
    /// A batch of `n` records (at least one), bounded by [`TRANSFORM_BISECT_CALLS_MAX`].
    #[must_use]
    pub fn new(n: usize) -> Self {
        Self::with_bound(n, TRANSFORM_BISECT_CALLS_MAX)
    }

    /// A batch of `n` records with another bound on extra calls (tests).
    #[must_use]
    pub fn with_bound(n: usize, extra_calls_max: u32) -> Self {
        assert!(n > 0, "a call has at least one record");
        Self {
            todo: std::iter::once(0..n).collect(),
            in_flight: None,
            succeeded: Vec::new(),
            failed: Vec::new(),
            calls: 0,
            planned: 1,
            extra_calls_max,
        }
    }

    /// The next range to call, or `None` when every record is resolved (or a call is still
    /// unanswered: answer it with [`Bisect::on_result`] first).
    pub fn next_call(&mut self) -> Option<Range<usize>> {
        if self.in_flight.is_some() {
            return None;
        }
        let range = self.todo.pop()?;
        self.calls += 1;
        self.in_flight = Some(range.clone());
        Some(range)
    }

    /// The answer to the call on `range` (the one `next_call` handed out).
    ///
    /// # Panics
    /// If `range` is not the call in flight: the runner's bug.
    pub fn on_result(&mut self, range: Range<usize>, ok: bool) {
        assert_eq!(
            self.in_flight.take().as_ref(),
            Some(&range),
            "answer to a call not made"
        );
        if ok {
            self.succeeded.push(range);
        } else if range.len() == 1 || self.planned - 1 + 2 > self.extra_calls_max {
            self.failed.push(range);
        } else {
            let middle = range.start + range.len() / 2;
            self.todo.push(middle..range.end);
            self.todo.push(range.start..middle);
            self.planned += 2;
        }
        debug_assert!(self.calls <= 1 + self.extra_calls_max);
    }

    /// The call on `range` (the one in flight) failed for exactly the records at `failed`
    /// (offsets into `range`, increasing): each fails on its own, and the records between
    /// them succeeded (their outputs came with the answer). No further calls for `range`:
    /// an answer that names its failing records (an output topic's validator) needs no
    /// bisecting.
    ///
    /// # Panics
    /// If `range` is not the call in flight, or `failed` is not increasing within it.
    pub fn on_partial(&mut self, range: Range<usize>, failed: &[usize]) {
        assert_eq!(
            self.in_flight.take().as_ref(),
            Some(&range),
            "answer to a call not made"
        );
        let mut start = range.start;
        for &i in failed {
            let at = range.start + i;
            assert!(
                at >= start && at < range.end,
                "failed records inside the call, increasing"
            );
            if at > start {
                self.succeeded.push(start..at);
            }
            self.failed.push(at..at + 1);
            start = at + 1;
        }
        if start < range.end {
            self.succeeded.push(start..range.end);
        }
    }

    /// Every record resolved.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.todo.is_empty() && self.in_flight.is_none()
    }

    /// Ranges whose call succeeded, in input order, disjoint.
    #[must_use]
    pub fn succeeded_ranges(&self) -> &[Range<usize>] {
        &self.succeeded
    }

    /// Ranges that failed for good, in input order, disjoint: single records, or a longer
    /// range left unresolved when the bound was reached.
    #[must_use]
    pub fn failed_ranges(&self) -> &[Range<usize>] {
        &self.failed
    }

    /// The first failed record, if any.
    #[must_use]
    pub fn first_failed(&self) -> Option<usize> {
        self.failed.first().map(|r| r.start)
    }

    /// Whether the bound left a range of several records failed as a whole.
    #[must_use]
    pub fn unresolved(&self) -> bool {
        self.failed.iter().any(|r| r.len() > 1)
    }

    /// Calls handed out so far, the first included (at most 1 + the bound).
    #[must_use]
    pub fn calls(&self) -> u32 {
        self.calls
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // a slice of one range is meant
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Drives a bisect against a plugin that fails on any call including a poison index.
    fn run(n: usize, poison: &BTreeSet<usize>, bound: u32) -> Bisect {
        let mut bisect = Bisect::with_bound(n, bound);
        while let Some(range) = bisect.next_call() {
            let ok = !range.clone().any(|i| poison.contains(&i));
            bisect.on_result(range, ok);
        }
        assert!(bisect.is_done());
        bisect
    }

    fn indices(ranges: &[Range<usize>]) -> Vec<usize> {
        ranges.iter().flat_map(Clone::clone).collect()
    }

    #[test]
    fn a_good_batch_costs_one_call() {
        let bisect = run(500, &BTreeSet::new(), TRANSFORM_BISECT_CALLS_MAX);
        assert_eq!(bisect.calls(), 1);
        assert_eq!(bisect.succeeded_ranges(), &[0..500]);
        assert!(bisect.failed_ranges().is_empty());
    }

    #[test]
    fn one_poison_among_512_costs_19_calls() {
        let bisect = run(512, &BTreeSet::from([300]), TRANSFORM_BISECT_CALLS_MAX);
        assert_eq!(bisect.calls(), 1 + 2 * 9);
        assert_eq!(bisect.failed_ranges(), &[300..301]);
        assert_eq!(bisect.first_failed(), Some(300));
        assert!(!bisect.unresolved());
    }

    #[test]
    fn past_the_bound_the_rest_fails_as_a_whole() {
        let all: BTreeSet<usize> = (0..64).collect();
        let bisect = run(64, &all, 4);
        assert_eq!(bisect.calls(), 5);
        assert!(bisect.unresolved());
        assert_eq!(indices(bisect.failed_ranges()), (0..64).collect::<Vec<_>>());
    }

    #[test]
    fn a_partial_answer_resolves_its_range_in_one_call() {
        // During a bisect: the right half's call names its failing records itself.
        let mut bisect = Bisect::new(10);
        assert_eq!(bisect.next_call(), Some(0..10));
        bisect.on_result(0..10, false);
        assert_eq!(bisect.next_call(), Some(0..5));
        bisect.on_result(0..5, true);
        assert_eq!(bisect.next_call(), Some(5..10));
        bisect.on_partial(5..10, &[0, 2, 3]);
        assert!(bisect.is_done());
        assert_eq!(bisect.succeeded_ranges(), &[0..5, 6..7, 9..10]);
        assert_eq!(bisect.failed_ranges(), &[5..6, 7..8, 8..9]);
        assert_eq!((bisect.calls(), bisect.first_failed()), (3, Some(5)));
    }

    #[test]
    #[should_panic(expected = "failed records inside the call, increasing")]
    fn a_partial_answer_naming_records_out_of_order_is_a_bug() {
        let mut bisect = Bisect::new(4);
        let _ = bisect.next_call();
        bisect.on_partial(0..4, &[2, 1]);
    }

    #[test]
    #[should_panic(expected = "answer to a call not made")]
    fn answering_another_range_is_a_bug() {
        let mut bisect = Bisect::new(4);
        let _ = bisect.next_call();
        bisect.on_result(0..2, true);
    }

    #[test]
    fn no_second_call_while_one_is_in_flight() {
        let mut bisect = Bisect::new(4);
        assert_eq!(bisect.next_call(), Some(0..4));
        assert_eq!(bisect.next_call(), None);
        assert!(!bisect.is_done());
    }

    proptest! {
        #[test]
        fn bisect_isolates_exactly_the_poison(
            n in 1usize..600,
            picks in proptest::collection::vec(any::<usize>(), 0..12),
            bound in 2u32..80,
        ) {
            let poison: BTreeSet<usize> = picks.iter().map(|p| p % n).collect();
            let bisect = run(n, &poison, bound);
            let succeeded = indices(bisect.succeeded_ranges());
            let failed = indices(bisect.failed_ranges());
            // In input order, disjoint, covering everything.
            let mut all = [succeeded.clone(), failed.clone()].concat();
            all.sort_unstable();
            prop_assert_eq!(all, (0..n).collect::<Vec<_>>());
            for ranges in [bisect.succeeded_ranges(), bisect.failed_ranges()] {
                prop_assert!(ranges.windows(2).all(|w| w[0].end <= w[1].start));
            }
            prop_assert!(bisect.calls() <= 1 + bound);
            // No poison ever counted as a success.
            prop_assert!(succeeded.iter().all(|i| !poison.contains(i)));
            if !bisect.unresolved() {
                prop_assert_eq!(failed, poison.iter().copied().collect::<Vec<_>>());
            }
            // With the real bound, three poisons among 600 always resolve.
            if bound == TRANSFORM_BISECT_CALLS_MAX && poison.len() <= 3 {
                prop_assert!(!bisect.unresolved());
            }
        }

        #[test]
        fn the_real_bound_resolves_up_to_three_poisons(
            n in 1usize..1024,
            picks in proptest::collection::vec(any::<usize>(), 0..=3),
        ) {
            let poison: BTreeSet<usize> = picks.iter().map(|p| p % n).collect();
            let bisect = run(n, &poison, TRANSFORM_BISECT_CALLS_MAX);
            prop_assert!(!bisect.unresolved());
            prop_assert_eq!(indices(bisect.failed_ranges()), poison.into_iter().collect::<Vec<_>>());
        }
    }
}
