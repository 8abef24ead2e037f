//! The registry's seam for the metadata log. Every change to the topics and views is
//! decided, recorded and applied:
//! - **decide** (`create_topic`, `delete_topic`, `alter_topic_config`, `create_partitions`,
//!   `create_view`, `delete_view`): under the admin lock, check the request against this
//!   broker's registry and turn it into a [`TopicChange`], the record of what changes;
//! - **record**: make the change durable in the source of truth. Today that is the
//!   registry's own files ([`Recorded::InFiles`]): `topics/<t>/topic.json` and
//!   `views/<v>.json`, written or removed through the durable-write path (`record` below);
//! - **apply** ([`TopicRegistry::apply`], under the same lock): change this broker: open or close partitions,
//!   bind plugins, swap the in-memory entry, publish the topic shapes. The read side
//!   (`topic`, `partition`, `view`, `read_partition`, `topic_shapes`) only sees applied
//!   changes, and does not know which source recorded them.
//!
//! With the files as the source, the record is written inside `apply`, at the change's
//! commit point: a created or grown topic's topic.json after its new partitions' logs exist
//! (a crash before it leaves the topic as it was), a config change's before the logs take
//! the new config, a view's file before the view is visible, and a deleted topic's
//! topic.json goes with its directory once its partitions are closed (`remove_topic_dir`,
//! which is the same step whatever the source: the partitions' data lives there too).
//!
//! How the metadata-log-backed source replaces this one: the decide step moves to the
//! controller, which appends the same changes (as the `TopicCreated`, `TopicRemoved`,
//! `ConfigSet`, `PartitionChanged`, `ViewPut` and `ViewRemoved` metadata records) to the
//! replicated log. Every broker, the controller's own included, applies each committed
//! record with `apply(change, Recorded::InLog)`: the same local effects, and no file
//! written, since the log is the record. topic.json and the view files are then no longer
//! the source of truth (a migration reads them once into the first metadata snapshot), and
//! the start replays the image through `apply` instead of loading them. Callers of the read
//! side do not change; those of the write side wait for the local apply instead.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_storage::io::{self as storage_io, RealFs};

use super::{TOPIC_FILE, Topic, TopicDeleted, TopicFile, TopicRegistry, ViewTopic, topic_id};
use crate::error::{KafkaError, ServerError};
use crate::files::{remove_dir_logged, remove_file_logged, write_durable};
use crate::plugins::TopicPlugins;
use crate::topic_config::{self, TopicOverrides};
use crate::views::ViewSpec;

/// A recorded change to the topics and views: what the file-backed source writes today
/// and what the metadata log will carry, applied to a broker by [`TopicRegistry::apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicChange {
    /// A topic with `partitions` empty partitions.
    TopicCreated {
        name: String,
        id: topic_id::Uuid,
        partitions: i32,
        configs: TopicOverrides,
        /// Each partition's replicas as the request gave them (CreateTopics' `assignments`):
        /// a cluster's controller places the partitions there; a single broker has checked
        /// they name only itself.
        assignments: Option<Vec<Vec<i32>>>,
        /// The replication factor asked for (-1: `default.replication.factor`); a cluster's
        /// controller places that many replicas (a single broker has checked it is 1).
        replication_factor: i16,
    },
    /// A topic and the views reading it are gone.
    TopicDeleted { name: String },
    /// A topic's overrides are now `configs` (the whole set, not a delta).
    ConfigAltered {
        name: String,
        configs: TopicOverrides,
    },
    /// A topic now has `partitions` partitions (more than before).
    PartitionsAdded { name: String, partitions: i32 },
    /// A view of an existing topic.
    ViewCreated { spec: ViewSpec },
    /// A view is gone.
    ViewDeleted { name: String },
}

/// Whether a change given to [`TopicRegistry::apply`] is recorded already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Not yet: the registry's files are the source of truth, and `apply` writes the
    /// change's file at its commit point.
    InFiles,
    /// Already, in a log every broker applies (the metadata log): `apply` changes only
    /// this broker.
    InLog,
}

/// What applying a change made, for the caller's response.
#[derive(Debug)]
pub enum Applied {
    /// The topic as it now is (created, altered or grown).
    Topic(Arc<Topic>),
    /// What deleting the topic removed, and the transforms that used it.
    TopicDeleted(TopicDeleted),
    /// The new view.
    View(Arc<ViewTopic>),
    /// The view is gone.
    ViewDeleted,
}

impl Applied {
    /// The topic of a creation, config change or growth.
    pub(super) fn into_topic(self) -> Arc<Topic> {
        match self {
            Self::Topic(topic) => topic,
            other => unreachable!("a topic change applied as {other:?}"),
        }
    }
}

impl TopicRegistry {
    /// Applies `change` to this broker, writing its record at its commit point when the
    /// files are the source (`recorded`), under the admin lock (as every change is).
    pub fn apply(&self, change: TopicChange, recorded: Recorded) -> Result<Applied, KafkaError> {
        let _admin = self.admin_lock();
        self.apply_locked(change, recorded)
    }

    /// Commits a change a decide step checked under the admin lock (`admin`): in a cluster
    /// (a remote is set, `crate::kraft`) the controller records it and this broker applies
    /// it from the image, so the lock is released first and the result read back once it
    /// is applied here; else it is applied here now, its files written. Ephemeral views stay
    /// this broker's own.
    pub(super) fn commit_decided(
        &self,
        admin: std::sync::MutexGuard<'_, ()>,
        change: TopicChange,
    ) -> Result<Applied, KafkaError> {
        let local = match &change {
            TopicChange::ViewCreated { spec } => spec.ephemeral,
            TopicChange::ViewDeleted { name } => self.view(name).is_some_and(|v| v.spec.ephemeral),
            _ => false,
        };
        let Some(remote) = self.remote.get().filter(|_| !local) else {
            let applied = self.apply_locked(change, Recorded::InFiles);
            drop(admin);
            return applied;
        };
        drop(admin);
        let decided = change.clone();
        (remote.0)(change)?;
        let missing = |what: &str| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("{what} changed again meanwhile"),
            )
        };
        match decided {
            TopicChange::TopicCreated { name, .. }
            | TopicChange::ConfigAltered { name, .. }
            | TopicChange::PartitionsAdded { name, .. } => self
                .topic(&name)
                .map(Applied::Topic)
                .ok_or_else(|| missing(&name)),
            TopicChange::TopicDeleted { .. } => Ok(Applied::TopicDeleted(TopicDeleted::default())),
            TopicChange::ViewCreated { spec } => self
                .view(&spec.name)
                .map(Applied::View)
                .ok_or_else(|| missing(&spec.name)),
            TopicChange::ViewDeleted { .. } => Ok(Applied::ViewDeleted),
        }
    }

    /// [`Self::apply`], for the decide steps that already hold the admin lock (they checked
    /// the change under it).
    pub(super) fn apply_locked(
        &self,
        change: TopicChange,
        recorded: Recorded,
    ) -> Result<Applied, KafkaError> {
        let commit = || match recorded {
            Recorded::InFiles => self.record(&change),
            Recorded::InLog => Ok(()),
        };
        match &change {
            TopicChange::TopicCreated {
                name,
                id,
                partitions,
                configs,
                ..
            } => self
                .apply_created(name, *id, *partitions, configs, commit)
                .map(Applied::Topic),
            TopicChange::TopicDeleted { name } => self
                .apply_deleted(name, recorded)
                .map(Applied::TopicDeleted),
            TopicChange::ConfigAltered { name, configs } => self
                .apply_altered(name, configs, commit)
                .map(Applied::Topic),
            TopicChange::PartitionsAdded { name, partitions } => self
                .apply_grown(name, *partitions, commit)
                .map(Applied::Topic),
            TopicChange::ViewCreated { spec } => {
                self.apply_view_created(spec, commit).map(Applied::View)
            }
            TopicChange::ViewDeleted { name } => {
                let view = self.view(name).ok_or_else(|| {
                    KafkaError::new(
                        ResponseError::UnknownTopicOrPartition,
                        format!("unknown view {name:?}"),
                    )
                })?;
                commit()?;
                self.views_write().remove(view.name());
                tracing::info!(view = name, "deleted view");
                Ok(Applied::ViewDeleted)
            }
        }
    }

    /// The file-backed source: writes (or removes) the file that records `change`.
    fn record(&self, change: &TopicChange) -> Result<(), KafkaError> {
        match change {
            TopicChange::TopicCreated {
                name,
                id,
                partitions,
                configs,
                ..
            } => self.write_topic_file(name, *id, *partitions, configs),
            TopicChange::ConfigAltered { name, configs } => {
                let topic = self.changeable_topic(name)?;
                let partitions = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
                self.write_topic_file(name, topic.id, partitions, configs)
            }
            TopicChange::PartitionsAdded { name, partitions } => {
                let topic = self.changeable_topic(name)?;
                self.write_topic_file(name, topic.id, *partitions, &topic.overrides)
            }
            // Removing the directory (`remove_topic_dir`) removes its topic.json with it.
            TopicChange::TopicDeleted { .. } => Ok(()),
            TopicChange::ViewCreated { spec } if spec.ephemeral => Ok(()),
            TopicChange::ViewCreated { spec } => self.persist_view(spec),
            TopicChange::ViewDeleted { name } => {
                if self.view(name).is_some_and(|v| !v.spec.ephemeral) {
                    remove_file_logged(&self.view_file(name));
                }
                Ok(())
            }
        }
    }

    /// Writes topic.json, the commit point of a topic change, through the durable-write path.
    fn write_topic_file(
        &self,
        name: &str,
        id: topic_id::Uuid,
        partitions: i32,
        configs: &TopicOverrides,
    ) -> Result<(), KafkaError> {
        let meta = TopicFile {
            name: name.to_owned(),
            partitions,
            configs: configs.clone(),
            topic_id: Some(id.to_string()),
        };
        let path = self.topic_dir(name).join(TOPIC_FILE);
        serde_json::to_string_pretty(&meta)
            .map_err(std::io::Error::other)
            .and_then(|text| write_durable(&path, text.as_bytes()))
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::KafkaStorageError,
                    format!("writing {}: {e}", path.display()),
                )
            })
    }

    /// A new topic: its plugins bound, its directory made (a stale one, left by a creation
    /// or deletion that did not finish, removed first: nothing in it is wanted), its
    /// partitions opened, then the record, then the registry entry. A failure removes the
    /// directory again.
    fn apply_created(
        &self,
        name: &str,
        id: topic_id::Uuid,
        partitions: i32,
        configs: &TopicOverrides,
        commit: impl FnOnce() -> Result<(), KafkaError>,
    ) -> Result<Arc<Topic>, KafkaError> {
        let plugins = TopicPlugins::bind(&self.plugins, configs)?;
        let dir = self.topic_dir(name);
        let stale = if dir.exists() {
            storage_io::remove_dir_durable(&RealFs, &dir)
        } else {
            Ok(())
        };
        let created = stale
            .and_then(|()| storage_io::create_dir_durable(&RealFs, &dir))
            .map_err(ServerError::io(format!("creating {}", dir.display())))
            .and_then(|()| self.open_topic(name, id, partitions, configs.clone(), plugins))
            .map_err(|e| KafkaError::new(ResponseError::KafkaStorageError, e.to_string()))
            .and_then(|topic| commit().map(|()| topic));
        let topic = match created {
            Ok(topic) => Arc::new(topic),
            Err(e) => {
                if let Some(suppressed) = self.creation_failures.note(self.now_ms()) {
                    tracing::error!(topic = name, error = %e.message, suppressed_since_last = suppressed, "creating topic failed");
                } else {
                    tracing::debug!(topic = name, error = %e.message, "creating topic failed");
                }
                remove_dir_logged(&dir);
                return Err(e);
            }
        };
        self.topics_write().insert(name.to_owned(), topic.clone());
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// A deleted topic: the views reading it removed first (their files too, when the files
    /// are the source), then the topic unregistered, its logs closed, its directory removed.
    /// Fetches holding a read slice keep reading the unlinked files.
    fn apply_deleted(&self, name: &str, recorded: Recorded) -> Result<TopicDeleted, KafkaError> {
        let unknown = || {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name:?}"),
            )
        };
        if self.topic(name).is_none() {
            return Err(unknown());
        }
        let (reading, writing) = self.transforms_of(name);
        let deleted = TopicDeleted {
            views: self.remove_views_of(name, recorded),
            reading,
            writing,
        };
        let topic = self.topics_write().remove(name).ok_or_else(unknown)?;
        for partition in &topic.partitions {
            if let Err(e) = partition.close() {
                tracing::warn!(topic = name, error = %e, "closing a deleted partition failed");
            }
        }
        self.remove_topic_dir(name)?;
        tracing::info!(topic = name, views = ?deleted.views, transforms_reading = ?deleted.reading, transforms_writing = ?deleted.writing, "deleted topic");
        Ok(deleted)
    }

    /// New overrides: the plugins rebound (a role whose keys did not change keeps its
    /// binding), the record, then every open partition's log reconfigured and the entry
    /// swapped.
    fn apply_altered(
        &self,
        name: &str,
        configs: &TopicOverrides,
        commit: impl FnOnce() -> Result<(), KafkaError>,
    ) -> Result<Arc<Topic>, KafkaError> {
        let topic = self.changeable_topic(name)?;
        let plugins = topic
            .plugins
            .rebind(&self.plugins, &topic.overrides, configs)?;
        commit()?;
        let log_config = topic_config::log_config(&self.config, configs);
        for partition in &topic.partitions {
            // A closed partition (broker shutting down) picks the config up at the next open.
            if let Ok(Err(e)) = partition.with_log(|log| log.try_set_config(log_config.clone())) {
                tracing::error!(topic = name, partition = partition.index, error = %e, "validated config refused by the log");
            }
        }
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            overrides: configs.clone(),
            partitions: topic.partitions.clone(),
            plugins,
            offline: None,
        });
        self.topics_write().insert(name.to_owned(), altered.clone());
        tracing::info!(topic = name, overrides = ?altered.overrides, "altered topic config");
        Ok(altered)
    }

    /// More partitions: the new partitions' logs created, the record, then the grown topic
    /// swapped into the registry and into the views that read it.
    fn apply_grown(
        &self,
        name: &str,
        count: i32,
        commit: impl FnOnce() -> Result<(), KafkaError>,
    ) -> Result<Arc<Topic>, KafkaError> {
        let topic = self.changeable_topic(name)?;
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let mut partitions = topic.partitions.clone();
        for index in current..count {
            partitions.push(Arc::new(self.open_new_partition(&topic, index)?));
        }
        commit()?;
        let grown = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            overrides: topic.overrides.clone(),
            partitions,
            plugins: topic.plugins.clone(),
            offline: None,
        });
        self.topics_write().insert(name.to_owned(), grown.clone());
        self.re_source_views(&grown);
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(grown)
    }

    /// A new view: its chain bound over the source topic (each plugin's `init` runs with its
    /// parameters), the record unless ephemeral, then the registry entry.
    fn apply_view_created(
        &self,
        spec: &ViewSpec,
        commit: impl FnOnce() -> Result<(), KafkaError>,
    ) -> Result<Arc<ViewTopic>, KafkaError> {
        let source = self.topic(&spec.source).ok_or_else(|| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!(
                    "view {:?}: unknown source topic {:?} (a view reads a topic, not another view)",
                    spec.name, spec.source
                ),
            )
        })?;
        let view = ViewTopic::bind(&self.plugins, spec.clone(), source, self.now_ms())?;
        commit()?;
        let view = Arc::new(view);
        self.views_write()
            .insert(view.name().to_owned(), Arc::clone(&view));
        tracing::info!(view = view.name(), source = %view.spec.source, stages = view.spec.stages.len(), ephemeral = view.spec.ephemeral, "created view");
        Ok(view)
    }
}
