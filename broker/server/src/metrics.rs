//! Broker metrics: relaxed atomic counters bumped on the request, produce and fetch paths,
//! rendered in Prometheus text format by the admin API (`admin/prometheus.rs`).
//!
//! The hot paths only do `fetch_add(_, Relaxed)`: no locks, no allocation, no map lookups.
//! Per-API metrics are a fixed array indexed by the version table's position; per-partition
//! counters live in [`crate::topics::Partition`]; gauges that the broker already knows (log
//! start/end offsets, sizes, consumer lag) are read at scrape time instead of being mirrored.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use sluice_storage::ReadSlice;

use sluice_protocol::versions;

use crate::limits;

/// Upper bounds of the request latency buckets, in microseconds (Prometheus `le` in seconds).
/// From 100 µs (a metadata request) to 30 s (a long poll at Kafka's largest common max wait).
pub const LATENCY_BUCKETS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 10_000_000, 30_000_000,
];

/// A fixed-bucket latency histogram (cumulative counts are computed when rendered).
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len() + 1],
    /// Sum of all observations, in microseconds.
    sum_us: AtomicU64,
    /// Number of observations.
    count: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let slot = LATENCY_BUCKETS_US.partition_point(|&bound| bound < us);
        self.buckets[slot].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// Cumulative counts per bucket (`+Inf` last), the sum in microseconds, and the count.
    pub fn snapshot(&self) -> (Vec<u64>, u64, u64) {
        let mut running = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                running += b.load(Relaxed);
                running
            })
            .collect();
        (
            cumulative,
            self.sum_us.load(Relaxed),
            self.count.load(Relaxed),
        )
    }
}

/// Metrics of one Kafka API.
#[derive(Debug, Default)]
pub struct ApiMetrics {
    /// Time from a decoded request header to its encoded response (long polls included).
    pub latency: Histogram,
    /// Requests that closed the connection (undecodable body, unsupported version).
    pub errors: AtomicU64,
    /// Requests per version, index = version (0..=the version table's max for the API): which
    /// versions clients actually negotiate.
    by_version: Vec<AtomicU64>,
}

impl ApiMetrics {
    fn for_api(support: &versions::ApiSupport) -> Self {
        let versions = usize::try_from(support.max).unwrap_or(0) + 1;
        Self {
            by_version: (0..versions).map(|_| AtomicU64::new(0)).collect(),
            ..Self::default()
        }
    }

    /// Counts a request of `version` (one the table serves; others are not counted).
    pub fn requested(&self, version: i16) {
        if let Some(count) = usize::try_from(version)
            .ok()
            .and_then(|v| self.by_version.get(v))
        {
            count.fetch_add(1, Relaxed);
        }
    }

    /// (version, requests) for every version requested at least once.
    pub fn versions_requested(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.by_version
            .iter()
            .map(|c| c.load(Relaxed))
            .enumerate()
            .filter(|&(_, n)| n > 0)
    }
}

/// Broker-wide metrics. One per broker, shared by every connection.
#[derive(Debug)]
pub struct Metrics {
    /// One entry per row of [`versions::SUPPORTED`], same order.
    apis: Vec<ApiMetrics>,
    /// Connections accepted since start (the open ones: `open_connections`).
    pub connections_accepted: AtomicU64,
    /// Client connections open right now (a gauge: `connection_opened`).
    open_connections: AtomicUsize,
    /// Fetches parked in a long poll right now (a gauge: `park_fetch`; tests wait on it).
    waiting_fetches: AtomicUsize,
    /// Connections closed at accept: their address had `max.connections.per.ip` open.
    pub connections_refused: AtomicU64,
    /// TLS handshakes that failed or timed out (`TLS_HANDSHAKE_TIMEOUT_MS`).
    pub tls_handshake_failures: AtomicU64,
    /// Admin API connections closed at accept: `admin.max.connections` were open.
    pub admin_connections_refused: AtomicU64,
    /// SASL authentications (and re-authentications) that succeeded.
    pub sasl_authentications: AtomicU64,
    /// SASL authentications that failed: bad credentials, an unknown mechanism, a refused
    /// re-authentication, or a user over `LOGIN_FAILURES_PER_USER_MAX` from its address.
    pub sasl_authentication_failures: AtomicU64,
    /// Logins (SASL and the admin API's) refused without being checked: the user name was
    /// over `LOGIN_FAILURES_PER_USER_MAX` failures from that source address.
    pub login_refusals: AtomicU64,
    /// Produce requests a client quota throttled (`producer_byte_rate`).
    pub produce_throttled: AtomicU64,
    /// Fetch requests a client quota throttled (`consumer_byte_rate`).
    pub fetch_throttled: AtomicU64,
    /// Fences of storage logs: shared with the offsets-log writer, which owns its log.
    pub fences: Arc<FenceMetrics>,
    /// The log cleaner's work (`cleaner.rs`).
    pub cleaner: Arc<CleanerMetrics>,
    /// Open connections per client software (KIP-511).
    pub client_software: Arc<ClientSoftware>,
}

/// Decrements a gauge when dropped.
struct Gauge<'a>(&'a AtomicUsize);

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// Open connections per client software: the name and version a client sends in ApiVersions
/// v3+ (KIP-511), like Kafka's socket-server `connections` gauge tagged
/// `clientSoftwareName`/`clientSoftwareVersion`. A connection counts as `unknown`/`unknown`
/// until it says (as Kafka's `ClientInformation.EMPTY`). At most
/// `CLIENT_SOFTWARE_ENTRIES_MAX` distinct pairs, each part at most
/// `CLIENT_SOFTWARE_BYTES_MAX` bytes: connections beyond are counted under
/// [`ClientSoftware::OTHER`], which no valid name can spell.
#[derive(Debug, Default)]
pub struct ClientSoftware {
    open: Mutex<BTreeMap<SoftwareKey, u64>>,
}

/// A client software's (name, version).
type SoftwareKey = (Arc<str>, Arc<str>);

impl ClientSoftware {
    /// A connection that has not said what it is.
    pub const UNKNOWN: &str = "unknown";
    /// Connections over the bounds (Kafka's name pattern refuses the leading `_`).
    pub const OTHER: &str = "_other";

    /// Counts one connection of `name` `version` until the returned guard drops.
    pub fn connect(self: &Arc<Self>, name: &str, version: &str) -> SoftwareSeen {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let too_long = name.len().max(version.len()) > limits::CLIENT_SOFTWARE_BYTES_MAX;
        let known = open.contains_key(&(Arc::from(name), Arc::from(version)));
        let key: (Arc<str>, Arc<str>) =
            if !too_long && (known || open.len() < limits::CLIENT_SOFTWARE_ENTRIES_MAX) {
                (name.into(), version.into())
            } else {
                (Self::OTHER.into(), Self::OTHER.into())
            };
        *open.entry(key.clone()).or_insert(0) += 1;
        SoftwareSeen {
            registry: Arc::clone(self),
            key,
        }
    }

    /// (name, version, open connections), sorted.
    pub fn snapshot(&self) -> Vec<(Arc<str>, Arc<str>, u64)> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.iter()
            .map(|((name, version), n)| (name.clone(), version.clone(), *n))
            .collect()
    }
}

/// One connection counted in [`ClientSoftware`] until dropped.
#[derive(Debug)]
pub struct SoftwareSeen {
    registry: Arc<ClientSoftware>,
    key: SoftwareKey,
}

impl Drop for SoftwareSeen {
    fn drop(&mut self) {
        let mut open = self
            .registry
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// What the log cleaner did since start.
#[derive(Debug, Default)]
pub struct CleanerMetrics {
    /// Cleans that swapped cleaned segments in.
    pub cleans_total: AtomicU64,
    /// Cleans abandoned because the log changed meanwhile (a reopen, retention).
    pub abandoned_total: AtomicU64,
    /// Bytes of segments read and rewritten.
    pub bytes_read_total: AtomicU64,
    /// Bytes of the cleaned segments written.
    pub bytes_written_total: AtomicU64,
    /// Records removed (superseded, expired tombstones, aborted).
    pub records_removed_total: AtomicU64,
}

/// Fenced logs (after a failed write or fsync) and fences lifted. Partitions are counted at
/// scrape time from their logs; the offsets and transaction logs' states are mirrored here by
/// their writers.
#[derive(Debug, Default)]
pub struct FenceMetrics {
    /// The internal offsets log is fenced now.
    pub offsets_log_fenced: AtomicBool,
    /// The transaction log is fenced now.
    pub txn_log_fenced: AtomicBool,
    /// Fences lifted since start (a probe write and fsync succeeded and the log reopened).
    pub lifted_total: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            apis: versions::SUPPORTED
                .iter()
                .map(ApiMetrics::for_api)
                .collect(),
            connections_accepted: AtomicU64::new(0),
            open_connections: AtomicUsize::new(0),
            waiting_fetches: AtomicUsize::new(0),
            connections_refused: AtomicU64::new(0),
            tls_handshake_failures: AtomicU64::new(0),
            admin_connections_refused: AtomicU64::new(0),
            sasl_authentications: AtomicU64::new(0),
            sasl_authentication_failures: AtomicU64::new(0),
            login_refusals: AtomicU64::new(0),
            produce_throttled: AtomicU64::new(0),
            fetch_throttled: AtomicU64::new(0),
            fences: Arc::default(),
            cleaner: Arc::default(),
            client_software: Arc::default(),
        }
    }
}

impl Metrics {
    /// The metrics of `key`, if the broker implements it.
    pub fn api(&self, key: ApiKey) -> Option<&ApiMetrics> {
        let index = versions::SUPPORTED.iter().position(|s| s.key == key)?;
        self.apis.get(index)
    }

    /// Every implemented API with its metrics, in version-table order.
    pub fn apis(&self) -> impl Iterator<Item = (ApiKey, &ApiMetrics)> {
        versions::SUPPORTED.iter().map(|s| s.key).zip(&self.apis)
    }

    /// Counts an accepted connection.
    pub fn connection_accepted(&self) {
        self.connections_accepted.fetch_add(1, Relaxed);
    }

    /// Client connections open right now.
    pub fn open_connections(&self) -> usize {
        self.open_connections.load(Relaxed)
    }

    /// Counts a connection as open until the returned guard drops.
    pub fn connection_opened(&self) -> impl Drop + '_ {
        self.open_connections.fetch_add(1, Relaxed);
        Gauge(&self.open_connections)
    }

    /// Fetches parked in a long poll right now.
    pub fn waiting_fetches(&self) -> usize {
        self.waiting_fetches.load(Relaxed)
    }

    /// Counts a fetch as parked until the returned guard drops.
    pub fn park_fetch(&self) -> impl Drop + '_ {
        self.waiting_fetches.fetch_add(1, Relaxed);
        Gauge(&self.waiting_fetches)
    }

    /// Counts a failed or timed-out TLS handshake.
    pub fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.fetch_add(1, Relaxed);
    }

    /// Counts a SASL authentication: `ok` if it succeeded.
    pub fn sasl_authentication(&self, ok: bool) {
        if ok {
            self.sasl_authentications.fetch_add(1, Relaxed);
        } else {
            self.sasl_authentication_failures.fetch_add(1, Relaxed);
        }
    }

    /// Counts an admin API connection closed at accept (`admin.max.connections`).
    pub fn admin_connection_refused(&self) {
        self.admin_connections_refused.fetch_add(1, Relaxed);
    }

    /// Counts a connection closed at accept (`max.connections.per.ip`).
    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Relaxed);
    }
}

/// Counters of one partition, held in the partition itself.
#[derive(Debug, Default)]
pub struct PartitionMetrics {
    /// Record-batch bytes appended by producers.
    pub bytes_in: AtomicU64,
    /// Records appended by producers.
    pub records_in: AtomicU64,
    /// Record-batch bytes handed to fetch responses.
    pub bytes_out: AtomicU64,
    /// Records handed to fetch responses (from the batch headers' last offset delta).
    pub records_out: AtomicU64,
    /// Produce requests for this partition that failed with an error code.
    pub produce_errors: AtomicU64,
    /// Retried batches acknowledged with their original offsets (idempotent producers).
    pub produce_duplicates: AtomicU64,
}

impl PartitionMetrics {
    /// Counts one successful append.
    pub fn appended(&self, records: u32, bytes: u32) {
        self.records_in.fetch_add(u64::from(records), Relaxed);
        self.bytes_in.fetch_add(u64::from(bytes), Relaxed);
    }

    /// Counts a slice handed to a fetch response: its bytes, and its records from the batch
    /// headers (read through the page cache; a few bytes per batch, never the records).
    pub fn fetched(&self, slice: &ReadSlice) {
        self.bytes_out.fetch_add(u64::from(slice.len), Relaxed);
        self.records_out.fetch_add(records_in_slice(slice), Relaxed);
    }
}

/// Sums `last_offset_delta + 1` over the batches of `slice` (one header read per batch).
/// Stops at the first header it cannot read: the count is observability, never a reason to
/// fail a fetch.
fn records_in_slice(slice: &ReadSlice) -> u64 {
    let mut records = 0u64;
    let _ = slice.for_each_header(|header| {
        records += u64::try_from(header.last_offset_delta).unwrap_or(0) + 1;
    });
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_inf_counts_everything() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(100));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let (buckets, sum_us, count) = h.snapshot();
        assert_eq!(buckets.len(), LATENCY_BUCKETS_US.len() + 1);
        assert_eq!(buckets[0], 2, "50 µs and 100 µs are both <= 100 µs");
        assert_eq!(buckets[5], 3, "3 ms is <= 5 ms");
        assert_eq!(buckets[LATENCY_BUCKETS_US.len() - 1], 3);
        assert_eq!(*buckets.last().unwrap(), 4);
        assert_eq!(count, 4);
        assert_eq!(sum_us, 50 + 100 + 3_000 + 60_000_000);
    }

    #[test]
    fn every_supported_api_has_metrics() {
        let m = Metrics::default();
        for s in versions::SUPPORTED {
            assert!(m.api(s.key).is_some(), "{:?}", s.key);
        }
        assert_eq!(m.apis().count(), versions::SUPPORTED.len());
    }
}
