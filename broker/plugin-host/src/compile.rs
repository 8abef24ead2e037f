//! From uploaded bytes to a ready-to-instantiate plugin version:
//! size check, core module -> component (`wit-component`), the shape check
//! against the per-component and compile limits (`check.rs`), compile (or
//! load the compiled artifact from the disk cache, `cache.rs`, when its
//! recorded digest vouches for it) on its own thread under
//! `PLUGIN_COMPILE_TIMEOUT_MS` and at most `PLUGIN_COMPILES_CONCURRENT_MAX`
//! at once, kind detection, and linking once (`instantiate_pre`), which
//! rejects any import we do not provide.

use std::fmt;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::bindings::{
    FilterPre, PartitionerPre, TransformPre, ValidatorPre, WitVersion, export_name,
};
use crate::cache::{self, hex};
use crate::engine::PluginEngine;
use crate::error::RegistryError;
use crate::limits;
use crate::state::HostState;

/// What a plugin does, told by the interface its component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    Partitioner,
    Filter,
    Transform,
    /// Produce time: refuses records before they are appended (WIT 0.2.0 on).
    Validator,
}

impl PluginKind {
    pub const ALL: [Self; 4] = [
        Self::Partitioner,
        Self::Filter,
        Self::Transform,
        Self::Validator,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Partitioner => "partitioner",
            Self::Filter => "filter",
            Self::Transform => "transform",
            Self::Validator => "validator",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One compiled version of a plugin. Immutable; a new upload makes a new
/// one and the registry swaps it in.
pub struct PluginVersion {
    pub name: String,
    pub kind: PluginKind,
    /// The WIT package version the plugin was built against, e.g. `0.1.0`.
    pub wit_version: String,
    /// sha256 of the component bytes, lowercase hex.
    pub sha256: String,
    pub size_bytes: u64,
    /// Whether the component imports WASI (a componentize-py or -js guest does).
    pub imports_wasi: bool,
    /// Linked once; instantiating from it is cheap.
    pub(crate) pre: KindPre,
}

/// A plugin version linked for its kind and WIT version.
pub(crate) enum KindPre {
    Partitioner(PartitionerPre<HostState>),
    Filter(FilterPre<HostState>),
    Transform(TransformPre<HostState>),
    Validator(ValidatorPre<HostState>),
}

impl fmt::Debug for PluginVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginVersion")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("wit_version", &self.wit_version)
            .field("sha256", &self.sha256)
            .field("size_bytes", &self.size_bytes)
            .finish_non_exhaustive()
    }
}

/// Turn uploaded bytes (a component, or a core module with the WIT world
/// embedded by wit-bindgen) into component bytes.
///
/// # Errors
/// Too large, not wasm, or a core module without a usable world.
pub fn to_component(engine: &PluginEngine, bytes: &[u8]) -> Result<Vec<u8>, RegistryError> {
    let max_bytes = engine.config.module_bytes_max;
    if bytes.len() as u64 > max_bytes {
        return Err(RegistryError::TooLarge {
            size_bytes: bytes.len() as u64,
            max_bytes,
        });
    }
    if has_header(bytes, COMPONENT_HEADER) {
        return Ok(bytes.to_vec());
    }
    if !has_header(bytes, MODULE_HEADER) {
        return Err(RegistryError::NotWasm(
            "the bytes start with neither a wasm module nor a component header".into(),
        ));
    }
    // wit-component trusts its input more than an upload deserves (a
    // truncated module made it index out of bounds): validate first, and
    // keep a panic in it from reaching the caller all the same.
    wasmparser::Validator::new()
        .validate_all(bytes)
        .map_err(|e| RegistryError::Componentize(format!("invalid core module: {e}")))?;
    let encode = || {
        wit_component::ComponentEncoder::default()
            .validate(true)
            .module(bytes)
            .and_then(|mut encoder| encoder.encode())
            .map_err(|e| RegistryError::Componentize(format!("{e:#}")))
    };
    std::panic::catch_unwind(encode).unwrap_or_else(|_| {
        Err(RegistryError::Componentize(
            "wit-component panicked on this module".into(),
        ))
    })
}

/// Compile component bytes (or load them from `cache_dir`), detect the
/// kind and link.
///
/// # Errors
/// Invalid component, unknown kind, imports we do not provide.
pub fn load(
    engine: &PluginEngine,
    name: &str,
    component_bytes: &[u8],
    cache_dir: Option<&Path>,
) -> Result<PluginVersion, RegistryError> {
    let sha256 = hex(&Sha256::digest(component_bytes));
    let imports = crate::check::check_component(component_bytes)?;
    let imports_wasi = crate::wasi::check_imports(&imports)?;
    let component = compile_cached(engine, name, component_bytes, cache_dir)?;
    let (kind, wit_version) = detect_kind(engine, &component)?;
    let pre = engine
        .linker
        .instantiate_pre(&component)
        .map_err(|e| RegistryError::Imports(format!("{e:#}")))?;
    let invalid = |e: wasmtime::Error| RegistryError::Invalid(format!("{e:#}"));
    let pre = match kind {
        PluginKind::Partitioner => {
            KindPre::Partitioner(PartitionerPre::new(wit_version, pre).map_err(invalid)?)
        }
        PluginKind::Filter => KindPre::Filter(FilterPre::new(wit_version, pre).map_err(invalid)?),
        PluginKind::Transform => {
            KindPre::Transform(TransformPre::new(wit_version, pre).map_err(invalid)?)
        }
        PluginKind::Validator => KindPre::Validator(ValidatorPre::new(pre).map_err(invalid)?),
    };
    Ok(PluginVersion {
        name: name.to_owned(),
        kind,
        wit_version: wit_version.as_str().to_owned(),
        sha256,
        size_bytes: component_bytes.len() as u64,
        imports_wasi,
        pre,
    })
}

fn compile_cached(
    engine: &PluginEngine,
    name: &str,
    bytes: &[u8],
    cache_dir: Option<&Path>,
) -> Result<Component, RegistryError> {
    let Some(dir) = cache_dir else {
        let wasmtime = engine.engine.clone();
        return compile_bounded(engine, bytes, move |bytes| Component::new(&wasmtime, bytes))
            .and_then(|compiled| compiled.map_err(loaded));
    };
    let key = cache::key(&engine.engine, bytes);
    let entry = cache::Entry::new(dir, &key);
    if let Some(cached) = entry.load(&key) {
        // SAFETY: these bytes hash to the digest recorded (outside plugin.dir) when this
        // engine configuration compiled them from this very source (`cache.rs`); they are
        // deserialized from this in-memory copy, so the file cannot change after the check.
        match unsafe { Component::deserialize(&engine.engine, &cached) } {
            Ok(component) => return Ok(component),
            Err(e) if is_pool_limit(&e) => return Err(loaded(e)),
            Err(e) => tracing::warn!(plugin = name, "ignoring an unusable compiled plugin: {e:#}"),
        }
    }
    let wasmtime = engine.engine.clone();
    let compiled = compile_bounded(engine, bytes, move |bytes| {
        wasmtime.precompile_component(bytes)
    })?
    .map_err(|e| RegistryError::Invalid(format!("{e:#}")))?;
    // SAFETY: `compiled` was just produced by this engine.
    let component = unsafe { Component::deserialize(&engine.engine, &compiled) }.map_err(loaded)?;
    // The cache only saves the next start a compile: a plugin that compiled is served even
    // if it cannot be stored.
    if let Err(e) = entry.store(&key, &compiled) {
        tracing::warn!(plugin = name, "cannot store the compiled plugin: {e}");
    }
    Ok(component)
}

/// A compiled component that wasmtime would not load: over a pooling allocator limit
/// (checked when a component is loaded, so at install), or otherwise invalid.
fn loaded(e: wasmtime::Error) -> RegistryError {
    if is_pool_limit(&e) {
        RegistryError::OverLimit(format!(
            "{e:#} (the per-component PLUGIN_* limits in docs/plugins.md)"
        ))
    } else {
        RegistryError::Invalid(format!("{e:#}"))
    }
}

fn is_pool_limit(e: &wasmtime::Error) -> bool {
    let message = format!("{e:#}");
    message.contains("pooling allocator") || message.contains("exceeds the")
}

/// Runs `compile` on its own thread, waiting for a compile slot and then for the result
/// until the compile timeout (both within one deadline). Past it the caller gets
/// [`RegistryError::CompileTimeout`]; the thread cannot be stopped and finishes in the
/// background, holding its slot, and its result is dropped.
fn compile_bounded<T: Send + 'static>(
    engine: &PluginEngine,
    bytes: &[u8],
    compile: impl FnOnce(&[u8]) -> T + Send + 'static,
) -> Result<T, RegistryError> {
    let timeout_ms = engine.config.compile_timeout_ms;
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let slot = engine
        .compiles
        .acquire(deadline)
        .ok_or(RegistryError::CompileBusy {
            max: limits::PLUGIN_COMPILES_CONCURRENT_MAX,
            timeout_ms,
        })?;
    let (tx, rx) = mpsc::sync_channel(1);
    let bytes = bytes.to_vec();
    std::thread::Builder::new()
        .name("plugin-compile".into())
        .spawn(move || {
            let result = compile(&bytes);
            // The receiver is gone if the install timed out.
            let _ = tx.send(result);
            drop(slot);
        })
        .map_err(|e| RegistryError::Engine(format!("cannot start a compile thread: {e}")))?;
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => RegistryError::CompileTimeout { timeout_ms },
            mpsc::RecvTimeoutError::Disconnected => {
                RegistryError::Invalid("the compiler panicked on this component".into())
            }
        })
}

/// The kind and WIT version of the first export that names a plugin API of a version the
/// host loads.
fn detect_kind(
    engine: &PluginEngine,
    component: &Component,
) -> Result<(PluginKind, WitVersion), RegistryError> {
    let known: Vec<(String, PluginKind, WitVersion)> = PluginKind::ALL
        .into_iter()
        .flat_map(|kind| {
            WitVersion::ALL.into_iter().filter_map(move |version| {
                export_name(kind.as_str(), version).map(|name| (name, kind, version))
            })
        })
        .collect();
    let ty = component.component_type();
    for (export, _) in ty.exports(&engine.engine) {
        if let Some((_, kind, version)) = known.iter().find(|(name, ..)| name == export) {
            return Ok((*kind, *version));
        }
    }
    Err(RegistryError::UnknownKind {
        expected: known
            .into_iter()
            .map(|(name, ..)| name)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `\0asm` then the version and layer fields (binary format spec).
const MODULE_HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";
const COMPONENT_HEADER: [u8; 8] = *b"\0asm\x0d\0\x01\0";

fn has_header(bytes: &[u8], header: [u8; 8]) -> bool {
    bytes.get(..8) == Some(&header[..])
}
