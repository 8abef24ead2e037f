//! Partitioner calls: one instance (own `Store`) per concurrent caller,
//! with a wall-clock deadline and a memory limit on every call. The
//! shareable handle, [`crate::Partitioner`], is in `pool.rs`.

use std::sync::Arc;

use crate::batch::ColumnarBatch;
use crate::bindings::{PartitionerBindings as Bindings, on_api};
use crate::call::Instance;
use crate::compile::{KindPre, PluginVersion};
use crate::engine::PluginEngine;
use crate::error::CallError;

/// One live instance of one partitioner version, initialised with its
/// parameters. Not shared: callers check one out of a [`crate::Partitioner`].
#[derive(Debug)]
pub struct PartitionerInstance(Instance<Bindings>);

impl PartitionerInstance {
    /// Instantiate `version` in a fresh store and call its `init`.
    ///
    /// # Errors
    /// Instantiation failures and anything `init` does wrong.
    pub fn new(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        Instance::new(
            engine,
            version,
            "partitioner",
            |v, store| match &v.pre {
                KindPre::Partitioner(pre) => Some(pre.instantiate(store)),
                _ => None,
            },
            |b, store, params| {
                on_api!(
                    b,
                    PartitionerBindings,
                    sluice_plugin_partitioner_api,
                    |api| api.call_init(store, params)
                )
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
        let partitions = self.0.call(|b, store| {
            on_api!(
                b,
                PartitionerBindings,
                sluice_plugin_partitioner_api,
                |api| api.call_partition(store, &batch.columns, partition_count)
            )
        })?;
        check_partitions(&partitions, batch.len(), partition_count)
            .map_err(|message| self.0.contract(message))?;
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
