//! Filter calls (fetch time): the same instance discipline as partitioners
//! (own `Store`, deadline and memory limit per call, discarded on any
//! error). The pooled handle is [`crate::Filter`]; views chain them with
//! transforms ([`crate::View`]).

use std::sync::Arc;

use crate::batch::ColumnarBatch;
use crate::bindings::{FilterBindings as Bindings, on_api};
use crate::call::Instance;
use crate::compile::{KindPre, PluginVersion};
use crate::engine::PluginEngine;
use crate::error::CallError;

/// One live, initialised instance of a filter plugin.
#[derive(Debug)]
pub struct FilterInstance(Instance<Bindings>);

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
        Instance::new(
            engine,
            version,
            "filter",
            |v, store| match &v.pre {
                KindPre::Filter(pre) => Some(pre.instantiate(store)),
                _ => None,
            },
            |b, store, params| {
                on_api!(b, FilterBindings, sluice_plugin_filter_api, |api| api
                    .call_init(store, params))
            },
            params,
        )
        .map(Self)
    }

    /// The version this instance runs.
    pub fn version(&self) -> &Arc<PluginVersion> {
        &self.0.version
    }

    /// Whether its memory has grown large enough to retire it (`call.rs`).
    pub(crate) fn grown_large(&self) -> bool {
        self.0.grown_large()
    }

    /// Which records of `batch` to keep, one `bool` per record.
    ///
    /// # Errors
    /// As [`crate::PartitionerInstance::partition`]; drop the instance after.
    pub fn filter(&mut self, batch: &ColumnarBatch) -> Result<Vec<bool>, CallError> {
        let bitmap = self.0.call(|b, store| {
            on_api!(b, FilterBindings, sluice_plugin_filter_api, |api| api
                .call_filter(store, &batch.columns))
        })?;
        keep_mask(&bitmap, batch.len()).map_err(|message| self.0.contract(message))
    }
}

/// The keep flags of a filter's answer: one bit per record, checked to be exactly as long as
/// the batch needs (the guest's answer is untrusted).
pub(crate) fn keep_mask(bitmap: &[u8], records: usize) -> Result<Vec<bool>, String> {
    if bitmap.len() != records.div_ceil(8) {
        return Err(format!(
            "a keep bitmap of {} bytes for {records} records",
            bitmap.len()
        ));
    }
    Ok((0..records)
        .map(|i| bitmap[i / 8] >> (i % 8) & 1 == 1)
        .collect())
}
