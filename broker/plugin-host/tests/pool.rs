//! The instance pool shared by every plugin, with real plugins: one plugin whose callers
//! hold its whole share (calls stuck in `hostile-infinite-loop` until the call timeout)
//! makes its next caller fail with the typed `CallError::Busy` naming the limit, while
//! another plugin's calls succeed; many handles of one plugin (300 topics naming
//! murmur2) hold no more than its idle bound; and when more plugins keep idle instances
//! than the pool holds, idle ones are dropped so every call still gets an instance.

mod common;

use std::time::{Duration, Instant};

use common::batch_with_key;
use sluice_plugin_host::limits::{
    PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX, PLUGIN_INSTANCES_MAX, PLUGIN_INSTANCES_PER_PLUGIN_MAX,
};
use sluice_plugin_host::{CallError, CallErrorKind, Registry};

/// Polls `cond` every millisecond until it holds; panics after 10 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_plugin_with_its_share_in_calls_is_busy_and_others_are_not() {
    let (_dir, registry) = common::registry(|c| {
        c.instances_per_plugin_max = 2;
        c.call_timeout_ms = 3000;
    });
    registry
        .install("spin", &common::wasm("hostile-infinite-loop"))
        .unwrap();
    registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap();
    let spin = std::sync::Arc::new(registry.partitioner("spin", &[]).unwrap());
    let murmur2 = registry.partitioner("murmur2", &[]).unwrap();
    // Two callers hold spin's whole share, each stuck in a call until the timeout.
    let stuck: Vec<_> = (0..2)
        .map(|_| {
            let spin = std::sync::Arc::clone(&spin);
            std::thread::spawn(move || spin.partition(&batch_with_key(b"loop"), 4))
        })
        .collect();
    wait_for("both spin instances in calls", || {
        registry
            .instances("spin")
            .is_some_and(|c| c.held == 2 && c.idle == 0)
    });

    let err = spin.partition(&batch_with_key(b"ok"), 4).unwrap_err();
    assert!(
        matches!(err, CallError::Busy { max: 2, .. }),
        "expected Busy, got {err}"
    );
    assert!(
        err.to_string()
            .contains("PLUGIN_INSTANCES_PER_PLUGIN_MAX = 2"),
        "{err}"
    );
    // Another plugin's callers never notice.
    for key in [&b"21"[..], b"a", b"b"] {
        murmur2.partition(&batch_with_key(key), 3).unwrap();
    }
    assert!(
        stuck.iter().all(|t| !t.is_finished()),
        "the stuck calls ended before the checks ran: raise call_timeout_ms"
    );

    for t in stuck {
        let result = t.join().unwrap();
        assert!(
            matches!(result, Err(CallError::Timeout { .. })),
            "{result:?}"
        );
    }
    // The share is free again.
    assert_eq!(spin.partition(&batch_with_key(b"ok"), 4).unwrap(), [0]);
    let stats = registry.stats_of("spin").unwrap();
    assert_eq!(stats.errors_of(CallErrorKind::Busy), 1);
}

fn install_murmur2(registry: &Registry, name: &str) {
    registry.install(name, &common::wasm("murmur2")).unwrap();
}

#[test]
fn many_handles_of_one_plugin_stay_within_its_idle_bound() {
    let (_dir, registry) = common::registry(|_| {});
    install_murmur2(&registry, "murmur2");
    registry.install("crc32", &common::wasm("crc32")).unwrap();
    // 300 topics naming the same partitioner, each produced to once.
    let handles: Vec<_> = (0..300)
        .map(|_| registry.partitioner("murmur2", &[]).unwrap())
        .collect();
    for handle in &handles {
        assert_eq!(handle.partition(&batch_with_key(b"21"), 3).unwrap(), [0]);
    }
    let counts = registry.instances("murmur2").unwrap();
    assert_eq!(counts.idle, counts.held, "no call in flight");
    assert!(
        counts.idle <= PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX,
        "{counts:?} idle over PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX"
    );
    assert!(counts.held <= PLUGIN_INSTANCES_PER_PLUGIN_MAX, "{counts:?}");
    // A steady caller reuses one: the idle ones serve every handle.
    assert!(handles[0].idle_instances() >= 1);
    // Another plugin is unaffected.
    let crc32 = registry.partitioner("crc32", &[]).unwrap();
    crc32.partition(&batch_with_key(b"x"), 3).unwrap();
    assert!(
        registry.instances_total() <= PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX + 1,
        "{} instances in the pool",
        registry.instances_total()
    );
}

#[test]
fn idle_instances_are_dropped_when_the_pool_is_full() {
    let (_dir, registry) = common::registry(|_| {});
    // More plugins, each with a full idle bound, than the pool holds.
    let plugins = PLUGIN_INSTANCES_MAX / PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX + 2;
    let names: Vec<String> = (0..plugins).map(|i| format!("m{i}")).collect();
    for name in &names {
        install_murmur2(&registry, name);
    }
    let mut handles = Vec::new();
    for name in &names {
        // Each handle makes (and then keeps idle) a fresh instance.
        for _ in 0..PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX {
            handles.push(registry.partitioner(name, &[]).unwrap());
        }
        assert!(
            registry.instances_total() <= PLUGIN_INSTANCES_MAX,
            "{} over PLUGIN_INSTANCES_MAX",
            registry.instances_total()
        );
    }
    assert_eq!(registry.instances_total(), PLUGIN_INSTANCES_MAX);
    // The earliest plugins gave up idle instances; every handle still works.
    let first = registry.instances(&names[0]).unwrap();
    assert!(
        first.idle < PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX,
        "{first:?}"
    );
    for handle in &handles {
        assert_eq!(handle.partition(&batch_with_key(b"21"), 3).unwrap(), [0]);
    }
    assert!(registry.instances_total() <= PLUGIN_INSTANCES_MAX);
}
