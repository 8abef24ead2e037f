//! From uploaded bytes to a ready-to-instantiate plugin version:
//! size check, core module -> component (`wit-component`), compile (or load
//! the compiled artifact from the disk cache), kind detection, and linking
//! once (`instantiate_pre`), which rejects any import we do not provide.

use std::collections::hash_map::DefaultHasher;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::Path;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::bindings::filter::FilterPre;
use crate::bindings::partitioner::PartitionerPre;
use crate::bindings::transform::TransformPre;
use crate::bindings::{FILTER_EXPORT, PARTITIONER_EXPORT, TRANSFORM_EXPORT};
use crate::engine::PluginEngine;
use crate::error::RegistryError;
use crate::state::HostState;

/// What a plugin does, told by the interface its component exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    Partitioner,
    Filter,
    Transform,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Partitioner => "partitioner",
            Self::Filter => "filter",
            Self::Transform => "transform",
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
    /// Linked once; instantiating from it is cheap. Exactly one is set:
    /// the one of the plugin's kind.
    pub(crate) partitioner_pre: Option<PartitionerPre<HostState>>,
    pub(crate) filter_pre: Option<FilterPre<HostState>>,
    pub(crate) transform_pre: Option<TransformPre<HostState>>,
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
    let component = compile_cached(engine, component_bytes, &sha256, cache_dir)?;
    let (kind, wit_version) = detect_kind(engine, &component)?;
    let pre = engine
        .linker
        .instantiate_pre(&component)
        .map_err(|e| RegistryError::Imports(format!("{e:#}")))?;
    let invalid = |e: wasmtime::Error| RegistryError::Invalid(format!("{e:#}"));
    let (mut partitioner_pre, mut filter_pre, mut transform_pre) = (None, None, None);
    match kind {
        PluginKind::Partitioner => {
            partitioner_pre = Some(PartitionerPre::new(pre).map_err(invalid)?)
        }
        PluginKind::Filter => filter_pre = Some(FilterPre::new(pre).map_err(invalid)?),
        PluginKind::Transform => transform_pre = Some(TransformPre::new(pre).map_err(invalid)?),
    }
    Ok(PluginVersion {
        name: name.to_owned(),
        kind,
        wit_version,
        sha256,
        size_bytes: component_bytes.len() as u64,
        partitioner_pre,
        filter_pre,
        transform_pre,
    })
}

fn compile_cached(
    engine: &PluginEngine,
    bytes: &[u8],
    sha256: &str,
    cache_dir: Option<&Path>,
) -> Result<Component, RegistryError> {
    let Some(dir) = cache_dir else {
        return Component::new(&engine.engine, bytes)
            .map_err(|e| RegistryError::Invalid(format!("{e:#}")));
    };
    let mut hasher = DefaultHasher::new();
    engine
        .engine
        .precompile_compatibility_hash()
        .hash(&mut hasher);
    let path = dir.join(format!("{sha256}-{:016x}.cwasm", hasher.finish()));
    if path.exists() {
        // SAFETY: the file is one we wrote with `precompile_component` into
        // a directory the broker owns, named by the sha256 of its source and
        // the engine's compatibility hash; wasmtime checks the header too.
        match unsafe { Component::deserialize_file(&engine.engine, &path) } {
            Ok(component) => return Ok(component),
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring unusable compile cache entry: {e:#}")
            }
        }
    }
    let compiled = engine
        .engine
        .precompile_component(bytes)
        .map_err(|e| RegistryError::Invalid(format!("{e:#}")))?;
    std::fs::create_dir_all(dir).map_err(RegistryError::io(dir))?;
    crate::registry::write_atomically(&path, &compiled)?;
    // SAFETY: `compiled` was just produced by this engine.
    unsafe { Component::deserialize(&engine.engine, &compiled) }
        .map_err(|e| RegistryError::Invalid(format!("{e:#}")))
}

fn detect_kind(
    engine: &PluginEngine,
    component: &Component,
) -> Result<(PluginKind, String), RegistryError> {
    let ty = component.component_type();
    for (export, _) in ty.exports(&engine.engine) {
        let kind = match export {
            PARTITIONER_EXPORT => PluginKind::Partitioner,
            FILTER_EXPORT => PluginKind::Filter,
            TRANSFORM_EXPORT => PluginKind::Transform,
            _ => continue,
        };
        let version = export.rsplit('@').next().unwrap_or_default().to_owned();
        return Ok((kind, version));
    }
    Err(RegistryError::UnknownKind {
        expected: [PARTITIONER_EXPORT, FILTER_EXPORT, TRANSFORM_EXPORT].join(", "),
    })
}

/// `\0asm` then the version and layer fields (binary format spec).
const MODULE_HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";
const COMPONENT_HEADER: [u8; 8] = *b"\0asm\x0d\0\x01\0";

fn has_header(bytes: &[u8], header: [u8; 8]) -> bool {
    bytes.get(..8) == Some(&header[..])
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
