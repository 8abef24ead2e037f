//! The registry over a real plugin directory: install, list, describe,
//! delete with in-use protection, reopen with a warm compile cache, and hot
//! reload through the directory watcher while another thread keeps calling
//! (no call fails; calls after the swap follow the new plugin); an install of a new name
//! only (`Install::NewOnly`) never replaces a plugin.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use sluice_plugin_host::{
    ColumnarBatch, Install, PluginConfig, PluginKind, Registry, RegistryError,
};
use sluice_sdk::hash;

#[test]
fn install_list_describe_delete() {
    let (dir, registry) = common::registry(|_| {});
    let info = registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    registry
        .install("rr", &common::wasm("round-robin"))
        .unwrap();
    assert_eq!(info.kind, PluginKind::Partitioner);
    assert_eq!(info.sha256.len(), 64);
    assert!(info.size_bytes > 1000);
    assert!(dir.path().join("plugins/murmur2.wasm").exists());
    let names: Vec<String> = registry.list().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["murmur2", "rr"]);
    assert_eq!(registry.describe("murmur2").unwrap(), info);

    let handle = registry.partitioner("murmur2", &[]).unwrap();
    assert_eq!(registry.describe("murmur2").unwrap().users, 1);
    let err = registry.delete("murmur2", false).unwrap_err();
    assert!(
        matches!(err, RegistryError::InUse { users: 1, .. }),
        "{err}"
    );
    drop(handle);
    registry.delete("murmur2", false).unwrap();
    assert!(registry.describe("murmur2").is_none());
    assert!(!dir.path().join("plugins/murmur2.wasm").exists());
    assert!(matches!(
        registry.delete("murmur2", false),
        Err(RegistryError::NotFound(_))
    ));

    // Forced: the handle keeps working on the last version.
    let handle = registry.partitioner("rr", &[]).unwrap();
    registry.delete("rr", true).unwrap();
    let mut batch = ColumnarBatch::new();
    batch.push(0, 0, None, None, &[]);
    assert_eq!(handle.partition(&batch, 2).unwrap(), [0]);
}

#[test]
fn reopen_loads_plugins_from_the_warm_compile_cache() {
    let (dir, registry) = common::registry(|_| {});
    let info = registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    drop(registry);
    let mut cache: Vec<_> = std::fs::read_dir(dir.path().join("plugin-cache"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    cache.sort();
    let entry = [0, 1].map(|i| format!("{}.{}", info.sha256, ["cwasm", "digest"][i]));
    assert_eq!(cache, entry, "one entry per plugin version");

    let started = Instant::now();
    let (registry, failures) = Registry::open(common::cached_config(dir.path())).unwrap();
    let reopen = started.elapsed();
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(registry.describe("murmur2").unwrap().sha256, info.sha256);
    let partitioner = registry.partitioner("murmur2", &[]).unwrap();
    let mut batch = ColumnarBatch::new();
    batch.push(0, 0, Some(b"foobar"), None, &[]);
    assert_eq!(partitioner.partition(&batch, 10).unwrap(), [6]);
    // Loading a precompiled artifact is a file read, not a compile.
    assert!(reopen < Duration::from_secs(2), "reopen took {reopen:?}");
}

#[test]
fn a_broken_file_in_the_directory_does_not_stop_the_others() {
    let (dir, registry) = common::registry(|_| {});
    registry.install("good", &common::wasm("crc32")).unwrap();
    drop(registry);
    std::fs::write(dir.path().join("plugins/bad.wasm"), b"junk").unwrap();
    let (registry, failures) =
        Registry::open(PluginConfig::new(dir.path().join("plugins"))).unwrap();
    assert_eq!(failures.len(), 1);
    assert!(failures[0].0.ends_with("bad.wasm"));
    assert!(registry.describe("good").is_some());
}

/// Keys and what each plugin answers for them.
fn batch_and_expectations(partition_count: u32) -> (ColumnarBatch, Vec<u32>, Vec<u32>) {
    let mut batch = ColumnarBatch::new();
    let mut murmur2 = Vec::new();
    let mut crc32 = Vec::new();
    for i in 0..64u32 {
        let key = format!("customer-{i}");
        batch.push(i64::from(i), 0, Some(key.as_bytes()), Some(b"v"), &[]);
        murmur2.push(hash::murmur2_partition(key.as_bytes(), partition_count));
        crc32.push(hash::crc32(key.as_bytes()) % partition_count);
    }
    assert_ne!(
        murmur2, crc32,
        "the two plugins must disagree for the test to mean anything"
    );
    (batch, murmur2, crc32)
}

#[test]
fn hot_reload_swaps_a_file_while_calls_run() {
    let (dir, registry) = common::registry(|_| {});
    let plugins = dir.path().join("plugins");
    // Install crc32 under another name first: its component bytes (and
    // compiled artifact in the cache) are what gets copied in below.
    registry.install("swap", &common::wasm("murmur2")).unwrap();
    registry
        .install("crc32-source", &common::wasm("crc32"))
        .unwrap();
    let _watch = registry.watch().unwrap();
    let partitioner = Arc::new(registry.partitioner("swap", &[]).unwrap());
    let (batch, murmur2, crc32) = batch_and_expectations(8);
    let batch = Arc::new(batch);

    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let caller = {
        let (partitioner, batch, stop, calls) = (
            partitioner.clone(),
            batch.clone(),
            stop.clone(),
            calls.clone(),
        );
        let (murmur2, crc32) = (murmur2.clone(), crc32.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let got = partitioner
                    .partition(&batch, 8)
                    .expect("no call fails during a swap");
                assert!(
                    got == murmur2 || got == crc32,
                    "a call saw a mix of versions: {got:?}"
                );
                calls.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let wait_calls = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while calls.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "the calling thread stalled");
            thread::yield_now();
        }
    };
    wait_calls(5);

    // Replace the file the way an operator would: write aside, rename in.
    let component = std::fs::read(plugins.join("crc32-source.wasm")).unwrap();
    std::fs::write(plugins.join(".incoming"), &component).unwrap();
    let swapped_at = Instant::now();
    std::fs::rename(plugins.join(".incoming"), plugins.join("swap.wasm")).unwrap();

    let deadline = swapped_at + Duration::from_secs(10);
    while partitioner.partition(&batch, 8).unwrap() != crc32 {
        assert!(
            Instant::now() < deadline,
            "the new version was not picked up"
        );
        thread::sleep(Duration::from_millis(5));
    }
    let took = swapped_at.elapsed();
    let after_swap = calls.load(Ordering::Relaxed);
    wait_calls(after_swap + 5);
    stop.store(true, Ordering::Relaxed);
    caller.join().expect("the calling thread saw no failure");
    assert_eq!(
        partitioner.partition(&batch, 8).unwrap(),
        crc32,
        "calls after the swap follow the new plugin"
    );
    assert!(took < Duration::from_secs(1), "swap took {took:?}");
    assert_eq!(
        registry.describe("swap").unwrap().sha256,
        registry.describe("crc32-source").unwrap().sha256
    );
}

#[test]
fn an_install_of_a_new_name_only_never_replaces_a_plugin() {
    let (dir, registry) = common::registry(|_| {});
    let first = registry
        .install_as("router", &common::wasm("murmur2"), Install::NewOnly)
        .unwrap();
    let err = registry
        .install_as("router", &common::wasm("crc32"), Install::NewOnly)
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::Exists(ref n) if n == "router"),
        "{err}"
    );
    // Nothing was written: the file and the loaded version are the first install's.
    let path = dir.path().join("plugins/router.wasm");
    assert_eq!(std::fs::read(&path).unwrap().len() as u64, first.size_bytes);
    assert_eq!(registry.describe("router").unwrap().sha256, first.sha256);
    // A replacing install (the caller may ALTER it) still replaces it.
    let second = registry
        .install_as("router", &common::wasm("crc32"), Install::NewOrReplace)
        .unwrap();
    assert_ne!(second.sha256, first.sha256);
}
