//! The broker's views (`crate::views`): create, delete, look up, load at start, expire the
//! idle ephemeral ones, and remove the views of a deleted topic with it. Views and topics
//! share one namespace, changed under the broker's admin lock; a view file is
//! `<data.dir>/views/<name>.json`, written atomically.
//!
//! A view never outlives its source: deleting a topic removes its views' files before the
//! topic goes, and a view file whose source is missing at start is removed, so a topic made
//! later under the same name is never read through an old view.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use kafka_protocol::ResponseError;
use sluice_plugin_host::{FailurePolicy, Registry, View, ViewStats};

use super::{Applied, Partition, Recorded, Topic, TopicChange, TopicRegistry};
use crate::error::{KafkaError, ServerError};
use crate::files::{remove_file_logged, remove_stale_temps, write_durable};
use crate::limits;
use crate::views::{ViewSpec, build, check};

/// Directory of the persisted views, under `data.dir`.
pub(super) const VIEWS_DIR: &str = "views";

/// A live view.
#[derive(Debug)]
pub struct ViewTopic {
    /// What was configured.
    pub spec: ViewSpec,
    /// The source topic (deleting it removes the view, so this stays current).
    pub source: Arc<Topic>,
    /// The failure policy, parsed from `spec.on_error`.
    policy: FailurePolicy,
    /// The plugin chain; `None` while a plugin is missing (a view loaded at start whose
    /// plugin was deleted): bound again at the next fetch.
    bound: RwLock<Option<Arc<View>>>,
    /// Wall-clock ms of the last fetch (ephemeral views expire on it).
    last_used_ms: AtomicI64,
    /// Whether the last read through the view was refused because its owner lost a right
    /// (`note_refusal` logs the changes, not every refused fetch).
    refused: AtomicBool,
}

impl ViewTopic {
    /// Binds a view being created: BAD request errors name the stage at fault.
    pub fn bind(
        registry: &Registry,
        spec: ViewSpec,
        source: Arc<Topic>,
        now_ms: i64,
    ) -> Result<Self, KafkaError> {
        let policy = check(&spec)?;
        let view = build(registry, &spec, policy)?;
        Ok(Self::new(
            spec,
            source,
            policy,
            Some(Arc::new(view)),
            now_ms,
        ))
    }

    /// Binds a view loaded at start: a missing or failing plugin is logged, and binding is
    /// retried at the view's next fetch.
    pub fn bind_loaded(
        registry: &Registry,
        spec: ViewSpec,
        source: Arc<Topic>,
        now_ms: i64,
    ) -> Result<Self, KafkaError> {
        let policy = check(&spec)?;
        let view = match build(registry, &spec, policy) {
            Ok(view) => Some(Arc::new(view)),
            Err(e) => {
                tracing::warn!(view = %spec.name, "view not bound; its fetches fail until it is: {}", e.message);
                None
            }
        };
        Ok(Self::new(spec, source, policy, view, now_ms))
    }

    fn new(
        spec: ViewSpec,
        source: Arc<Topic>,
        policy: FailurePolicy,
        view: Option<Arc<View>>,
        now_ms: i64,
    ) -> Self {
        Self {
            spec,
            source,
            policy,
            bound: RwLock::new(view),
            last_used_ms: AtomicI64::new(now_ms),
            refused: AtomicBool::new(false),
        }
    }

    /// The same view over `source`'s new registry entry.
    fn with_source(&self, source: Arc<Topic>) -> Self {
        let bound = self.read_bound().clone();
        let last_used_ms = self.last_used_ms.load(std::sync::atomic::Ordering::Relaxed);
        Self::new(self.spec.clone(), source, self.policy, bound, last_used_ms)
    }

    /// The view's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The chain to run, binding it now if the view was loaded without it.
    pub fn view(&self, registry: &Registry) -> Result<Arc<View>, KafkaError> {
        if let Some(view) = self.read_bound().as_ref() {
            return Ok(Arc::clone(view));
        }
        let view = Arc::new(build(registry, &self.spec, self.policy)?);
        *self
            .bound
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&view));
        Ok(view)
    }

    /// Counters of the bound chain (zero while unbound).
    pub fn stats(&self) -> ViewStats {
        self.read_bound()
            .as_ref()
            .map(|v| v.stats())
            .unwrap_or_default()
    }

    /// Whether the plugin chain is bound (false while a stage's plugin is missing).
    pub fn is_bound(&self) -> bool {
        self.read_bound().is_some()
    }

    /// Notes whether a read through the view was refused (`authz::view_refusal`) and logs a
    /// change: WARN when its owner's reads start being refused, INFO when they are allowed
    /// again. A view without a recorded owner is refused per reader, so only at debug.
    pub fn note_refusal(&self, refusal: Option<&str>) {
        if self.spec.owner.is_none() {
            if let Some(why) = refusal {
                tracing::debug!(view = self.name(), "read refused: {why}");
            }
            return;
        }
        let was = self.refused.swap(refusal.is_some(), Ordering::Relaxed);
        match refusal {
            Some(why) if !was => tracing::warn!(
                view = self.name(),
                "fetches refused (TOPIC_AUTHORIZATION_FAILED) until the owner's rights are granted again: {why}"
            ),
            None if was => tracing::info!(
                view = self.name(),
                "the owner's rights are back; fetches allowed again"
            ),
            _ => {}
        }
    }

    /// Notes a fetch at `now_ms`.
    pub fn touch(&self, now_ms: i64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// An ephemeral view unused since `now_ms - VIEW_EPHEMERAL_IDLE_MS`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.spec.ephemeral
            && now_ms - self.last_used_ms.load(Ordering::Relaxed)
                > limits::VIEW_EPHEMERAL_IDLE_MS as i64
    }

    fn read_bound(&self) -> std::sync::RwLockReadGuard<'_, Option<Arc<View>>> {
        self.bound
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TopicRegistry {
    /// Looks a view up.
    pub fn view(&self, name: &str) -> Option<Arc<ViewTopic>> {
        self.views_read().get(name).cloned()
    }

    /// Every view, by name.
    pub fn views(&self) -> Vec<Arc<ViewTopic>> {
        self.views_read().values().cloned().collect()
    }

    /// A partition to read from under `name`: a topic's own, or a view's source partition
    /// with the view. Produce must not use this (views are read-only).
    pub fn read_partition(
        &self,
        name: &str,
        index: i32,
    ) -> Option<(Arc<Partition>, Option<Arc<ViewTopic>>)> {
        if let Some(partition) = self.partition(name, index) {
            return Some((partition, None));
        }
        let view = self.view(name)?;
        let partition = usize::try_from(index)
            .ok()
            .and_then(|i| view.source.partitions.get(i).cloned())?;
        Some((partition, Some(view)))
    }

    /// Creates a view of an existing topic: checks the name (a free topic name), the source,
    /// and binds every stage (each plugin's `init` runs with its parameters); then persists
    /// it unless ephemeral.
    pub fn create_view(&self, spec: ViewSpec) -> Result<Arc<ViewTopic>, KafkaError> {
        let admin = self.admin_lock();
        crate::topic_name::validate(&spec.name)?;
        if self.topic(&spec.name).is_some() || self.view(&spec.name).is_some() {
            return Err(KafkaError::new(
                ResponseError::TopicAlreadyExists,
                format!("a topic or view named {:?} already exists", spec.name),
            ));
        }
        self.check_no_collision(&spec.name)?;
        if self.views_read().len() >= limits::VIEWS_MAX {
            return Err(KafkaError::new(
                ResponseError::PolicyViolation,
                format!("VIEWS_MAX ({}) views exist already", limits::VIEWS_MAX),
            ));
        }
        let change = TopicChange::ViewCreated { spec };
        match self.commit_decided(admin, change)? {
            Applied::View(view) => Ok(view),
            other => unreachable!("a view creation applied as {other:?}"),
        }
    }

    /// Another broker's ephemeral view (its spec's JSON), made here too (a cluster: the
    /// consumer fetches each partition from its leader); one of the name already here is
    /// left as it is. Blocking: binding runs the plugins' `init`.
    ///
    /// # Errors
    /// The spec does not parse or is not ephemeral, or the registry refused it.
    pub fn put_ephemeral_view(&self, spec: &[u8]) -> Result<(), String> {
        let spec: crate::views::ViewSpec =
            serde_json::from_slice(spec).map_err(|e| format!("a view spec: {e}"))?;
        if !spec.ephemeral {
            return Err(format!(
                "view {}: only ephemeral views travel between brokers",
                spec.name
            ));
        }
        if self.view(&spec.name).is_some() {
            return Ok(());
        }
        let name = spec.name.clone();
        self.create_view(spec)
            .map(|_| ())
            .map_err(|e| format!("view {name}: {}", e.message))
    }

    /// Another broker's ephemeral view is done with: removed here (if it is here, and
    /// ephemeral).
    ///
    /// # Errors
    /// The registry refused it.
    pub fn remove_ephemeral_view(&self, name: &str) -> Result<(), String> {
        if self.view(name).is_some_and(|v| v.spec.ephemeral) {
            self.delete_view(name)
                .map_err(|e| format!("view {name}: {}", e.message))?;
        }
        Ok(())
    }

    /// Deletes a view (its file too). Fetches in flight finish on the chain they hold.
    pub fn delete_view(&self, name: &str) -> Result<(), KafkaError> {
        let admin = self.admin_lock();
        let change = TopicChange::ViewDeleted {
            name: name.to_owned(),
        };
        self.commit_decided(admin, change).map(drop)
    }

    /// Drops ephemeral views no fetch has used for `VIEW_EPHEMERAL_IDLE_MS`.
    pub fn expire_views(&self, now_ms: i64) {
        let expired: Vec<String> = self
            .views_read()
            .values()
            .filter(|v| v.expired(now_ms))
            .map(|v| v.name().to_owned())
            .collect();
        for name in expired {
            tracing::info!(view = %name, "ephemeral view idle; dropping it");
            self.views_write().remove(&name);
        }
    }

    /// Points the views reading `topic` at its new registry entry (after partitions were
    /// added), keeping their bound chains and idle clocks.
    pub(super) fn re_source_views(&self, topic: &Arc<Topic>) {
        let mut views = self.views_write();
        for view in views.values_mut() {
            if view.spec.source == topic.name {
                *view = Arc::new(view.with_source(topic.clone()));
            }
        }
    }

    /// The views reading `topic`.
    fn views_of(&self, topic: &str) -> Vec<String> {
        self.views_read()
            .values()
            .filter(|v| v.spec.source == topic)
            .map(|v| v.name().to_owned())
            .collect()
    }

    /// Removes the views reading `topic`, files and all when the files are the source
    /// (durably, before the topic goes): deleting a topic deletes its views. Applied with the
    /// topic's deletion, under the admin lock; returns their names. Fetches in flight finish
    /// on the chain they hold.
    pub(super) fn remove_views_of(&self, topic: &str, recorded: Recorded) -> Vec<String> {
        let names = self.views_of(topic);
        for name in &names {
            let removed = self.views_write().remove(name);
            if recorded == Recorded::InFiles && removed.is_some_and(|v| !v.spec.ephemeral) {
                remove_file_logged(&self.view_file(name));
            }
            tracing::info!(view = %name, topic, "deleted view: its source topic is being deleted");
        }
        names
    }

    /// Loads `<data.dir>/views/*.json` (after the topics). A view whose source is gone (a
    /// crash between removing a deleted topic's views and the topic) has its file removed: a
    /// topic made later under the name is never read through it. One whose file does not
    /// parse is logged and skipped; one whose plugin is missing is kept, its fetches failing
    /// until the plugin is deployed.
    pub(super) fn load_views(&self) -> Result<(), ServerError> {
        let dir = self.config.data_dir.join(VIEWS_DIR);
        sluice_storage::io::create_dir_durable(&sluice_storage::RealFs, &dir)
            .map_err(ServerError::io(format!("creating {}", dir.display())))?;
        remove_stale_temps(&dir);
        let entries = std::fs::read_dir(&dir)
            .map_err(ServerError::io(format!("reading {}", dir.display())))?;
        for entry in entries {
            let path = entry
                .map_err(ServerError::io("reading the views dir"))?
                .path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match self.load_view(&path) {
                Ok(view) => {
                    tracing::info!(view = view.name(), source = %view.spec.source, "loaded view");
                    self.views_write().insert(view.name().to_owned(), view);
                }
                Err(e) => tracing::error!(path = %path.display(), "view not loaded: {e}"),
            }
        }
        Ok(())
    }

    fn load_view(&self, path: &std::path::Path) -> Result<Arc<ViewTopic>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let spec: ViewSpec = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        if let Some(owner) = &spec.owner {
            sluice_security::principal::KafkaPrincipal::parse(owner)
                .map_err(|e| format!("owner {owner:?}: {e}"))?;
        }
        let Some(source) = self.topic(&spec.source) else {
            remove_file_logged(path);
            return Err(format!(
                "its source topic {:?} is gone (deleted): the view is removed",
                spec.source
            ));
        };
        ViewTopic::bind_loaded(&self.plugins, spec, source, self.now_ms())
            .map(Arc::new)
            .map_err(|e| e.message)
    }

    pub(super) fn persist_view(&self, spec: &ViewSpec) -> Result<(), KafkaError> {
        let path = self.view_file(&spec.name);
        let text = serde_json::to_string_pretty(spec).unwrap_or_default();
        write_durable(&path, text.as_bytes()).map_err(|e| {
            KafkaError::new(
                ResponseError::KafkaStorageError,
                format!("writing {}: {e}", path.display()),
            )
        })
    }

    pub(super) fn view_file(&self, name: &str) -> std::path::PathBuf {
        self.config
            .data_dir
            .join(VIEWS_DIR)
            .join(format!("{name}.json"))
    }

    fn views_read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, std::collections::BTreeMap<String, Arc<ViewTopic>>> {
        self.views
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn views_write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, std::collections::BTreeMap<String, Arc<ViewTopic>>> {
        self.views
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
