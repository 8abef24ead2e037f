//! The plugin registry: owns the plugin directory (`<name>.wasm` files; the
//! compiled artifacts are in `PluginConfig::cache_dir`, outside it), installs,
//! lists, describes and deletes plugins, and swaps new versions in atomically.
//! Every file change goes through `sluice_storage::io::durable`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use sluice_storage::io::{self as storage_io, RealFs};

use crate::compile::{self, PluginKind, PluginVersion};
use crate::config::PluginConfig;
use crate::engine::PluginEngine;
use crate::error::RegistryError;
use crate::limits;
use crate::plugin_log::LogPage;
use crate::pool::{Filter, Partitioner, Pool, Transform, Validator};

use crate::share::{Budget, InstanceCounts};
use crate::slot::PluginSlot;
use crate::stats::PluginStats;

/// What `list` and `describe` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: String,
    pub kind: PluginKind,
    pub wit_version: String,
    pub sha256: String,
    pub size_bytes: u64,
    /// Whether the component imports WASI (deny-by-default, `docs/plugins.md`).
    pub imports_wasi: bool,
    /// Handles (topics) using the plugin now.
    pub users: usize,
}

/// The SHA-256 of `bytes`, lowercase hex (how digests are written here): what a broker sending
/// an upload to another says of the bytes it sends.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::cache::hex(&sha2::Sha256::digest(bytes))
}

/// Whether an install may replace a plugin of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// Make the plugin or replace its current version.
    NewOrReplace,
    /// Make the plugin only if no plugin has the name.
    NewOnly,
}

/// The registry. Share it as `Arc<Registry>`.
#[derive(Debug)]
pub struct Registry {
    engine: PluginEngine,
    /// Instances of every plugin held now, and each plugin's share of them.
    budget: Arc<Budget>,
    dir: PathBuf,
    slots: RwLock<BTreeMap<String, Arc<PluginSlot>>>,
    /// Held by an install from its existence check to its swap (`Registry::install_as`).
    installing: Mutex<()>,
    /// Set in a cluster ([`Registry::manage_from_cluster`]): the directory watcher no longer
    /// loads or forgets files, since every broker must run the versions the cluster's
    /// metadata names.
    cluster_managed: std::sync::atomic::AtomicBool,
}

/// Files that failed to load at open; the broker logs them and goes on.
pub type LoadFailures = Vec<(PathBuf, RegistryError)>;

impl Registry {
    /// Open (creating it if needed) the plugin directory and load every
    /// `<name>.wasm` in it, using the compile cache.
    ///
    /// # Errors
    /// An invalid config or an unusable directory. A plugin file that does
    /// not load is reported in the failures, not fatal.
    pub fn open(config: PluginConfig) -> Result<(Arc<Self>, LoadFailures), RegistryError> {
        let dir = config.dir.clone();
        storage_io::create_dir_durable(&RealFs, &dir).map_err(RegistryError::io(&dir))?;
        storage_io::remove_stale_temps(&RealFs, &dir).map_err(RegistryError::io(&dir))?;
        let old_cache = dir.join(".cache");
        if old_cache.exists() {
            tracing::info!(dir = %old_cache.display(), "compiled plugins are no longer read from plugin.dir; this old cache can be deleted");
        }
        let registry = Arc::new(Self {
            budget: Budget::new(config.instances_per_plugin_max),
            engine: PluginEngine::new(config)?,
            dir,
            slots: RwLock::default(),
            installing: Mutex::default(),
            cluster_managed: std::sync::atomic::AtomicBool::new(false),
        });
        let mut failures = Vec::new();
        for entry in std::fs::read_dir(&registry.dir).map_err(RegistryError::io(&registry.dir))? {
            let path = entry.map_err(RegistryError::io(&registry.dir))?.path();
            if plugin_name(&path).is_some()
                && let Err(e) = registry.load_file(&path)
            {
                failures.push((path, e));
            }
        }
        registry.retain_cache();
        Ok((registry, failures))
    }

    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn cache_dir(&self) -> Option<&Path> {
        self.engine.config.cache_dir.as_deref()
    }

    /// Removes compiled plugins no loaded plugin uses (logged on failure: the cache only
    /// saves compiles).
    fn retain_cache(&self) {
        let Some(dir) = self.cache_dir() else { return };
        let live = self
            .slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|slot| slot.current().sha256.clone())
            .collect();
        if let Err(e) = crate::cache::retain(dir, &live) {
            tracing::warn!(dir = %dir.display(), "cannot clean the compiled plugin cache: {e}");
        }
    }

    /// Validate, compile and store a plugin under `name`, replacing any
    /// previous version atomically. Invalid bytes never replace a working
    /// version: everything is checked before the file is written.
    ///
    /// # Errors
    /// Bad name, too large, not wasm, wrong world, unprovided imports, I/O.
    pub fn install(&self, name: &str, bytes: &[u8]) -> Result<PluginInfo, RegistryError> {
        self.install_as(name, bytes, Install::NewOrReplace)
    }

    /// As [`Registry::install`], but `Install::NewOnly` refuses a name that exists
    /// ([`RegistryError::Exists`]) at the moment it would be written: a caller allowed to
    /// make plugins but not to alter this one can never replace it, even racing another
    /// install of the same name.
    ///
    /// # Errors
    /// As [`Registry::install`], and `Exists`.
    pub fn install_as(
        &self,
        name: &str,
        bytes: &[u8],
        mode: Install,
    ) -> Result<PluginInfo, RegistryError> {
        check_name(name)?;
        let component = compile::to_component(&self.engine, bytes)?;
        let version = compile::load(&self.engine, name, &component, self.cache_dir())?;
        // One install writes and swaps at a time, so the existence check below holds until
        // the new version is in.
        let _installing = self
            .installing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = self
            .slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
        {
            if mode == Install::NewOnly {
                return Err(RegistryError::Exists(name.to_owned()));
            }
            check_same_kind(slot, &version)?;
        }
        let path = self.dir.join(format!("{name}.wasm"));
        storage_io::write_durable(&RealFs, &path, &component).map_err(RegistryError::io(path))?;
        let info = self.swap_in(version)?;
        self.retain_cache();
        Ok(info)
    }

    /// Load (or reload) `<dir>/<name>.wasm`; a file whose sha256 is the
    /// current version's is left alone. Used at open and by the watcher.
    ///
    /// # Errors
    /// As [`Registry::install`].
    pub fn load_file(&self, path: &Path) -> Result<Option<PluginInfo>, RegistryError> {
        let name = plugin_name(path)
            .ok_or_else(|| RegistryError::InvalidName(path.display().to_string()))?;
        let bytes = std::fs::read(path).map_err(RegistryError::io(path))?;
        let component = compile::to_component(&self.engine, &bytes)?;
        let sha256 = crate::cache::hex(&sha2::Sha256::digest(&component));
        if self
            .slot(&name)
            .is_some_and(|slot| slot.current().sha256 == sha256)
        {
            return Ok(None);
        }
        let version = compile::load(&self.engine, &name, &component, self.cache_dir())?;
        let info = self.swap_in(version)?;
        tracing::info!(plugin = %name, sha256 = %info.sha256, kind = %info.kind, "plugin loaded");
        Ok(Some(info))
    }

    /// Make `version` the current one of its slot (a new slot for a new
    /// name). A version of another kind never replaces one that has users:
    /// their handles were bound to the old kind ([`check_same_kind`]).
    fn swap_in(&self, version: PluginVersion) -> Result<PluginInfo, RegistryError> {
        let name = version.name.clone();
        let version = Arc::new(version);
        let mut slots = self
            .slots
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = slots.get(&name) {
            check_same_kind(slot, &version)?;
        }
        let slot = slots.entry(name.clone()).or_insert_with(|| {
            Arc::new(PluginSlot::new(
                name.clone(),
                Arc::clone(&version),
                self.budget.share(&name),
            ))
        });
        slot.swap(version);
        Ok(info(slot))
    }

    fn slot(&self, name: &str) -> Option<Arc<PluginSlot>> {
        self.slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The current version of `name`, e.g. to make a
    /// [`crate::FilterInstance`] of it.
    pub fn version(&self, name: &str) -> Option<Arc<PluginVersion>> {
        self.slot(name).map(|slot| slot.current())
    }

    /// Every plugin, by name.
    pub fn list(&self) -> Vec<PluginInfo> {
        self.slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(info)
            .collect()
    }

    pub fn describe(&self, name: &str) -> Option<PluginInfo> {
        self.slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .map(info)
    }

    /// Call statistics of every loaded plugin, by name (for `/metrics`).
    pub fn stats(&self) -> Vec<PluginStats> {
        self.slots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .map(|slot| slot.stats().snapshot(slot.name(), slot.current().kind))
            .collect()
    }

    /// Live and idle instances of one plugin, across its handles.
    pub fn instances(&self, name: &str) -> Option<InstanceCounts> {
        self.slot(name).map(|slot| slot.share().counts())
    }

    /// Instances of every plugin, live or idle (at most `PLUGIN_INSTANCES_MAX`).
    pub fn instances_total(&self) -> u32 {
        self.budget.total()
    }

    /// Call statistics of one plugin.
    pub fn stats_of(&self, name: &str) -> Option<PluginStats> {
        self.slot(name)
            .map(|slot| slot.stats().snapshot(slot.name(), slot.current().kind))
    }

    /// Remove a plugin and its file. A plugin in use (a topic holds a
    /// handle) is refused unless `force`; forced, the handles keep running
    /// the last version until they are dropped.
    ///
    /// # Errors
    /// Not found, in use, I/O.
    pub fn delete(&self, name: &str, force: bool) -> Result<(), RegistryError> {
        let mut slots = self
            .slots
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = slots
            .get(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_owned()))?;
        let users = Arc::strong_count(slot) - 1;
        if users > 0 && !force {
            return Err(RegistryError::InUse {
                name: name.to_owned(),
                users,
            });
        }
        let path = self.dir.join(format!("{name}.wasm"));
        storage_io::remove_file_durable(&RealFs, &path).map_err(RegistryError::io(path))?;
        slots.remove(name);
        drop(slots);
        self.engine.logs.remove(name);
        self.retain_cache();
        Ok(())
    }

    /// Up to `max` lines of `name`'s own log after line `after` (0: from the oldest kept);
    /// `None` if no such plugin is installed.
    pub fn logs(&self, name: &str, after: u64, max: usize) -> Option<LogPage> {
        self.describe(name)?;
        Some(match self.engine.logs.get(name) {
            Some(log) => log.read(after, max),
            // Installed, but no instance has been made yet: nothing logged.
            None => LogPage {
                lines: Vec::new(),
                first_seq: 0,
                next_after: after,
                dropped: 0,
            },
        })
    }

    /// From now on plugins change only through [`Registry::install_as`] and
    /// [`Registry::delete`] (a cluster's broker, whose plugins are the metadata's): a file
    /// an operator adds, replaces or removes in the directory is refused by the watcher,
    /// with a log line saying how to deploy instead.
    pub fn manage_from_cluster(&self) {
        self.cluster_managed
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn cluster_managed(&self) -> bool {
        self.cluster_managed
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits for an install in progress (its file written, its version not yet swapped in)
    /// and runs `f`.
    pub(crate) fn after_installs<T>(&self, f: impl FnOnce() -> T) -> T {
        let _installing = self
            .installing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f()
    }

    /// Forget a plugin whose file disappeared (watcher). Handles keep their
    /// last version.
    pub(crate) fn forget(&self, name: &str) {
        self.slots
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name);
        self.engine.logs.remove(name);
    }

    /// A filter handle for a view: `name` with `params`. One instance is
    /// made and initialised now, so bad parameters are reported when the
    /// view is configured.
    ///
    /// # Errors
    /// Not found, not a filter, `init` failing.
    pub fn filter(&self, name: &str, params: &[(String, String)]) -> Result<Filter, RegistryError> {
        let slot = self.slot_of_kind(name, params, PluginKind::Filter)?;
        Ok(Filter::new(Pool::new(
            slot,
            self.engine.clone(),
            params.to_vec(),
        )?))
    }

    /// A transform handle for a view; as [`Registry::filter`].
    ///
    /// # Errors
    /// Not found, not a transform, `init` failing.
    pub fn transform(
        &self,
        name: &str,
        params: &[(String, String)],
    ) -> Result<Transform, RegistryError> {
        let slot = self.slot_of_kind(name, params, PluginKind::Transform)?;
        Ok(Transform::new(Pool::new(
            slot,
            self.engine.clone(),
            params.to_vec(),
        )?))
    }

    /// One stage of a view: a filter or a transform handle, whichever
    /// `name` is.
    ///
    /// # Errors
    /// Not found, a partitioner, `init` failing.
    pub fn stage(
        &self,
        name: &str,
        params: &[(String, String)],
    ) -> Result<crate::view::Stage, RegistryError> {
        let kind = self
            .slot(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_owned()))?
            .current()
            .kind;
        match kind {
            PluginKind::Transform => Ok(crate::view::Stage::Transform(std::sync::Arc::new(
                self.transform(name, params)?,
            ))),
            _ => Ok(crate::view::Stage::Filter(std::sync::Arc::new(
                self.filter(name, params)?,
            ))),
        }
    }

    fn slot_of_kind(
        &self,
        name: &str,
        params: &[(String, String)],
        expected: PluginKind,
    ) -> Result<Arc<PluginSlot>, RegistryError> {
        check_params(name, params)?;
        let slot = self
            .slot(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_owned()))?;
        let kind = slot.current().kind;
        if kind != expected {
            return Err(RegistryError::WrongKind {
                name: name.to_owned(),
                expected: expected.as_str(),
                actual: kind.as_str(),
            });
        }
        Ok(slot)
    }

    /// A partitioner handle for a topic: `name` with `params` (from
    /// `sluice.partitioner.params`). One instance is made and initialised
    /// now, so bad parameters are reported at configuration time.
    ///
    /// # Errors
    /// Not found, not a partitioner, `init` failing.
    pub fn partitioner(
        &self,
        name: &str,
        params: &[(String, String)],
    ) -> Result<Partitioner, RegistryError> {
        let slot = self.slot_of_kind(name, params, PluginKind::Partitioner)?;
        Ok(Partitioner::new(Pool::new(
            slot,
            self.engine.clone(),
            params.to_vec(),
        )?))
    }

    /// A validator handle for a topic: `name` with `params` (from
    /// `sluice.validator.params`); as [`Registry::partitioner`].
    ///
    /// # Errors
    /// Not found, not a validator, `init` failing.
    pub fn validator(
        &self,
        name: &str,
        params: &[(String, String)],
    ) -> Result<Validator, RegistryError> {
        let slot = self.slot_of_kind(name, params, PluginKind::Validator)?;
        Ok(Validator::new(Pool::new(
            slot,
            self.engine.clone(),
            params.to_vec(),
        )?))
    }
}

use sha2::Digest as _;

/// `slot` is borrowed from the map: the map holds one reference, every
/// other is a handle.
fn info(slot: &Arc<PluginSlot>) -> PluginInfo {
    let v = slot.current();
    PluginInfo {
        name: v.name.clone(),
        kind: v.kind,
        wit_version: v.wit_version.clone(),
        sha256: v.sha256.clone(),
        size_bytes: v.size_bytes,
        imports_wasi: v.imports_wasi,
        users: Arc::strong_count(slot) - 1,
    }
}

/// `<dir>/<name>.wasm` -> `name`, for names we accept; hidden and
/// temporary files are not plugins.
pub(crate) fn plugin_name(path: &Path) -> Option<String> {
    if path.extension()? != "wasm" {
        return None;
    }
    let name = path.file_stem()?.to_str()?;
    check_name(name).ok().map(|()| name.to_owned())
}

fn check_name(name: &str) -> Result<(), RegistryError> {
    let ok = !name.is_empty()
        && name.len() <= limits::PLUGIN_NAME_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(RegistryError::InvalidName(name.to_owned()))
    }
}

/// `version` may replace `slot`'s current version: same kind, or a slot
/// no handle holds (`slot` is the registry's own reference).
fn check_same_kind(slot: &Arc<PluginSlot>, version: &PluginVersion) -> Result<(), RegistryError> {
    let current = slot.current().kind;
    let users = Arc::strong_count(slot) - 1;
    if current == version.kind || users == 0 {
        return Ok(());
    }
    Err(RegistryError::KindChange {
        name: version.name.clone(),
        current: current.as_str(),
        new: version.kind.as_str(),
        users,
    })
}

fn check_params(name: &str, params: &[(String, String)]) -> Result<(), RegistryError> {
    let too_long = params
        .iter()
        .any(|(k, v)| k.len() > limits::PARAM_BYTES_MAX || v.len() > limits::PARAM_BYTES_MAX);
    if params.len() > limits::PARAMS_MAX || too_long {
        return Err(RegistryError::Call(
            crate::error::CallError::InvalidParams {
                plugin: name.to_owned(),
                message: format!(
                    "at most {} parameters of at most {} bytes each",
                    limits::PARAMS_MAX,
                    limits::PARAM_BYTES_MAX
                ),
            },
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_are_safe_file_names() {
        for good in ["murmur2", "json-field", "a_b", "x1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "a".repeat(limits::PLUGIN_NAME_BYTES_MAX + 1);
        for bad in [
            "",
            "../x",
            "a/b",
            "Caps",
            "-flag",
            ".hidden",
            "a.b",
            long.as_str(),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            plugin_name(Path::new("/d/murmur2.wasm")).as_deref(),
            Some("murmur2")
        );
        assert_eq!(plugin_name(Path::new("/d/.murmur2.wasm.1.tmp")), None);
        assert_eq!(plugin_name(Path::new("/d/.cache")), None);
    }
}
