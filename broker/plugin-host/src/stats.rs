//! Per-plugin call statistics: calls, failures by kind and a call latency histogram, kept in
//! the plugin's [`crate::slot::PluginSlot`] so they cover every handle (every topic or
//! view using the plugin) and survive hot-reload version swaps. A deleted plugin's counters
//! go with it; one installed again under the same name starts from zero.
//!
//! Every update is a relaxed `fetch_add`: no lock, no allocation on the call path. Readers
//! get a [`PluginStats`] snapshot (each counter read once; they may be a call apart).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::compile::PluginKind;
use crate::error::CallError;

/// Upper bounds of the call latency buckets, in microseconds: from 10 µs (a small batch
/// through a simple partitioner) to 10 s (past any sane `plugin.call.timeout.ms`).
pub const CALL_LATENCY_BUCKETS_US: [u64; 14] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000, 10_000_000,
];

/// Why a call failed, as metrics label it (one per [`CallError`] variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallErrorKind {
    /// Ran past `plugin.call.timeout.ms`.
    Timeout,
    /// Grew its memory past `plugin.memory.bytes.max`.
    Memory,
    /// A wasm trap (panic, unreachable, out-of-bounds access).
    Trap,
    /// The plugin returned an error.
    Guest,
    /// The plugin's answer broke the contract (wrong length, partition out of range).
    Contract,
    /// A fresh instance could not be made.
    Instantiate,
    /// `init` rejected the parameters.
    Params,
    /// No instance to be had: the plugin's share, or the whole pool, was in calls.
    Busy,
}

impl CallErrorKind {
    /// Every kind, in the order snapshots list them.
    pub const ALL: [Self; 8] = [
        Self::Timeout,
        Self::Memory,
        Self::Trap,
        Self::Guest,
        Self::Contract,
        Self::Instantiate,
        Self::Params,
        Self::Busy,
    ];

    /// The label value: `timeout`, `memory`, `trap`, `guest`, `contract`, `instantiate`,
    /// `params`, `busy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::Trap => "trap",
            Self::Guest => "guest",
            Self::Contract => "contract",
            Self::Instantiate => "instantiate",
            Self::Params => "params",
            Self::Busy => "busy",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl CallError {
    /// The kind of failure, for metrics.
    pub fn kind(&self) -> CallErrorKind {
        match self {
            Self::Timeout { .. } => CallErrorKind::Timeout,
            Self::MemoryExceeded { .. } => CallErrorKind::Memory,
            Self::Trap { .. } => CallErrorKind::Trap,
            Self::Guest { .. } => CallErrorKind::Guest,
            Self::Contract { .. } => CallErrorKind::Contract,
            Self::Instantiate { .. } => CallErrorKind::Instantiate,
            Self::InvalidParams { .. } => CallErrorKind::Params,
            Self::Busy { .. } | Self::PoolFull { .. } => CallErrorKind::Busy,
        }
    }
}

/// The live counters of one plugin name.
#[derive(Debug, Default)]
pub(crate) struct CallStats {
    calls: AtomicU64,
    errors: [AtomicU64; CallErrorKind::ALL.len()],
    /// Calls per latency bucket (not cumulative); the last slot is `+Inf`.
    latency: [AtomicU64; CALL_LATENCY_BUCKETS_US.len() + 1],
    latency_sum_us: AtomicU64,
    /// Records handed to the plugin, and records it answered with (partitioned, kept or
    /// produced by a transform), over successful calls.
    records_in: AtomicU64,
    records_out: AtomicU64,
}

impl CallStats {
    /// Counts one call through a handle that began at `started` (its latency includes
    /// making an instance when no idle one was ready), how it ended, and for a successful
    /// one the records in and out.
    pub(crate) fn record<T>(
        &self,
        started: Instant,
        result: &Result<T, CallError>,
        records: (usize, impl FnOnce(&T) -> usize),
    ) {
        if let Ok(answer) = result {
            let (records_in, records_out) = records;
            self.records_in.fetch_add(records_in as u64, Relaxed);
            self.records_out
                .fetch_add(records_out(answer) as u64, Relaxed);
        }
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let slot = CALL_LATENCY_BUCKETS_US.partition_point(|&bound| bound < us);
        self.latency[slot].fetch_add(1, Relaxed);
        self.latency_sum_us.fetch_add(us, Relaxed);
        if let Err(e) = result {
            self.errors[e.kind().index()].fetch_add(1, Relaxed);
        }
        self.calls.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self, name: &str, kind: PluginKind) -> PluginStats {
        let mut running = 0;
        PluginStats {
            name: name.to_owned(),
            kind,
            calls: self.calls.load(Relaxed),
            errors: CallErrorKind::ALL
                .iter()
                .map(|&k| (k, self.errors[k.index()].load(Relaxed)))
                .collect(),
            latency_cumulative: self
                .latency
                .iter()
                .map(|b| {
                    running += b.load(Relaxed);
                    running
                })
                .collect(),
            latency_sum_us: self.latency_sum_us.load(Relaxed),
            records_in: self.records_in.load(Relaxed),
            records_out: self.records_out.load(Relaxed),
        }
    }
}

/// A snapshot of one plugin's call statistics ([`crate::Registry::stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginStats {
    pub name: String,
    /// The kind of the current version.
    pub kind: PluginKind,
    /// Calls through any handle (a partition, filter or transform of one batch), failed
    /// ones included.
    pub calls: u64,
    /// Failed calls per kind, every kind listed (in [`CallErrorKind::ALL`] order).
    pub errors: Vec<(CallErrorKind, u64)>,
    /// Calls with a latency at or below each of [`CALL_LATENCY_BUCKETS_US`], then all
    /// calls (`+Inf`): cumulative, as Prometheus buckets are.
    pub latency_cumulative: Vec<u64>,
    /// Sum of all call latencies, in microseconds.
    pub latency_sum_us: u64,
    /// Records into and out of successful calls (a partitioner: in = out; a filter: the
    /// kept; a transform: what it returned).
    pub records_in: u64,
    pub records_out: u64,
}

impl PluginStats {
    /// Failed calls of one kind.
    pub fn errors_of(&self, kind: CallErrorKind) -> u64 {
        self.errors
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Failed calls of every kind.
    pub fn errors_total(&self) -> u64 {
        self.errors.iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_errors_and_latency_add_up() {
        let stats = CallStats::default();
        let ok: Result<(), CallError> = Ok(());
        let timeout: Result<(), CallError> = Err(CallError::Timeout {
            plugin: "p".into(),
            timeout_ms: 1,
        });
        stats.record(Instant::now(), &ok, (10, |()| 4));
        stats.record(Instant::now(), &ok, (5, |()| 5));
        stats.record(Instant::now(), &timeout, (7, |()| 7));
        let snap = stats.snapshot("p", PluginKind::Filter);
        assert_eq!(snap.calls, 3);
        // The failed call's records are not counted.
        assert_eq!((snap.records_in, snap.records_out), (15, 9));
        assert_eq!(snap.errors_of(CallErrorKind::Timeout), 1);
        assert_eq!(snap.errors_total(), 1);
        assert_eq!(snap.errors.len(), CallErrorKind::ALL.len());
        assert_eq!(
            snap.latency_cumulative.len(),
            CALL_LATENCY_BUCKETS_US.len() + 1
        );
        assert_eq!(snap.latency_cumulative.last(), Some(&3));
        assert!(snap.latency_cumulative.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn kinds_index_their_own_slot() {
        for (i, kind) in CallErrorKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }
}
