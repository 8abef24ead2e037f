//! Hostile plugins (`plugins/hostile/*`) and hostile uploads: each is
//! stopped or rejected with a clear typed error, and the host keeps
//! serving: the same handle works on its next call, other plugins are
//! untouched, and a failed upload never replaces a working version.

mod common;

use std::time::{Duration, Instant};

use common::batch_with_key;
use sluice_plugin_host::{CallError, PluginKind, RegistryError};

#[test]
fn an_infinite_loop_is_stopped_at_the_call_timeout() {
    let (_dir, registry) = common::registry(|c| c.call_timeout_ms = 100);
    registry
        .install("spin", &common::wasm("hostile-infinite-loop"))
        .unwrap();
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let spin = registry.partitioner("spin", &[]).unwrap();
    let started = Instant::now();
    let err = spin.partition(&batch_with_key(b"loop"), 4).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(
            err,
            CallError::Timeout {
                timeout_ms: 100,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        elapsed >= Duration::from_millis(100),
        "stopped after {elapsed:?}, before the timeout"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "stopped only after {elapsed:?}"
    );
    assert!(
        err.to_string().contains("plugin.call.timeout.ms = 100"),
        "{err}"
    );
    // The handle recovers with a fresh instance; other plugins never noticed.
    assert_eq!(spin.partition(&batch_with_key(b"ok"), 4).unwrap(), [0]);
    let murmur2 = registry.partitioner("murmur2", &[]).unwrap();
    assert_eq!(murmur2.partition(&batch_with_key(b"21"), 3).unwrap(), [0]);
}

#[test]
fn a_memory_bomb_traps_at_the_memory_limit() {
    let max = 16 * 1024 * 1024;
    // A generous deadline: growing to the limit takes a debug build on a loaded machine
    // longer than the default 100 ms, and this test is about the memory limit.
    let (_dir, registry) = common::registry(|c| {
        c.memory_bytes_max = max;
        c.call_timeout_ms = 10_000;
    });
    registry
        .install("bomb", &common::wasm("hostile-memory-bomb"))
        .unwrap();
    let bomb = registry.partitioner("bomb", &[]).unwrap();
    let err = bomb.partition(&batch_with_key(b"bomb"), 4).unwrap_err();
    match &err {
        CallError::MemoryExceeded {
            desired_bytes,
            max_bytes,
            ..
        } => {
            assert_eq!(*max_bytes, max);
            assert!(*desired_bytes > max);
        }
        other => panic!("expected MemoryExceeded, got {other}"),
    }
    assert!(err.to_string().contains("plugin.memory.bytes.max"), "{err}");
    assert_eq!(bomb.partition(&batch_with_key(b"calm"), 4).unwrap(), [0]);
}

#[test]
fn a_huge_allocation_in_init_fails_the_handle_creation() {
    let (_dir, registry) = common::registry(|c| c.memory_bytes_max = 32 * 1024 * 1024);
    registry
        .install("hoarder", &common::wasm("hostile-init-alloc"))
        .unwrap();
    let err = registry.partitioner("hoarder", &[]).unwrap_err();
    assert!(
        matches!(err, RegistryError::Call(CallError::MemoryExceeded { .. })),
        "{err}"
    );
}

#[test]
fn a_panic_is_a_trap_and_a_bad_answer_breaks_the_contract() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("boom", &common::wasm("hostile-panic"))
        .unwrap();
    let boom = registry.partitioner("boom", &[]).unwrap();
    let err = boom.partition(&batch_with_key(b"panic"), 4).unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err}");
    // The SDK catches an out-of-range partition before the host does.
    let err = boom.partition(&batch_with_key(b"range"), 4).unwrap_err();
    assert!(
        matches!(&err, CallError::Guest { message, .. } if message.contains("partition 5")),
        "{err}"
    );
    // 1000 log messages of 4 KB: cut to the budget, the call succeeds.
    assert_eq!(boom.partition(&batch_with_key(b"chatty"), 4).unwrap(), [0]);
    assert_eq!(boom.partition(&batch_with_key(b"fine"), 4).unwrap(), [0]);
}

#[test]
fn bad_parameters_are_rejected_when_the_topic_is_configured() {
    let (_dir, registry) = common::registry(|_| {});
    registry
        .install("by-field", &common::wasm("json-field"))
        .unwrap();
    let err = registry.partitioner("by-field", &[]).unwrap_err();
    assert!(
        matches!(&err, RegistryError::Call(CallError::InvalidParams { message, .. }) if message.contains("`field`")),
        "{err}"
    );
    let err = registry
        .partitioner(
            "by-field",
            &common::params(&[("field", "$.a"), ("typo", "1")]),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown parameter `typo`"),
        "{err}"
    );
}

#[test]
fn a_plugin_of_another_kind_is_not_a_partitioner() {
    let (_dir, registry) = common::registry(|_| {});
    let info = registry
        .install("eu-only", &common::wasm("hostile-filter-kind"))
        .unwrap();
    assert_eq!(info.kind, PluginKind::Filter);
    let err = registry.partitioner("eu-only", &[]).unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::WrongKind {
                actual: "filter",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_plugin_of_another_kind_never_replaces_one_in_use() {
    let (dir, registry) = common::registry(|_| {});
    let working = registry
        .install("router", &common::wasm("murmur2"))
        .unwrap();
    let handle = registry.partitioner("router", &[]).unwrap();

    let err = registry
        .install("router", &common::wasm("hostile-filter-kind"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RegistryError::KindChange {
                current: "partitioner",
                new: "filter",
                users: 1,
                ..
            }
        ),
        "{err}"
    );
    // Dropped into the directory instead: refused the same way, the file is not loaded.
    let path = dir.path().join("plugins/router.wasm");
    assert_eq!(
        std::fs::read(&path).unwrap().len() as u64,
        working.size_bytes
    );
    std::fs::write(&path, common::wasm("hostile-filter-kind")).unwrap();
    let err = registry.load_file(&path).unwrap_err();
    assert!(matches!(err, RegistryError::KindChange { .. }), "{err}");
    let info = registry.describe("router").unwrap();
    assert_eq!(
        (info.kind, info.sha256),
        (PluginKind::Partitioner, working.sha256)
    );

    // Unused, the name may change kinds.
    drop(handle);
    let filter = registry.load_file(&path).unwrap().unwrap();
    assert_eq!(filter.kind, PluginKind::Filter);
}

#[test]
fn garbage_truncated_foreign_and_oversized_uploads_are_rejected() {
    let (_dir, registry) = common::registry(|c| c.module_bytes_max = 1024 * 1024);
    let good = common::wasm("murmur2");
    let working = registry.install("p", &good).unwrap();

    let garbage = registry.install("p", b"definitely not wasm").unwrap_err();
    assert!(matches!(garbage, RegistryError::NotWasm(_)), "{garbage}");
    let truncated = registry.install("p", &good[..good.len() / 2]).unwrap_err();
    assert!(
        matches!(truncated, RegistryError::Componentize(_)),
        "{truncated}"
    );
    // A valid module not built with the SDK: no world embedded.
    let empty_module = b"\0asm\x01\0\0\0";
    let foreign = registry.install("p", empty_module).unwrap_err();
    assert!(
        matches!(
            foreign,
            RegistryError::Componentize(_) | RegistryError::UnknownKind { .. }
        ),
        "{foreign}"
    );
    let huge = vec![0u8; 1024 * 1024 + 1];
    let too_large = registry.install("p", &huge).unwrap_err();
    assert!(
        matches!(
            too_large,
            RegistryError::TooLarge {
                max_bytes: 1_048_576,
                ..
            }
        ),
        "{too_large}"
    );
    let bad_name = registry.install("../etc", &good).unwrap_err();
    assert!(
        matches!(bad_name, RegistryError::InvalidName(_)),
        "{bad_name}"
    );

    // The working version is still the one installed, on disk and in use.
    assert_eq!(registry.describe("p").unwrap().sha256, working.sha256);
    let partitioner = registry.partitioner("p", &[]).unwrap();
    assert_eq!(
        partitioner.partition(&batch_with_key(b"21"), 3).unwrap(),
        [0]
    );
}

/// A component for `world`, written in WIT that may use our package.
fn foreign_component(world_wit: &str) -> Vec<u8> {
    let mut resolve = wit_parser::Resolve::default();
    let ours = include_str!("../../../wit/sluice-plugin.wit");
    resolve.push_str("sluice-plugin.wit", ours).unwrap();
    let package = resolve.push_str("foreign.wit", world_wit).unwrap();
    let world = resolve.select_world(&[package], Some("foreign")).unwrap();
    let mut module =
        wit_component::dummy_module(&resolve, world, wit_parser::ManglingAndAbi::Standard32);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    let mut encoder = wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap();
    encoder.encode().unwrap()
}

#[test]
fn a_component_of_an_unknown_world_is_rejected() {
    let (_dir, registry) = common::registry(|_| {});
    let component =
        foreign_component("package test:foreign; world foreign { export run: func(); }");
    let err = registry.install("foreign", &component).unwrap_err();
    assert!(matches!(err, RegistryError::UnknownKind { .. }), "{err}");
    assert!(registry.describe("foreign").is_none());
}

#[test]
fn a_component_that_wants_a_filesystem_is_rejected() {
    let (_dir, registry) = common::registry(|_| {});
    let component = foreign_component(
        "package test:foreign;
         interface fs { read: func(path: string) -> list<u8>; }
         world foreign { import fs; export sluice:plugin/partitioner-api@0.2.0; }",
    );
    let err = registry.install("greedy", &component).unwrap_err();
    assert!(
        matches!(&err, RegistryError::Imports(m) if m.contains("test:foreign/fs")),
        "{err}"
    );
}

/// WASI beyond what the host links (`wasi:http` here) is refused at install, naming the
/// import.
#[test]
fn a_component_that_wants_http_is_refused_naming_the_import() {
    let (_dir, registry) = common::registry(|_| {});
    let component = foreign_component(
        "package wasi:http@0.2.0;
         interface outgoing-handler { handle: func(url: string) -> u32; }
         world foreign { import outgoing-handler; export sluice:plugin/filter-api@0.2.0; }",
    );
    let err = registry.install("dialer", &component).unwrap_err();
    assert!(
        matches!(&err, RegistryError::Imports(m) if m.contains("`wasi:http/outgoing-handler@0.2.0`")),
        "{err}"
    );
    assert!(registry.describe("dialer").is_none());
}

/// The WASI a componentize-py or -js guest imports (clocks, random, environment, stdio,
/// a filesystem with no preopens) is linked: such a component installs and says so.
#[test]
fn a_component_importing_allowed_wasi_installs() {
    let (_dir, registry) = common::registry(|_| {});
    let component = foreign_component(
        "package wasi:clocks@0.2.0;
         interface wall-clock {
             record datetime { seconds: u64, nanoseconds: u32 }
             now: func() -> datetime;
         }
         world foreign { import wall-clock; export sluice:plugin/filter-api@0.2.0; }",
    );
    let info = registry.install("clocky", &component).unwrap();
    assert!(info.imports_wasi, "{info:?}");
    let rust = registry
        .install("json-filter", &common::wasm("json-filter"))
        .unwrap();
    assert!(
        !rust.imports_wasi,
        "an SDK plugin imports no WASI: {rust:?}"
    );
}
