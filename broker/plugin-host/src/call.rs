//! What every plugin kind's instance does the same way: a fresh store under the engine's
//! limits, the deadline armed before each call, parameters in WIT form, and guest errors
//! sorted into [`CallError`]s.

use wasmtime::Store;

use crate::bindings::{Param, PluginError};
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::state::HostState;

/// A store for one instance of plugin `name`: memory limiter and epoch deadline installed.
pub(crate) fn new_store(engine: &PluginEngine, name: &str) -> Store<HostState> {
    let mut store = Store::new(
        &engine.engine,
        HostState::new(name, engine.config.memory_bytes_max),
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
