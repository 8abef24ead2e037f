//! Partitioner calls: one instance (own `Store`) per concurrent caller,
//! with a wall-clock deadline and a memory limit on every call, and a
//! shareable [`Partitioner`] handle that follows hot reloads.

use std::sync::{Arc, Mutex};

use crate::batch::ColumnarBatch;
use crate::bindings::partitioner::Partitioner as Bindings;
use crate::call::Instance;
use crate::compile::PluginVersion;
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::limits;
use crate::registry::PluginSlot;

/// One live instance of one partitioner version, initialised with its
/// parameters. Not shared: callers check one out of a [`Partitioner`].
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
            |v, store| v.partitioner_pre.as_ref().map(|pre| pre.instantiate(store)),
            |b, store, params| b.sluice_plugin_partitioner_api().call_init(store, params),
            params,
        )
        .map(Self)
    }

    /// The version this instance runs.
    pub fn version(&self) -> &Arc<PluginVersion> {
        &self.0.version
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
            b.sluice_plugin_partitioner_api()
                .call_partition(store, &batch.columns, partition_count)
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

/// A partitioner as a topic uses it: a plugin name and its parameters.
/// Cheap to share across connections (`Arc` it); each call checks out an
/// idle instance of the current version (or makes one), so calls in flight
/// finish on the version they started with while new calls pick up a hot
/// reload. Holding a handle marks the plugin in use for the registry.
pub struct Partitioner {
    slot: Arc<PluginSlot>,
    engine: PluginEngine,
    params: Vec<(String, String)>,
    idle: Mutex<Vec<PartitionerInstance>>,
}

impl std::fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Partitioner")
            .field("plugin", &self.slot.name())
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Partitioner {
    /// Make the handle and one instance, so bad parameters fail here (at
    /// topic configuration) rather than on the first produce.
    pub(crate) fn new(
        slot: Arc<PluginSlot>,
        engine: PluginEngine,
        params: Vec<(String, String)>,
    ) -> Result<Self, CallError> {
        let first = PartitionerInstance::new(&engine, slot.current(), &params)?;
        Ok(Self {
            slot,
            engine,
            params,
            idle: Mutex::new(vec![first]),
        })
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.slot.name()
    }

    /// One partition per record of `batch`, each below `partition_count`.
    ///
    /// # Errors
    /// See [`CallError`]. The failed instance is discarded; the handle
    /// stays usable and the next call gets a fresh instance.
    pub fn partition(
        &self,
        batch: &ColumnarBatch,
        partition_count: u32,
    ) -> Result<Vec<u32>, CallError> {
        let started = std::time::Instant::now();
        let result = self.partition_uncounted(batch, partition_count);
        self.slot.stats().record(started, &result);
        result
    }

    fn partition_uncounted(
        &self,
        batch: &ColumnarBatch,
        partition_count: u32,
    ) -> Result<Vec<u32>, CallError> {
        let current = self.slot.current();
        let mut instance = match self.checkout(&current) {
            Some(instance) => instance,
            None => PartitionerInstance::new(&self.engine, current, &self.params)?,
        };
        let result = instance.partition(batch, partition_count);
        if result.is_ok() {
            self.checkin(instance);
        }
        result
    }

    fn checkout(&self, current: &Arc<PluginVersion>) -> Option<PartitionerInstance> {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Instances of a replaced version are dropped as they are found.
        idle.retain(|i| Arc::ptr_eq(i.version(), current));
        idle.pop()
    }

    fn checkin(&self, instance: PartitionerInstance) {
        if !Arc::ptr_eq(instance.version(), &self.slot.current()) {
            return;
        }
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < limits::IDLE_INSTANCES_PER_HANDLE_MAX {
            idle.push(instance);
        }
    }
}
