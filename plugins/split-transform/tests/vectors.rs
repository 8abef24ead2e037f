//! json-filter's shared test vectors (`plugins/testdata/json-filter.json`) run against the
//! split: a record json-filter keeps goes to the first output, any other to the second, so
//! the two plugins compare fields by the same rules. Natively, with the SDK's `Output`.

use serde_json::Value;
use sluice_plugin_split_transform::{Split, split};
use sluice_sdk::transform::target_of;
use sluice_sdk::{BatchBuilder, Init, Output, Params, Target};

const VECTORS: &str = include_str!("../../testdata/json-filter.json");

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
fn kept_records_go_to_the_first_output_and_the_rest_to_the_second() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "the file lost its cases");
    let mut records_seen = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut state = Split::init(&params(case)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let records = case["records"].as_array().unwrap();
        let mut b = BatchBuilder::new();
        for (i, r) in records.iter().enumerate() {
            b.push(i as i64, 0, None, bytes(r, "value").as_deref(), &[]);
        }
        let mut out = Output::new();
        for (i, record) in b.batch().iter().enumerate() {
            out.begin(i);
            split(&mut state, &record, &mut out);
        }
        let emitted = out.into_builder();
        let emitted: Vec<_> = emitted.batch().iter().collect();
        assert_eq!(emitted.len(), records.len(), "{name}: one output per input");
        for ((r, input), output) in records.iter().zip(b.batch().iter()).zip(&emitted) {
            assert_eq!(output.offset, input.offset, "{name}: in input order");
            assert_eq!(output.value(), input.value(), "{name}: value unchanged");
            let expected = if r["keep"].as_bool().unwrap() {
                Target::Index(0)
            } else {
                Target::Index(1)
            };
            assert_eq!(target_of(output), Ok(expected), "{name}: {r}");
            records_seen += 1;
        }
    }
    assert!(records_seen > 200, "only {records_seen} records");
}

#[test]
fn invalid_params_are_rejected_as_json_filter_rejects_them() {
    let vectors: Value = serde_json::from_str(VECTORS).unwrap();
    for case in vectors["invalid_params"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let expected = case["error"].as_str().unwrap();
        let result = Split::init(&params(case));
        match name {
            // `op` is optional here (default `==`).
            "missing op" => assert!(result.is_ok(), "{name}"),
            // The known parameters are listed, and the split has one more.
            "an unknown parameter" => {
                let error = result.expect_err(name).message;
                assert!(error.starts_with("unknown parameter `x`"), "{error}");
                assert!(error.contains("unparseable"), "{error}");
            }
            _ => assert_eq!(result.expect_err(name).message, expected, "{name}"),
        }
    }
}
