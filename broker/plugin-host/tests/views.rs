//! The fetch-time example plugins (`plugins/{json-filter, regex-filter,
//! header-filter, sample, redact, csv-to-json}`), built to wasm with the
//! SDK and loaded by the host, on real columnar batches: each one's
//! results, its bad parameters rejected at configuration with a message
//! naming the parameter, a view chaining filters and transforms, instance
//! reuse across calls, and the `fail` / `skip` policies on a real failure
//! (a batch past the instance's memory limit).

mod common;

use std::sync::Arc;

use sluice_plugin_host::{
    CallError, ColumnarBatch, FailurePolicy, PluginKind, Registry, RegistryError, Stage, View,
};
use sluice_sdk::hash;

const EXAMPLES: [(&str, PluginKind); 6] = [
    ("json-filter", PluginKind::Filter),
    ("regex-filter", PluginKind::Filter),
    ("header-filter", PluginKind::Filter),
    ("sample", PluginKind::Filter),
    ("redact", PluginKind::Transform),
    ("csv-to-json", PluginKind::Transform),
];

/// A registry with the named examples installed (compiling one is most of
/// a test's time in a debug build: install only what a test uses).
fn registry_with(names: &[&str]) -> (tempfile::TempDir, Arc<Registry>) {
    let (dir, registry) = common::registry(|_| {});
    for (name, kind) in EXAMPLES.into_iter().filter(|(n, _)| names.contains(n)) {
        let info = registry.install(name, &common::wasm(name)).expect(name);
        assert_eq!(info.kind, kind, "{name}");
    }
    (dir, registry)
}

/// Offsets start at 1000 so an index is never mistaken for an offset.
fn batch(values: &[Option<&str>]) -> ColumnarBatch {
    let mut b = ColumnarBatch::new();
    for (i, v) in values.iter().enumerate() {
        let key = format!("key-{i}");
        let headers: &[(&[u8], &[u8])] = if i % 2 == 0 {
            &[(b"tenant", b"acme"), (b"trace", b"t")]
        } else {
            &[(b"tenant", b"globex")]
        };
        b.push(
            1000 + i as i64,
            1_700_000_000_000 + i as i64,
            Some(key.as_bytes()),
            v.map(str::as_bytes),
            headers,
        );
    }
    b
}

fn kept_offsets(b: &ColumnarBatch) -> Vec<i64> {
    b.offsets().to_vec()
}

fn values(b: &ColumnarBatch) -> Vec<(i64, Option<String>)> {
    b.records()
        .map(|r| {
            (
                r.offset,
                r.value().map(|v| String::from_utf8(v.to_vec()).unwrap()),
            )
        })
        .collect()
}

fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    common::params(pairs)
}

#[test]
fn json_filter_compares_fields() {
    let (_dir, registry) = registry_with(&["json-filter"]);
    let input = batch(&[
        Some(r#"{"region":"eu","total":5}"#),
        Some(r#"{"region":"us","total":50}"#),
        Some(r#"{"total":500,"region":"eu"}"#),
        Some("not json"),
        None,
    ]);
    let eu = registry
        .filter(
            "json-filter",
            &p(&[("field", "$.region"), ("op", "=="), ("value", "\"eu\"")]),
        )
        .unwrap();
    assert_eq!(
        eu.filter(&input).unwrap(),
        [true, false, true, false, false]
    );
    let big = registry
        .filter(
            "json-filter",
            &p(&[("field", "$.total"), ("op", ">="), ("value", "50")]),
        )
        .unwrap();
    assert_eq!(
        big.filter(&input).unwrap(),
        [false, true, true, false, false]
    );
}

#[test]
fn regex_header_and_sample_filters() {
    let (_dir, registry) = registry_with(&["regex-filter", "header-filter", "sample"]);
    let input = batch(&[Some("ERROR disk"), Some("ok"), Some("error 500"), None]);
    let errors = registry
        .filter("regex-filter", &p(&[("pattern", "(?i)^error")]))
        .unwrap();
    assert_eq!(errors.filter(&input).unwrap(), [true, false, true, false]);
    let acme = registry
        .filter(
            "header-filter",
            &p(&[("name", "tenant"), ("value", "acme")]),
        )
        .unwrap();
    assert_eq!(acme.filter(&input).unwrap(), [true, false, true, false]);
    let traced = registry
        .filter("header-filter", &p(&[("name", "trace")]))
        .unwrap();
    assert_eq!(traced.filter(&input).unwrap(), [true, false, true, false]);

    let many = batch(&vec![Some("v"); 2000]);
    let one_in_7 = registry.filter("sample", &p(&[("n", "7")])).unwrap();
    let got = one_in_7.filter(&many).unwrap();
    let expected: Vec<bool> = (0..2000)
        .map(|i| hash::to_positive(hash::murmur2(format!("key-{i}").as_bytes())).is_multiple_of(7))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn transforms_rewrite_values_and_keep_offsets() {
    let (_dir, registry) = registry_with(&["redact", "csv-to-json"]);
    let input = batch(&[
        Some(r#"{"id":1,"card_number":"4111"}"#),
        Some("not json"),
        None,
    ]);
    let mask = registry
        .transform("redact", &p(&[("fields", "card_number")]))
        .unwrap();
    let out = mask.transform(&input).unwrap();
    assert_eq!(
        values(&out),
        [
            (1000, Some(r#"{"id":1,"card_number":"****"}"#.into())),
            (1002, None)
        ]
    );
    let first = out.records().next().unwrap();
    assert_eq!(first.timestamp, 1_700_000_000_000);
    assert_eq!(first.key(), Some(&b"key-0"[..]));
    assert_eq!(first.headers().len(), 2);

    let csv = registry
        .transform("csv-to-json", &p(&[("columns", "region,total")]))
        .unwrap();
    let out = csv.transform(&batch(&[Some("eu,5"), Some("us")])).unwrap();
    assert_eq!(
        values(&out),
        [
            (1000, Some(r#"{"region":"eu","total":"5"}"#.into())),
            (1001, Some(r#"{"region":"us","total":null}"#.into()))
        ]
    );
}

#[test]
fn bad_parameters_are_rejected_at_configuration() {
    let (_dir, registry) = registry_with(&EXAMPLES.map(|(n, _)| n));
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 8] = [
        (
            "json-filter",
            &[("field", "$.a"), ("op", "~"), ("value", "1")],
            "`op` = `~`",
        ),
        ("json-filter", &[("op", "=="), ("value", "1")], "`field`"),
        ("regex-filter", &[("pattern", "(")], "parameter `pattern`"),
        ("header-filter", &[], "`name`"),
        ("sample", &[("n", "0")], "n >= 1"),
        (
            "redact",
            &[("fields", "a"), ("mode", "hash")],
            "`mode` = `hash`",
        ),
        (
            "csv-to-json",
            &[("columns", "a"), ("delimiter", "ab")],
            "`delimiter`",
        ),
        (
            "csv-to-json",
            &[("colums", "a")],
            "unknown parameter `colums`",
        ),
    ];
    for (name, params, needle) in cases {
        let err = registry.stage(name, &p(params)).unwrap_err();
        assert!(
            matches!(err, RegistryError::Call(CallError::InvalidParams { .. })),
            "{name}: {err}"
        );
        let message = err.to_string();
        assert!(message.contains(needle), "{name}: {message}");
        assert!(message.contains(name), "{name}: {message}");
    }
}

#[test]
fn kinds_are_checked() {
    let (_dir, registry) = registry_with(&["redact", "sample"]);
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let err = registry
        .filter("redact", &p(&[("fields", "a")]))
        .unwrap_err();
    assert!(matches!(err, RegistryError::WrongKind { .. }), "{err}");
    let err = registry.transform("sample", &p(&[("n", "2")])).unwrap_err();
    assert!(matches!(err, RegistryError::WrongKind { .. }), "{err}");
    let err = registry.stage("murmur2", &[]).unwrap_err();
    assert!(matches!(err, RegistryError::WrongKind { .. }), "{err}");
    assert!(matches!(
        registry.stage("nope", &[]).unwrap_err(),
        RegistryError::NotFound(_)
    ));
}

#[test]
fn a_view_chains_filters_and_transforms_reusing_instances() {
    let (_dir, registry) =
        registry_with(&["header-filter", "csv-to-json", "redact", "json-filter"]);
    let stages = vec![
        registry
            .stage(
                "header-filter",
                &p(&[("name", "tenant"), ("value", "acme")]),
            )
            .unwrap(),
        registry
            .stage("csv-to-json", &p(&[("columns", "region,card_number")]))
            .unwrap(),
        registry
            .stage("redact", &p(&[("fields", "card_number"), ("mode", "drop")]))
            .unwrap(),
        registry
            .stage(
                "json-filter",
                &p(&[("field", "region"), ("op", "!="), ("value", "us")]),
            )
            .unwrap(),
    ];
    let Stage::Transform(csv) = stages[1].clone() else {
        panic!("csv-to-json is a transform");
    };
    let view = View::new(stages, FailurePolicy::Fail);
    let input = batch(&[
        Some("eu,4111"),
        Some("eu,1"),
        Some("us,2"),
        Some("ap,3"),
        Some("eu,5"),
    ]);
    for _ in 0..3 {
        let out = view.apply(&input).unwrap();
        assert_eq!(
            values(out.kept(&input)),
            [
                (1000, Some(r#"{"region":"eu"}"#.into())),
                (1004, Some(r#"{"region":"eu"}"#.into()))
            ]
        );
        assert_eq!(out.skipped_records, 0);
    }
    // One instance served all three fetches.
    assert_eq!(csv.idle_instances(), 1);
    let stats = view.stats();
    assert_eq!(
        (stats.batches, stats.records_in, stats.records_out),
        (3, 15, 6)
    );
}

#[test]
fn a_batch_past_the_memory_limit_fails_or_is_skipped_and_the_view_goes_on() {
    let (_dir, registry) = common::registry(|c| c.memory_bytes_max = 4 * 1024 * 1024);
    registry
        .install("json-filter", &common::wasm("json-filter"))
        .unwrap();
    let params = p(&[("field", "$.region"), ("op", "=="), ("value", "eu")]);
    let big_value = format!(r#"{{"region":"eu","pad":"{}"}}"#, "x".repeat(64 * 1024));
    let big = batch(&vec![Some(big_value.as_str()); 128]);
    let small = batch(&[Some(r#"{"region":"eu"}"#), Some(r#"{"region":"us"}"#)]);
    for policy in [FailurePolicy::Fail, FailurePolicy::Skip] {
        let view = View::new(
            vec![registry.stage("json-filter", &params).unwrap()],
            policy,
        );
        match (policy, view.apply(&big)) {
            (FailurePolicy::Fail, Err(e)) => {
                assert!(matches!(e, CallError::MemoryExceeded { .. }), "{e}");
            }
            (FailurePolicy::Skip, Ok(out)) => {
                assert_eq!(out.kept_len(&big), 0);
                assert_eq!(out.skipped_records, 128);
                assert!(matches!(
                    out.skipped_because,
                    Some(CallError::MemoryExceeded { .. })
                ));
            }
            (policy, other) => panic!("{policy:?}: {other:?}"),
        }
        assert_eq!(
            kept_offsets(view.apply(&small).unwrap().kept(&small)),
            [1000]
        );
        assert_eq!(view.stats().batches_failed, 1);
    }
}

#[test]
fn a_transform_that_breaks_the_contract_is_stopped_under_either_policy() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("dup", &common::wasm("hostile-duplicate-transform"))
        .unwrap();
    let input = batch(&[Some("a"), Some("b")]);
    let err = registry
        .transform("dup", &[])
        .unwrap()
        .transform(&input)
        .unwrap_err();
    assert!(matches!(err, CallError::Contract { .. }), "{err}");
    assert!(
        err.to_string().contains("at most one output per input"),
        "{err}"
    );
    let view = View::new(
        vec![registry.stage("dup", &[]).unwrap()],
        FailurePolicy::Skip,
    );
    let out = view.apply(&input).unwrap();
    assert_eq!((out.kept_len(&input), out.skipped_records), (0, 2));
    assert_eq!(view.stats().records_skipped, 2);
}
