//! Who may hold plugin instances: the pool's [`Budget`] (one per engine, at most
//! `PLUGIN_INSTANCES_MAX` instances of all plugins) and each plugin's [`Share`] of it (at
//! most `plugin_instances_per_plugin_max` of that plugin, live or idle, across all of its
//! handles, plus its idle instances for reuse, at most `PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX`).
//!
//! Every instance carries a [`Lease`]; dropping the lease (after the instance) gives the
//! slot back to both counts, so an instance dropped anywhere (failed call, replaced
//! version, evicted) is accounted for. A caller whose plugin has its whole share in calls
//! waits up to `PLUGIN_INSTANCE_WAIT_MS` and then gets [`CallError::Busy`]; when the whole
//! pool is full, idle instances of any plugin are dropped to make room, and only if every
//! instance is in a call does the caller get [`CallError::PoolFull`].
//!
//! Lock order: a share's state, never two at once, and never while dropping an instance
//! (its lease locks the share again): evicted instances are dropped after unlocking.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::compile::PluginVersion;
use crate::error::CallError;
use crate::limits;

/// The whole pool: instances of every plugin, and the shares to reclaim idle ones from.
#[derive(Debug)]
pub(crate) struct Budget {
    /// Live + idle instances of every plugin; at most `PLUGIN_INSTANCES_MAX`.
    total: AtomicU32,
    /// Every plugin's share (dead ones pruned as new ones come).
    shares: Mutex<Vec<Weak<Share>>>,
    /// Live + idle instances of one plugin.
    per_plugin_max: u32,
}

impl Budget {
    pub(crate) fn new(per_plugin_max: u32) -> Arc<Self> {
        Arc::new(Self {
            total: AtomicU32::new(0),
            shares: Mutex::default(),
            per_plugin_max,
        })
    }

    /// A new share for plugin `name`.
    pub(crate) fn share(self: &Arc<Self>, name: &str) -> Arc<Share> {
        let share = Arc::new(Share {
            name: name.to_owned(),
            budget: Arc::clone(self),
            state: Mutex::default(),
            freed: Condvar::new(),
        });
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        shares.retain(|s| s.strong_count() > 0);
        shares.push(Arc::downgrade(&share));
        share
    }

    /// Instances of every plugin, live or idle.
    pub(crate) fn total(&self) -> u32 {
        self.total.load(Ordering::Acquire)
    }

    /// One more instance in the pool, dropping idle instances of any plugin if it is full.
    fn reserve(&self) -> bool {
        loop {
            let reserved = self
                .total
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                    (t < limits::PLUGIN_INSTANCES_MAX).then_some(t + 1)
                })
                .is_ok();
            if reserved {
                return true;
            }
            if !self.reclaim_one() {
                return false;
            }
        }
    }

    /// Drops the least recently used idle instance of the first share that has one.
    fn reclaim_one(&self) -> bool {
        let shares: Vec<Arc<Share>> = self
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        shares.iter().any(|share| {
            let evicted = share.lock().idle.pop_front();
            evicted.is_some() // dropped here, outside the lock: its lease frees the slot
        })
    }
}

/// One plugin's part of the pool.
#[derive(Debug)]
pub(crate) struct Share {
    name: String,
    budget: Arc<Budget>,
    state: Mutex<State>,
    /// Signalled when an instance of this plugin is freed or goes idle.
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Live + idle instances of this plugin.
    held: u32,
    /// Least recently used first.
    idle: VecDeque<Idle>,
}

/// An idle instance: initialised with `params`, of `version`.
struct Idle {
    version: Arc<PluginVersion>,
    params: Vec<(String, String)>,
    /// Declared before the lease: dropped first, so the slot is free when it is counted so.
    instance: Box<dyn Any + Send>,
    lease: Lease,
}

impl std::fmt::Debug for Idle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idle")
            .field("version", &self.version.sha256)
            .finish_non_exhaustive()
    }
}

/// The right to hold one instance; dropping it frees the slot in the share and the pool.
#[derive(Debug)]
pub(crate) struct Lease {
    share: Arc<Share>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.share.budget.total.fetch_sub(1, Ordering::AcqRel);
        let mut state = self.share.lock();
        state.held -= 1;
        drop(state);
        self.share.freed.notify_one();
    }
}

/// What [`Share::checkout`] found.
pub(crate) enum Checkout<I> {
    /// An idle instance of the version and parameters asked for.
    Idle(I, Lease),
    /// Room for a new instance.
    New(Lease),
}

/// Live and idle instances of one plugin (for tests and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceCounts {
    /// Live + idle: what counts against the plugin's share.
    pub held: u32,
    pub idle: u32,
}

impl Share {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle instance of `version` made with `params` if there is one (`reuse`), else
    /// the right to make one, waiting up to `PLUGIN_INSTANCE_WAIT_MS` for the share.
    ///
    /// # Errors
    /// [`CallError::Busy`]: the plugin's whole share is in calls. [`CallError::PoolFull`]:
    /// every instance of the pool is in a call.
    pub(crate) fn checkout<I: Send + 'static>(
        self: &Arc<Self>,
        version: &Arc<PluginVersion>,
        params: &[(String, String)],
        reuse: bool,
    ) -> Result<Checkout<I>, CallError> {
        let wait = Duration::from_millis(limits::PLUGIN_INSTANCE_WAIT_MS);
        let deadline = Instant::now() + wait;
        let mut state = self.lock();
        loop {
            // Instances of a replaced version are dropped as they are found.
            let (current, evicted): (VecDeque<Idle>, VecDeque<Idle>) =
                std::mem::take(&mut state.idle)
                    .into_iter()
                    .partition(|i| Arc::ptr_eq(&i.version, version));
            state.idle = current;
            if !evicted.is_empty() {
                // Their leases lock the state: drop them unlocked, then look again.
                drop(state);
                drop(evicted);
                state = self.lock();
                continue;
            }
            let found = reuse
                .then(|| state.idle.iter().rposition(|i| i.params == params))
                .flatten();
            if let Some(i) = found.and_then(|i| state.idle.remove(i)) {
                drop(state);
                let Idle {
                    instance, lease, ..
                } = i;
                return match instance.downcast::<I>() {
                    Ok(instance) => Ok(Checkout::Idle(*instance, lease)),
                    // Another kind under the same name: make a fresh one in its slot.
                    Err(other) => {
                        drop(other);
                        Ok(Checkout::New(lease))
                    }
                };
            }
            if state.held < self.budget.per_plugin_max {
                state.held += 1;
                drop(state);
                return self.lease_new();
            }
            // The share is full: an idle instance of other parameters gives up its slot.
            if let Some(Idle {
                instance, lease, ..
            }) = state.idle.pop_front()
            {
                drop(state);
                drop(instance);
                return Ok(Checkout::New(lease));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CallError::Busy {
                    plugin: self.name.clone(),
                    max: self.budget.per_plugin_max,
                    waited_ms: limits::PLUGIN_INSTANCE_WAIT_MS,
                });
            }
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The share has counted one more instance; now the pool.
    fn lease_new<I>(self: &Arc<Self>) -> Result<Checkout<I>, CallError> {
        if self.budget.reserve() {
            return Ok(Checkout::New(Lease {
                share: Arc::clone(self),
            }));
        }
        self.lock().held -= 1;
        self.freed.notify_one();
        Err(CallError::PoolFull {
            plugin: self.name.clone(),
            max: limits::PLUGIN_INSTANCES_MAX,
        })
    }

    /// Keep `instance` (of `version`, made with `params`) for reuse, dropping the least
    /// recently used idle instance past `PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX`.
    pub(crate) fn checkin<I: Send + 'static>(
        &self,
        version: Arc<PluginVersion>,
        params: &[(String, String)],
        instance: I,
        lease: Lease,
    ) {
        let idle = Idle {
            version,
            params: params.to_vec(),
            instance: Box::new(instance),
            lease,
        };
        let mut state = self.lock();
        let evicted = if state.idle.len() >= limits::PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX as usize {
            state.idle.pop_front()
        } else {
            None
        };
        state.idle.push_back(idle);
        drop(state);
        drop(evicted);
        self.freed.notify_one();
    }

    /// Idle instances of `version` made with `params`.
    pub(crate) fn idle_with(
        &self,
        version: &Arc<PluginVersion>,
        params: &[(String, String)],
    ) -> usize {
        self.lock()
            .idle
            .iter()
            .filter(|i| Arc::ptr_eq(&i.version, version) && i.params == params)
            .count()
    }

    pub(crate) fn counts(&self) -> InstanceCounts {
        let state = self.lock();
        InstanceCounts {
            held: state.held,
            idle: u32::try_from(state.idle.len()).unwrap_or(u32::MAX),
        }
    }
}
