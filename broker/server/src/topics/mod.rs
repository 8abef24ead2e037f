//! The topic registry: topics, their partitions (each a storage `Log` behind a mutex plus a
//! watch channel that wakes long-polling fetches: `partition.rs`), the live views
//! (`views.rs`), the topic shapes watch, and topic metadata persisted as one small JSON file
//! per topic. Every metadata change here (files written, directories created, renamed and
//! removed) goes through `sluice_storage::io::durable` on the real filesystem.
//!
//! On-disk layout under `data.dir` (topics live in their own directory, so no topic name can
//! collide with the broker's files):
//! ```text
//! topics/<topic>/topic.json      {"name", "partitions", "configs"}, written last at creation
//! topics/<topic>/<partition>/    the storage engine's directory for one partition
//! deleting/<topic>.<ms>/         a deleted topic, removed at once (leftovers at start);
//!                                `deleting/` itself is kept, so deleting needs no new block
//! views/<view>.json              a view (`crate::views`): {"name", "source", "stages", ...}
//! ```
//! Every change is decided here (checked under the admin lock), then recorded and applied
//! through one seam, `change.rs`: a [`TopicChange`] written to the file-backed source of
//! truth (topic.json, the view files) and applied to this broker by [`TopicRegistry::apply`],
//! which is what a broker will do with the same change read from the metadata log.
//!
//! Methods here are synchronous (they do file I/O); async callers use `spawn_blocking`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use sluice_plugin_host::Registry;
use sluice_storage::io::{self as storage_io, RealFs};
use sluice_storage::{FileCache, Fs, Log};
use tokio::sync::watch;
use uuid::Uuid;

use crate::clock::{SharedClock, now_ms};
use crate::config::BrokerConfig;
use crate::descriptors::DescriptorBudget;
use crate::error::{KafkaError, ServerError};
use crate::files::{remove_dir_logged, remove_stale_temps};
use crate::limits;
use crate::plugins::TopicPlugins;
use crate::topic_config::{self, TopicOverrides};
use crate::topic_name;

pub use partition::{Partition, Placement};

const TOPIC_FILE: &str = "topic.json";
const TOPICS_DIR: &str = "topics";
const DELETING_DIR: &str = "deleting";

/// The topic registry: every topic and view of this broker, and their metadata files.
#[derive(Debug)]
pub struct TopicRegistry {
    /// Validated config: topic defaults, the data dir, the partition budget.
    config: Arc<BrokerConfig>,
    /// The plugin registry topics and views bind their plugins from.
    plugins: Arc<Registry>,
    /// The filesystem partition logs live on: the real one, or a fault-injecting twin in tests.
    fs: Arc<dyn Fs>,
    /// The clock logs are opened and views aged by (`crate::clock`).
    clock: SharedClock,
    /// Topic name -> topic. Held only for lookups and inserts, never across I/O.
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Every topic's partition count, republished by every change of `topics` (the group
    /// coordinator's consumer groups assign from it: `topic_shapes`).
    shapes: watch::Sender<TopicShapes>,
    /// Topic id -> name, refreshed with every change of `topics` (Fetch v13+ and the consumer
    /// group protocol name topics by id: one look-up each, not a scan).
    ids: RwLock<HashMap<Uuid, String>>,
    /// View name -> view (`views.rs`); views and topics share one namespace.
    views: RwLock<BTreeMap<String, Arc<ViewTopic>>>,
    /// Serialises topic and view creation and deletion (directory and registry changes
    /// together).
    admin: Mutex<()>,
    /// Topic -> the materialized transforms using it and how (`transforms/`, which the
    /// registry cannot import): deleting the topic reports them ([`TopicDeleted`]).
    transform_topics: Mutex<BTreeMap<String, BTreeMap<String, TopicUse>>>,
    /// Failed topic creations (a full disk fails every auto-creation a client's Metadata
    /// asks for), logged once per interval (`repeated.rs`).
    creation_failures: repeated::RepeatedFailures,
    /// What the broker may hold open against `RLIMIT_NOFILE` (`crate::descriptors`).
    descriptors: DescriptorBudget,
    /// Every partition's sealed segment files, opened on demand within
    /// `sluice.segment.files.open.max`.
    segment_files: Arc<FileCache>,
    /// In a cluster, where a decided config change goes instead of this broker's files:
    /// the controller (set by `crate::kraft`; it returns once this broker applied it).
    remote: std::sync::OnceLock<RemoteChange>,
}

/// Commits a decided change elsewhere (the metadata log) and returns once it is applied here.
pub struct RemoteChange(pub Box<dyn Fn(TopicChange) -> Result<(), KafkaError> + Send + Sync>);

impl std::fmt::Debug for RemoteChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteChange")
    }
}

/// Topic name -> partition count.
pub type TopicShapes = BTreeMap<String, i32>;

/// A write lock on the topics that publishes their shapes and refreshes the id index when it
/// drops.
struct TopicsWrite<'a> {
    guard: std::sync::RwLockWriteGuard<'a, BTreeMap<String, Arc<Topic>>>,
    shapes: &'a watch::Sender<TopicShapes>,
    ids: &'a RwLock<HashMap<Uuid, String>>,
}

impl std::ops::Deref for TopicsWrite<'_> {
    type Target = BTreeMap<String, Arc<Topic>>;
    fn deref(&self) -> &Self::Target {
        &self.guard
    }
}

impl std::ops::DerefMut for TopicsWrite<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.guard
    }
}

impl Drop for TopicsWrite<'_> {
    fn drop(&mut self) {
        let ids: HashMap<Uuid, String> = self
            .guard
            .values()
            .map(|t| (t.id, t.name.clone()))
            .collect();
        *self
            .ids
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ids;
        let shapes: TopicShapes = self
            .guard
            .iter()
            .map(|(name, t)| {
                (
                    name.clone(),
                    i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
                )
            })
            .collect();
        self.shapes.send_if_modified(|old| {
            let changed = *old != shapes;
            *old = shapes;
            changed
        });
    }
}

/// How a materialized transform uses a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicUse {
    /// Its source: deleting the topic removes the transform.
    Reads,
    /// An output or its dead-letter topic: deleting the topic fails the transform.
    Writes,
}

/// What deleting a topic did to what used it, for the caller's audit lines.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TopicDeleted {
    /// The views that read it, removed with it.
    pub views: Vec<String>,
    /// The transforms that read it: their service removes them (their runners never read
    /// a topic made later under the name).
    pub reading: Vec<String>,
    /// The transforms that write it: they fail, naming it, until resumed.
    pub writing: Vec<String>,
}

/// One topic.
#[derive(Debug)]
pub struct Topic {
    /// Topic name.
    pub name: String,
    /// Topic id (`topic_id.rs`).
    pub id: topic_id::Uuid,
    /// Config overrides given at creation.
    pub overrides: TopicOverrides,
    /// Partitions by index.
    pub partitions: Vec<Arc<Partition>>,
    /// The plugins the topic binds: `sluice.partitioner`, `sluice.validator`.
    pub plugins: TopicPlugins,
    /// Why the topic is quarantined (its `topic.json` could not be read at start), naming
    /// the path; every partition is then offline too (`quarantine.rs`).
    pub offline: Option<String>,
}

/// `topics/<topic>/topic.json`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct TopicFile {
    pub(crate) name: String,
    pub(crate) partitions: i32,
    pub(crate) configs: TopicOverrides,
    /// The topic id, hyphenated; absent in files written before topic ids (the id is then
    /// derived from the name: `topic_id.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) topic_id: Option<String>,
}

impl TopicFile {
    /// Parses a topic.json and checks what `create_topic` checked before writing it (the
    /// name, the partition count), so a damaged file fails the start with its path instead
    /// of opening a partition count nobody asked for.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let meta: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        topic_name::validate(&meta.name).map_err(|e| e.message)?;
        if !(1..=limits::PARTITIONS_PER_TOPIC_MAX).contains(&meta.partitions) {
            return Err(format!(
                "{} partitions is outside 1..={} (PARTITIONS_PER_TOPIC_MAX)",
                meta.partitions,
                limits::PARTITIONS_PER_TOPIC_MAX
            ));
        }
        Ok(meta)
    }
}

impl TopicRegistry {
    /// Opens the registry under `config.data_dir`: loads every topic (opening its partitions'
    /// logs on `fs`) and every view, binding their plugins from `plugins`.
    pub fn open(
        config: Arc<BrokerConfig>,
        plugins: Arc<Registry>,
        fs: Arc<dyn Fs>,
        clock: SharedClock,
    ) -> Result<Self, ServerError> {
        let descriptors = DescriptorBudget::of_process(&config);
        let segment_files =
            FileCache::new(usize::try_from(descriptors.segment_files).unwrap_or(usize::MAX));
        let registry = Self {
            descriptors,
            segment_files,
            config,
            plugins,
            fs,
            clock,
            topics: RwLock::new(BTreeMap::new()),
            shapes: watch::Sender::new(TopicShapes::new()),
            ids: RwLock::new(HashMap::new()),
            views: RwLock::new(BTreeMap::new()),
            admin: Mutex::new(()),
            transform_topics: Mutex::new(BTreeMap::new()),
            creation_failures: repeated::RepeatedFailures::default(),
            remote: std::sync::OnceLock::new(),
        };
        registry.load_topics()?;
        registry.load_views()?;
        Ok(registry)
    }

    fn load_topics(&self) -> Result<(), ServerError> {
        let deleting = self.config.data_dir.join(DELETING_DIR);
        if deleting.exists() {
            remove_dir_logged(&deleting);
        }
        // Made now, while there is room: deleting a topic on a full disk then only moves
        // an entry into it (`remove_topic_dir`).
        if let Err(e) = storage_io::create_dir_durable(&RealFs, &deleting) {
            tracing::warn!(path = %deleting.display(), error = %e, "creating the deleting dir failed");
        }
        let dir = self.config.data_dir.join(TOPICS_DIR);
        storage_io::create_dir_durable(&RealFs, &dir)
            .map_err(ServerError::io(format!("creating {}", dir.display())))?;
        let on_disk = count_partition_dirs(&dir);
        if let Some(refusal) = self.descriptors.refusal(on_disk) {
            return Err(ServerError::DescriptorBudget(format!(
                "the data dir holds {on_disk} partitions: {refusal}"
            )));
        }
        tracing::info!(
            partitions = on_disk,
            limit = self.descriptors.limit,
            needed = self.descriptors.needed(on_disk),
            partitions_fit = self.descriptors.partitions_max(),
            "descriptor budget"
        );
        let entries = std::fs::read_dir(&dir)
            .map_err(ServerError::io(format!("reading {}", dir.display())))?;
        let paths = entries
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(ServerError::io("reading the topics dir"))?;
        self.load_topic_dirs(paths);
        let open = self.partition_count();
        if open > u64::from(self.config.partitions_max) {
            // Startup never fails on the budget: it only refuses new partitions.
            tracing::warn!(
                partitions = open,
                limit = self.config.partitions_max,
                "the data dir holds more partitions than sluice.partitions.max; creating topics is refused until it holds fewer"
            );
        }
        Ok(())
    }

    /// Opens the topic dirs on `limits::STARTUP_OPEN_THREADS` threads: opening a partition
    /// is mostly waiting for its one fsync (the clean-shutdown marker's removal), and the
    /// disk takes many at once. One bad topic never stops the start: it is quarantined
    /// (`quarantine.rs`).
    fn load_topic_dirs(&self, paths: Vec<PathBuf>) {
        on_threads(paths, |path| {
            if let Some(topic) = self.load_topic_dir(&path) {
                self.topics_write()
                    .insert(topic.name.clone(), Arc::new(topic));
            }
        });
    }

    fn open_topic(
        &self,
        name: &str,
        id: topic_id::Uuid,
        partitions: i32,
        overrides: TopicOverrides,
        plugins: TopicPlugins,
    ) -> Result<Topic, ServerError> {
        let log_config = topic_config::log_config(&self.config, &overrides);
        let dir = self.topic_dir(name);
        remove_stale_temps(&dir);
        let mut opened = Vec::with_capacity(usize::try_from(partitions).unwrap_or(0));
        for index in 0..partitions {
            let log = Log::open_shared(
                self.fs.clone(),
                &self.segment_files,
                &dir.join(index.to_string()),
                log_config.clone(),
                self.now_ms(),
            )
            .map_err(|source| ServerError::Storage {
                context: format!("opening {name}-{index}"),
                source,
            })?;
            opened.push(Arc::new(Partition::new(name, index, log)));
        }
        Ok(Topic {
            name: name.to_owned(),
            id,
            overrides,
            partitions: opened,
            plugins,
            offline: None,
        })
    }

    fn topic_dir(&self, name: &str) -> PathBuf {
        self.config.data_dir.join(TOPICS_DIR).join(name)
    }

    /// The topics for a change; the change is published to `topic_shapes` when the guard
    /// drops, so no writer can forget to.
    fn topics_write(&self) -> TopicsWrite<'_> {
        TopicsWrite {
            guard: self
                .topics
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            shapes: &self.shapes,
            ids: &self.ids,
        }
    }

    /// From now on decided config changes go to `remote` (a broker in a cluster).
    pub fn set_remote(&self, remote: RemoteChange) {
        if self.remote.set(remote).is_err() {
            tracing::error!("the topic registry's remote was set twice; keeping the first");
        }
    }

    /// Whether changes commit through a cluster's controller (a remote is set).
    pub fn in_cluster(&self) -> bool {
        self.remote.get().is_some()
    }

    /// The config topics are created with (`num.partitions` and the topic defaults).
    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// Every topic's partition count, updated after each topic creation, deletion or
    /// partition increase.
    pub fn topic_shapes(&self) -> watch::Receiver<TopicShapes> {
        self.shapes.subscribe()
    }

    fn topics_read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Topic>>> {
        self.topics
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Held while topics or views are created or deleted.
    fn admin_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.admin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Looks a topic up.
    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics_read().get(name).cloned()
    }

    /// The name of the topic with `id`, or of the view whose id (derived from its name) it
    /// is. Topics are one index look-up; views, few and bounded, are scanned.
    pub fn name_of_id(&self, id: &Uuid) -> Option<String> {
        let topic = self
            .ids
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned();
        topic.or_else(|| {
            self.views()
                .into_iter()
                .map(|v| v.name().to_owned())
                .find(|name| topic_id::derived_topic_id(name) == *id)
        })
    }

    /// The id of topic or view `name`, if it exists.
    pub fn id_of_name(&self, name: &str) -> Option<Uuid> {
        if let Some(topic) = self.topic(name) {
            return Some(topic.id);
        }
        self.view(name).map(|_| topic_id::derived_topic_id(name))
    }

    /// Looks a partition up.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let topic = self.topic(topic)?;
        usize::try_from(index)
            .ok()
            .and_then(|i| topic.partitions.get(i).cloned())
    }

    /// Every topic, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.topics_read().values().cloned().collect()
    }

    /// Every open partition (for the ticker).
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.topics_read()
            .values()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect()
    }

    /// Partitions of every open topic.
    pub fn partition_count(&self) -> u64 {
        self.topics_read()
            .values()
            .map(|t| t.partitions.len() as u64)
            .sum()
    }

    /// The descriptor budget partitions are checked against.
    pub fn descriptor_budget(&self) -> DescriptorBudget {
        self.descriptors
    }

    /// The cache of sealed segments' open files.
    pub fn segment_files(&self) -> &FileCache {
        &self.segment_files
    }

    /// Refuses `more` partitions past `sluice.partitions.max` or past the descriptor budget
    /// (POLICY_VIOLATION naming the key, and the descriptor limit).
    pub fn check_partition_budget(&self, more: i32) -> Result<(), KafkaError> {
        let open = self.partition_count();
        let max = u64::from(self.config.partitions_max);
        let more = u64::try_from(more).unwrap_or(0);
        if let Some(refusal) = self.descriptors.refusal(open + more) {
            return Err(KafkaError::new(
                ResponseError::PolicyViolation,
                format!(
                    "{more} more partitions would make {} on this broker, past its file \
                     descriptor budget (sluice.partitions.max is {max}): {refusal}",
                    open + more
                ),
            ));
        }
        if open + more > max {
            return Err(KafkaError::new(
                ResponseError::PolicyViolation,
                format!(
                    "{more} more partitions would make {} on this broker, above \
                     sluice.partitions.max ({max})",
                    open + more
                ),
            ));
        }
        Ok(())
    }

    /// Checks a CreateTopics request for one topic without creating anything.
    /// Kafka's rule that names differing only in `.` and `_` collide (their metric names
    /// would be the same): INVALID_TOPIC_EXCEPTION naming the topic or view it collides
    /// with. Called for a new topic and a new view.
    pub fn check_no_collision(&self, name: &str) -> Result<(), KafkaError> {
        let normal = |n: &str| n.replace('.', "_");
        let wanted = normal(name);
        let collides = |other: &str| other.len() == name.len() && normal(other) == wanted;
        let views = self.views();
        let topics = self.topics_read();
        let other = topics
            .keys()
            .map(String::as_str)
            .chain(views.iter().map(|v| v.name()))
            .find(|other| collides(other));
        match other {
            Some(other) => Err(KafkaError::new(
                ResponseError::InvalidTopicException,
                format!("Topic '{name}' collides with existing topic: {other}"),
            )),
            None => Ok(()),
        }
    }

    pub fn validate_new_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: &TopicOverrides,
    ) -> Result<(), KafkaError> {
        topic_name::validate(name)?;
        if !(1..=limits::PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(KafkaError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "{partitions} partitions is outside 1..={}",
                    limits::PARTITIONS_PER_TOPIC_MAX
                ),
            ));
        }
        self.check_partition_budget(partitions)?;
        topic_config::validate_all(&self.config, overrides)?;
        TopicPlugins::bind(&self.plugins, overrides)?;
        if self.view(name).is_some() {
            return Err(KafkaError::new(
                ResponseError::TopicAlreadyExists,
                format!("{name:?} is a view (sluice view list)"),
            ));
        }
        if self.topic(name).is_some() {
            return Err(KafkaError::new(
                ResponseError::TopicAlreadyExists,
                format!("topic {name:?} already exists"),
            ));
        }
        self.check_no_collision(name)?;
        Ok(())
    }

    /// Creates a topic: directory, partitions, metadata file (`change.rs`). Returns the new
    /// topic.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: TopicOverrides,
    ) -> Result<Arc<Topic>, KafkaError> {
        self.create_topic_assigned(name, partitions, overrides, None, -1)
    }

    /// [`Self::create_topic`] with each partition's replicas given (CreateTopics'
    /// `assignments`, checked by the caller on one broker, by the controller in a cluster).
    pub fn create_topic_assigned(
        &self,
        name: &str,
        partitions: i32,
        overrides: TopicOverrides,
        assignments: Option<Vec<Vec<i32>>>,
        replication_factor: i16,
    ) -> Result<Arc<Topic>, KafkaError> {
        let admin = self.admin_lock();
        self.validate_new_topic(name, partitions, &overrides)?;
        let change = TopicChange::TopicCreated {
            name: name.to_owned(),
            id: topic_id::new_topic_id(),
            partitions,
            configs: overrides,
            assignments,
            replication_factor,
        };
        self.commit_decided(admin, change).map(Applied::into_topic)
    }

    /// Creates `name` with `num.partitions` if auto-creation is on and the name is valid.
    pub fn auto_create(&self, name: &str) -> Result<Arc<Topic>, KafkaError> {
        if let Some(topic) = self.topic(name) {
            return Ok(topic);
        }
        if self.view(name).is_some() {
            return Err(read_only(name));
        }
        if !self.config.auto_create_topics_enable {
            return Err(KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name:?}"),
            ));
        }
        match self.create_topic(name, self.config.num_partitions, TopicOverrides::new()) {
            Err(e) if e.code == ResponseError::TopicAlreadyExists => self.topic(name).ok_or(e),
            other => other,
        }
    }

    /// Deletes a topic: unregisters it, closes its logs, renames its directory aside and
    /// removes it. Fetches holding a read slice keep reading the unlinked files. The views
    /// reading it are removed first (`remove_views_of`); the transforms using it are
    /// reported: those reading it are removed by their service, those writing it fail
    /// (docs/views.md, docs/transforms.md). DELETE on the topic is the only right it needs.
    pub fn delete_topic(&self, name: &str) -> Result<TopicDeleted, KafkaError> {
        let admin = self.admin_lock();
        if self.view(name).is_some() {
            return Err(KafkaError::new(
                ResponseError::InvalidTopicException,
                format!("{name:?} is a view; delete it with `sluice view delete {name}`"),
            ));
        }
        let change = TopicChange::TopicDeleted {
            name: name.to_owned(),
        };
        match self.commit_decided(admin, change)? {
            Applied::TopicDeleted(deleted) => Ok(deleted),
            other => unreachable!("a topic deletion applied as {other:?}"),
        }
    }

    /// Removes a deleted (unregistered, closed) topic's directory so that a crash leaves the
    /// topic whole or gone, without needing a free block: a full disk is when deleting
    /// matters most, and it must free the space rather than fail for the lack of it. The
    /// directory is renamed into `deleting/` (made at start, so the rename only adds an entry
    /// to a directory that exists) and removed there. If that fails (ENOSPC where
    /// `deleting/` had to be made, say), `topic.json`, the topic's commit point, is unlinked
    /// in place instead, then the rest: a directory without it is ignored at start and
    /// removed by the next creation of the name. Leftovers in `deleting/` go at the next
    /// start.
    fn remove_topic_dir(&self, name: &str) -> Result<(), KafkaError> {
        let dir = self.topic_dir(name);
        let deleting = self.config.data_dir.join(DELETING_DIR);
        let aside = deleting.join(format!("{name}.{}", now_ms()));
        let moved = storage_io::create_dir_durable(&RealFs, &deleting)
            .and_then(|()| storage_io::rename_durable(&RealFs, &dir, &aside));
        if let Err(error) = moved {
            tracing::warn!(topic = name, %error, "moving a deleted topic aside failed; removing it in place");
            if dir.exists() {
                storage_io::remove_file_durable(&RealFs, &dir.join(TOPIC_FILE)).map_err(|e| {
                    tracing::error!(topic = name, error = %e, "deleting topic failed: its files stay, and it is back at the next start");
                    KafkaError::new(
                        ResponseError::KafkaStorageError,
                        format!("removing {}: {e}", dir.join(TOPIC_FILE).display()),
                    )
                })?;
                remove_dir_logged(&dir);
            }
        }
        if aside.exists() {
            remove_dir_logged(&aside);
        }
        Ok(())
    }

    /// Notes the topics a materialized transform reads (`source`) and writes (`outputs`, the
    /// dead-letter topic), so deleting one of them reports the transform ([`TopicDeleted`]).
    pub fn note_transform_topics(&self, transform: &str, source: &str, outputs: &[&str]) {
        let mut uses = self.transform_topics_lock();
        let writes = outputs.iter().map(|o| (*o, TopicUse::Writes));
        for (topic, used) in writes.chain(std::iter::once((source, TopicUse::Reads))) {
            uses.entry(topic.to_owned())
                .or_default()
                .insert(transform.to_owned(), used);
        }
    }

    /// Forgets every topic `transform` uses (it was deleted).
    pub fn forget_transform_topics(&self, transform: &str) {
        let mut uses = self.transform_topics_lock();
        for users in uses.values_mut() {
            users.remove(transform);
        }
        uses.retain(|_, users| !users.is_empty());
    }

    /// The transforms reading `topic`, and those writing it.
    fn transforms_of(&self, topic: &str) -> (Vec<String>, Vec<String>) {
        let uses = self.transform_topics_lock();
        let users = uses.get(topic).into_iter().flatten();
        let (reading, writing): (Vec<_>, Vec<_>) =
            users.partition(|(_, used)| **used == TopicUse::Reads);
        let names = |v: Vec<(&String, &TopicUse)>| v.into_iter().map(|(n, _)| n.clone()).collect();
        (names(reading), names(writing))
    }

    fn transform_topics_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<String, BTreeMap<String, TopicUse>>> {
        self.transform_topics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Now, by the registry's clock (the broker's), in Unix milliseconds.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Closes every partition (flush + clean-shutdown marker) on
    /// `limits::STARTUP_OPEN_THREADS` threads (each close waits on its fsyncs). Used at
    /// shutdown; the first failure is returned after every partition was tried.
    pub fn close_all(&self) -> Result<(), ServerError> {
        let first_error = Mutex::new(None);
        on_threads(self.partitions(), |partition| {
            if let Err(e) = partition.close() {
                tracing::error!(error = %e, "closing partition failed");
                first_error
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get_or_insert(e);
            }
        });
        let first_error = first_error
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        first_error.map_or(Ok(()), Err)
    }
}

/// Runs `work` on each of `items` from `limits::STARTUP_OPEN_THREADS` scoped threads, each
/// taking the next item when done (the start's opens and the shutdown's closes are mostly
/// waiting on fsyncs, which the disk serves many at once).
fn on_threads<T: Send>(items: Vec<T>, work: impl Fn(T) + Sync) {
    let next = Mutex::new(items.into_iter());
    let take = || {
        next.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .next()
    };
    std::thread::scope(|scope| {
        for _ in 0..limits::STARTUP_OPEN_THREADS {
            scope.spawn(|| {
                while let Some(item) = take() {
                    work(item);
                }
            });
        }
    });
}

/// Producing to a view: Kafka's answer to producing to an internal topic.
pub fn read_only(name: &str) -> KafkaError {
    KafkaError::new(
        ResponseError::InvalidTopicException,
        format!("{name:?} is a view, which is read-only; produce to its source topic"),
    )
}

mod alter;
pub(crate) mod append;
mod change;
pub(crate) mod group_commit;
mod partition;
mod partitions;
mod quarantine;
pub(crate) mod repeated;
pub mod topic_id;
mod views;

pub use alter::ConfigChange;
pub use change::{Applied, Recorded, TopicChange};
pub use views::ViewTopic;

#[cfg(test)]
mod tests;

/// Partition directories (`<topic>/<index>`) under the topics dir, counted without opening
/// them (the descriptor budget is checked before any is opened).
fn count_partition_dirs(topics_dir: &Path) -> u64 {
    let Ok(topics) = std::fs::read_dir(topics_dir) else {
        return 0;
    };
    topics
        .filter_map(Result::ok)
        .filter_map(|topic| std::fs::read_dir(topic.path()).ok())
        .flat_map(|partitions| partitions.filter_map(Result::ok))
        .filter(|entry| {
            let name = entry.file_name();
            let numeric = name.to_str().is_some_and(|n| n.parse::<u32>().is_ok());
            numeric && entry.file_type().is_ok_and(|t| t.is_dir())
        })
        .count() as u64
}
