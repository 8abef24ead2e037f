//! Per-plugin call statistics: calls, failures by kind, a call latency histogram, records in
//! and out, and the CPU time of the calling thread during calls (the guest's work plus the
//! host's copying of the batch in and the answer out), kept in
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
    /// CPU time of the calling threads during calls, in nanoseconds.
    cpu_ns: AtomicU64,
}

/// When a call began: wall clock and the calling thread's CPU clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallStart {
    wall: Instant,
    cpu_ns: u64,
}

impl CallStart {
    pub(crate) fn now() -> Self {
        Self {
            wall: Instant::now(),
            cpu_ns: thread_cpu_ns(),
        }
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds; 0 where the
/// clock cannot be read (then the plugin's CPU time reads 0). About half a microsecond per
/// read, paid twice per call (per batch, not per record).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}

impl CallStats {
    /// Counts one call through a handle that began at `started` (its latency includes
    /// making an instance when no idle one was ready), how it ended, and for a successful
    /// one the records in and out.
    pub(crate) fn record<T>(
        &self,
        started: CallStart,
        result: &Result<T, CallError>,
        records: (usize, impl FnOnce(&T) -> usize),
    ) {
        self.cpu_ns
            .fetch_add(thread_cpu_ns().saturating_sub(started.cpu_ns), Relaxed);
        if let Ok(answer) = result {
            let (records_in, records_out) = records;
            self.records_in.fetch_add(records_in as u64, Relaxed);
            self.records_out
                .fetch_add(records_out(answer) as u64, Relaxed);
        }
        let us = u64::try_from(started.wall.elapsed().as_micros()).unwrap_or(u64::MAX);
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
            cpu_ns: self.cpu_ns.load(Relaxed),
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
    /// CPU time of the calling threads during calls (guest work and the host's copies), in
    /// nanoseconds.
    pub cpu_ns: u64,
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
        stats.record(CallStart::now(), &ok, (10, |()| 4));
        stats.record(CallStart::now(), &ok, (5, |()| 5));
        // Burn some CPU inside a "call" so its clock moves.
        let start = CallStart::now();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i * i));
        }
        stats.record(start, &timeout, (7, |()| 7));
        let snap = stats.snapshot("p", PluginKind::Filter);
        assert_eq!(snap.calls, 3);
        // The failed call's records are not counted.
        assert_eq!((snap.records_in, snap.records_out), (15, 9));
        assert_eq!(snap.errors_of(CallErrorKind::Timeout), 1);
        assert_eq!(snap.errors_total(), 1);
        assert!(snap.cpu_ns > 0, "the calls' CPU time is counted: {snap:?}");
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
