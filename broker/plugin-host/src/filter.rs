//! Filter calls (fetch time): the same instance discipline as every kind (own `Store`,
//! deadline and memory limit per call, discarded on any error: `call.rs`); what is a
//! filter's own is its call and the check of its answer, a keep mask per batch. The pooled
//! handle is [`crate::Filter`]; views chain them with transforms ([`crate::View`]).

use wasmtime::Store;

use crate::batch::ColumnarBatch;
use crate::bindings::{FilterBindings, Param, on_api};
use crate::call::{GuestResult, Instance, Kind};
use crate::compile::{KindPre, PluginVersion};
use crate::error::CallError;
use crate::state::HostState;

/// The filter kind (WIT world `filter`).
#[derive(Debug)]
pub enum FilterKind {}

impl Kind for FilterKind {
    type Bindings = FilterBindings;
    const NAME: &'static str = "filter";

    fn instantiate(
        version: &PluginVersion,
        store: &mut Store<HostState>,
    ) -> Option<wasmtime::Result<FilterBindings>> {
        match &version.pre {
            KindPre::Filter(pre) => Some(pre.instantiate(store)),
            _ => None,
        }
    }

    fn init(b: &FilterBindings, store: &mut Store<HostState>, params: &[Param]) -> GuestResult<()> {
        on_api!(b, FilterBindings, sluice_plugin_filter_api, |api| api
            .call_init(store, params))
    }
}

/// One live, initialised instance of a filter plugin.
pub type FilterInstance = Instance<FilterKind>;

impl Instance<FilterKind> {
    /// Which records of `batch` to keep, one `bool` per record.
    ///
    /// # Errors
    /// As [`crate::PartitionerInstance::partition`]; drop the instance after.
    pub fn filter(&mut self, batch: &ColumnarBatch) -> Result<Vec<bool>, CallError> {
        let bitmap = self.call(|b, store| {
            on_api!(b, FilterBindings, sluice_plugin_filter_api, |api| api
                .call_filter(store, &batch.columns))
        })?;
        keep_mask(&bitmap, batch.len()).map_err(|message| self.contract(message))
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
