//! Output routing with a real plugin: `plugins/split-transform`, built to wasm with the
//! SDK, as a materialized transform (every record routed to one of its outputs, the routing
//! header gone) and as a view (the first output only), and the routing header a producer
//! wrote stripped before the plugin sees the records.

mod common;

use std::sync::Arc;

use sluice_plugin_host::{ColumnarBatch, FailurePolicy, Registry, View};

const OUTPUT_HEADER: &[u8] = b"sluice.output";

fn registry() -> (tempfile::TempDir, Arc<Registry>) {
    let (dir, registry) = common::registry(|_| {});
    registry
        .install("split", &common::wasm("split-transform"))
        .unwrap();
    (dir, registry)
}

fn params(unparseable: &str) -> Vec<(String, String)> {
    [
        ("field", "$.region"),
        ("value", "eu"),
        ("unparseable", unparseable),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

/// Orders at offsets 500.. with a header each; `steer` adds a producer-written routing
/// header to every record.
fn orders(values: &[&str], steer: bool) -> ColumnarBatch {
    let mut b = ColumnarBatch::new();
    for (i, v) in values.iter().enumerate() {
        let mut headers: Vec<(&[u8], &[u8])> = vec![(b"trace", b"t")];
        if steer {
            headers.push((OUTPUT_HEADER, b"1"));
        }
        let key = format!("customer-{i}");
        b.push(
            500 + i as i64,
            1_700_000_000_000 + i as i64,
            Some(key.as_bytes()),
            Some(v.as_bytes()),
            &headers,
        );
    }
    b
}

const ORDERS: [&str; 5] = [
    r#"{"region":"eu","id":1}"#,
    r#"{"region":"us","id":2}"#,
    "not json",
    r#"{"id":4}"#,
    r#"{"region":"eu","id":5}"#,
];

#[test]
fn a_split_routes_every_record_to_its_output_without_the_header() {
    let (_dir, registry) = registry();
    let split = registry.transform("split", &params("dead-letter")).unwrap();
    let input = orders(&ORDERS, false);
    let routed = split
        .transform_routed(&input, &["orders-eu", "orders-us", "orders-dlq"])
        .unwrap();
    assert_eq!(routed.outputs, [0, 1, 2, 2, 0]);
    assert_eq!(routed.batch.offsets(), [500, 501, 502, 503, 504]);
    for (r, original) in routed.batch.records().zip(input.records()) {
        assert_eq!(
            (r.key(), r.value(), r.timestamp),
            (original.key(), original.value(), original.timestamp)
        );
        assert!(
            r.header("sluice.output").is_none(),
            "the routing header is removed"
        );
        assert_eq!(r.header("trace"), Some(&b"t"[..]));
    }
    let reasons: Vec<_> = routed
        .batch
        .records()
        .filter_map(|r| r.header("split.reason"))
        .collect();
    assert_eq!(reasons.len(), 2, "the unreadable ones say why");
    // Two outputs: the plugin's third output does not exist, a broken contract.
    let err = split
        .transform_routed(&input, &["orders-eu", "orders-us"])
        .unwrap_err();
    assert!(err.to_string().contains("has 2 outputs"), "{err}");
}

#[test]
fn as_a_view_the_same_binary_shows_its_first_output() {
    let (_dir, registry) = registry();
    let view = View::new(
        vec![registry.stage("split", &params("second")).unwrap()],
        FailurePolicy::Fail,
    );
    let input = orders(&ORDERS, false);
    let out = view.apply(&input).unwrap();
    assert_eq!(out.kept(&input).offsets(), [500, 504]);
    assert!(
        out.kept(&input)
            .records()
            .all(|r| r.header("sluice.output").is_none())
    );
}

#[test]
fn a_producer_cannot_steer_records_with_the_routing_header() {
    let (_dir, registry) = registry();
    let split = registry.transform("split", &params("second")).unwrap();
    let routed = split
        .transform_routed(&orders(&ORDERS, true), &["orders-eu", "orders-rest"])
        .unwrap();
    // The plugin routed by region; every record kept its own headers, without the steering one.
    assert_eq!(routed.outputs, [0, 1, 1, 1, 0]);
    assert!(
        routed
            .batch
            .records()
            .all(|r| r.header("sluice.output").is_none() && r.header("trace").is_some())
    );
}
