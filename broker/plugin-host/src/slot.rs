//! One plugin name's slot: its current version (swapped atomically on a reload), its call
//! statistics and its share of the instance pool. Below both the registry (which makes and
//! swaps slots) and the pool (whose handles hold one), so neither imports the other for it.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::compile::PluginVersion;
use crate::share::Share;
use crate::stats::CallStats;

/// The current version of one plugin name. Handles hold the slot, so a
/// swap reaches them and the slot's reference count says who uses it.
#[derive(Debug)]
pub struct PluginSlot {
    name: String,
    current: ArcSwap<PluginVersion>,
    /// Calls through every handle of this name, across version swaps.
    stats: CallStats,
    /// This plugin's part of the instance pool: its live and idle instances.
    share: Arc<Share>,
}

impl PluginSlot {
    pub(crate) fn new(name: String, version: Arc<PluginVersion>, share: Arc<Share>) -> Self {
        Self {
            name,
            current: ArcSwap::new(version),
            stats: CallStats::default(),
            share,
        }
    }

    /// Makes `version` the one new calls use; calls in flight finish on theirs.
    pub(crate) fn swap(&self, version: Arc<PluginVersion>) {
        self.current.store(version);
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn stats(&self) -> &CallStats {
        &self.stats
    }

    pub(crate) fn share(&self) -> &Arc<Share> {
        &self.share
    }

    /// The version new calls use.
    pub fn current(&self) -> Arc<PluginVersion> {
        self.current.load_full()
    }
}
