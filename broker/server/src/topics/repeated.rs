//! `RepeatedFailures`: one failure that repeats (a fenced partition refusing every append, a
//! topic that cannot be created on a full disk) logged at ERROR at most once per
//! `REPEATED_FAILURE_LOG_INTERVAL_MS`, each line carrying how many were suppressed since the
//! one before. A producer retrying for five minutes against a full disk once wrote 10,891
//! identical lines (2.1 MB) onto that disk; now it writes a handful. The suppressed ones still
//! go to DEBUG, and the partition's `produce_errors` metric counts every one.

use std::sync::{Mutex, PoisonError};

use crate::limits;

/// The log budget of one kind of failure in one place.
#[derive(Debug, Default)]
pub(crate) struct RepeatedFailures {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the last line was logged (`None`: never, or not since `take_suppressed`).
    last_logged_ms: Option<i64>,
    /// Failures since that line that were not logged.
    suppressed: u64,
}

impl RepeatedFailures {
    /// Notes one failure at `now_ms`: `Some(suppressed since the last line)` if this one is
    /// to be logged, `None` if it is suppressed (and counted).
    pub(crate) fn note(&self, now_ms: i64) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let due = state.last_logged_ms.is_none_or(|last| {
            now_ms.saturating_sub(last) >= limits::REPEATED_FAILURE_LOG_INTERVAL_MS
        });
        if !due {
            state.suppressed = state.suppressed.saturating_add(1);
            return None;
        }
        state.last_logged_ms = Some(now_ms);
        Some(std::mem::take(&mut state.suppressed))
    }

    /// Ends a run of failures (the fence lifted): the count not logged yet, and the next
    /// failure is logged at once.
    pub(crate) fn take_suppressed(&self) -> u64 {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.last_logged_ms = None;
        std::mem::take(&mut state.suppressed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: i64 = limits::REPEATED_FAILURE_LOG_INTERVAL_MS;

    #[test]
    fn one_line_per_interval_with_the_count_suppressed_before_it() {
        let failures = RepeatedFailures::default();
        assert_eq!(failures.note(1_000), Some(0), "the first is logged");
        let suppressed = (1..1_000)
            .filter(|i| failures.note(1_000 + i * INTERVAL / 1_000).is_some())
            .count();
        assert_eq!(suppressed, 0, "the rest of the interval is suppressed");
        assert_eq!(
            failures.note(1_000 + INTERVAL),
            Some(999),
            "with their count"
        );
        assert_eq!(failures.note(1_001 + INTERVAL), None);
        assert_eq!(failures.take_suppressed(), 1, "the lift takes the rest");
        assert_eq!(
            failures.note(1_002 + INTERVAL),
            Some(0),
            "a new run logs at once"
        );
        assert_eq!(failures.take_suppressed(), 0);
    }
}
