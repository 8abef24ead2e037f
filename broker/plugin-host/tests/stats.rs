//! Per-plugin call statistics (`Registry::stats`, `Registry::stats_of`) with real plugins of
//! every kind: a partitioner, a filter and a transform count one call per batch through any
//! of their handles, and the records in and out; a timed-out call is counted as a timeout; the counters survive a
//! hot-reload version swap and start over when the plugin is deleted and installed again.

mod common;

use sluice_plugin_host::{CallErrorKind, ColumnarBatch, PluginKind};

fn batch(values: &[&str]) -> ColumnarBatch {
    let mut b = ColumnarBatch::new();
    for (i, v) in values.iter().enumerate() {
        b.push(i as i64, 0, Some(b"k"), Some(v.as_bytes()), &[]);
    }
    b
}

#[test]
fn every_kind_counts_its_calls_across_handles_and_reloads() {
    let (_dir, registry) = common::registry(|_| {});
    for name in ["murmur2", "json-filter", "redact"] {
        registry.install(name, &common::wasm(name)).expect(name);
    }
    let one = registry.partitioner("murmur2", &[]).unwrap();
    let two = registry.partitioner("murmur2", &[]).unwrap();
    let filter_params = common::params(&[("field", "$.n"), ("op", ">="), ("value", "1")]);
    let filter = registry.filter("json-filter", &filter_params).unwrap();
    let redact = registry
        .transform("redact", &common::params(&[("fields", "card")]))
        .unwrap();
    let records = batch(&[r#"{"n":0,"card":"1"}"#, r#"{"n":2,"card":"2"}"#]);
    for _ in 0..3 {
        one.partition(&records, 4).unwrap();
        filter.filter(&records).unwrap();
    }
    two.partition(&records, 4).unwrap();
    redact.transform(&records).unwrap();

    let murmur2 = registry.stats_of("murmur2").unwrap();
    assert_eq!((murmur2.calls, murmur2.kind), (4, PluginKind::Partitioner));
    assert_eq!(murmur2.latency_cumulative.last(), Some(&4));
    let json_filter = registry.stats_of("json-filter").unwrap();
    assert_eq!(
        (json_filter.calls, json_filter.kind),
        (3, PluginKind::Filter)
    );
    let transform = registry.stats_of("redact").unwrap();
    assert_eq!(
        (transform.calls, transform.kind),
        (1, PluginKind::Transform)
    );
    assert!(registry.stats().iter().all(|s| s.errors_total() == 0));
    // Records in and out: a partitioner places all, the filter keeps one of two (n >= 1),
    // redact returns each record.
    assert_eq!((murmur2.records_in, murmur2.records_out), (8, 8));
    assert_eq!((json_filter.records_in, json_filter.records_out), (6, 3));
    assert_eq!((transform.records_in, transform.records_out), (2, 2));

    // A new version under the same name keeps the counters.
    registry.install("murmur2", &common::wasm("crc32")).unwrap();
    one.partition(&records, 4).unwrap();
    assert_eq!(registry.stats_of("murmur2").unwrap().calls, 5);

    drop((one, two));
    registry.delete("murmur2", false).unwrap();
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    assert_eq!(registry.stats_of("murmur2").unwrap().calls, 0);
}

#[test]
fn a_timed_out_call_is_counted_as_a_timeout() {
    let (_dir, registry) = common::registry(|c| c.call_timeout_ms = 100);
    registry
        .install("spin", &common::wasm("hostile-infinite-loop"))
        .unwrap();
    let spin = registry.partitioner("spin", &[]).unwrap();
    spin.partition(&batch(&["x"]), 4).unwrap_err();
    let stats = registry.stats_of("spin").unwrap();
    assert_eq!(stats.calls, 1);
    assert_eq!(stats.errors_of(CallErrorKind::Timeout), 1);
    assert_eq!(stats.errors_total(), 1);
    assert!(stats.latency_sum_us >= 100_000, "{}", stats.latency_sum_us);
}
