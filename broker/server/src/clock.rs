//! Time for the broker, in one place, and a seam for tests to drive it.
//!
//! Every module that stamps or ages something (record batches, offset commits, group
//! sessions, views, fences, retention, producer ids) reads the time here, so none of them
//! imports `broker.rs` just for the clock. The broker holds one [`SharedClock`]
//! ([`crate::broker::Broker::clock`]): the system clock in production, a [`ManualClock`]
//! in tests that age segments, views or group sessions without sleeping. The free
//! [`now_ms`] is the system clock, for code that runs before a broker exists (opening the
//! offsets log) or that must be unique rather than testable (producer-id seeds, names).

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Wall-clock milliseconds since the Unix epoch (0 if the clock reads before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A source of wall-clock time in Unix milliseconds.
pub trait Clock: Send + Sync + Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The clock every part of one broker reads.
pub type SharedClock = Arc<dyn Clock>;

/// The operating system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        now_ms()
    }
}

/// The system clock, shared.
#[must_use]
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `start_ms`.
    #[must_use]
    pub fn new(start_ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(start_ms)))
    }

    /// Moves the clock forward by `ms` (or back, for a negative `ms`: clocks do that too).
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_ms_is_after_2020_and_does_not_go_backwards_between_reads() {
        let first = now_ms();
        let second = SystemClock.now_ms();
        assert!(
            first > 1_577_836_800_000,
            "clock reads {first} ms, before 2020"
        );
        assert!(second >= first, "{second} ms read after {first} ms");
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        let shared: SharedClock = clock.clone();
        assert_eq!(shared.now_ms(), 1_000);
        clock.advance(250);
        assert_eq!(shared.now_ms(), 1_250);
        clock.advance(-1_250);
        assert_eq!(shared.now_ms(), 0);
    }
}
