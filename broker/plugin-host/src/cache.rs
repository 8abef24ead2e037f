//! The compiled-plugin cache. A `.cwasm` is native code that wasmtime loads with the unsafe
//! `Component::deserialize`, so it is trusted by digest, never by its file name.
//!
//! Layout, in the cache directory (`PluginConfig::cache_dir`; the broker uses
//! `<data.dir>/plugin-cache/`, never inside `plugin.dir`, which deployers write to):
//! ```text
//! <source>.cwasm    wasmtime's precompiled component (`Engine::precompile_component`)
//! <source>.digest   "sluice-plugin-cache 1\nsource <hex>\nengine <hex>\ncwasm <hex>\n"
//! ```
//! `<source>` is the SHA-256 of the source component, lowercase hex (a plugin's `sha256`),
//! so plugins of the same bytes under two names share one entry; entries no loaded plugin
//! uses are removed ([`retain`]) when the registry opens and after an install or delete.
//! `source` is the SHA-256 of the source component's bytes; `engine` the SHA-256 of a
//! version tag, the wasmtime version and the engine's `precompile_compatibility_hash`
//! (target, compiler flags, tunables, features); `cwasm` the SHA-256 of the `.cwasm` file.
//! A cache entry is loaded only if the digest file parses, its `source` and `engine` are
//! this source's and this engine's, and the `.cwasm` bytes read (once, into memory, then
//! deserialized from that copy) hash to its `cwasm`. Anything else (a tampered or damaged file, another plugin's
//! valid `.cwasm` put in its place, a changed source or engine, a missing digest) is logged
//! with the file and the reason and ignored; the caller recompiles and stores both files
//! again, the `.cwasm` first and the digest last (`sluice_storage::io::write_durable`), so a
//! crash between the two leaves a digest that does not match and the next load recompiles.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use sluice_storage::Fs;
use sluice_storage::io::{self as storage_io, RealFs};

use crate::error::RegistryError;

/// The wasmtime version compiled in (pinned with `=` in the workspace `Cargo.toml`; a unit
/// test keeps the two equal). Also inside the compatibility hash; named here so a key never
/// outlives a wasmtime upgrade even if that hash stopped covering it.
pub(crate) const WASMTIME_VERSION: &str = "48.0.8";

const HEADER: &str = "sluice-plugin-cache 1";

/// Feeds everything a `Hash` impl writes into SHA-256.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
    }
}

/// What a cache entry must have been compiled from: the SHA-256 of the source component
/// and of the engine configuration, lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    source: String,
    engine: String,
}

/// The cache key of `source` compiled by `engine`.
pub(crate) fn key(engine: &wasmtime::Engine, source: &[u8]) -> Key {
    let mut hasher = Sha256Hasher(Sha256::new());
    hasher.0.update(HEADER.as_bytes());
    hasher.0.update(b"\0wasmtime ");
    hasher.0.update(WASMTIME_VERSION.as_bytes());
    hasher.0.update(b"\0");
    engine.precompile_compatibility_hash().hash(&mut hasher);
    Key {
        source: hex(&Sha256::digest(source)),
        engine: hex(&hasher.0.finalize()),
    }
}

const CWASM_EXT: &str = "cwasm";
const DIGEST_EXT: &str = "digest";

/// One source's two cache files.
#[derive(Debug)]
pub(crate) struct Entry {
    cwasm: PathBuf,
    digest: PathBuf,
}

impl Entry {
    pub(crate) fn new(dir: &Path, key: &Key) -> Self {
        Self {
            cwasm: dir.join(format!("{}.{CWASM_EXT}", key.source)),
            digest: dir.join(format!("{}.{DIGEST_EXT}", key.source)),
        }
    }

    /// The `.cwasm` bytes if the recorded digest vouches for them and for `key`; `None`
    /// (logged, unless there is no entry at all) otherwise. A stale entry (another engine
    /// configuration or wasmtime) is logged at info, anything else at warn.
    pub(crate) fn load(&self, key: &Key) -> Option<Vec<u8>> {
        let (stale, reason) = match self.check(key) {
            Ok(bytes) => return Some(bytes),
            Err(Miss::Cold) => return None,
            Err(Miss::Stale(reason)) => (true, reason),
            Err(Miss::Untrusted(reason)) => (false, reason),
        };
        let file = self.cwasm.display();
        let message = "ignoring the compiled plugin cache file; recompiling";
        if stale {
            tracing::info!(file = %file, reason = %reason, "{message}");
        } else {
            tracing::warn!(file = %file, reason = %reason, "{message}");
        }
        None
    }

    fn check(&self, key: &Key) -> Result<Vec<u8>, Miss> {
        let digest = match std::fs::read_to_string(&self.digest) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.cwasm.exists() => {
                return Err(Miss::Cold);
            }
            Err(e) => {
                let at = self.digest.display();
                return Err(Miss::Untrusted(format!("no digest recorded ({at}: {e})")));
            }
        };
        let record = parse(&digest).ok_or_else(|| {
            let at = self.digest.display();
            Miss::Untrusted(format!("{at} is not a cache digest record"))
        })?;
        if record.source != key.source {
            return Err(Miss::Untrusted(
                "its digest record is for another source component".into(),
            ));
        }
        if record.engine != key.engine {
            return Err(Miss::Stale(
                "the engine configuration or the wasmtime version changed".into(),
            ));
        }
        let bytes =
            std::fs::read(&self.cwasm).map_err(|e| Miss::Untrusted(format!("reading it: {e}")))?;
        if hex(&Sha256::digest(&bytes)) != record.cwasm {
            return Err(Miss::Untrusted(format!(
                "its SHA-256 does not match the digest recorded in {} (tampered, damaged or replaced)",
                self.digest.display()
            )));
        }
        Ok(bytes)
    }

    /// Stores freshly compiled bytes: the `.cwasm`, then the digest, each durably.
    pub(crate) fn store(&self, key: &Key, compiled: &[u8]) -> Result<(), RegistryError> {
        if let Some(dir) = self.cwasm.parent() {
            storage_io::create_dir_durable(&RealFs, dir).map_err(RegistryError::io(dir))?;
        }
        storage_io::write_durable(&RealFs, &self.cwasm, compiled)
            .map_err(RegistryError::io(&self.cwasm))?;
        let record = format!(
            "{HEADER}\nsource {}\nengine {}\ncwasm {}\n",
            key.source,
            key.engine,
            hex(&Sha256::digest(compiled))
        );
        storage_io::write_durable(&RealFs, &self.digest, record.as_bytes())
            .map_err(RegistryError::io(&self.digest))
    }
}

/// Removes the cache files of sources not in `live` (plugins deleted or replaced) and temp
/// files a crash left, then fsyncs the directory. A missing directory holds nothing.
///
/// # Errors
/// Listing, removing or fsyncing failed.
pub(crate) fn retain(dir: &Path, live: &BTreeSet<String>) -> std::io::Result<()> {
    storage_io::remove_stale_temps(&RealFs, dir)?;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut removed = false;
    for entry in entries {
        let path = entry?.path();
        let ours = path
            .extension()
            .is_some_and(|e| e == CWASM_EXT || e == DIGEST_EXT);
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if ours && !live.contains(stem) {
            tracing::info!(file = %path.display(), "removing a compiled plugin no plugin uses");
            std::fs::remove_file(&path)?;
            removed = true;
        }
    }
    if removed {
        RealFs.sync_dir(dir)?;
    }
    Ok(())
}

/// Why a cache entry is not loaded.
enum Miss {
    /// Neither file exists.
    Cold,
    /// Made by another engine configuration: expected after an upgrade.
    Stale(String),
    /// Anything else: the digest is missing or unreadable, or the `.cwasm` does not match.
    Untrusted(String),
}

/// A parsed digest record.
#[derive(Debug, PartialEq, Eq)]
struct Record<'a> {
    source: &'a str,
    engine: &'a str,
    cwasm: &'a str,
}

/// A digest record; `None` unless the text is exactly one.
fn parse(text: &str) -> Option<Record<'_>> {
    let mut lines = text.lines();
    let is_hex = |s: &&str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    (lines.next()? == HEADER).then_some(())?;
    let mut field = |name: &str| {
        let line = lines.next()?;
        line.strip_prefix(name)?.strip_prefix(' ').filter(is_hex)
    };
    let record = Record {
        source: field("source")?,
        engine: field("engine")?,
        cwasm: field("cwasm")?,
    };
    lines.next().is_none().then_some(record)
}

/// Lowercase hex of a digest (the cache records and plugin versions name files by it).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(epoch_interruption: bool) -> wasmtime::Engine {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(epoch_interruption);
        wasmtime::Engine::new(&config).unwrap()
    }

    #[test]
    fn the_key_covers_source_and_engine_configuration_and_is_stable() {
        let (a, b) = (engine(true), engine(false));
        assert_eq!(key(&a, b"one"), key(&engine(true), b"one"), "stable");
        assert_ne!(key(&a, b"one"), key(&a, b"two"), "source");
        assert_ne!(key(&a, b"one"), key(&b, b"one"), "engine configuration");
        assert_eq!(key(&a, b"").source.len(), 64);
        assert_eq!(key(&a, b"").engine.len(), 64);
    }

    #[test]
    fn the_wasmtime_version_is_the_pinned_one() {
        let manifest = include_str!("../../../Cargo.toml");
        let pin = format!("wasmtime = {{ version = \"={WASMTIME_VERSION}\"");
        assert!(manifest.contains(&pin), "Cargo.toml does not pin {pin}");
    }

    #[test]
    fn digest_records_parse_strictly() {
        let h = "ab".repeat(32);
        let good = format!("{HEADER}\nsource {h}\nengine {h}\ncwasm {h}\n");
        let want = Record {
            source: &h,
            engine: &h,
            cwasm: &h,
        };
        assert_eq!(parse(&good), Some(want));
        for bad in [
            String::new(),
            format!("{HEADER}\nsource {h}\nengine {h}\n"),
            format!("{HEADER}\nsource {h}\nengine {h}\ncwasm {h}\nextra\n"),
            format!("{HEADER}\nsource zz\nengine {h}\ncwasm {h}\n"),
            format!("{HEADER}\nengine {h}\nsource {h}\ncwasm {h}\n"),
            format!("sluice-plugin-cache 2\nsource {h}\nengine {h}\ncwasm {h}\n"),
        ] {
            assert_eq!(parse(&bad), None, "{bad:?}");
        }
    }
}
