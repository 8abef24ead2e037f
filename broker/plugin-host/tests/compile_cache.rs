//! The compiled-plugin cache is trusted by digest, never by file name.
//!
//! Real guests (murmur2, fnv1a from `plugins/target/wasm`) are installed into a registry
//! whose cache lives outside `plugin.dir`, as the broker lays it out. Then the cache is
//! attacked between restarts: bytes of murmur2's `.cwasm` flipped, the file replaced by
//! fnv1a's valid `.cwasm`, its digest record rewritten for another source, the digest
//! deleted. Each time the reopened registry logs a line naming the file and the reason
//! (captured with a tracing subscriber), does not load the file (murmur2 still computes
//! murmur2 partitions, which fnv1a's code would not), and rewrites the `.cwasm` and its
//! digest so the next start is warm and quiet again.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use sluice_plugin_host::{ColumnarBatch, Registry};
use sluice_sdk::hash;

const KEYS: [&[u8]; 8] = [
    b"a",
    b"foobar",
    b"k1",
    b"k2",
    b"customer-21",
    b"x",
    b"yy",
    b"zzz",
];
const PARTITIONS: u32 = 10;

/// A `Write` into a shared buffer, for the log lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Opens the registry over `dir`, returning it with the log lines the open wrote.
fn open(dir: &Path) -> (Arc<Registry>, String) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let (registry, failures) = tracing::subscriber::with_default(subscriber, || {
        Registry::open(common::cached_config(dir)).expect("opening the registry")
    });
    assert!(failures.is_empty(), "{failures:?}");
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    (registry, logs)
}

fn partitions(registry: &Registry, plugin: &str) -> Vec<u32> {
    let mut batch = ColumnarBatch::new();
    for (i, key) in KEYS.iter().enumerate() {
        batch.push(i as i64, 0, Some(*key), None, &[]);
    }
    let partitioner = registry.partitioner(plugin, &[]).unwrap();
    partitioner.partition(&batch, PARTITIONS).unwrap()
}

fn murmur2_partitions() -> Vec<u32> {
    KEYS.iter()
        .map(|k| hash::murmur2_partition(k, PARTITIONS))
        .collect()
}

/// A cache file of the source whose SHA-256 is `sha256`.
fn cached(dir: &Path, sha256: &str, ext: &str) -> PathBuf {
    dir.join("plugin-cache").join(format!("{sha256}.{ext}"))
}

/// The `cwasm` line of a source's digest record.
fn recorded_digest(dir: &Path, sha256: &str) -> String {
    let text = std::fs::read_to_string(cached(dir, sha256, "digest")).unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("cwasm "));
    line.expect("a cwasm line").to_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// After a rejected cache file: the plugin computes murmur2, the log names the file and the
/// reason, and the cache holds a `.cwasm` matching its digest again (not `tampered`).
fn assert_rejected_and_recompiled(dir: &Path, sha256: &str, tampered: &[u8], reason: &str) {
    let (registry, logs) = open(dir);
    assert_eq!(
        partitions(&registry, "murmur2"),
        murmur2_partitions(),
        "{logs}"
    );
    let file = cached(dir, sha256, "cwasm");
    let line = logs
        .lines()
        .find(|l| l.contains("ignoring the compiled plugin cache file"))
        .unwrap_or_else(|| panic!("no log line about the cache: {logs}"));
    assert!(line.contains(&file.display().to_string()), "{line}");
    assert!(line.contains(reason), "{line}");
    let rewritten = std::fs::read(&file).unwrap();
    assert_ne!(rewritten, tampered, "the rejected file was replaced");
    assert_eq!(sha256_hex(&rewritten), recorded_digest(dir, sha256));
    drop(registry);
    let (registry, logs) = open(dir);
    assert!(
        !logs.contains("ignoring the compiled"),
        "warm again: {logs}"
    );
    assert_eq!(partitions(&registry, "murmur2"), murmur2_partitions());
}

#[test]
fn tampered_or_substituted_cache_files_are_detected_never_loaded_and_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (registry, _) = open(dir);
    let murmur2 = registry
        .install("murmur2", &common::wasm("murmur2"))
        .unwrap()
        .sha256;
    let fnv1a = registry
        .install("fnv1a", &common::wasm("fnv1a"))
        .unwrap()
        .sha256;
    assert_ne!(
        partitions(&registry, "fnv1a"),
        murmur2_partitions(),
        "the two plugins are told apart"
    );
    drop(registry);
    let cwasm = cached(dir, &murmur2, "cwasm");
    assert!(cwasm.is_file());
    assert!(
        !dir.join("plugins/.cache").exists(),
        "nothing compiled inside plugin.dir"
    );

    // A warm start loads the cache quietly.
    let (registry, logs) = open(dir);
    assert!(!logs.contains("ignoring the compiled"), "{logs}");
    assert_eq!(partitions(&registry, "murmur2"), murmur2_partitions());
    drop(registry);

    // Bytes flipped all through the file (code and headers alike).
    let mut flipped = std::fs::read(&cwasm).unwrap();
    for i in (100..flipped.len()).step_by(509) {
        flipped[i] ^= 0x5a;
    }
    std::fs::write(&cwasm, &flipped).unwrap();
    assert_rejected_and_recompiled(dir, &murmur2, &flipped, "does not match the digest");

    // Another plugin's valid compiled code in its place.
    let substitute = std::fs::read(cached(dir, &fnv1a, "cwasm")).unwrap();
    std::fs::write(&cwasm, &substitute).unwrap();
    assert_rejected_and_recompiled(dir, &murmur2, &substitute, "does not match the digest");

    // ... with fnv1a's digest record too: the record names another source.
    std::fs::write(&cwasm, &substitute).unwrap();
    std::fs::copy(
        cached(dir, &fnv1a, "digest"),
        cached(dir, &murmur2, "digest"),
    )
    .unwrap();
    assert_rejected_and_recompiled(dir, &murmur2, &substitute, "another source");

    // The digest gone.
    std::fs::remove_file(cached(dir, &murmur2, "digest")).unwrap();
    let (registry, logs) = open(dir);
    assert!(logs.contains("no digest recorded"), "{logs}");
    assert_eq!(partitions(&registry, "murmur2"), murmur2_partitions());
    let after = std::fs::read(&cwasm).unwrap();
    assert_eq!(sha256_hex(&after), recorded_digest(dir, &murmur2));
}

#[test]
fn replaced_and_deleted_plugins_leave_no_cache_entry_behind() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let (registry, _) = open(dir);
    let old = registry
        .install("p", &common::wasm("murmur2"))
        .unwrap()
        .sha256;
    assert!(cached(dir, &old, "cwasm").is_file());
    // A new source under the same name: compiled afresh, the old entry removed.
    let new = registry
        .install("p", &common::wasm("fnv1a"))
        .unwrap()
        .sha256;
    assert_ne!(old, new);
    assert!(!cached(dir, &old, "cwasm").exists());
    let cwasm = std::fs::read(cached(dir, &new, "cwasm")).unwrap();
    assert_eq!(sha256_hex(&cwasm), recorded_digest(dir, &new));
    assert_ne!(partitions(&registry, "p"), murmur2_partitions());
    registry.delete("p", false).unwrap();
    assert!(!cached(dir, &new, "cwasm").exists());
    assert!(!cached(dir, &new, "digest").exists());
}
