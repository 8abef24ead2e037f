//! [`MetadataImage`]: the cluster's metadata as of one Raft index, built by applying the
//! committed batches of [`MetadataRecord`]s in log order. Every broker holds one and answers
//! Metadata, DescribeCluster and FindCoordinator from it; the active controller decides
//! against it.
//!
//! Applying is deterministic: the same batches at the same indexes give the same image on
//! every replica, including the records the image refuses (a partition of an unknown topic,
//! a stale broker epoch, a producer-id block that does not move forward): they are refused
//! everywhere, change nothing, and are returned so the caller can log them. The controller
//! never writes one (the simulator checks it). Each index is applied once: a batch at an
//! index not above [`MetadataImage::last_applied_index`] is an error and changes nothing.
//!
//! A broker's epoch is the Raft index of the entry that registered it (KIP-631), so it is
//! assigned here, not written in the record. [`MetadataImage::snapshot_bytes`] and
//! [`MetadataImage::from_snapshot`] (in `snapshot`) save and restore the whole image,
//! bounded and checksummed: restoring a snapshot equals replaying the records it covers.

use std::collections::BTreeMap;

use sluice_security::principal::SuperUsers;
use sluice_security::state::{ApplyError as SecurityApplyError, SecurityState};

use crate::limits;
use crate::mutants::{Mutant, mutant};
use crate::records::{
    BrokerRegistration, ConfigResource, ConfigResourceType, MetadataRecord, NO_LEADER,
    PartitionChange, PartitionRecord, PluginVersion, ProducerIdsRecord, TopicId,
};

mod snapshot;
pub use snapshot::SnapshotError;

/// A registered broker as the image knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    /// What it registered with.
    pub registration: BrokerRegistration,
    /// Its broker epoch: the Raft index of its registration.
    pub broker_epoch: i64,
    /// Fenced brokers lead nothing and join no ISR. A registration starts fenced.
    pub fenced: bool,
    /// It asked for a controlled shutdown: it leads nothing and joins no ISR.
    pub in_controlled_shutdown: bool,
}

impl BrokerState {
    /// May lead and join ISRs: unfenced and not shutting down.
    #[must_use]
    pub const fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// A partition's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The assigned replicas, in preference order.
    pub replicas: Vec<i32>,
    /// The in-sync replicas (a non-empty subset of the replicas).
    pub isr: Vec<i32>,
    /// The leader, or [`NO_LEADER`].
    pub leader: i32,
    /// Grows at every change of leadership.
    pub leader_epoch: i32,
    /// Grows at every change.
    pub partition_epoch: i32,
}

/// A topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    /// Its name.
    pub name: String,
    /// Its id.
    pub topic_id: TopicId,
    /// Its partitions, `0..n` with no gap.
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// A deployed transform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformEntry {
    /// Its generation.
    pub generation: u32,
    /// Its spec (JSON).
    pub spec: Vec<u8>,
}

/// A record the image refuses (the same on every replica: it changes nothing).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The cluster id is set once.
    #[error("the cluster id is already {0}")]
    ClusterIdSet(String),
    /// No broker with that node id is registered.
    #[error("broker {0} is not registered")]
    UnknownBroker(i32),
    /// The record names another registration of the broker.
    #[error("broker {node_id}: epoch {epoch} is not its current {current}")]
    StaleBrokerEpoch {
        /// The node id.
        node_id: i32,
        /// The record's epoch.
        epoch: i64,
        /// The registration's.
        current: i64,
    },
    /// A topic id the image does not have.
    #[error("unknown topic id {0:?}")]
    UnknownTopic(TopicId),
    /// A topic name or id already taken.
    #[error("topic {0} already exists (by name or id)")]
    TopicExists(String),
    /// A partition the topic does not have.
    #[error("topic {0:?} has no partition {1}")]
    UnknownPartition(TopicId, i32),
    /// A partition created out of order (partitions are `0..n`).
    #[error("topic {0:?}: partition {1} is not the next one")]
    PartitionOutOfOrder(TopicId, i32),
    /// A change whose ISR leaves the replicas or whose leader leaves the ISR.
    #[error("partition change refused: {0}")]
    BadChange(String),
    /// A count bound of `limits.rs`, named.
    #[error("{0} reached")]
    Full(&'static str),
    /// A config for a topic the image does not have.
    #[error("config for unknown topic {0}")]
    ConfigOfUnknownTopic(String),
    /// A producer-id block that does not move forward.
    #[error("producer ids: next {next} is not above the current {current}")]
    ProducerIdsBackwards {
        /// The record's.
        next: i64,
        /// The image's.
        current: i64,
    },
    /// A transform generation that does not grow.
    #[error("transform {name}: generation {generation} is not above {current}")]
    StaleGeneration {
        /// The transform.
        name: String,
        /// The record's.
        generation: u32,
        /// The image's.
        current: u32,
    },
    /// The security state refused the record.
    #[error(transparent)]
    Security(#[from] SecurityApplyError),
}

/// A batch applied at an index that is not after the last applied one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("index {index} is not after the last applied index {last_applied_index}")]
pub struct IndexError {
    /// The batch's index.
    pub index: u64,
    /// The image's.
    pub last_applied_index: u64,
}

/// The cluster's metadata (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataImage {
    last_applied_index: u64,
    cluster_id: Option<String>,
    brokers: BTreeMap<i32, BrokerState>,
    topics: BTreeMap<TopicId, TopicImage>,
    topic_ids: BTreeMap<String, TopicId>,
    partition_count: usize,
    configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    security: SecurityState,
    views: BTreeMap<String, Vec<u8>>,
    transforms: BTreeMap<String, TransformEntry>,
    plugins: BTreeMap<String, PluginVersion>,
    producer_ids: Option<ProducerIdsRecord>,
    features: BTreeMap<String, i16>,
}

impl Default for MetadataImage {
    fn default() -> Self {
        Self::new()
    }
}

impl MetadataImage {
    /// The image before the first record (index 0: Raft indexes start at 1).
    #[must_use]
    pub fn new() -> Self {
        Self {
            last_applied_index: 0,
            cluster_id: None,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            partition_count: 0,
            configs: BTreeMap::new(),
            // `super.users` and `allow.everyone.if.no.acl.found` are each broker's config,
            // not metadata: a broker builds its authorizer from these records with its own.
            security: SecurityState::new(SuperUsers::default(), false),
            views: BTreeMap::new(),
            transforms: BTreeMap::new(),
            plugins: BTreeMap::new(),
            producer_ids: None,
            features: BTreeMap::new(),
        }
    }

    /// Applies one Raft entry's records at `index`, in order. Returns the refused records
    /// by position (each refused record changes nothing; the others apply).
    ///
    /// # Errors
    /// [`IndexError`] if `index` is not above the last applied index: nothing changes.
    pub fn apply_batch(
        &mut self,
        index: u64,
        records: &[MetadataRecord],
    ) -> Result<Vec<(usize, Refusal)>, IndexError> {
        if index <= self.last_applied_index {
            return Err(IndexError {
                index,
                last_applied_index: self.last_applied_index,
            });
        }
        let mut refused = Vec::new();
        for (i, record) in records.iter().enumerate() {
            if let Err(e) = self.apply_record(index, record) {
                refused.push((i, e));
            }
        }
        self.last_applied_index = index;
        Ok(refused)
    }

    /// [`MetadataImage::apply_batch`] of one record.
    ///
    /// # Errors
    /// [`IndexError`] as [`MetadataImage::apply_batch`]; the refusal, if refused (the index
    /// is applied either way).
    pub fn apply(&mut self, index: u64, record: &MetadataRecord) -> Result<(), ApplyError> {
        let mut refused = self.apply_batch(index, std::slice::from_ref(record))?;
        match refused.pop() {
            Some((_, refusal)) => Err(ApplyError::Refused(refusal)),
            None => Ok(()),
        }
    }

    fn apply_record(&mut self, index: u64, record: &MetadataRecord) -> Result<(), Refusal> {
        match record {
            MetadataRecord::ClusterId { cluster_id } => match &self.cluster_id {
                Some(current) => Err(Refusal::ClusterIdSet(current.clone())),
                None => {
                    self.cluster_id = Some(cluster_id.clone());
                    Ok(())
                }
            },
            MetadataRecord::RegisterBroker(registration) => {
                self.register(index, registration.clone())
            }
            MetadataRecord::UnregisterBroker {
                node_id,
                broker_epoch,
            } => {
                self.broker_at(*node_id, *broker_epoch)?;
                self.brokers.remove(node_id);
                Ok(())
            }
            MetadataRecord::FenceBroker {
                node_id,
                broker_epoch,
            } => {
                self.broker_at(*node_id, *broker_epoch)?.fenced = true;
                Ok(())
            }
            MetadataRecord::UnfenceBroker {
                node_id,
                broker_epoch,
            } => {
                let broker = self.broker_at(*node_id, *broker_epoch)?;
                broker.fenced = false;
                broker.in_controlled_shutdown = false;
                Ok(())
            }
            MetadataRecord::BrokerControlledShutdown {
                node_id,
                broker_epoch,
            } => {
                self.broker_at(*node_id, *broker_epoch)?
                    .in_controlled_shutdown = true;
                Ok(())
            }
            MetadataRecord::Topic { name, topic_id } => self.create_topic(name, *topic_id),
            MetadataRecord::Partition(p) => self.create_partition(p),
            MetadataRecord::PartitionChange(c) => self.change_partition(c),
            MetadataRecord::RemoveTopic { topic_id } => self.remove_topic(*topic_id),
            MetadataRecord::Config {
                resource,
                key,
                value,
            } => self.set_config(resource, key, value.as_deref()),
            MetadataRecord::Security(record) => Ok(self.security.apply(record.clone())?),
            _ => self.apply_object(record),
        }
    }

    fn apply_object(&mut self, record: &MetadataRecord) -> Result<(), Refusal> {
        match record {
            MetadataRecord::View { name, spec } => {
                bounded_insert(&mut self.views, name, spec.clone(), "OBJECTS_MAX (views)")
            }
            MetadataRecord::RemoveView { name } => {
                self.views.remove(name);
                Ok(())
            }
            MetadataRecord::Transform {
                name,
                generation,
                spec,
            } => {
                if let Some(current) = self.transforms.get(name)
                    && *generation <= current.generation
                {
                    return Err(Refusal::StaleGeneration {
                        name: name.clone(),
                        generation: *generation,
                        current: current.generation,
                    });
                }
                let entry = TransformEntry {
                    generation: *generation,
                    spec: spec.clone(),
                };
                bounded_insert(
                    &mut self.transforms,
                    name,
                    entry,
                    "OBJECTS_MAX (transforms)",
                )
            }
            MetadataRecord::RemoveTransform { name } => {
                self.transforms.remove(name);
                Ok(())
            }
            MetadataRecord::PluginVersion(p) => bounded_insert(
                &mut self.plugins,
                &p.name,
                p.clone(),
                "OBJECTS_MAX (plugins)",
            ),
            MetadataRecord::RemovePlugin { name } => {
                self.plugins.remove(name);
                Ok(())
            }
            MetadataRecord::ProducerIds(p) => self.allocate_producer_ids(*p),
            MetadataRecord::FeatureLevel { name, level } => {
                if !self.features.contains_key(name) && self.features.len() >= limits::FEATURES_MAX
                {
                    return Err(Refusal::Full("FEATURES_MAX"));
                }
                self.features.insert(name.clone(), *level);
                Ok(())
            }
            _ => unreachable!("apply_record handles the other records"),
        }
    }

    fn register(&mut self, index: u64, registration: BrokerRegistration) -> Result<(), Refusal> {
        let node_id = registration.node_id;
        if !self.brokers.contains_key(&node_id) && self.brokers.len() >= limits::BROKERS_MAX {
            return Err(Refusal::Full("BROKERS_MAX"));
        }
        let broker_epoch = i64::try_from(index).map_err(|_| Refusal::Full("i64 broker epoch"))?;
        let state = BrokerState {
            registration,
            broker_epoch,
            fenced: true,
            in_controlled_shutdown: false,
        };
        self.brokers.insert(node_id, state);
        Ok(())
    }

    fn broker_at(&mut self, node_id: i32, epoch: i64) -> Result<&mut BrokerState, Refusal> {
        let broker = self
            .brokers
            .get_mut(&node_id)
            .ok_or(Refusal::UnknownBroker(node_id))?;
        if broker.broker_epoch != epoch {
            return Err(Refusal::StaleBrokerEpoch {
                node_id,
                epoch,
                current: broker.broker_epoch,
            });
        }
        Ok(broker)
    }

    fn create_topic(&mut self, name: &str, topic_id: TopicId) -> Result<(), Refusal> {
        if self.topic_ids.contains_key(name) || self.topics.contains_key(&topic_id) {
            return Err(Refusal::TopicExists(name.to_owned()));
        }
        if self.topics.len() >= limits::TOPICS_MAX {
            return Err(Refusal::Full("TOPICS_MAX"));
        }
        self.topic_ids.insert(name.to_owned(), topic_id);
        let topic = TopicImage {
            name: name.to_owned(),
            topic_id,
            partitions: BTreeMap::new(),
        };
        self.topics.insert(topic_id, topic);
        Ok(())
    }

    fn create_partition(&mut self, p: &PartitionRecord) -> Result<(), Refusal> {
        if self.partition_count >= limits::PARTITIONS_MAX {
            return Err(Refusal::Full("PARTITIONS_MAX"));
        }
        let topic = self
            .topics
            .get_mut(&p.topic_id)
            .ok_or(Refusal::UnknownTopic(p.topic_id))?;
        if usize::try_from(p.partition) != Ok(topic.partitions.len()) {
            return Err(Refusal::PartitionOutOfOrder(p.topic_id, p.partition));
        }
        let state = PartitionState {
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        };
        topic.partitions.insert(p.partition, state);
        self.partition_count += 1;
        Ok(())
    }

    fn change_partition(&mut self, c: &PartitionChange) -> Result<(), Refusal> {
        let state = self
            .topics
            .get_mut(&c.topic_id)
            .ok_or(Refusal::UnknownTopic(c.topic_id))?
            .partitions
            .get_mut(&c.partition)
            .ok_or(Refusal::UnknownPartition(c.topic_id, c.partition))?;
        let isr = c.isr.as_ref().unwrap_or(&state.isr);
        if let Some(id) = isr.iter().find(|id| !state.replicas.contains(id)) {
            return Err(Refusal::BadChange(format!(
                "isr member {id} is not a replica"
            )));
        }
        let leader = c.leader.unwrap_or(state.leader);
        if leader != NO_LEADER && !isr.contains(&leader) {
            return Err(Refusal::BadChange(format!(
                "leader {leader} is not in the isr"
            )));
        }
        let bump = |epoch: i32| epoch.checked_add(1).ok_or(Refusal::Full("i32 epoch"));
        let partition_epoch = bump(state.partition_epoch)?;
        let leader_epoch = match c.leader {
            Some(_) if !mutant(Mutant::NoLeaderEpochBump) => bump(state.leader_epoch)?,
            _ => state.leader_epoch,
        };
        state.isr = isr.clone();
        state.leader = leader;
        state.leader_epoch = leader_epoch;
        state.partition_epoch = partition_epoch;
        Ok(())
    }

    fn remove_topic(&mut self, topic_id: TopicId) -> Result<(), Refusal> {
        let topic = self
            .topics
            .remove(&topic_id)
            .ok_or(Refusal::UnknownTopic(topic_id))?;
        self.topic_ids.remove(&topic.name);
        self.partition_count -= topic.partitions.len();
        self.configs.remove(&ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: topic.name,
        });
        Ok(())
    }

    fn set_config(
        &mut self,
        resource: &ConfigResource,
        key: &str,
        value: Option<&str>,
    ) -> Result<(), Refusal> {
        if resource.resource_type == ConfigResourceType::Topic
            && !self.topic_ids.contains_key(&resource.name)
        {
            return Err(Refusal::ConfigOfUnknownTopic(resource.name.clone()));
        }
        let Some(value) = value else {
            if let Some(entries) = self.configs.get_mut(resource) {
                entries.remove(key);
                if entries.is_empty() {
                    self.configs.remove(resource);
                }
            }
            return Ok(());
        };
        if !self.configs.contains_key(resource)
            && self.configs.len() >= limits::CONFIG_RESOURCES_MAX
        {
            return Err(Refusal::Full("CONFIG_RESOURCES_MAX"));
        }
        let entries = self.configs.entry(resource.clone()).or_default();
        if !entries.contains_key(key) && entries.len() >= limits::CONFIGS_PER_RESOURCE_MAX {
            return Err(Refusal::Full("CONFIGS_PER_RESOURCE_MAX"));
        }
        entries.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    fn allocate_producer_ids(&mut self, p: ProducerIdsRecord) -> Result<(), Refusal> {
        let current = self.next_producer_id();
        if p.next_producer_id <= current {
            return Err(Refusal::ProducerIdsBackwards {
                next: p.next_producer_id,
                current,
            });
        }
        self.producer_ids = Some(p);
        Ok(())
    }
}

/// What [`MetadataImage::apply`] refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// The index was applied already.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The image refused the record.
    #[error(transparent)]
    Refused(Refusal),
}

fn bounded_insert<V>(
    map: &mut BTreeMap<String, V>,
    name: &str,
    value: V,
    bound: &'static str,
) -> Result<(), Refusal> {
    if !map.contains_key(name) && map.len() >= limits::OBJECTS_MAX {
        return Err(Refusal::Full(bound));
    }
    map.insert(name.to_owned(), value);
    Ok(())
}

/// Reading the image.
impl MetadataImage {
    /// The index of the last applied batch (0 before any).
    #[must_use]
    pub const fn last_applied_index(&self) -> u64 {
        self.last_applied_index
    }

    /// The cluster id, once its record is applied.
    #[must_use]
    pub fn cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// Registered brokers by node id.
    #[must_use]
    pub const fn brokers(&self) -> &BTreeMap<i32, BrokerState> {
        &self.brokers
    }

    /// One broker.
    #[must_use]
    pub fn broker(&self, node_id: i32) -> Option<&BrokerState> {
        self.brokers.get(&node_id)
    }

    /// Whether `node_id` is registered, unfenced and not shutting down.
    #[must_use]
    pub fn is_active(&self, node_id: i32) -> bool {
        self.brokers
            .get(&node_id)
            .is_some_and(BrokerState::is_active)
    }

    /// Topics by id.
    #[must_use]
    pub const fn topics(&self) -> &BTreeMap<TopicId, TopicImage> {
        &self.topics
    }

    /// Topic ids by name.
    #[must_use]
    pub const fn topic_ids(&self) -> &BTreeMap<String, TopicId> {
        &self.topic_ids
    }

    /// One topic by name.
    #[must_use]
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// One partition.
    #[must_use]
    pub fn partition(&self, topic_id: TopicId, partition: i32) -> Option<&PartitionState> {
        self.topics.get(&topic_id)?.partitions.get(&partition)
    }

    /// Partitions over all topics.
    #[must_use]
    pub const fn partition_count(&self) -> usize {
        self.partition_count
    }

    /// Every resource's configs.
    #[must_use]
    pub const fn configs(&self) -> &BTreeMap<ConfigResource, BTreeMap<String, String>> {
        &self.configs
    }

    /// SCRAM credentials, ACLs, quotas and delegation tokens.
    #[must_use]
    pub const fn security(&self) -> &SecurityState {
        &self.security
    }

    /// View specs by name.
    #[must_use]
    pub const fn views(&self) -> &BTreeMap<String, Vec<u8>> {
        &self.views
    }

    /// Transforms by name.
    #[must_use]
    pub const fn transforms(&self) -> &BTreeMap<String, TransformEntry> {
        &self.transforms
    }

    /// Plugin versions by name.
    #[must_use]
    pub const fn plugins(&self) -> &BTreeMap<String, PluginVersion> {
        &self.plugins
    }

    /// The last producer-id block's record, if any.
    #[must_use]
    pub const fn producer_ids(&self) -> Option<&ProducerIdsRecord> {
        self.producer_ids.as_ref()
    }

    /// The first id of the next producer-id block.
    #[must_use]
    pub fn next_producer_id(&self) -> i64 {
        self.producer_ids.map_or(0, |p| p.next_producer_id)
    }

    /// Feature levels by name.
    #[must_use]
    pub const fn features(&self) -> &BTreeMap<String, i16> {
        &self.features
    }
}

#[cfg(test)]
mod tests;
