//! Plugin benchmarks for BENCHMARKS.md, in one run:
//! - per-record cost of the wasm murmur2 partitioner (built from
//!   `plugins/murmur2` with the SDK) against the same code compiled
//!   natively (the SDK's batch view + `sluice_sdk::hash`), 1M distinct keys
//!   in batches of 1000, medians of 5 passes;
//! - cold start: install (componentize + compile + write), reopen with a
//!   warm compile cache, first instance, fresh instance.
//!
//! `cargo bench -p sluice-plugin-host --bench plugins` (builds the guest
//! plugins first unless `SLUICE_PLUGIN_WASM_DIR` is set).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_plugin_host::{ColumnarBatch, PluginConfig, Registry};
use sluice_sdk::{BatchBuilder, hash};

const RECORDS: usize = 1_000_000;
const BATCH: usize = 1000;
const PASSES: usize = 5;

fn main() {
    let keys: Vec<Vec<u8>> = (0..RECORDS)
        .map(|i| format!("customer-{i:08}-{}", i * 7919 % 1013).into_bytes())
        .collect();
    let value = [b'x'; 100];
    let mut wasm_batches = Vec::new();
    let mut native_batches = Vec::new();
    for chunk in keys.chunks(BATCH) {
        let mut w = ColumnarBatch::with_capacity(BATCH, BATCH * 120);
        let mut n = BatchBuilder::new();
        for (i, key) in chunk.iter().enumerate() {
            w.push(i as i64, 0, Some(key), Some(&value), &[]);
            n.push(i as i64, 0, Some(key), Some(&value), &[]);
        }
        wasm_batches.push(w);
        native_batches.push(n);
    }
    let partition_count = 12;

    let (_dir, registry) = common::registry(|_| {});
    let cold = cold_start(&registry);
    let partitioner = registry.partitioner("murmur2", &[]).unwrap();

    let wasm = median(|| {
        for b in &wasm_batches {
            black_box(partitioner.partition(b, partition_count).unwrap());
        }
    });
    let native = median(|| {
        for b in &native_batches {
            let batch = b.batch();
            let partitions: Vec<u32> = batch
                .iter()
                .map(|r| {
                    hash::murmur2_partition(black_box(r.key().unwrap_or_default()), partition_count)
                })
                .collect();
            black_box(partitions);
        }
    });
    let build = median(|| {
        for chunk in keys.chunks(BATCH) {
            let mut w = ColumnarBatch::with_capacity(BATCH, BATCH * 120);
            for (i, key) in chunk.iter().enumerate() {
                w.push(i as i64, 0, Some(key), Some(&value), &[]);
            }
            black_box(w);
        }
    });
    // Same answers, or the comparison means nothing.
    let check = partitioner
        .partition(&wasm_batches[7], partition_count)
        .unwrap();
    let expected: Vec<u32> = keys[7 * BATCH..8 * BATCH]
        .iter()
        .map(|k| hash::murmur2_partition(k, partition_count))
        .collect();
    assert_eq!(check, expected);

    let per_record = |d: Duration| d.as_nanos() as f64 / RECORDS as f64;
    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| murmur2, native (SDK batch view + hash), ns/record | {:.1} |",
        per_record(native)
    );
    println!(
        "| murmur2, wasm plugin call (columns already built), ns/record | {:.1} |",
        per_record(wasm)
    );
    println!(
        "| wasm / native | {:.2}x |",
        per_record(wasm) / per_record(native)
    );
    println!(
        "| building the columnar batch on the host, ns/record | {:.1} |",
        per_record(build)
    );
    println!(
        "| wasm call + building the batch / native | {:.2}x |",
        per_record(wasm + build) / per_record(native)
    );
    for (what, d) in cold {
        println!("| {what} | {:.2} ms |", d.as_secs_f64() * 1e3);
    }
}

fn median(mut f: impl FnMut()) -> Duration {
    f(); // warm up
    let mut times: Vec<Duration> = (0..PASSES)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[PASSES / 2]
}

fn cold_start(registry: &Registry) -> Vec<(&'static str, Duration)> {
    let bytes = common::wasm("murmur2");
    let started = Instant::now();
    registry.install("murmur2", &bytes).unwrap();
    let install = started.elapsed();

    let started = Instant::now();
    let (reopened, failures) = Registry::open(PluginConfig::new(registry.dir())).unwrap();
    let reopen = started.elapsed();
    assert!(failures.is_empty());

    let started = Instant::now();
    let handle = reopened.partitioner("murmur2", &[]).unwrap();
    let first_instance = started.elapsed();
    drop(handle);
    let started = Instant::now();
    for _ in 0..100 {
        black_box(reopened.partitioner("murmur2", &[]).unwrap());
    }
    let instance = started.elapsed() / 100;
    vec![
        (
            "cold start: install (componentize + compile + write), murmur2 core module",
            install,
        ),
        (
            "restart: open the registry with a warm compile cache (1 plugin)",
            reopen,
        ),
        ("first instance + init after restart", first_instance),
        (
            "new instance + init (pooling allocator), average of 100",
            instance,
        ),
    ]
}
