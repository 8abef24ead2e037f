//! Filter calls (fetch time): the same instance discipline as partitioners
//! (own `Store`, deadline and memory limit per call, discarded on any
//! error). The pooled handle is [`crate::Filter`]; views chain them with
//! transforms ([`crate::View`]).

use std::sync::Arc;

use wasmtime::Store;

use crate::batch::ColumnarBatch;
use crate::bindings::PluginError;
use crate::bindings::filter::Filter as Bindings;
use crate::call;
use crate::compile::PluginVersion;
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::partitioner::classify;
use crate::state::HostState;

/// One live, initialised instance of a filter plugin.
pub struct FilterInstance {
    version: Arc<PluginVersion>,
    store: Store<HostState>,
    bindings: Bindings,
    engine: PluginEngine,
}

impl std::fmt::Debug for FilterInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterInstance")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl FilterInstance {
    /// Instantiate `version` in a fresh store and call its `init`.
    ///
    /// # Errors
    /// Not a filter, instantiation failures, anything `init` does wrong.
    pub fn new(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        let pre = version
            .filter_pre
            .as_ref()
            .ok_or_else(|| CallError::Instantiate {
                plugin: version.name.clone(),
                message: format!("a {} is not a filter", version.kind),
            })?;
        let mut store = call::new_store(engine, &version.name);
        let bindings = pre
            .instantiate(&mut store)
            .map_err(|e| classify(&version.name, engine, e))?;
        let mut instance = Self {
            version,
            store,
            bindings,
            engine: engine.clone(),
        };
        let params = call::wit_params(params);
        instance.begin_call();
        let result = instance
            .bindings
            .sluice_plugin_filter_api()
            .call_init(&mut instance.store, &params);
        instance.finish(result)?;
        Ok(instance)
    }

    /// The version this instance runs.
    pub fn version(&self) -> &Arc<PluginVersion> {
        &self.version
    }

    /// Which records of `batch` to keep, one `bool` per record.
    ///
    /// # Errors
    /// As [`crate::PartitionerInstance::partition`]; drop the instance after.
    pub fn filter(&mut self, batch: &ColumnarBatch) -> Result<Vec<bool>, CallError> {
        self.begin_call();
        let result = self
            .bindings
            .sluice_plugin_filter_api()
            .call_filter(&mut self.store, &batch.columns);
        let bitmap = self.finish(result)?;
        if bitmap.len() != batch.len().div_ceil(8) {
            let message = format!(
                "a keep bitmap of {} bytes for {} records",
                bitmap.len(),
                batch.len()
            );
            return Err(CallError::Contract {
                plugin: self.version.name.clone(),
                message,
            });
        }
        Ok((0..batch.len())
            .map(|i| bitmap[i / 8] >> (i % 8) & 1 == 1)
            .collect())
    }

    fn begin_call(&mut self) {
        call::begin_call(&mut self.store, &self.engine);
    }

    fn finish<T>(
        &mut self,
        result: wasmtime::Result<Result<T, PluginError>>,
    ) -> Result<T, CallError> {
        self.store.data_mut().end_call();
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(call::guest_error(&self.version.name, e)),
            Err(e) => Err(classify(&self.version.name, &self.engine, e)),
        }
    }
}
