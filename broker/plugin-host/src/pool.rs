//! Shareable, pooled handles for every kind: [`Partitioner`], [`Filter`], [`Transform`]
//! and [`Validator`], each over one generic [`Pool`] of its kind's [`Instance`]s. Cheap to
//! share (`Arc` it, one per topic, per view and partition, or per view); each call checks
//! out an idle instance of the plugin's current version made with the handle's parameters,
//! or makes one, under the plugin's [`crate::share::Share`] of the instance pool. A failed
//! instance is discarded, a good one goes back to the plugin's idle instances (shared by all
//! of its handles, bounded per plugin). So a steady caller pays instantiation once, calls in
//! flight finish on the version they started with, new calls pick up a hot reload, and many
//! handles of one plugin hold no more than its share.

use std::sync::Arc;

use crate::batch::ColumnarBatch;
use crate::call::{Instance, Kind};
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::filter::FilterKind;
use crate::partitioner::PartitionerKind;
use crate::share::Checkout;
use crate::slot::PluginSlot;
use crate::stats::CallStart;
use crate::transform::{Routed, TransformKind};
use crate::validator::{Refusal, ValidatorKind};

/// A plugin name and its parameters; its instances are in the plugin's share. Holding one
/// marks the plugin in use for the registry.
pub(crate) struct Pool<K> {
    slot: Arc<PluginSlot>,
    engine: PluginEngine,
    params: Vec<(String, String)>,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K: Kind> Pool<K> {
    /// Make one instance now (never reusing an idle one), so bad parameters fail at
    /// configuration time rather than on the first call; it then goes idle.
    pub(crate) fn new(
        slot: Arc<PluginSlot>,
        engine: PluginEngine,
        params: Vec<(String, String)>,
    ) -> Result<Self, CallError> {
        let pool = Self {
            slot,
            engine,
            params,
            _kind: std::marker::PhantomData,
        };
        pool.run(false, |_| Ok(()))?;
        Ok(pool)
    }

    /// Run `f` on an instance of the current version with a batch of `records_in` records;
    /// keep the instance only if `f` succeeded. Counted in the plugin's stats, with the
    /// records `records_out` says the answer holds.
    fn call<T>(
        &self,
        records_in: usize,
        f: impl FnOnce(&mut Instance<K>) -> Result<T, CallError>,
        records_out: impl FnOnce(&T) -> usize,
    ) -> Result<T, CallError> {
        let started = CallStart::now();
        let result = self.run(true, f);
        self.slot
            .stats()
            .record(started, &result, (records_in, records_out));
        result
    }

    fn run<T>(
        &self,
        reuse: bool,
        f: impl FnOnce(&mut Instance<K>) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let current = self.slot.current();
        let share = self.slot.share();
        let checkout = share.checkout::<Instance<K>>(&current, &self.params, reuse)?;
        let (mut instance, lease) = match checkout {
            Checkout::Idle(instance, lease) => (instance, lease),
            // A failed instantiation drops the lease after the half-made instance.
            Checkout::New(lease) => (Instance::new(&self.engine, current, &self.params)?, lease),
        };
        let result = f(&mut instance);
        let version = Arc::clone(instance.version());
        if result.is_ok() && Arc::ptr_eq(&version, &self.slot.current()) && !instance.grown_large()
        {
            share.checkin(version, &self.params, instance, lease);
        } else {
            // The instance first: its slot is free before the lease says so.
            drop(instance);
            drop(lease);
        }
        result
    }

    /// Idle instances of the current version with this handle's parameters.
    fn idle_count(&self) -> usize {
        self.slot
            .share()
            .idle_with(&self.slot.current(), &self.params)
    }
}

impl<K> std::fmt::Debug for Pool<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("plugin", &self.slot.name())
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// A partitioner as a topic uses it: a plugin name and its parameters. Make it with
/// [`crate::Registry::partitioner`]. Holding one marks the plugin in use for the registry.
#[derive(Debug)]
pub struct Partitioner {
    pool: Pool<PartitionerKind>,
}

impl Partitioner {
    pub(crate) fn new(pool: Pool<PartitionerKind>) -> Self {
        Self { pool }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.pool.slot.name()
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
        self.pool.call(
            batch.len(),
            |i| i.partition(batch, partition_count),
            Vec::len,
        )
    }

    /// Idle instances ready for the next call (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle_count()
    }
}

/// A filter as a view uses it. Make it with [`crate::Registry::filter`].
#[derive(Debug)]
pub struct Filter {
    pool: Pool<FilterKind>,
}

impl Filter {
    pub(crate) fn new(pool: Pool<FilterKind>) -> Self {
        Self { pool }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.pool.slot.name()
    }

    /// Which records of `batch` to keep, one `bool` per record.
    ///
    /// # Errors
    /// See [`CallError`]. The failed instance is discarded; the handle
    /// stays usable and the next call gets a fresh instance.
    pub fn filter(&self, batch: &ColumnarBatch) -> Result<Vec<bool>, CallError> {
        self.pool.call(
            batch.len(),
            |i| i.filter(batch),
            |keep| keep.iter().filter(|&&k| k).count(),
        )
    }

    /// Idle instances ready for the next call (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle_count()
    }
}

/// A transform as a view uses it. Make it with
/// [`crate::Registry::transform`].
#[derive(Debug)]
pub struct Transform {
    pool: Pool<TransformKind>,
}

impl Transform {
    pub(crate) fn new(pool: Pool<TransformKind>) -> Self {
        Self { pool }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.pool.slot.name()
    }

    /// The transformed batch; see [`crate::TransformInstance::transform`].
    ///
    /// # Errors
    /// See [`CallError`]; the failed instance is discarded.
    pub fn transform(&self, batch: &ColumnarBatch) -> Result<ColumnarBatch, CallError> {
        self.pool
            .call(batch.len(), |i| i.transform(batch), ColumnarBatch::len)
    }

    /// The transformed batch routed to `outputs`, as a materialized transform writes it;
    /// see [`crate::TransformInstance::transform_routed`].
    ///
    /// # Errors
    /// See [`CallError`]; the failed instance is discarded.
    pub fn transform_routed(
        &self,
        batch: &ColumnarBatch,
        outputs: &[&str],
    ) -> Result<Routed, CallError> {
        self.pool.call(
            batch.len(),
            |i| i.transform_routed(batch, outputs),
            |r| r.batch.len(),
        )
    }

    /// Idle instances ready for the next call (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle_count()
    }
}

/// A validator as a topic uses it. Make it with [`crate::Registry::validator`].
#[derive(Debug)]
pub struct Validator {
    pool: Pool<ValidatorKind>,
}

impl Validator {
    pub(crate) fn new(pool: Pool<ValidatorKind>) -> Self {
        Self { pool }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.pool.slot.name()
    }

    /// The records of `batch` the plugin refuses, in order (empty: all accepted).
    ///
    /// # Errors
    /// See [`CallError`]; the failed instance is discarded.
    pub fn validate(&self, batch: &ColumnarBatch) -> Result<Vec<Refusal>, CallError> {
        self.pool.call(
            batch.len(),
            |i| i.validate(batch),
            |refused| batch.len() - refused.len(),
        )
    }

    /// Idle instances ready for the next call (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle_count()
    }
}
