//! Deliberate bugs the simulator must catch (`sim_tests`), switched on per test thread.
//! Outside `cfg(test)` every switch is off and compiles to `false`.

/// One deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mutant {
    /// The leader's high watermark is its log end offset, whatever the ISR has.
    HighWatermarkIsLogEnd,
    /// A follower told of a diverging epoch does not truncate: it fetches on from its own
    /// log end.
    NoTruncationOnDivergence,
    /// The controller elects a live replica outside the ISR when the ISR has no live member
    /// (the simulator's controller step; `sluice-cluster`'s own mutants are its tests' only).
    #[cfg_attr(not(test), allow(dead_code))]
    ElectionOutsideIsr,
    /// A follower reports a fetch offset (its next fetch) before its fsync covers it.
    AckBeforeFollowerFsync,
}

#[cfg(test)]
thread_local! {
    static ACTIVE: std::cell::Cell<Option<Mutant>> = const { std::cell::Cell::new(None) };
}

/// Whether the deliberate bug `m` is switched on (on this test thread).
#[cfg(test)]
pub(crate) fn mutant(m: Mutant) -> bool {
    ACTIVE.with(|a| a.get() == Some(m))
}

/// Whether the deliberate bug `m` is switched on: never, outside tests.
#[cfg(not(test))]
#[inline(always)]
pub(crate) const fn mutant(_: Mutant) -> bool {
    false
}

/// Switches `m` on for this thread until the guard drops.
#[cfg(test)]
pub(crate) fn switch_on(m: Mutant) -> impl Drop {
    struct Off;
    impl Drop for Off {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(None));
        }
    }
    ACTIVE.with(|a| a.set(Some(m)));
    Off
}
