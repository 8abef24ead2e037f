//! Partitioner calls (produce time): the same instance discipline as every kind (own
//! `Store`, deadline and memory limit per call, discarded on any error: `call.rs`); what is
//! a partitioner's own is its call and the check of its answer, a partition per record. The
//! shareable handle, [`crate::Partitioner`], is in `pool.rs`.

use wasmtime::Store;

use crate::batch::ColumnarBatch;
use crate::bindings::{Param, PartitionerBindings, on_api};
use crate::call::{GuestResult, Instance, Kind};
use crate::compile::{KindPre, PluginVersion};
use crate::error::CallError;
use crate::state::HostState;

/// The partitioner kind (WIT world `partitioner`).
#[derive(Debug)]
pub enum PartitionerKind {}

impl Kind for PartitionerKind {
    type Bindings = PartitionerBindings;
    const NAME: &'static str = "partitioner";

    fn instantiate(
        version: &PluginVersion,
        store: &mut Store<HostState>,
    ) -> Option<wasmtime::Result<PartitionerBindings>> {
        match &version.pre {
            KindPre::Partitioner(pre) => Some(pre.instantiate(store)),
            _ => None,
        }
    }

    fn init(
        b: &PartitionerBindings,
        store: &mut Store<HostState>,
        params: &[Param],
    ) -> GuestResult<()> {
        on_api!(
            b,
            PartitionerBindings,
            sluice_plugin_partitioner_api,
            |api| api.call_init(store, params)
        )
    }
}

/// One live instance of one partitioner version, initialised with its parameters. Not
/// shared: callers check one out of a [`crate::Partitioner`].
pub type PartitionerInstance = Instance<PartitionerKind>;

impl Instance<PartitionerKind> {
    /// One partition per record of `batch`, each below `partition_count`.
    ///
    /// # Errors
    /// A trap, a timeout, memory exhaustion, a guest error, or an answer
    /// that breaks the contract. The instance must be dropped afterwards.
    pub fn partition(
        &mut self,
        batch: &ColumnarBatch,
        partition_count: u32,
    ) -> Result<Vec<u32>, CallError> {
        let partitions = self.call(|b, store| {
            on_api!(
                b,
                PartitionerBindings,
                sluice_plugin_partitioner_api,
                |api| api.call_partition(store, &batch.columns, partition_count)
            )
        })?;
        check_partitions(&partitions, batch.len(), partition_count)
            .map_err(|message| self.contract(message))?;
        Ok(partitions)
    }
}

/// A partitioner's answer names one partition in range per record. The SDK checks this too;
/// the host does not trust the guest.
pub(crate) fn check_partitions(
    partitions: &[u32],
    records: usize,
    partition_count: u32,
) -> Result<(), String> {
    if partitions.len() != records {
        return Err(format!(
            "{} partitions for {records} records",
            partitions.len()
        ));
    }
    if let Some(p) = partitions.iter().find(|&&p| p >= partition_count) {
        return Err(format!(
            "partition {p} out of range for {partition_count} partitions"
        ));
    }
    Ok(())
}
