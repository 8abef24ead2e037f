//! Shared by the plugin-host integration tests: the real guest plugins
//! built from `plugins/` by `sdk/build-plugins.sh`, and registry set-up.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use sluice_plugin_host::{ColumnarBatch, PluginConfig, Registry};

/// Where the built plugins are: `SLUICE_PLUGIN_WASM_DIR` if set (CI builds
/// them first), else built now, once per test binary, by the build script
/// (incremental: a second or two when nothing changed).
pub fn wasm_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SLUICE_PLUGIN_WASM_DIR") {
            return PathBuf::from(dir);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let status = Command::new("bash")
            .arg(root.join("sdk/build-plugins.sh"))
            .status()
            .expect("running sdk/build-plugins.sh");
        assert!(
            status.success(),
            "sdk/build-plugins.sh failed: the guest plugins could not be built"
        );
        root.join("plugins/target/wasm")
    })
}

/// The bytes of a built plugin (a core module, as cargo makes it).
pub fn wasm(name: &str) -> Vec<u8> {
    let path = wasm_dir().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The config of a broker-like layout under `dir`: plugins in `dir/plugins`, the compile
/// cache outside it in `dir/plugin-cache`.
pub fn cached_config(dir: &Path) -> PluginConfig {
    let mut config = PluginConfig::new(dir.join("plugins"));
    config.cache_dir = Some(dir.join("plugin-cache"));
    config
}

/// A registry over a fresh temporary directory (laid out as `cached_config`).
pub fn registry(config: impl FnOnce(&mut PluginConfig)) -> (tempfile::TempDir, Arc<Registry>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = cached_config(dir.path());
    config(&mut c);
    let (registry, failures) = Registry::open(c).expect("opening the registry");
    assert!(failures.is_empty(), "{failures:?}");
    (dir, registry)
}

pub fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A one-record batch with key `key` and value `v`.
pub fn batch_with_key(key: &[u8]) -> ColumnarBatch {
    let mut batch = ColumnarBatch::new();
    batch.push(0, 0, Some(key), Some(b"v"), &[]);
    batch
}
