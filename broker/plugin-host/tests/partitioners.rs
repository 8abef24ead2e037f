//! The shipped partitioner plugins, built from `plugins/` with the SDK,
//! loaded by the host as core modules (componentized on install) and
//! called through the real component boundary: every record lands where
//! the client's own partitioner (native `sluice_sdk::hash`) puts it.

mod common;

use sluice_plugin_host::{ColumnarBatch, PluginKind};
use sluice_sdk::hash;

fn keyed_batch(keys: &[Vec<u8>]) -> ColumnarBatch {
    let mut batch = ColumnarBatch::new();
    for (i, key) in keys.iter().enumerate() {
        batch.push(
            i as i64,
            1_700_000_000_000,
            Some(key),
            Some(b"{}"),
            &[(b"h", b"v")],
        );
    }
    batch
}

fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..500u32)
        .map(|i| format!("key-{i}-{}", i * 7919).into_bytes())
        .collect();
    keys.extend([
        b"21".to_vec(),
        b"foobar".to_vec(),
        b"a".to_vec(),
        Vec::new(),
    ]);
    keys
}

#[test]
fn hash_partitioners_match_the_clients() {
    let (_dir, registry) = common::registry(|_| {});
    let keys = keys();
    let batch = keyed_batch(&keys);
    type Reference = fn(&[u8], u32) -> u32;
    let cases: [(&str, Reference); 3] = [
        ("murmur2", hash::murmur2_partition),
        ("crc32", |k, n| hash::crc32(k) % n),
        ("fnv1a", hash::sarama_partition),
    ];
    for (name, reference) in cases {
        let info = registry.install(name, &common::wasm(name)).expect(name);
        assert_eq!(
            (info.kind, info.wit_version.as_str()),
            (PluginKind::Partitioner, "0.2.0")
        );
        let partitioner = registry.partitioner(name, &[]).expect(name);
        for partition_count in [1, 3, 12, 1000] {
            let got = partitioner.partition(&batch, partition_count).expect(name);
            let expected: Vec<u32> = keys.iter().map(|k| reference(k, partition_count)).collect();
            assert_eq!(got, expected, "{name}, {partition_count} partitions");
        }
    }
}

#[test]
fn json_field_hashes_the_field() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("by-customer", &common::wasm("json-field"))
        .unwrap();
    let partitioner = registry
        .partitioner(
            "by-customer",
            &common::params(&[("field", "$.customer_id")]),
        )
        .unwrap();
    let mut batch = ColumnarBatch::new();
    batch.push(0, 0, Some(b"k1"), Some(br#"{"customer_id":"21"}"#), &[]);
    batch.push(
        1,
        0,
        Some(b"k2"),
        Some(br#"{"x":1,"customer_id":"21"}"#),
        &[],
    );
    batch.push(2, 0, Some(b"foobar"), Some(b"not json"), &[]);
    batch.push(3, 0, None, None, &[]);
    let got = partitioner.partition(&batch, 10).unwrap();
    let p21 = hash::murmur2_partition(b"21", 10);
    assert_eq!(got, [p21, p21, hash::murmur2_partition(b"foobar", 10), 0]);
}

#[test]
fn round_robin_and_keyless_records_spread_across_calls() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("rr", &common::wasm("round-robin"))
        .unwrap();
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let mut batch = ColumnarBatch::new();
    for i in 0..3 {
        batch.push(i, 0, None, Some(b"v"), &[]);
    }
    let rr = registry
        .partitioner("rr", &common::params(&[("start", "1")]))
        .unwrap();
    assert_eq!(rr.partition(&batch, 4).unwrap(), [1, 2, 3]);
    assert_eq!(rr.partition(&batch, 4).unwrap(), [0, 1, 2]);
    let murmur2 = registry.partitioner("murmur2", &[]).unwrap();
    assert_eq!(murmur2.partition(&batch, 2).unwrap(), [0, 1, 0]);
}

#[test]
fn an_empty_batch_gets_no_partitions() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let partitioner = registry.partitioner("murmur2", &[]).unwrap();
    assert_eq!(
        partitioner.partition(&ColumnarBatch::new(), 3).unwrap(),
        Vec::<u32>::new()
    );
}
