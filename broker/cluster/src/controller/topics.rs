//! Topics, partitions and configs: CreateTopics, DeleteTopics, CreatePartitions,
//! (Incremental)AlterConfigs, ElectLeaders (preferred), and AlterPartition (KIP-497, with KIP-841's and KIP-903's
//! checks: no fenced or shutting-down broker and no stale broker epoch enters an ISR).

use std::collections::{BTreeMap, BTreeSet};

use sluice_kafka::ErrorCode;

use super::brokers::current_broker;
use super::{Controller, ControllerError, Decision, placement};
use crate::image::{MetadataImage, PartitionState};
use crate::limits;
use crate::records::{
    ConfigResource, ConfigResourceType, MetadataRecord, NO_LEADER, PartitionChange,
    PartitionRecord, TopicId, valid_topic_name,
};

/// One topic of a CreateTopics (the server resolves `-1` defaults first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// Its name.
    pub name: String,
    /// Its partition count.
    pub num_partitions: i32,
    /// Its replication factor.
    pub replication_factor: i16,
    /// Its config overrides (validated by the server).
    pub configs: Vec<(String, String)>,
    /// The id to give it, drawn once per client request by the broker that forwards it
    /// (or `None`: the controller draws one). A retry of the same request after a
    /// controller failover finds the topic created with this id and succeeds again instead
    /// of answering TOPIC_ALREADY_EXISTS: the create is idempotent.
    pub topic_id: Option<TopicId>,
    /// Each partition's replicas, as Kafka's CreateTopics `assignments` give them (the
    /// first the preferred leader); `None`: placed over the active brokers.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// One topic's answer to CreateTopics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicResult {
    /// The topic.
    pub name: String,
    /// Its id and replica assignment, or why not.
    pub result: Result<(TopicId, Vec<Vec<i32>>), ControllerError>,
}

/// One config change: set `value`, or delete the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    /// The key.
    pub key: String,
    /// The new value, or `None` to delete.
    pub value: Option<String>,
}

/// One ISR member with its broker epoch (KIP-903; -1 when the leader's request version
/// does not carry it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    /// Its node id.
    pub broker_id: i32,
    /// Its broker epoch as the leader knows it, or -1.
    pub broker_epoch: i64,
}

/// A partition leader's AlterPartition for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartition {
    /// The leader's node id.
    pub broker_id: i32,
    /// The leader's broker epoch.
    pub broker_epoch: i64,
    /// The topic.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The leader epoch the leader has.
    pub leader_epoch: i32,
    /// The partition epoch the leader has.
    pub partition_epoch: i32,
    /// The ISR it asks for.
    pub new_isr: Vec<IsrMember>,
}

impl Controller {
    /// CreateTopics: each topic is created (a topic record, its configs, its partitions
    /// placed over the active brokers) or refused with its own error.
    pub fn create_topics(
        &mut self,
        image: &MetadataImage,
        topics: &[NewTopic],
    ) -> Decision<Vec<TopicResult>> {
        let brokers = placement::brokers(image);
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(topics.len());
        let mut names = BTreeSet::new();
        let mut ids = BTreeSet::new();
        let mut partitions = image.partition_count();
        let mut topic_count = image.topics().len();
        for topic in topics {
            if let Some(done) = created_by_this_request(image, topic) {
                names.insert(topic.name.clone());
                results.push(done);
                continue;
            }
            let result = self
                .check_new_topic(image, topic, &names, brokers.len())
                .and_then(|()| self.check_new_id(image, topic, &ids))
                .and_then(|()| {
                    let n = topic.num_partitions as usize;
                    if topic_count >= limits::TOPICS_MAX || partitions + n > limits::PARTITIONS_MAX
                    {
                        return Err(policy("the cluster is at TOPICS_MAX or PARTITIONS_MAX"));
                    }
                    if records.len() + 1 + n + topic.configs.len() > limits::BATCH_RECORDS_MAX {
                        return Err(policy("the request is over BATCH_RECORDS_MAX records"));
                    }
                    Ok(self.new_topic(image, topic, &brokers, &mut ids, &mut records))
                });
            names.insert(topic.name.clone());
            if result.is_ok() {
                topic_count += 1;
                partitions += topic.num_partitions as usize;
            }
            results.push(TopicResult {
                name: topic.name.clone(),
                result,
            });
        }
        Decision::new(records, results)
    }

    fn check_new_topic(
        &self,
        image: &MetadataImage,
        topic: &NewTopic,
        names: &BTreeSet<String>,
        active: usize,
    ) -> Result<(), ControllerError> {
        let name = &topic.name;
        if !valid_topic_name(name) {
            return Err(ControllerError::new(
                ErrorCode::InvalidTopicException,
                format!("{name:?} is not a legal topic name"),
            ));
        }
        if names.contains(name) {
            return Err(ControllerError::new(
                ErrorCode::InvalidRequest,
                format!("topic {name} is named twice in the request"),
            ));
        }
        if image.topic_ids().contains_key(name) {
            return Err(ControllerError::new(
                ErrorCode::TopicAlreadyExists,
                format!("topic {name} already exists"),
            ));
        }
        partition_count(topic.num_partitions)?;
        let rf = topic.replication_factor;
        if rf < 1 || rf as usize > limits::REPLICAS_MAX || rf as usize > active {
            return Err(ControllerError::new(
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "replication factor {rf} is not within 1..={} (the active brokers, \
                     REPLICAS_MAX {})",
                    active.min(limits::REPLICAS_MAX),
                    limits::REPLICAS_MAX
                ),
            ));
        }
        if let Some(assignments) = &topic.assignments {
            check_assignments(image, assignments, topic.num_partitions, rf)?;
        }
        check_configs(
            &topic_resource(name),
            topic
                .configs
                .iter()
                .map(|(k, v)| (k.as_str(), Some(v.as_str()))),
        )
    }

    fn check_new_id(
        &self,
        image: &MetadataImage,
        topic: &NewTopic,
        ids: &BTreeSet<TopicId>,
    ) -> Result<(), ControllerError> {
        match topic.topic_id {
            Some(id)
                if id.0 == [0; 16] || image.topics().contains_key(&id) || ids.contains(&id) =>
            {
                Err(ControllerError::new(
                    ErrorCode::InvalidRequest,
                    format!("topic id {id:?} is zero or taken"),
                ))
            }
            _ => Ok(()),
        }
    }

    fn new_topic(
        &mut self,
        image: &MetadataImage,
        topic: &NewTopic,
        brokers: &[(i32, Option<String>)],
        ids: &mut BTreeSet<TopicId>,
        records: &mut Vec<MetadataRecord>,
    ) -> (TopicId, Vec<Vec<i32>>) {
        let topic_id = topic.topic_id.filter(|id| ids.insert(*id));
        let topic_id = topic_id.unwrap_or_else(|| {
            loop {
                let mut id = [0; 16];
                id[..8].copy_from_slice(&self.rng.next_u64().to_be_bytes());
                id[8..].copy_from_slice(&self.rng.next_u64().to_be_bytes());
                let id = TopicId(id);
                if id.0 != [0; 16] && !image.topics().contains_key(&id) && ids.insert(id) {
                    break id;
                }
            }
        });
        records.push(MetadataRecord::Topic {
            name: topic.name.clone(),
            topic_id,
        });
        records.extend(
            topic
                .configs
                .iter()
                .map(|(key, value)| MetadataRecord::Config {
                    resource: topic_resource(&topic.name),
                    key: key.clone(),
                    value: Some(value.clone()),
                }),
        );
        let rf = topic.replication_factor as usize;
        let placed = match &topic.assignments {
            Some(assignments) => {
                // As Kafka's manual assignments: the leader is the first active replica and
                // the ISR the active ones (none active: no leader, the first replica's ISR).
                records.extend(assignments.iter().zip(0..).map(|(replicas, partition)| {
                    let isr: Vec<i32> = replicas
                        .iter()
                        .copied()
                        .filter(|b| image.is_active(*b))
                        .collect();
                    let leader = isr.first().copied().unwrap_or(NO_LEADER);
                    MetadataRecord::Partition(PartitionRecord {
                        topic_id,
                        partition,
                        replicas: replicas.clone(),
                        isr: if isr.is_empty() {
                            vec![replicas[0]]
                        } else {
                            isr
                        },
                        leader,
                        leader_epoch: 0,
                        partition_epoch: 0,
                    })
                }));
                return (topic_id, assignments.clone());
            }
            None => placement::place(brokers, 0, topic.num_partitions, rf, &mut self.rng),
        };
        records.extend(new_partitions(topic_id, 0, &placed));
        (topic_id, placed)
    }

    /// DeleteTopics: each topic's removal, or `UNKNOWN_TOPIC_OR_PARTITION`.
    pub fn delete_topics(
        &mut self,
        image: &MetadataImage,
        names: &[String],
    ) -> Decision<Vec<(String, Result<TopicId, ControllerError>)>> {
        let mut records = Vec::new();
        let mut removed = BTreeSet::new();
        let results = names
            .iter()
            .map(|name| {
                let result = match image.topic_ids().get(name) {
                    Some(&id) if removed.insert(id) => {
                        records.push(MetadataRecord::RemoveTopic { topic_id: id });
                        Ok(id)
                    }
                    _ => Err(unknown_topic(name)),
                };
                (name.clone(), result)
            })
            .collect();
        Decision::new(records, results)
    }

    /// CreatePartitions: the topic grows to `count` partitions, the new ones placed with
    /// the replication factor of its partition 0.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`, `INVALID_PARTITIONS` (not above the current count, or
    /// over the bounds), `INVALID_REPLICATION_FACTOR` (fewer active brokers than that).
    pub fn create_partitions(
        &mut self,
        image: &MetadataImage,
        name: &str,
        count: i32,
    ) -> Result<Decision<Vec<Vec<i32>>>, ControllerError> {
        let topic = image
            .topic_by_name(name)
            .ok_or_else(|| unknown_topic(name))?;
        let current = topic.partitions.len() as i32;
        partition_count(count)?;
        if count <= current {
            return Err(ControllerError::new(
                ErrorCode::InvalidPartitions,
                format!("topic {name} has {current} partitions; {count} is not more"),
            ));
        }
        if image.partition_count() + (count - current) as usize > limits::PARTITIONS_MAX {
            return Err(policy("the cluster is at PARTITIONS_MAX"));
        }
        let rf = topic.partitions.get(&0).map_or(1, |p| p.replicas.len());
        let brokers = placement::brokers(image);
        if rf > brokers.len() {
            return Err(ControllerError::new(
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "replication factor {rf} is above the {} active brokers",
                    brokers.len()
                ),
            ));
        }
        let placed = placement::place(&brokers, current, count - current, rf, &mut self.rng);
        let records = new_partitions(topic.topic_id, current, &placed).collect();
        Ok(Decision::new(records, placed))
    }

    /// IncrementalAlterConfigs (`replace` false: set or delete each key) or AlterConfigs
    /// (`replace` true: the resource's configs become exactly the changes). Values are
    /// validated by the server; here only their bounds.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`, `INVALID_CONFIG` (a bound, a malformed resource).
    pub fn alter_configs(
        &mut self,
        image: &MetadataImage,
        resource: &ConfigResource,
        changes: &[ConfigChange],
        replace: bool,
    ) -> Result<Decision<()>, ControllerError> {
        if resource.resource_type == ConfigResourceType::Topic
            && !image.topic_ids().contains_key(&resource.name)
        {
            return Err(unknown_topic(&resource.name));
        }
        check_configs(
            resource,
            changes.iter().map(|c| (c.key.as_str(), c.value.as_deref())),
        )?;
        let mut records = Vec::new();
        if replace {
            let keep: BTreeSet<&str> = changes.iter().map(|c| c.key.as_str()).collect();
            let current = image
                .configs()
                .get(resource)
                .into_iter()
                .flat_map(BTreeMap::keys);
            records.extend(current.filter(|k| !keep.contains(k.as_str())).map(|key| {
                MetadataRecord::Config {
                    resource: resource.clone(),
                    key: key.clone(),
                    value: None,
                }
            }));
        }
        records.extend(changes.iter().map(|c| MetadataRecord::Config {
            resource: resource.clone(),
            key: c.key.clone(),
            value: c.value.clone(),
        }));
        let set = image.configs().get(resource).map_or(0, BTreeMap::len) + changes.len();
        if set > limits::CONFIGS_PER_RESOURCE_MAX && !replace {
            return Err(ControllerError::new(
                ErrorCode::InvalidConfig,
                "over CONFIGS_PER_RESOURCE_MAX configs",
            ));
        }
        Ok(Decision::new(records, ()))
    }

    /// ElectLeaders (KIP-460), the PREFERRED election: each partition's first replica
    /// becomes its leader if it is in the ISR and active. Answers per partition.
    pub fn elect_preferred_leaders(
        &mut self,
        image: &MetadataImage,
        partitions: &[(String, i32)],
    ) -> Decision<Vec<Result<(), ControllerError>>> {
        let mut records = Vec::new();
        let mut done = BTreeSet::new();
        let results = partitions
            .iter()
            .map(|(name, partition)| {
                let topic = image
                    .topic_by_name(name)
                    .ok_or_else(|| unknown_topic(name))?;
                let p = topic.partitions.get(partition).ok_or_else(|| {
                    ControllerError::new(
                        ErrorCode::UnknownTopicOrPartition,
                        format!("{name} has no partition {partition}"),
                    )
                })?;
                let preferred = p.replicas[0];
                if preferred == p.leader || !done.insert((topic.topic_id, *partition)) {
                    return Err(ControllerError::new(
                        ErrorCode::ElectionNotNeeded,
                        format!("{name}-{partition}: broker {preferred} leads already"),
                    ));
                }
                if !p.isr.contains(&preferred) || !image.is_active(preferred) {
                    return Err(ControllerError::new(
                        ErrorCode::PreferredLeaderNotAvailable,
                        format!(
                            "{name}-{partition}: broker {preferred} is not an active ISR member"
                        ),
                    ));
                }
                records.push(MetadataRecord::PartitionChange(PartitionChange {
                    topic_id: topic.topic_id,
                    partition: *partition,
                    leader: Some(preferred),
                    isr: None,
                }));
                Ok(())
            })
            .collect();
        Decision::new(records, results)
    }

    /// AlterPartition: the leader changes the ISR, compare-and-set on its leader epoch and
    /// the partition epoch. The answer is the partition's state after the change.
    ///
    /// # Errors
    /// `STALE_BROKER_EPOCH`, `BROKER_ID_NOT_REGISTERED`, `UNKNOWN_TOPIC_ID`,
    /// `UNKNOWN_TOPIC_OR_PARTITION`, `FENCED_LEADER_EPOCH`, `INVALID_REQUEST` (not the
    /// leader, an ISR without it or outside the replicas), `INVALID_UPDATE_VERSION`,
    /// `INELIGIBLE_REPLICA` (a fenced or shutting-down member, or a stale member epoch).
    pub fn alter_partition(
        &mut self,
        image: &MetadataImage,
        req: &AlterPartition,
    ) -> Result<Decision<PartitionState>, ControllerError> {
        current_broker(image, req.broker_id, req.broker_epoch)?;
        let topic = image.topics().get(&req.topic_id).ok_or_else(|| {
            ControllerError::new(ErrorCode::UnknownTopicId, format!("{:?}", req.topic_id))
        })?;
        let p = topic.partitions.get(&req.partition).ok_or_else(|| {
            ControllerError::new(
                ErrorCode::UnknownTopicOrPartition,
                format!("{} has no partition {}", topic.name, req.partition),
            )
        })?;
        check_alter(image, p, req)?;
        let isr: Vec<i32> = req.new_isr.iter().map(|m| m.broker_id).collect();
        if isr == p.isr {
            return Ok(Decision::new(vec![], p.clone()));
        }
        let after = PartitionState {
            isr: isr.clone(),
            partition_epoch: p.partition_epoch + 1,
            ..p.clone()
        };
        let record = MetadataRecord::PartitionChange(PartitionChange {
            topic_id: req.topic_id,
            partition: req.partition,
            leader: None,
            isr: Some(isr),
        });
        Ok(Decision::new(vec![record], after))
    }
}

/// The answer to a retried create whose topic exists with the id the request carries.
fn created_by_this_request(image: &MetadataImage, topic: &NewTopic) -> Option<TopicResult> {
    let id = topic.topic_id?;
    let existing = image
        .topic_by_name(&topic.name)
        .filter(|t| t.topic_id == id)?;
    let assignment = existing
        .partitions
        .values()
        .map(|p| p.replicas.clone())
        .collect();
    Some(TopicResult {
        name: topic.name.clone(),
        result: Ok((id, assignment)),
    })
}

fn check_alter(
    image: &MetadataImage,
    p: &PartitionState,
    req: &AlterPartition,
) -> Result<(), ControllerError> {
    let invalid = |m: String| Err(ControllerError::new(ErrorCode::InvalidRequest, m));
    if req.leader_epoch != p.leader_epoch {
        return Err(ControllerError::new(
            ErrorCode::FencedLeaderEpoch,
            format!(
                "leader epoch {} is not the current {}",
                req.leader_epoch, p.leader_epoch
            ),
        ));
    }
    if req.broker_id != p.leader {
        return invalid(format!(
            "broker {} is not the leader {}",
            req.broker_id, p.leader
        ));
    }
    if req.partition_epoch != p.partition_epoch {
        return Err(ControllerError::new(
            ErrorCode::InvalidUpdateVersion,
            format!(
                "partition epoch {} is not the current {}",
                req.partition_epoch, p.partition_epoch
            ),
        ));
    }
    let ids: BTreeSet<i32> = req.new_isr.iter().map(|m| m.broker_id).collect();
    if ids.len() != req.new_isr.len() || !ids.contains(&req.broker_id) {
        return invalid("the new ISR names a broker twice or leaves out the leader".into());
    }
    if let Some(id) = ids.iter().find(|id| !p.replicas.contains(id)) {
        return invalid(format!("broker {id} is not a replica"));
    }
    for m in &req.new_isr {
        let eligible = image.broker(m.broker_id).is_some_and(|b| {
            b.is_active() && (m.broker_epoch == -1 || m.broker_epoch == b.broker_epoch)
        });
        if !eligible {
            return Err(ControllerError::new(
                ErrorCode::IneligibleReplica,
                format!(
                    "broker {} (epoch {}) is fenced, shutting down or of another epoch",
                    m.broker_id, m.broker_epoch
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka's checks of manual assignments: one per partition, each `rf` distinct registered
/// brokers.
fn check_assignments(
    image: &MetadataImage,
    assignments: &[Vec<i32>],
    partitions: i32,
    rf: i16,
) -> Result<(), ControllerError> {
    let invalid = |why: String| ControllerError::new(ErrorCode::InvalidReplicaAssignment, why);
    if assignments.len() != partitions as usize {
        return Err(invalid(format!(
            "{} assignments for {partitions} partitions",
            assignments.len()
        )));
    }
    for (p, replicas) in assignments.iter().enumerate() {
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        if replicas.len() != rf as usize || distinct.len() != replicas.len() {
            return Err(invalid(format!(
                "partition {p}: {replicas:?} is not {rf} distinct brokers"
            )));
        }
        if let Some(unknown) = replicas.iter().find(|b| image.broker(**b).is_none()) {
            return Err(invalid(format!(
                "partition {p}: broker {unknown} is not registered"
            )));
        }
    }
    Ok(())
}

fn new_partitions(
    topic_id: TopicId,
    first: i32,
    placed: &[Vec<i32>],
) -> impl Iterator<Item = MetadataRecord> + '_ {
    placed
        .iter()
        .zip(first..)
        .map(move |(replicas, partition)| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition,
                replicas: replicas.clone(),
                isr: replicas.clone(),
                leader: replicas[0],
                leader_epoch: 0,
                partition_epoch: 0,
            })
        })
}

fn check_configs<'a>(
    resource: &ConfigResource,
    entries: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<(), ControllerError> {
    let mut count = 0;
    for (key, value) in entries {
        count += 1;
        let record = MetadataRecord::Config {
            resource: resource.clone(),
            key: key.to_owned(),
            value: value.map(str::to_owned),
        };
        record
            .validate()
            .map_err(|e| ControllerError::new(ErrorCode::InvalidConfig, e.to_string()))?;
    }
    if count > limits::CONFIGS_PER_RESOURCE_MAX {
        return Err(ControllerError::new(
            ErrorCode::InvalidConfig,
            format!("{count} configs are over CONFIGS_PER_RESOURCE_MAX"),
        ));
    }
    Ok(())
}

fn partition_count(count: i32) -> Result<(), ControllerError> {
    if count < 1 || count as usize > limits::PARTITIONS_PER_TOPIC_MAX {
        return Err(ControllerError::new(
            ErrorCode::InvalidPartitions,
            format!(
                "{count} partitions is not within 1..={} (PARTITIONS_PER_TOPIC_MAX)",
                limits::PARTITIONS_PER_TOPIC_MAX
            ),
        ));
    }
    Ok(())
}

fn topic_resource(name: &str) -> ConfigResource {
    ConfigResource {
        resource_type: ConfigResourceType::Topic,
        name: name.to_owned(),
    }
}

fn unknown_topic(name: &str) -> ControllerError {
    ControllerError::new(
        ErrorCode::UnknownTopicOrPartition,
        format!("topic {name} does not exist"),
    )
}

fn policy(message: &str) -> ControllerError {
    ControllerError::new(ErrorCode::PolicyViolation, message)
}
