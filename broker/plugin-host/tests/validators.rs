//! Validator plugins (WIT 0.2.0, produce time) through the registry: the real
//! `json-validator` and `record-policy-validator` guests refuse records with their reasons
//! and accept the rest; bad parameters and the wrong kind are refused when the handle is
//! made. And WIT versioning (wit/README.md, rule 4): a plugin built against the released
//! 0.1.0 contract (`plugins/compat/v0-1-filter`) still loads, filters and logs.

mod common;

use sluice_plugin_host::{CallError, ColumnarBatch, PluginKind, Refusal, RegistryError};

fn values(values: &[Option<&str>]) -> ColumnarBatch {
    let mut batch = ColumnarBatch::new();
    for (i, v) in values.iter().enumerate() {
        batch.push(i as i64, 0, Some(b"k"), v.map(str::as_bytes), &[]);
    }
    batch
}

fn refusal(index: u32, reason: &str) -> Refusal {
    Refusal {
        index,
        reason: reason.to_owned(),
    }
}

#[test]
fn the_json_validator_refuses_records_with_their_reasons() {
    let (_dir, registry) = common::registry(|_| {});
    let info = registry
        .install("json-validator", &common::wasm("json-validator"))
        .unwrap();
    assert_eq!(
        (info.kind, info.wit_version.as_str()),
        (PluginKind::Validator, "0.2.0")
    );
    let params = common::params(&[("required", "$.id"), ("types", "$.id:number")]);
    let validator = registry.validator("json-validator", &params).unwrap();
    let batch = values(&[
        Some(r#"{"id": 1}"#),
        Some("[1, 2]"),
        Some(r#"{"id": "x"}"#),
        Some(r#"{"name": "no id"}"#),
        Some(r#"{"id": 2, "ok": true}"#),
    ]);
    assert_eq!(
        validator.validate(&batch).unwrap(),
        [
            refusal(1, "the value is a JSON array, not an object"),
            refusal(2, "field $.id is of type string, expected number"),
            refusal(3, "required field $.id is missing or null"),
        ]
    );
    let good = values(&[Some(r#"{"id": 3}"#); 100]);
    assert!(validator.validate(&good).unwrap().is_empty());
    assert_eq!(validator.idle_instances(), 1);
}

#[test]
fn the_record_policy_validator_checks_sizes() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("policy", &common::wasm("record-policy-validator"))
        .unwrap();
    let validator = registry
        .validator("policy", &common::params(&[("max.value.bytes", "4")]))
        .unwrap();
    let refused = validator
        .validate(&values(&[Some("ok"), Some("too long")]))
        .unwrap();
    assert_eq!(
        refused,
        [refusal(1, "the value is 8 bytes, over max.value.bytes=4")]
    );
}

#[test]
fn bad_params_and_the_wrong_kind_fail_when_the_handle_is_made() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("json-validator", &common::wasm("json-validator"))
        .unwrap();
    registry
        .install("json-filter", &common::wasm("json-filter"))
        .unwrap();
    let err = registry
        .validator("json-validator", &common::params(&[("root", "list")]))
        .unwrap_err();
    assert!(
        matches!(&err, RegistryError::Call(CallError::InvalidParams { message, .. }) if message.contains("`root`")),
        "{err}"
    );
    let err = registry.validator("json-filter", &[]).unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::WrongKind {
                expected: "validator",
                actual: "filter",
                ..
            }
        ),
        "{err}"
    );
    let err = registry.filter("json-validator", &[]).unwrap_err();
    assert!(matches!(err, RegistryError::WrongKind { .. }), "{err}");
}

#[test]
fn a_plugin_built_against_wit_0_1_0_still_loads_filters_and_logs() {
    let (_dir, registry) = common::registry(|_| {});
    let info = registry
        .install("old", &common::wasm("compat-v0-1-filter"))
        .unwrap();
    assert_eq!(
        (info.kind, info.wit_version.as_str()),
        (PluginKind::Filter, "0.1.0")
    );
    let filter = registry
        .filter("old", &common::params(&[("prefix", "ok")]))
        .unwrap();
    let keep = filter
        .filter(&values(&[Some("ok-1"), Some("no"), None, Some("ok")]))
        .unwrap();
    assert_eq!(keep, [true, false, false, true]);
    let logged = registry.logs("old", 0, 10).unwrap();
    assert!(
        logged
            .lines
            .iter()
            .any(|l| l.message.contains("sluice:plugin@0.1.0")),
        "{logged:?}"
    );
}
