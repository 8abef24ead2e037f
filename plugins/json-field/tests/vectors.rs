//! The shared test vectors (`plugins/testdata/json-field-partitioner.json`), run against
//! the Rust plugin natively. The Python and JavaScript twins run the same file with pytest
//! and `node --test`, so all three place every record in the same partition.

use serde_json::Value;
use sluice_plugin_json_field::{Field, json_field};
use sluice_sdk::{BatchBuilder, Init, Params};

const VECTORS: &str = include_str!("../../testdata/json-field-partitioner.json");

fn params(case: &Value) -> Params {
    let pairs = case["params"].as_array().expect("params");
    Params::new(
        pairs
            .iter()
            .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap())),
    )
}

/// `key` / `value` as UTF-8 text, `key_hex` / `value_hex` as bytes, or none.
fn bytes(record: &Value, name: &str) -> Option<Vec<u8>> {
    if let Some(hex) = record[format!("{name}_hex")].as_str() {
        let digit = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
        return Some((0..hex.len()).step_by(2).map(digit).collect());
    }
    record[name].as_str().map(|s| s.as_bytes().to_vec())
}

#[test]
fn every_record_lands_in_the_expected_partition() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 10, "the file lost its cases");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut field = Field::init(&params(case)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let count = u32::try_from(case["partition_count"].as_u64().unwrap()).unwrap();
        let records = case["records"].as_array().unwrap();
        let mut b = BatchBuilder::new();
        for (i, r) in records.iter().enumerate() {
            let (key, value) = (bytes(r, "key"), bytes(r, "value"));
            b.push(i as i64, 0, key.as_deref(), value.as_deref(), &[]);
        }
        for (r, record) in records.iter().zip(b.batch().iter()) {
            let expected = r["partition"].as_u64().unwrap();
            assert_eq!(
                u64::from(json_field(&mut field, &record, count)),
                expected,
                "{name}: {r}"
            );
        }
    }
}

#[test]
fn murmur2_matches_kafka() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    for pair in vectors["murmur2"].as_array().unwrap() {
        let key = pair[0].as_str().unwrap();
        let expected = i32::try_from(pair[1].as_i64().unwrap()).unwrap();
        assert_eq!(sluice_sdk::hash::murmur2(key.as_bytes()), expected, "{key}");
    }
}

#[test]
fn invalid_params_are_rejected_naming_the_parameter() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    for case in vectors["invalid_params"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let error = Field::init(&params(case)).expect_err(name);
        assert_eq!(error.message, case["error"].as_str().unwrap(), "{name}");
    }
}
