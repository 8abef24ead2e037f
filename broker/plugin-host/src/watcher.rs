//! Hot reload: watch the plugin directory and swap in any `<name>.wasm`
//! added or replaced there (by an operator's `cp`, or a deploy tool), in
//! well under a second. A file that does not load is logged and the working
//! version stays.

use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::error::RegistryError;
use crate::registry::{Registry, plugin_name};

/// Watching stops when this is dropped.
pub struct Watcher {
    _watcher: RecommendedWatcher,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watcher")
    }
}

impl Registry {
    /// Start watching the plugin directory.
    ///
    /// # Errors
    /// The OS refusing the watch.
    pub fn watch(self: &Arc<Self>) -> Result<Watcher, RegistryError> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let mut watcher =
            notify::recommended_watcher(tx).map_err(|e| RegistryError::Watch(e.to_string()))?;
        watcher
            .watch(self.dir(), RecursiveMode::NonRecursive)
            .map_err(|e| RegistryError::Watch(e.to_string()))?;
        let registry = Arc::downgrade(self);
        thread::Builder::new()
            .name("plugin-watcher".into())
            .spawn(move || run(&registry, &rx))
            .map_err(|e| RegistryError::Watch(e.to_string()))?;
        Ok(Watcher { _watcher: watcher })
    }
}

/// Ends when the watcher (the sender) or the registry is dropped.
fn run(registry: &Weak<Registry>, events: &mpsc::Receiver<notify::Result<notify::Event>>) {
    while let Ok(event) = events.recv() {
        let Some(registry) = registry.upgrade() else {
            return;
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!("plugin directory watch error: {e}");
                continue;
            }
        };
        for path in event.paths {
            apply(&registry, &event.kind, path);
        }
    }
}

fn apply(registry: &Registry, kind: &EventKind, path: PathBuf) {
    let Some(name) = plugin_name(&path) else {
        return;
    };
    // Our own reads show up as opens and closes; only a closed writer
    // means new bytes.
    if matches!(kind, EventKind::Access(a) if *a != AccessKind::Close(AccessMode::Write)) {
        return;
    }
    if registry.cluster_managed() {
        refuse_in_cluster(registry, &name, &path);
        return;
    }
    if !path.exists() {
        tracing::info!(plugin = %name, "plugin file removed");
        registry.forget(&name);
        return;
    }
    if let Err(e) = registry.load_file(&path) {
        tracing::warn!(plugin = %name, path = %path.display(), "keeping the working version: {e}");
    }
}

/// A cluster's broker: the file is the registry's own write (an install through the admin
/// API or from another broker), or an operator's change, which is refused: every broker
/// runs the version the cluster's metadata names.
fn refuse_in_cluster(registry: &Registry, name: &str, path: &std::path::Path) {
    let ours = registry.after_installs(|| {
        let current = registry.version(name).map(|v| v.sha256.clone());
        let on_disk = std::fs::read(path)
            .ok()
            .map(|bytes| crate::sha256_hex(&bytes));
        current == on_disk
    });
    if !ours {
        tracing::warn!(
            plugin = %name,
            path = %path.display(),
            "in a cluster, files changed in plugin.dir are not loaded or unloaded: every broker runs the plugin versions \
             the cluster's metadata names; deploy with `sluice plugin deploy` or PUT /v1/plugins/NAME (DELETE to remove) \
             on any broker"
        );
    }
}
