//! What every plugin kind's instance does the same way: [`Kind`], what tells the kinds
//! apart (their bindings, their name, how a linked version of the kind is instantiated and
//! `init`ed), and [`Instance`], one live instance of any kind: a fresh store under the
//! engine's limits, instantiated and `init`ed; the deadline armed before each call;
//! parameters in WIT form; wasmtime and guest errors sorted into [`CallError`]s; whether it
//! has grown large enough to retire. `partitioner.rs`, `filter.rs`, `transform.rs` and
//! `validator.rs` each add only their kind, their call and the check of its answer.

use std::sync::Arc;

use wasmtime::Store;

use crate::bindings::{Param, PluginError};
use crate::compile::PluginVersion;
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::state::{HostState, MemoryLimitHit};

/// A guest call's raw result: wasmtime's error (trap, deadline, memory) around the guest's.
pub type GuestResult<T> = wasmtime::Result<Result<T, PluginError>>;

/// One plugin kind (one WIT world): what [`Instance`] needs to make an instance of it.
/// Implemented by the four kinds' marker types only (its signatures name this crate's
/// private types).
pub trait Kind: 'static {
    /// The instance bindings of the kind's world, over the WIT versions that have it.
    type Bindings: Send;
    /// The kind's name, as [`crate::PluginKind`] writes it.
    const NAME: &'static str;
    /// Instantiates `version`'s component from the kind's linked `*Pre`; `None` when
    /// `version` is of another kind.
    fn instantiate(
        version: &PluginVersion,
        store: &mut Store<HostState>,
    ) -> Option<wasmtime::Result<Self::Bindings>>;
    /// The guest's `init` with the plugin's parameters.
    fn init(
        bindings: &Self::Bindings,
        store: &mut Store<HostState>,
        params: &[Param],
    ) -> GuestResult<()>;
}

/// One live, initialised instance of a plugin version of kind `K`. Not shared: a caller
/// checks one out of a handle's pool ([`crate::Partitioner`], [`crate::Filter`],
/// [`crate::Transform`], [`crate::Validator`]), and after any failed call it is dropped.
pub struct Instance<K: Kind> {
    version: Arc<PluginVersion>,
    store: Store<HostState>,
    bindings: K::Bindings,
    engine: PluginEngine,
}

impl<K: Kind> Instance<K> {
    /// Instantiates `version` in a fresh store and calls its `init` with `params`.
    ///
    /// # Errors
    /// A version of another kind, instantiation failures, anything `init` does wrong.
    pub fn new(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        let mut store = new_store(engine, &version.name, &version.sha256);
        let bindings = K::instantiate(&version, &mut store)
            .ok_or_else(|| CallError::Instantiate {
                plugin: version.name.clone(),
                message: format!("a {} is not a {}", version.kind, K::NAME),
            })?
            .map_err(|e| classify(&version.name, engine, e))?;
        let mut instance = Self {
            version,
            store,
            bindings,
            engine: engine.clone(),
        };
        let params = wit_params(params);
        instance.call(|b, store| K::init(b, store, &params))?;
        Ok(instance)
    }

    /// The version this instance runs.
    pub fn version(&self) -> &Arc<PluginVersion> {
        &self.version
    }

    /// One call into the guest under the deadline and the memory limit, its errors typed.
    pub(crate) fn call<T>(
        &mut self,
        f: impl FnOnce(&K::Bindings, &mut Store<HostState>) -> GuestResult<T>,
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

impl<K: Kind> std::fmt::Debug for Instance<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("kind", &K::NAME)
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
