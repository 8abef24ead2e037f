//! Fetch-time filter benchmark for BENCHMARKS.md, in one run: a selective
//! JSON filter (`plugins/json-filter`, `$.region == "eu"`, keeping 10% of
//! 1M distinct ~74-byte JSON records, batches of 1000), medians of 5
//! passes:
//! - records/s scanned by the wasm plugin (columns already built), and
//!   through a whole [`View`] (filter call + copying the kept records out);
//! - per-record cost of the wasm call against the **same crate** compiled
//!   natively (`sluice_plugin_json_filter::json_filter` over the SDK's
//!   batch view);
//! - building the columnar batch on the host;
//! - the same filter written in Python (`plugins/python-json-filter`,
//!   componentize-py) and JavaScript (`plugins/js-json-filter`,
//!   componentize-js), when built (`sdk/build-polyglot-plugins.sh`), over the
//!   first `POLYGLOT_RECORDS` records (their answers checked against the Rust
//!   one's), medians of `POLYGLOT_PASSES`.
//!
//! `cargo bench -p sluice-plugin-host --bench filters` (builds the Rust guest
//! plugins first unless `SLUICE_PLUGIN_WASM_DIR` is set).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice_plugin_host::{ColumnarBatch, FailurePolicy, View};
use sluice_plugin_json_filter::{Predicate, json_filter};
use sluice_sdk::{BatchBuilder, Init, Params};

const RECORDS: usize = 1_000_000;
const BATCH: usize = 1000;
const PASSES: usize = 5;
const PARAMS: [(&str, &str); 3] = [("field", "$.region"), ("op", "=="), ("value", "\"eu\"")];
/// Records and passes for the Python and JavaScript guests (microseconds a record, not
/// nanoseconds: the full million would take minutes a pass).
const POLYGLOT_RECORDS: usize = 50_000;
const POLYGLOT_PASSES: usize = 3;
/// Their call deadline here: a batch of 1000 in CPython takes milliseconds, far below the
/// broker's default 100 ms, but a shared machine's hiccup should not fail a benchmark.
const POLYGLOT_CALL_TIMEOUT_MS: u64 = 10_000;

fn value(i: usize) -> String {
    let region = match i % 10 {
        0 => "eu",
        1..=4 => "us",
        5..=7 => "ap",
        _ => "sa",
    };
    format!(
        r#"{{"id":{i},"customer":"c-{:06}","region":"{region}","total":{}.{:02},"items":{}}}"#,
        i * 7919 % 1_000_003,
        i % 500,
        i % 100,
        i % 9 + 1
    )
}

fn main() {
    let values: Vec<String> = (0..RECORDS).map(value).collect();
    let mut wasm_batches = Vec::new();
    let mut native_batches = Vec::new();
    for (b, chunk) in values.chunks(BATCH).enumerate() {
        let mut w = ColumnarBatch::with_capacity(BATCH, BATCH * 100);
        let mut n = BatchBuilder::new();
        for (i, v) in chunk.iter().enumerate() {
            let offset = (b * BATCH + i) as i64;
            w.push(offset, 0, None, Some(v.as_bytes()), &[]);
            n.push(offset, 0, None, Some(v.as_bytes()), &[]);
        }
        wasm_batches.push(w);
        native_batches.push(n);
    }
    let bytes: usize = values.iter().map(String::len).sum();

    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("json-filter", &common::wasm("json-filter"))
        .unwrap();
    let params = common::params(&PARAMS);
    let filter = registry.filter("json-filter", &params).unwrap();
    let view = View::new(
        vec![registry.stage("json-filter", &params).unwrap()],
        FailurePolicy::Fail,
    );
    let mut predicate = Predicate::init(&Params::new(PARAMS)).unwrap();

    check_same_answers(&filter, &mut predicate, &wasm_batches, &native_batches);

    let wasm = median(|| {
        for b in &wasm_batches {
            black_box(filter.filter(b).unwrap());
        }
    });
    let through_view = median(|| {
        for b in &wasm_batches {
            black_box(view.apply(b).unwrap());
        }
    });
    let native = median(|| {
        for b in &native_batches {
            let keep: Vec<bool> = b
                .batch()
                .iter()
                .map(|r| json_filter(&mut predicate, black_box(&r)))
                .collect();
            black_box(keep);
        }
    });
    let build = median(|| {
        for chunk in values.chunks(BATCH) {
            let mut w = ColumnarBatch::with_capacity(BATCH, BATCH * 100);
            for (i, v) in chunk.iter().enumerate() {
                w.push(i as i64, 0, None, Some(v.as_bytes()), &[]);
            }
            black_box(w);
        }
    });
    report(bytes, wasm, through_view, native, build);
    polyglot(&wasm_batches, wasm, native);
}

/// The Python and JavaScript json-filters next to the Rust one (the Rust guest and native
/// figures are per record over the whole run).
fn polyglot(wasm_batches: &[ColumnarBatch], rust_wasm: Duration, native: Duration) {
    let per_record_rust = rust_wasm.as_nanos() as f64 / RECORDS as f64;
    let per_record_native = native.as_nanos() as f64 / RECORDS as f64;
    let (_dir, registry) = common::registry(|c| c.call_timeout_ms = POLYGLOT_CALL_TIMEOUT_MS);
    registry
        .install("rust", &common::wasm("json-filter"))
        .unwrap();
    let params = common::params(&PARAMS);
    let reference = registry.filter("rust", &params).unwrap();
    let batches = &wasm_batches[..POLYGLOT_RECORDS / BATCH];
    for name in ["python-json-filter", "js-json-filter"] {
        let path = common::wasm_dir().join(format!("{name}.wasm"));
        let Ok(bytes) = std::fs::read(&path) else {
            println!("| {name}: not built (sdk/build-polyglot-plugins.sh) | - |");
            continue;
        };
        let started = Instant::now();
        registry.install(name, &bytes).unwrap();
        let compile = started.elapsed();
        let filter = registry.filter(name, &params).unwrap();
        for b in batches.iter().take(10) {
            assert_eq!(
                filter.filter(b).unwrap(),
                reference.filter(b).unwrap(),
                "{name}"
            );
        }
        let mut times: Vec<Duration> = (0..POLYGLOT_PASSES)
            .map(|_| {
                let t = Instant::now();
                for b in batches {
                    black_box(filter.filter(b).unwrap());
                }
                t.elapsed()
            })
            .collect();
        times.sort();
        let per_record = times[POLYGLOT_PASSES / 2].as_nanos() as f64 / POLYGLOT_RECORDS as f64;
        println!(
            "| {name} ({} MB component, compiled in {:.1} s), ns/record | {per_record:.0} ({:.0}x the Rust guest, {:.0}x native) |",
            bytes.len() / 1_000_000,
            compile.as_secs_f64(),
            per_record / per_record_rust,
            per_record / per_record_native,
        );
    }
}

/// The same records kept natively and in wasm, and 10% of them.
fn check_same_answers(
    filter: &sluice_plugin_host::Filter,
    predicate: &mut Predicate,
    wasm_batches: &[ColumnarBatch],
    native_batches: &[BatchBuilder],
) {
    let mut kept = 0;
    for (w, n) in wasm_batches.iter().zip(native_batches).take(50) {
        let got = filter.filter(w).unwrap();
        let expected: Vec<bool> = n
            .batch()
            .iter()
            .map(|r| json_filter(predicate, &r))
            .collect();
        assert_eq!(got, expected);
        kept += got.iter().filter(|&&k| k).count();
    }
    assert_eq!(kept, 50 * BATCH / 10);
}

fn report(bytes: usize, wasm: Duration, through_view: Duration, native: Duration, build: Duration) {
    let per_record = |d: Duration| d.as_nanos() as f64 / RECORDS as f64;
    let per_second = |d: Duration| RECORDS as f64 / d.as_secs_f64() / 1e6;
    println!(
        "{RECORDS} records, {:.0} bytes/record average, batches of {BATCH}, 10% kept",
        bytes as f64 / RECORDS as f64
    );
    println!("| measurement | result |");
    println!("|---|---|");
    println!(
        "| json-filter, native (same crate, SDK batch view), ns/record | {:.1} |",
        per_record(native)
    );
    println!(
        "| json-filter, wasm plugin call (columns already built), ns/record | {:.1} |",
        per_record(wasm)
    );
    println!(
        "| wasm / native | {:.2}x |",
        per_record(wasm) / per_record(native)
    );
    println!(
        "| json-filter, wasm, records scanned per second | {:.2} M |",
        per_second(wasm)
    );
    println!(
        "| through a View (call + copy the kept 10% out), records scanned per second | {:.2} M |",
        per_second(through_view)
    );
    println!(
        "| building the columnar batch on the host, ns/record | {:.1} |",
        per_record(build)
    );
    println!(
        "| building the batch + View, records scanned per second | {:.2} M |",
        per_second(build + through_view)
    );
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
