//! A filter plugin (`plugins/hostile/filter-kind`, keep values containing
//! `"region":"eu"`) through `FilterInstance`: the contract, the SDK macro
//! and the host fit the fetch-time kinds too, before their broker wiring.

mod common;

use sluice_plugin_host::{CallError, ColumnarBatch, FilterInstance, PluginKind};

#[test]
fn a_filter_keeps_matching_records() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("eu-only", &common::wasm("hostile-filter-kind"))
        .unwrap();
    let version = registry.version("eu-only").unwrap();
    assert_eq!(version.kind, PluginKind::Filter);
    let mut filter = FilterInstance::new(registry.engine(), version, &[]).unwrap();
    let mut batch = ColumnarBatch::new();
    let values: [&[u8]; 10] = [
        br#"{"region":"eu","n":0}"#,
        br#"{"region":"us"}"#,
        b"",
        br#"{"n":3,"region":"eu"}"#,
        br#"{"region":"eu"}"#,
        b"x",
        b"y",
        b"z",
        br#"{"region":"eu"}"#,
        br#"{"region":"ap"}"#,
    ];
    for (i, v) in values.iter().enumerate() {
        batch.push(i as i64, 0, None, Some(v), &[]);
    }
    batch.push(10, 0, None, None, &[]);
    let keep = filter.filter(&batch).unwrap();
    let expected = [
        true, false, false, true, true, false, false, false, true, false, false,
    ];
    assert_eq!(keep, expected);
}

#[test]
fn a_partitioner_is_not_a_filter() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let err = FilterInstance::new(registry.engine(), registry.version("murmur2").unwrap(), &[])
        .unwrap_err();
    assert!(matches!(err, CallError::Instantiate { .. }), "{err}");
}
