//! What every plugin kind's instance does the same way: [`Instance`], a fresh store under
//! the engine's limits with the kind's bindings, instantiated and `init`ed; the deadline
//! armed before each call; parameters in WIT form; wasmtime and guest errors sorted into
//! [`CallError`]s. `partitioner.rs`, `filter.rs` and `transform.rs` add only their call and
//! the check of its answer.

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::{Param, PluginError};
use crate::compile::PluginVersion;
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::state::{HostState, MemoryLimitHit};

/// A guest call's raw result: wasmtime's error (trap, deadline, memory) around the guest's.
pub(crate) type GuestResult<T> = wasmtime::Result<Result<T, PluginError>>;

/// One live, initialised instance of a plugin version with bindings `B` (one world's).
/// Not shared: a caller checks one out of a handle's pool.
pub(crate) struct Instance<B> {
    pub(crate) version: Arc<PluginVersion>,
    store: Store<HostState>,
    bindings: B,
    engine: PluginEngine,
}

impl<B> Instance<B> {
    /// Instantiates `version` in a fresh store and calls its `init` with `params`.
    /// `instantiate` is `None` when the version is not of this kind (`kind` names it).
    pub(crate) fn new(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        kind: &str,
        instantiate: impl FnOnce(&PluginVersion, &mut Store<HostState>) -> Option<wasmtime::Result<B>>,
        init: impl FnOnce(&B, &mut Store<HostState>, &[Param]) -> GuestResult<()>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        let mut store = new_store(engine, &version.name, &version.sha256);
        let bindings = instantiate(&version, &mut store)
            .ok_or_else(|| CallError::Instantiate {
                plugin: version.name.clone(),
                message: format!("a {} is not a {kind}", version.kind),
            })?
            .map_err(|e| classify(&version.name, engine, e))?;
        let mut instance = Self {
            version,
            store,
            bindings,
            engine: engine.clone(),
        };
        let params = wit_params(params);
        instance.call(|b, store| init(b, store, &params))?;
        Ok(instance)
    }

    /// One call into the guest under the deadline and the memory limit, its errors typed.
    pub(crate) fn call<T>(
        &mut self,
        f: impl FnOnce(&B, &mut Store<HostState>) -> GuestResult<T>,
    ) -> Result<T, CallError> {
        begin_call(&mut self.store, &self.engine);
        let result = f(&self.bindings, &mut self.store);
        self.store.data_mut().end_call();
        let refused = self.store.data_mut().take_memory_refused();
        match (result, refused) {
            (Ok(Ok(value)), _) => Ok(value),
            // The guest failed after the host refused it memory: that is why.
            (_, Some(hit)) => Err(memory_exceeded(&self.version.name, hit)),
            (Ok(Err(e)), None) => Err(guest_error(&self.version.name, e)),
            (Err(e), None) => Err(classify(&self.version.name, &self.engine, e)),
        }
    }

    /// Whether the instance's memory has grown past `PLUGIN_RETIRE_MEMORY_PERCENT` of
    /// `plugin.memory.bytes.max`: the pool then drops it after its call instead of keeping
    /// it, so a guest whose runtime never gives memory back (a garbage-collected heap that
    /// only grows between calls) is replaced by a fresh instance before it runs out.
    pub(crate) fn grown_large(&self) -> bool {
        let max = self.engine.config.memory_bytes_max;
        self.store.data().memory_bytes()
            > max / 100 * u64::from(crate::limits::PLUGIN_RETIRE_MEMORY_PERCENT)
    }

    /// A broken contract in the guest's answer.
    pub(crate) fn contract(&self, message: String) -> CallError {
        CallError::Contract {
            plugin: self.version.name.clone(),
            message,
        }
    }
}

impl<B> std::fmt::Debug for Instance<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Sort a wasmtime error into the typed call errors.
pub(crate) fn classify(plugin: &str, engine: &PluginEngine, e: wasmtime::Error) -> CallError {
    let plugin = plugin.to_owned();
    if let Some(hit) = e.downcast_ref::<MemoryLimitHit>() {
        return memory_exceeded(&plugin, *hit);
    }
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => CallError::Timeout {
            plugin,
            timeout_ms: engine.config.call_timeout_ms,
        },
        Some(trap) => CallError::Trap {
            plugin,
            message: format!("{trap}: {e:#}"),
        },
        None => CallError::Instantiate {
            plugin,
            message: format!("{e:#}"),
        },
    }
}

fn memory_exceeded(plugin: &str, hit: MemoryLimitHit) -> CallError {
    CallError::MemoryExceeded {
        plugin: plugin.to_owned(),
        desired_bytes: hit.desired_bytes,
        max_bytes: hit.max_bytes,
    }
}

/// A store for one instance of plugin `name` at version `sha256`: memory limiter, epoch
/// deadline and the plugin's log installed.
pub(crate) fn new_store(engine: &PluginEngine, name: &str, sha256: &str) -> Store<HostState> {
    let mut store = Store::new(
        &engine.engine,
        HostState::new(
            name,
            sha256,
            engine.config.memory_bytes_max,
            engine.logs.of(name),
        ),
    );
    store.limiter(|state| state);
    store.set_epoch_deadline(engine.config.deadline_ticks());
    store.epoch_deadline_trap();
    store
}

/// Re-arms the call deadline and starts the per-call accounting.
pub(crate) fn begin_call(store: &mut Store<HostState>, engine: &PluginEngine) {
    store.set_epoch_deadline(engine.config.deadline_ticks());
    store.data_mut().begin_call();
}

/// The plugin's parameters as the WIT `init` takes them.
pub(crate) fn wit_params(params: &[(String, String)]) -> Vec<Param> {
    params
        .iter()
        .map(|(k, v)| Param {
            key: k.clone(),
            value: v.clone(),
        })
        .collect()
}

/// A guest's own error, typed.
pub(crate) fn guest_error(plugin: &str, e: PluginError) -> CallError {
    let plugin = plugin.to_owned();
    match e {
        PluginError::InvalidParams(message) => CallError::InvalidParams { plugin, message },
        PluginError::Failed(message) => CallError::Guest { plugin, message },
    }
}
