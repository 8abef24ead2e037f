//! Deliberate bugs the simulator must catch (`sim_tests.rs`), switched on per test thread.
//! Outside `cfg(test)` every switch is off and compiles to `false`.

/// One deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mutant {
    /// The image does not bump the leader epoch when the leader changes.
    NoLeaderEpochBump,
    /// The controller elects leaders without looking at fencing.
    LeaderOnFencedBroker,
    /// The controller hands out the current producer-id block again.
    ProducerIdBlockReused,
    /// The controller accepts a heartbeat or AlterPartition with an old broker epoch.
    StaleBrokerEpochAccepted,
    /// The controller elects any active replica, in the ISR or not.
    UncleanElection,
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
