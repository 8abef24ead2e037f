//! The shared test vectors (`plugins/testdata/json-validator.json`), run against the Rust
//! plugin natively. The Python and JavaScript twins run the same file with pytest and
//! `node --test`, so all three refuse the same records with the same reasons.

use serde_json::Value;
use sluice_plugin_json_validator::{Schema, json_validator};
use sluice_sdk::{BatchBuilder, Init, Params};

const VECTORS: &str = include_str!("../../testdata/json-validator.json");

fn params(case: &Value) -> Params {
    let pairs = case["params"].as_array().expect("params");
    Params::new(
        pairs
            .iter()
            .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap())),
    )
}

/// `value` as UTF-8 text, `value_hex` as bytes, or no value.
fn bytes(record: &Value, name: &str) -> Option<Vec<u8>> {
    if let Some(hex) = record[format!("{name}_hex")].as_str() {
        let digit = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
        return Some((0..hex.len()).step_by(2).map(digit).collect());
    }
    record[name].as_str().map(|s| s.as_bytes().to_vec())
}

#[test]
fn every_case_refuses_the_expected_records_with_the_expected_reasons() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 15, "the file lost its cases");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut schema = Schema::init(&params(case)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let records = case["records"].as_array().unwrap();
        let mut b = BatchBuilder::new();
        for (i, r) in records.iter().enumerate() {
            b.push(i as i64, 0, None, bytes(r, "value").as_deref(), &[]);
        }
        for (r, record) in records.iter().zip(b.batch().iter()) {
            let expected = r["reason"].as_str().map(str::to_owned);
            let got = json_validator(&mut schema, &record).err();
            assert_eq!(got, expected, "{name}: {r}");
        }
    }
}

#[test]
fn invalid_params_are_rejected_naming_the_parameter() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    for case in vectors["invalid_params"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let error = Schema::init(&params(case)).expect_err(name);
        assert_eq!(error.message, case["error"].as_str().unwrap(), "{name}");
    }
}
