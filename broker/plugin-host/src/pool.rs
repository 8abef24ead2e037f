//! Shareable, pooled handles for the fetch-time kinds: [`Filter`] and
//! [`Transform`]. Like [`crate::Partitioner`]: cheap to share (`Arc` it,
//! one per view and partition, or per view), each call checks out an idle
//! instance of the plugin's current version or makes one, a failed
//! instance is discarded, a good one goes back to the pool. So a steady
//! consumer pays instantiation once, calls in flight finish on the version
//! they started with, and new calls pick up a hot reload.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::batch::ColumnarBatch;
use crate::compile::PluginVersion;
use crate::engine::PluginEngine;
use crate::error::CallError;
use crate::filter::FilterInstance;
use crate::limits;
use crate::registry::PluginSlot;
use crate::transform::TransformInstance;

/// What the pool needs of an instance.
pub(crate) trait Pooled: Sized {
    fn create(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError>;
    fn version(&self) -> &Arc<PluginVersion>;
}

impl Pooled for FilterInstance {
    fn create(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        Self::new(engine, version, params)
    }
    fn version(&self) -> &Arc<PluginVersion> {
        self.version()
    }
}

impl Pooled for TransformInstance {
    fn create(
        engine: &PluginEngine,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> Result<Self, CallError> {
        Self::new(engine, version, params)
    }
    fn version(&self) -> &Arc<PluginVersion> {
        self.version()
    }
}

/// A plugin name, its parameters and the idle instances of it. Holding
/// one marks the plugin in use for the registry.
pub(crate) struct Pool<I> {
    slot: Arc<PluginSlot>,
    engine: PluginEngine,
    params: Vec<(String, String)>,
    idle: Mutex<Vec<I>>,
}

impl<I: Pooled> Pool<I> {
    /// Make one instance now, so bad parameters fail at configuration
    /// time rather than on the first fetch.
    pub(crate) fn new(
        slot: Arc<PluginSlot>,
        engine: PluginEngine,
        params: Vec<(String, String)>,
    ) -> Result<Self, CallError> {
        let first = I::create(&engine, slot.current(), &params)?;
        Ok(Self {
            slot,
            engine,
            params,
            idle: Mutex::new(vec![first]),
        })
    }

    /// Run `f` on an instance of the current version; keep the instance
    /// only if `f` succeeded. Counted in the plugin's stats.
    fn call<T>(&self, f: impl FnOnce(&mut I) -> Result<T, CallError>) -> Result<T, CallError> {
        let started = Instant::now();
        let result = self.call_uncounted(f);
        self.slot.stats().record(started, &result);
        result
    }

    fn call_uncounted<T>(
        &self,
        f: impl FnOnce(&mut I) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let current = self.slot.current();
        let mut instance = match self.checkout(&current) {
            Some(instance) => instance,
            None => I::create(&self.engine, current, &self.params)?,
        };
        let result = f(&mut instance);
        if result.is_ok() {
            self.checkin(instance);
        }
        result
    }

    fn checkout(&self, current: &Arc<PluginVersion>) -> Option<I> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // Instances of a replaced version are dropped as they are found.
        idle.retain(|i| Arc::ptr_eq(i.version(), current));
        idle.pop()
    }

    fn checkin(&self, instance: I) {
        if !Arc::ptr_eq(instance.version(), &self.slot.current()) {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < limits::IDLE_INSTANCES_PER_HANDLE_MAX {
            idle.push(instance);
        }
    }

    fn idle_count(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl<I> std::fmt::Debug for Pool<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("plugin", &self.slot.name())
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// A filter as a view uses it. Make it with [`crate::Registry::filter`].
#[derive(Debug)]
pub struct Filter {
    pool: Pool<FilterInstance>,
}

impl Filter {
    pub(crate) fn new(pool: Pool<FilterInstance>) -> Self {
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
        self.pool.call(|i| i.filter(batch))
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
    pool: Pool<TransformInstance>,
}

impl Transform {
    pub(crate) fn new(pool: Pool<TransformInstance>) -> Self {
        Self { pool }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.pool.slot.name()
    }

    /// The transformed batch; see [`TransformInstance::transform`].
    ///
    /// # Errors
    /// See [`CallError`]; the failed instance is discarded.
    pub fn transform(&self, batch: &ColumnarBatch) -> Result<ColumnarBatch, CallError> {
        self.pool.call(|i| i.transform(batch))
    }

    /// Idle instances ready for the next call (for tests and metrics).
    pub fn idle_instances(&self) -> usize {
        self.pool.idle_count()
    }
}
