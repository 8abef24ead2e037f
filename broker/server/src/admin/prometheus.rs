//! `GET /metrics`: every metric in Prometheus text exposition format 0.0.4. Counters come
//! from [`crate::metrics`]; log offsets, sizes and consumer lag are read at scrape time.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use axum::Extension;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::auth::Caller;
use super::{AdminState, ApiError};
use crate::broker::Broker;
use crate::limits;
use crate::metrics::{Histogram, LATENCY_BUCKETS_US};
use sluice_plugin_host::{CALL_LATENCY_BUCKETS_US, CallErrorKind, PluginStats};
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Needs DESCRIBE on the cluster.
pub(super) async fn handle(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME)],
    )?;
    let broker = state.broker.clone();
    let mut out = super::topics::blocking(move || {
        let mut out = String::new();
        broker_metrics(&mut out, &broker);
        partition_metrics(&mut out, &broker);
        view_metrics(&mut out, &broker);
        topic_plugin_metrics(&mut out, &broker);
        plugin_metrics(&mut out, &broker.plugins.registry.stats());
        super::clients::render(&mut out, &broker);
        out
    })
    .await?;
    group_metrics(&mut out, &state).await;
    transform_metrics(&mut out, &state).await;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], out).into_response())
}

pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn broker_metrics(out: &mut String, broker: &Broker) {
    let m = &broker.metrics;
    family(
        out,
        "sluice_connections_open",
        "gauge",
        "Kafka connections open now.",
    );
    let _ = writeln!(
        out,
        "sluice_connections_open {}",
        broker.metrics.open_connections()
    );
    counters(out, m);
    client_software_metrics(out, m);
    family(
        out,
        "sluice_fetches_waiting",
        "gauge",
        "Fetch requests parked in a long poll now.",
    );
    let _ = writeln!(
        out,
        "sluice_fetches_waiting {}",
        broker.metrics.waiting_fetches()
    );
    quarantine_metrics(out, broker);
    storage_metrics(out, broker);
    descriptor_metrics(out, broker);
    cleaner_metrics(out, broker);
    family(
        out,
        "sluice_request_errors_total",
        "counter",
        "Requests per Kafka API that closed the connection (undecodable, unsupported).",
    );
    for (key, api) in m.apis() {
        let _ = writeln!(
            out,
            "sluice_request_errors_total{{api=\"{key:?}\"}} {}",
            api.errors.load(Relaxed)
        );
    }
    family(
        out,
        "sluice_requests_total",
        "counter",
        "Requests per Kafka API and version: the versions clients negotiated.",
    );
    for (key, api) in m.apis() {
        for (version, count) in api.versions_requested() {
            let _ = writeln!(
                out,
                "sluice_requests_total{{api=\"{key:?}\",version=\"{version}\"}} {count}"
            );
        }
    }
    family(
        out,
        "sluice_request_duration_seconds",
        "histogram",
        "Time from request header to encoded response per Kafka API (long polls included).",
    );
    for (key, api) in m.apis() {
        histogram(
            out,
            "sluice_request_duration_seconds",
            &format!("api=\"{key:?}\""),
            &api.latency,
        );
    }
}

/// The descriptor budget (`crate::descriptors`): what is open against what may be.
fn descriptor_metrics(out: &mut String, broker: &Broker) {
    let budget = broker.topics.descriptor_budget();
    let files = broker.topics.segment_files();
    let gauges = [
        (
            "sluice_descriptors_open",
            "File descriptors this process holds now (/proc/self/fd).",
            crate::descriptors::open_descriptors(),
        ),
        (
            "sluice_descriptors_limit",
            "The soft RLIMIT_NOFILE the descriptor budget is checked against.",
            Some(budget.limit),
        ),
        (
            "sluice_descriptors_partitions_max",
            "Partitions the descriptor budget fits (after max.connections, sluice.segment.files.open.max and the reserve).",
            Some(budget.partitions_max()),
        ),
        (
            "sluice_segment_files_open",
            "Sealed segment files the broker-wide cache holds open (at most sluice.segment.files.open.max).",
            Some(files.open_files() as u64),
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(value) = value {
            family(out, name, "gauge", help);
            let _ = writeln!(out, "{name} {value}");
        }
    }
    family(
        out,
        "sluice_segment_files_opened_total",
        "counter",
        "Sealed segment files opened on demand (cache misses).",
    );
    let _ = writeln!(out, "sluice_segment_files_opened_total {}", files.opens());
}

/// The broker-wide counters: connections, TLS, SASL, quotas.
/// Open connections per client software (KIP-511), as Kafka's socket server tags them.
fn client_software_metrics(out: &mut String, m: &crate::metrics::Metrics) {
    family(
        out,
        "sluice_client_software_connections",
        "gauge",
        "Kafka connections open now per client software name and version (KIP-511; unknown until ApiVersions v3+ names them; _other past the entries limit).",
    );
    for (name, version, open) in m.client_software.snapshot() {
        let _ = writeln!(
            out,
            "sluice_client_software_connections{{clientSoftwareName=\"{}\",clientSoftwareVersion=\"{}\"}} {open}",
            escape(&name),
            escape(&version)
        );
    }
}

fn counters(out: &mut String, m: &crate::metrics::Metrics) {
    for (name, help, value) in [
        (
            "sluice_connections_accepted_total",
            "Kafka connections accepted since start.",
            &m.connections_accepted,
        ),
        (
            "sluice_connections_refused_total",
            "Kafka connections closed at accept because their address had max.connections.per.ip open.",
            &m.connections_refused,
        ),
        (
            "sluice_tls_handshake_failures_total",
            "TLS handshakes that failed or did not finish within the handshake timeout.",
            &m.tls_handshake_failures,
        ),
        (
            "sluice_sasl_authentications_total",
            "SASL authentications and re-authentications that succeeded.",
            &m.sasl_authentications,
        ),
        (
            "sluice_sasl_authentication_failures_total",
            "SASL authentications that failed (credentials, mechanism, re-authentication, or a user over its failure limit from its address).",
            &m.sasl_authentication_failures,
        ),
        (
            "sluice_login_refusals_total",
            "Logins (SASL and admin API) refused unchecked: the user name had LOGIN_FAILURES_PER_USER_MAX failures from that address within LOGIN_FAILURE_WINDOW_MS.",
            &m.login_refusals,
        ),
        (
            "sluice_admin_connections_refused_total",
            "Admin API connections closed at accept because admin.max.connections were open.",
            &m.admin_connections_refused,
        ),
        (
            "sluice_produce_throttled_total",
            "Produce requests a client quota (producer_byte_rate) throttled: answered with throttle_time_ms and the connection muted.",
            &m.produce_throttled,
        ),
        (
            "sluice_fetch_throttled_total",
            "Fetch requests a client quota (consumer_byte_rate) throttled: answered with throttle_time_ms and the connection muted.",
            &m.fetch_throttled,
        ),
    ] {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", value.load(Relaxed));
    }
}

fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let (buckets, sum_us, count) = h.snapshot();
    histogram_lines(
        out,
        name,
        labels,
        &LATENCY_BUCKETS_US,
        &buckets,
        sum_us,
        count,
    );
}

/// One histogram's lines from cumulative counts (`+Inf` last) over bounds in microseconds.
fn histogram_lines(
    out: &mut String,
    name: &str,
    labels: &str,
    bounds_us: &[u64],
    buckets: &[u64],
    sum_us: u64,
    count: u64,
) {
    for (bound, cumulative) in bounds_us.iter().zip(buckets) {
        let le = *bound as f64 / 1e6;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(
        out,
        "{name}_bucket{{{labels},le=\"+Inf\"}} {}",
        buckets.last().copied().unwrap_or(0)
    );
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
}

/// Per plugin: calls, failures by kind, timeouts, and the call latency.
fn plugin_metrics(out: &mut String, plugins: &[PluginStats]) {
    family(
        out,
        "sluice_plugin_calls_total",
        "counter",
        "Calls into a plugin (one per batch partitioned, filtered or transformed), failed ones included.",
    );
    for p in plugins {
        let _ = writeln!(
            out,
            "sluice_plugin_calls_total{{{}}} {}",
            plugin_labels(p),
            p.calls
        );
    }
    family(
        out,
        "sluice_plugin_errors_total",
        "counter",
        "Failed plugin calls by kind: timeout, memory, trap, guest, contract, instantiate, params, busy.",
    );
    for p in plugins {
        for (kind, n) in &p.errors {
            let _ = writeln!(
                out,
                "sluice_plugin_errors_total{{{},error=\"{}\"}} {n}",
                plugin_labels(p),
                kind.as_str()
            );
        }
    }
    family(
        out,
        "sluice_plugin_timeouts_total",
        "counter",
        "Plugin calls stopped at plugin.call.timeout.ms (also in sluice_plugin_errors_total).",
    );
    for p in plugins {
        let _ = writeln!(
            out,
            "sluice_plugin_timeouts_total{{{}}} {}",
            plugin_labels(p),
            p.errors_of(CallErrorKind::Timeout)
        );
    }
    plugin_record_metrics(out, plugins);
    family(
        out,
        "sluice_plugin_call_duration_seconds",
        "histogram",
        "Time of one plugin call, including making an instance when none was idle.",
    );
    for p in plugins {
        histogram_lines(
            out,
            "sluice_plugin_call_duration_seconds",
            &plugin_labels(p),
            &CALL_LATENCY_BUCKETS_US,
            &p.latency_cumulative,
            p.latency_sum_us,
            p.latency_cumulative.last().copied().unwrap_or(0),
        );
    }
}

/// A counter family: its name, its help, and its value for one item.
type Counter<T> = (&'static str, &'static str, fn(&T) -> u64);

/// Per plugin: records in and out of successful calls.
fn plugin_record_metrics(out: &mut String, plugins: &[PluginStats]) {
    family(
        out,
        "sluice_plugin_cpu_seconds_total",
        "counter",
        "CPU time of the threads calling a plugin, during its calls (the guest's work and the host's copies of batches in and answers out).",
    );
    for p in plugins {
        let _ = writeln!(
            out,
            "sluice_plugin_cpu_seconds_total{{{}}} {}",
            plugin_labels(p),
            p.cpu_ns as f64 / 1e9
        );
    }
    let counters: [Counter<PluginStats>; 2] = [
        (
            "sluice_plugin_records_in_total",
            "Records handed to a plugin in successful calls.",
            |p| p.records_in,
        ),
        (
            "sluice_plugin_records_out_total",
            "Records a plugin answered with in successful calls (partitioned, kept, or produced by a transform).",
            |p| p.records_out,
        ),
    ];
    for (name, help, value) in counters {
        family(out, name, "counter", help);
        for p in plugins {
            let _ = writeln!(out, "{name}{{{}}} {}", plugin_labels(p), value(p));
        }
    }
}

/// Fenced logs now (every partition's log, read at scrape time, plus the offsets and transaction logs) and
/// fences lifted since start.
fn storage_metrics(out: &mut String, broker: &Broker) {
    let fences = &broker.metrics.fences;
    let partitions = broker
        .topics
        .partitions()
        .iter()
        .filter(|p| p.with_log(|log| log.is_fenced()).unwrap_or(false))
        .count();
    let offsets_log = usize::from(fences.offsets_log_fenced.load(Relaxed))
        + usize::from(fences.txn_log_fenced.load(Relaxed));
    family(
        out,
        "sluice_storage_fenced_partitions",
        "gauge",
        "Logs fenced now after a failed write or fsync (partitions, the offsets and the transaction log); producers get KAFKA_STORAGE_ERROR until a probe lifts the fence.",
    );
    let _ = writeln!(
        out,
        "sluice_storage_fenced_partitions {}",
        partitions + offsets_log
    );
    family(
        out,
        "sluice_storage_fence_lifted_total",
        "counter",
        "Fences lifted since start: a probe write and fsync succeeded and the log was reopened from disk.",
    );
    let _ = writeln!(
        out,
        "sluice_storage_fence_lifted_total {}",
        fences.lifted_total.load(Relaxed)
    );
}

/// The log cleaner's counters since start.
fn cleaner_metrics(out: &mut String, broker: &Broker) {
    let c = &broker.metrics.cleaner;
    let counters = [
        (
            "sluice_cleaner_cleans_total",
            "Cleans of compacted partitions that swapped cleaned segments in.",
            &c.cleans_total,
        ),
        (
            "sluice_cleaner_abandoned_total",
            "Cleans abandoned because the log changed while they ran.",
            &c.abandoned_total,
        ),
        (
            "sluice_cleaner_read_bytes_total",
            "Bytes of segments the cleaner read and rewrote.",
            &c.bytes_read_total,
        ),
        (
            "sluice_cleaner_written_bytes_total",
            "Bytes of cleaned segments the cleaner wrote (read minus written: bytes reclaimed).",
            &c.bytes_written_total,
        ),
        (
            "sluice_cleaner_removed_records_total",
            "Records the cleaner removed: superseded values, expired tombstones, aborted transactions.",
            &c.records_removed_total,
        ),
    ];
    for (name, help, value) in counters {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name} {}", value.load(Relaxed));
    }
}

fn plugin_labels(p: &PluginStats) -> String {
    format!(
        "plugin=\"{}\",kind=\"{}\"",
        escape(&p.name),
        p.kind.as_str()
    )
}

/// One gauge or counter per partition; `read` returns `None` for a closed partition.
const PARTITION_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "sluice_partition_log_start_offset",
        "gauge",
        "First offset still readable.",
    ),
    (
        "sluice_partition_log_end_offset",
        "gauge",
        "Next offset to be assigned (the high watermark on one node).",
    ),
    (
        "sluice_partition_size_bytes",
        "gauge",
        "Bytes in the partition's segment files.",
    ),
    (
        "sluice_partition_bytes_in_total",
        "counter",
        "Record-batch bytes appended by producers since start.",
    ),
    (
        "sluice_partition_records_in_total",
        "counter",
        "Records appended by producers since start.",
    ),
    (
        "sluice_partition_bytes_out_total",
        "counter",
        "Record-batch bytes sent to fetchers since start.",
    ),
    (
        "sluice_partition_records_out_total",
        "counter",
        "Records sent to fetchers since start.",
    ),
    (
        "sluice_partition_produce_errors_total",
        "counter",
        "Appends refused with an error since start.",
    ),
    (
        "sluice_partition_produce_duplicates_total",
        "counter",
        "Retried batches of idempotent producers acknowledged with their original offsets (nothing appended) since start.",
    ),
    (
        "sluice_partition_last_stable_offset",
        "gauge",
        "Last stable offset: read_committed consumers read below it (the log end when no transaction is open).",
    ),
];

/// Quarantined topics and offline partitions (`broker/quarantine.rs`), read at scrape time.
fn quarantine_metrics(out: &mut String, broker: &Broker) {
    let quarantined = broker.topics.quarantined();
    family(
        out,
        "sluice_topics_quarantined",
        "gauge",
        "Topics with unreadable metadata or an offline partition, left untouched on disk since start.",
    );
    let _ = writeln!(out, "sluice_topics_quarantined {}", quarantined.len());
    family(
        out,
        "sluice_partitions_offline",
        "gauge",
        "Partitions whose log could not be opened at start (KAFKA_STORAGE_ERROR until the topic is deleted).",
    );
    let offline = quarantined
        .iter()
        .flat_map(|(t, _)| &t.partitions)
        .filter(|p| p.offline_reason().is_some())
        .count();
    let _ = writeln!(out, "sluice_partitions_offline {offline}");
}

fn partition_metrics(out: &mut String, broker: &Broker) {
    let rows: Vec<_> = broker
        .topics
        .partitions()
        .into_iter()
        .filter_map(|p| {
            let (start, end, size, lso) = p
                .with_log(|log| {
                    (
                        log.log_start_offset().value(),
                        log.log_end_offset().value(),
                        log.size_bytes(),
                        log.last_stable_offset().value(),
                    )
                })
                .ok()?;
            let m = &p.metrics;
            let values = [
                start as u64,
                end as u64,
                size,
                m.bytes_in.load(Relaxed),
                m.records_in.load(Relaxed),
                m.bytes_out.load(Relaxed),
                m.records_out.load(Relaxed),
                m.produce_errors.load(Relaxed),
                m.produce_duplicates.load(Relaxed),
                lso as u64,
            ];
            Some((
                format!("topic=\"{}\",partition=\"{}\"", escape(&p.topic), p.index),
                values,
            ))
        })
        .collect();
    for (i, (name, kind, help)) in PARTITION_FAMILIES.iter().enumerate() {
        family(out, name, kind, help);
        for (labels, values) in &rows {
            let _ = writeln!(out, "{name}{{{labels}}} {}", values[i]);
        }
    }
}

const VIEW_FAMILIES: [(&str, &str); 5] = [
    (
        "sluice_view_batches_total",
        "Source batches run through the view's plugins since start.",
    ),
    (
        "sluice_view_records_in_total",
        "Source records the view's plugins saw since start.",
    ),
    (
        "sluice_view_records_out_total",
        "Records the view sent to consumers since start.",
    ),
    (
        "sluice_view_batches_failed_total",
        "Batches on which a plugin failed (trap, timeout, memory, guest error) since start.",
    ),
    (
        "sluice_view_records_skipped_total",
        "Records dropped because a plugin failed under on_error = skip, since start.",
    ),
];

const TOPIC_PLUGIN_FAMILIES: [(&str, &str); 4] = [
    (
        "sluice_topic_plugin_batches_total",
        "Produced batches a topic handed to its partitioner or validator plugin.",
    ),
    (
        "sluice_topic_plugin_records_in_total",
        "Records in those batches.",
    ),
    (
        "sluice_topic_plugin_records_out_total",
        "Records the plugin let through: all placed (partitioner), or not refused (validator).",
    ),
    (
        "sluice_topic_plugin_failures_total",
        "Calls of a topic's plugin that failed (trap, timeout, memory, broken answer, no instance).",
    ),
];

/// Per topic and plugin role: the topic's own calls of its partitioner and validator.
fn topic_plugin_metrics(out: &mut String, broker: &Broker) {
    let mut rows = Vec::new();
    for topic in broker.topics.topics() {
        let bound = [
            topic
                .plugins
                .partitioner
                .as_deref()
                .map(|p| (p.role(), p.plugin(), p.stats.snapshot())),
            topic
                .plugins
                .validator
                .as_deref()
                .map(|v| (v.role(), v.plugin(), v.stats.snapshot())),
        ];
        for (role, plugin, values) in bound.into_iter().flatten() {
            let labels = format!(
                "topic=\"{}\",role=\"{role}\",plugin=\"{}\"",
                escape(&topic.name),
                escape(plugin)
            );
            rows.push((labels, values));
        }
    }
    for (i, (name, help)) in TOPIC_PLUGIN_FAMILIES.iter().enumerate() {
        family(out, name, "counter", help);
        for (labels, values) in &rows {
            let _ = writeln!(out, "{name}{{{labels}}} {}", values[i]);
        }
    }
}

fn view_metrics(out: &mut String, broker: &Broker) {
    let rows: Vec<_> = broker
        .topics
        .views()
        .iter()
        .map(|v| {
            let s = v.stats();
            let values = [
                s.batches,
                s.records_in,
                s.records_out,
                s.batches_failed,
                s.records_skipped,
            ];
            (
                format!(
                    "view=\"{}\",source=\"{}\"",
                    escape(v.name()),
                    escape(&v.spec.source)
                ),
                values,
            )
        })
        .collect();
    for (i, (name, help)) in VIEW_FAMILIES.iter().enumerate() {
        family(out, name, "counter", help);
        for (labels, values) in &rows {
            let _ = writeln!(out, "{name}{{{labels}}} {}", values[i]);
        }
    }
}

const TRANSFORM_FAMILIES: [(&str, &str, &str); 8] = [
    (
        "sluice_transform_records_in_total",
        "counter",
        "Source records consumed by a transform's committed transactions, per source partition, since start.",
    ),
    (
        "sluice_transform_records_out_total",
        "counter",
        "Records a transform's committed transactions wrote, per output topic, since start.",
    ),
    (
        "sluice_transform_records_failed_total",
        "counter",
        "Records a plugin call failed on, dropped (skip) or written to the dead-letter topic (dead-letter), since start.",
    ),
    (
        "sluice_transform_transactions_total",
        "counter",
        "A transform's transactions, committed or aborted, since start.",
    ),
    (
        "sluice_transform_lag_records",
        "gauge",
        "Source records below the last stable offset not yet committed through the transform.",
    ),
    (
        "sluice_transform_partitions",
        "gauge",
        "A transform's source partitions by runner state (starting, running, paused, unauthorized, failed, stopped).",
    ),
    (
        "sluice_transform_txn_wait_ms",
        "gauge",
        "How long a transform's runner has waited on an open transaction holding its source partition's last stable offset (0: not waiting).",
    ),
    (
        "sluice_transform_txn_held_records",
        "gauge",
        "Source records after the open transaction a runner waits on, held back until its marker (0: not waiting); lag does not count them.",
    ),
];

/// Materialized transforms: counters of committed work (memory only, from the runners'
/// status), lag, states and waits on open transactions read now.
async fn transform_metrics(out: &mut String, state: &AdminState) {
    let mut lines: [String; 8] = Default::default();
    for t in state.transforms.list().await {
        transform_lines(&t, &mut lines);
    }
    for ((name, kind, help), lines) in TRANSFORM_FAMILIES.iter().zip(lines) {
        family(out, name, kind, help);
        out.push_str(&lines);
    }
}

/// One transform's samples, in `TRANSFORM_FAMILIES` order.
fn transform_lines(t: &crate::transforms::TransformReport, lines: &mut [String; 8]) {
    use std::collections::BTreeMap;
    let name = escape(&t.name);
    let mut out_by_output: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
    let mut totals = [0u64; 4]; // skipped, dead-lettered, commits, aborts
    for p in &t.partitions {
        let labels = format!("transform=\"{name}\",partition=\"{}\"", p.partition);
        let family = |i: usize| TRANSFORM_FAMILIES[i].0;
        let _ = writeln!(lines[0], "{}{{{labels}}} {}", family(0), p.records_in);
        let _ = writeln!(lines[4], "{}{{{labels}}} {}", family(4), p.lag);
        let wait = p.waiting_on_transaction.as_ref();
        let (wait_ms, held) = wait.map_or((0, 0), |w| (w.waiting_ms, w.records_held));
        let _ = writeln!(lines[6], "{}{{{labels}}} {wait_ms}", family(6));
        let _ = writeln!(lines[7], "{}{{{labels}}} {held}", family(7));
        for (output, n) in &p.records_out {
            *out_by_output.entry(output).or_default() += n;
        }
        *by_state.entry(p.state.as_str()).or_default() += 1;
        let counts = [
            p.records_skipped,
            p.records_dead_lettered,
            p.transactions,
            p.aborts,
        ];
        for (total, n) in totals.iter_mut().zip(counts) {
            *total += n;
        }
    }
    let labelled = |line: &mut String, i: usize, label: &str, value: &str, n: u64| {
        let family = TRANSFORM_FAMILIES[i].0;
        let _ = writeln!(
            line,
            "{family}{{transform=\"{name}\",{label}=\"{value}\"}} {n}"
        );
    };
    for (output, n) in out_by_output {
        labelled(&mut lines[1], 1, "output", &escape(output), n);
    }
    labelled(&mut lines[2], 2, "policy", "skip", totals[0]);
    labelled(&mut lines[2], 2, "policy", "dead-letter", totals[1]);
    labelled(&mut lines[3], 3, "outcome", "commit", totals[2]);
    labelled(&mut lines[3], 3, "outcome", "abort", totals[3]);
    for (s, n) in by_state {
        labelled(&mut lines[5], 5, "state", s, n);
    }
}

async fn group_metrics(out: &mut String, state: &AdminState) {
    let groups = state.groups.list_groups().await.unwrap_or_default();
    let truncated = groups.len() > limits::ADMIN_METRICS_GROUPS_MAX;
    let mut lag_lines = String::new();
    let mut committed_lines = String::new();
    for group in groups.iter().take(limits::ADMIN_METRICS_GROUPS_MAX) {
        let Ok(rows) = super::groups::lag(state, &group.group_id).await else {
            continue;
        };
        for row in rows {
            let labels = format!(
                "group=\"{}\",topic=\"{}\",partition=\"{}\"",
                escape(&group.group_id),
                escape(&row.topic),
                row.partition
            );
            let _ = writeln!(
                committed_lines,
                "sluice_group_committed_offset{{{labels}}} {}",
                row.committed_offset
            );
            if row.lag >= 0 {
                let _ = writeln!(lag_lines, "sluice_group_lag{{{labels}}} {}", row.lag);
            }
        }
    }
    family(
        out,
        "sluice_group_committed_offset",
        "gauge",
        "A consumer group's committed offset per partition.",
    );
    out.push_str(&committed_lines);
    family(
        out,
        "sluice_group_lag",
        "gauge",
        "Log end offset minus the committed offset, per group and partition.",
    );
    out.push_str(&lag_lines);
    family(
        out,
        "sluice_metrics_groups_truncated",
        "gauge",
        "1 when more groups exist than one scrape reports (ADMIN_METRICS_GROUPS_MAX).",
    );
    let _ = writeln!(
        out,
        "sluice_metrics_groups_truncated {}",
        u8::from(truncated)
    );
}

/// Escapes a label value (backslash, double quote, newline).
pub(super) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
