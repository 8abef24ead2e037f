//! [`ControllerOp`] and [`ControllerReply`]: the operations a broker asks of the active
//! controller and its answers, mirroring `sluice_cluster::Controller`'s calls, serializable
//! so a broker that does not lead can forward them (wire.rs). [`run`] applies one to the
//! controller.
//!
//! Fields are plain values; the ones that are metadata records already (a registration,
//! security changes, a plugin version) travel in the records' own strict codec
//! (`encode_batch` / `decode_batch`), so their bounds are checked once, in one place.

use serde::{Deserialize, Serialize};
use sluice_cluster::controller::{
    BrokerEpoch, ConfigChange, Heartbeat, HeartbeatReply, IsrMember, NewTopic, ProducerIdBlock,
};
use sluice_cluster::records::{
    BrokerRegistration, ConfigResource, ConfigResourceType, PluginVersion, TopicId,
};
use sluice_cluster::{Controller, ControllerError, Decision, MetadataImage, MetadataRecord};
use sluice_kafka::ErrorCode;
use sluice_security::records::SecurityRecord;

/// One topic of a CreateTopics ([`NewTopic`]'s fields; `topic_id` drawn once per client
/// request makes a retry after a failover idempotent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSpec {
    pub name: String,
    pub num_partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
    pub topic_id: Option<[u8; 16]>,
    /// Each partition's replicas (a migrated topic stays where its data is); `None`: placed.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// An operation for the active controller (each is one `Controller` call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ControllerOp {
    /// BrokerRegistration: answers [`ControllerReply::BrokerEpoch`].
    RegisterBroker(#[serde(with = "one_record")] BrokerRegistration),
    /// BrokerHeartbeat: answers [`ControllerReply::Heartbeat`].
    Heartbeat {
        node_id: i32,
        broker_epoch: i64,
        current_metadata_offset: i64,
        want_fence: bool,
        want_shut_down: bool,
    },
    /// UnregisterBroker: answers [`ControllerReply::Done`].
    UnregisterBroker {
        node_id: i32,
    },
    /// CreateTopics: answers [`ControllerReply::Topics`].
    CreateTopics(Vec<TopicSpec>),
    /// DeleteTopics by name: answers [`ControllerReply::Deleted`].
    DeleteTopics(Vec<String>),
    /// CreatePartitions (the new total): answers [`ControllerReply::Assignments`].
    CreatePartitions {
        name: String,
        count: i32,
    },
    /// (Incremental)AlterConfigs of a topic (`broker` false) or a broker: `None` deletes a
    /// key; `replace` drops the keys not named. Answers [`ControllerReply::Done`].
    AlterConfigs {
        broker: bool,
        name: String,
        changes: Vec<(String, Option<String>)>,
        replace: bool,
    },
    /// SCRAM, ACL, quota and token changes, in order: answers [`ControllerReply::Done`].
    Security(#[serde(with = "security_records")] Vec<SecurityRecord>),
    /// AllocateProducerIds: answers [`ControllerReply::ProducerIds`].
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// A view (its spec's JSON): answers [`ControllerReply::Done`].
    PutView {
        name: String,
        spec: Vec<u8>,
    },
    RemoveView {
        name: String,
    },
    /// A transform (its spec): answers [`ControllerReply::Generation`].
    PutTransform {
        name: String,
        spec: Vec<u8>,
    },
    RemoveTransform {
        name: String,
    },
    /// A plugin version: answers [`ControllerReply::Done`].
    PutPlugin(#[serde(with = "plugin_record")] PluginVersion),
    RemovePlugin {
        name: String,
    },
    /// ElectLeaders (preferred): answers [`ControllerReply::Elected`].
    ElectPreferredLeaders(Vec<(String, i32)>),
    /// AlterPartition (KIP-497): a partition leader's ISR change, compare-and-set on its
    /// leader epoch and the partition epoch; each new ISR member with the broker epoch the
    /// leader saw (-1: unknown). Answers [`ControllerReply::Partition`].
    AlterPartition {
        broker_id: i32,
        broker_epoch: i64,
        topic_id: [u8; 16],
        partition: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        new_isr: Vec<(i32, i64)>,
    },
    /// A broker that is not a voter (`process.roles=broker`) asks to follow the metadata log
    /// as a Raft learner, reached at `controller_addr`: a membership change (no metadata
    /// record), run by the controller task itself. Answers [`ControllerReply::Done`].
    AddLearner {
        node_id: i32,
        controller_addr: String,
    },
}

impl ControllerOp {
    /// Whether applying it twice does what applying it once does, so a forward whose
    /// outcome is unknown may be sent again: a creation with its topic id (the second finds
    /// it made by this request), a registration (the same incarnation), a heartbeat, the
    /// whole-set config changes, the security upserts and removals, views, plugins. Not:
    /// deletions and partition growth (a second answers as if the first had not happened),
    /// transforms (a new generation), producer-id blocks (a second block).
    pub fn is_idempotent(&self) -> bool {
        match self {
            ControllerOp::CreateTopics(specs) => specs.iter().all(|s| s.topic_id.is_some()),
            ControllerOp::RegisterBroker(_)
            | ControllerOp::Heartbeat { .. }
            | ControllerOp::AlterConfigs { replace: true, .. }
            | ControllerOp::Security(_)
            | ControllerOp::PutView { .. }
            | ControllerOp::PutPlugin(_)
            | ControllerOp::ElectPreferredLeaders(_)
            | ControllerOp::AddLearner { .. } => true,
            ControllerOp::UnregisterBroker { .. }
            | ControllerOp::DeleteTopics(_)
            | ControllerOp::CreatePartitions { .. }
            | ControllerOp::AlterConfigs { replace: false, .. }
            | ControllerOp::AllocateProducerIds { .. }
            | ControllerOp::RemoveView { .. }
            | ControllerOp::PutTransform { .. }
            | ControllerOp::RemoveTransform { .. }
            | ControllerOp::RemovePlugin { .. }
            | ControllerOp::AlterPartition { .. } => false,
        }
    }
}

/// A refusal by the controller: Kafka's error code and a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}: {message}", ErrorCode::from_code(*.code).map_or("UNKNOWN", ErrorCode::name))]
pub struct OpError {
    /// Kafka's error code ([`ErrorCode::code`]).
    pub code: i16,
    pub message: String,
}

impl From<ControllerError> for OpError {
    fn from(e: ControllerError) -> Self {
        OpError {
            code: e.code.code(),
            message: e.message,
        }
    }
}

/// One topic's answer: its id and replica assignment, or why not.
pub type TopicOutcome = Result<([u8; 16], Vec<Vec<i32>>), OpError>;

/// The controller's answer to a [`ControllerOp`], once its records are applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerReply {
    /// Done, nothing to report.
    Done,
    /// The registration's broker epoch.
    BrokerEpoch(i64),
    Heartbeat {
        is_caught_up: bool,
        is_fenced: bool,
        should_shut_down: bool,
    },
    /// Per topic, in request order.
    Topics(Vec<(String, TopicOutcome)>),
    /// Per topic deleted, in request order: its id, or why not.
    Deleted(Vec<(String, Result<[u8; 16], OpError>)>),
    /// The topic's replica assignment after CreatePartitions.
    Assignments(Vec<Vec<i32>>),
    /// The transform's generation.
    Generation(u32),
    /// A block of producer ids: `first..first + len`.
    ProducerIds { first: i64, len: i64 },
    /// Per partition, in request order.
    Elected(Vec<Result<(), OpError>>),
    /// A partition's state after an AlterPartition.
    Partition {
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
    },
}

/// What [`run`] decided: the records to commit and the reply, which for a registration
/// still needs the index its records commit at.
pub(crate) struct Decided {
    pub records: Vec<MetadataRecord>,
    pub reply: ControllerReply,
    /// The reply is [`ControllerReply::BrokerEpoch`] of the last record's index.
    pub epoch_of_commit: bool,
}

fn decided<R>(d: Decision<R>, reply: impl FnOnce(R) -> ControllerReply) -> Decided {
    Decided {
        records: d.records,
        reply: reply(d.reply),
        epoch_of_commit: false,
    }
}

/// Runs `op` on the controller against `image` at `now_ms`.
pub(crate) fn run(
    controller: &mut Controller,
    image: &MetadataImage,
    now_ms: i64,
    op: ControllerOp,
) -> Result<Decided, OpError> {
    match op {
        ControllerOp::RegisterBroker(_)
        | ControllerOp::Heartbeat { .. }
        | ControllerOp::UnregisterBroker { .. }
        | ControllerOp::AllocateProducerIds { .. } => brokers(controller, image, now_ms, op),
        ControllerOp::CreateTopics(_)
        | ControllerOp::DeleteTopics(_)
        | ControllerOp::CreatePartitions { .. }
        | ControllerOp::AlterConfigs { .. }
        | ControllerOp::ElectPreferredLeaders(_)
        | ControllerOp::AlterPartition { .. } => topics(controller, image, op),
        _ => objects(controller, image, op),
    }
}

/// The brokers' lifecycle and producer ids.
fn brokers(
    controller: &mut Controller,
    image: &MetadataImage,
    now_ms: i64,
    op: ControllerOp,
) -> Result<Decided, OpError> {
    let done = |()| ControllerReply::Done;
    Ok(match op {
        ControllerOp::RegisterBroker(registration) => {
            let d = controller.register_broker(image, now_ms, registration)?;
            let epoch_of_commit = d.reply == BrokerEpoch::OfCommit;
            let epoch = match d.reply {
                BrokerEpoch::Existing(epoch) => epoch,
                BrokerEpoch::OfCommit => -1,
            };
            Decided {
                records: d.records,
                reply: ControllerReply::BrokerEpoch(epoch),
                epoch_of_commit,
            }
        }
        ControllerOp::Heartbeat {
            node_id,
            broker_epoch,
            current_metadata_offset,
            want_fence,
            want_shut_down,
        } => {
            let hb = Heartbeat {
                node_id,
                broker_epoch,
                current_metadata_offset,
                want_fence,
                want_shut_down,
            };
            decided(controller.heartbeat(image, now_ms, hb)?, heartbeat_reply)
        }
        ControllerOp::UnregisterBroker { node_id } => {
            decided(controller.unregister_broker(image, now_ms, node_id)?, done)
        }
        ControllerOp::AllocateProducerIds {
            broker_id,
            broker_epoch,
        } => decided(
            controller.allocate_producer_ids(image, broker_id, broker_epoch)?,
            |ProducerIdBlock { first, len }| ControllerReply::ProducerIds { first, len },
        ),
        other => unreachable!("brokers given {other:?}"),
    })
}

/// Topics, partitions and configs.
fn topics(
    controller: &mut Controller,
    image: &MetadataImage,
    op: ControllerOp,
) -> Result<Decided, OpError> {
    let done = |()| ControllerReply::Done;
    Ok(match op {
        ControllerOp::CreateTopics(specs) => {
            let topics: Vec<NewTopic> = specs.into_iter().map(new_topic).collect();
            decided(controller.create_topics(image, &topics), |results| {
                ControllerReply::Topics(
                    results
                        .into_iter()
                        .map(|t| {
                            (
                                t.name,
                                t.result.map(|(id, a)| (id.0, a)).map_err(Into::into),
                            )
                        })
                        .collect(),
                )
            })
        }
        ControllerOp::DeleteTopics(names) => {
            decided(controller.delete_topics(image, &names), |results| {
                ControllerReply::Deleted(
                    results
                        .into_iter()
                        .map(|(name, r)| (name, r.map(|id| id.0).map_err(Into::into)))
                        .collect(),
                )
            })
        }
        ControllerOp::CreatePartitions { name, count } => decided(
            controller.create_partitions(image, &name, count)?,
            ControllerReply::Assignments,
        ),
        ControllerOp::AlterConfigs {
            broker,
            name,
            changes,
            replace,
        } => {
            let resource = ConfigResource {
                resource_type: if broker {
                    ConfigResourceType::Broker
                } else {
                    ConfigResourceType::Topic
                },
                name,
            };
            let changes: Vec<ConfigChange> = changes
                .into_iter()
                .map(|(key, value)| ConfigChange { key, value })
                .collect();
            decided(
                controller.alter_configs(image, &resource, &changes, replace)?,
                done,
            )
        }
        ControllerOp::ElectPreferredLeaders(partitions) => decided(
            controller.elect_preferred_leaders(image, &partitions),
            |results| {
                ControllerReply::Elected(
                    results.into_iter().map(|r| r.map_err(Into::into)).collect(),
                )
            },
        ),
        op @ ControllerOp::AlterPartition { .. } => alter_partition(controller, image, op)?,
        other => unreachable!("topics given {other:?}"),
    })
}

/// AlterPartition: the leader's ISR change, decided by the controller's compare-and-set.
fn alter_partition(
    controller: &mut Controller,
    image: &MetadataImage,
    op: ControllerOp,
) -> Result<Decided, OpError> {
    let ControllerOp::AlterPartition {
        broker_id,
        broker_epoch,
        topic_id,
        partition,
        leader_epoch,
        partition_epoch,
        new_isr,
    } = op
    else {
        unreachable!("alter_partition given {op:?}")
    };
    let request = sluice_cluster::controller::AlterPartition {
        broker_id,
        broker_epoch,
        topic_id: TopicId(topic_id),
        partition,
        leader_epoch,
        partition_epoch,
        new_isr: new_isr
            .into_iter()
            .map(|(broker_id, broker_epoch)| IsrMember {
                broker_id,
                broker_epoch,
            })
            .collect(),
    };
    Ok(decided(controller.alter_partition(image, &request)?, |p| {
        ControllerReply::Partition {
            replicas: p.replicas,
            isr: p.isr,
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        }
    }))
}

/// Security, views, transforms and plugins.
fn objects(
    controller: &mut Controller,
    image: &MetadataImage,
    op: ControllerOp,
) -> Result<Decided, OpError> {
    let done = |()| ControllerReply::Done;
    Ok(match op {
        ControllerOp::Security(changes) => decided(controller.security(image, changes)?, done),
        ControllerOp::PutView { name, spec } => {
            decided(controller.put_view(image, &name, spec)?, done)
        }
        ControllerOp::RemoveView { name } => decided(controller.remove_view(image, &name)?, done),
        ControllerOp::PutTransform { name, spec } => decided(
            controller.put_transform(image, &name, spec)?,
            ControllerReply::Generation,
        ),
        ControllerOp::RemoveTransform { name } => {
            decided(controller.remove_transform(image, &name)?, done)
        }
        ControllerOp::PutPlugin(version) => decided(controller.put_plugin(image, version)?, done),
        ControllerOp::RemovePlugin { name } => {
            decided(controller.remove_plugin(image, &name)?, done)
        }
        ControllerOp::AddLearner { .. } => {
            return Err(OpError {
                code: ErrorCode::InvalidRequest.code(),
                message: "a learner is added by the controller task, not decided".to_owned(),
            });
        }
        other => unreachable!("objects given {other:?}"),
    })
}

fn heartbeat_reply(r: HeartbeatReply) -> ControllerReply {
    ControllerReply::Heartbeat {
        is_caught_up: r.is_caught_up,
        is_fenced: r.is_fenced,
        should_shut_down: r.should_shut_down,
    }
}

fn new_topic(spec: TopicSpec) -> NewTopic {
    NewTopic {
        name: spec.name,
        num_partitions: spec.num_partitions,
        replication_factor: spec.replication_factor,
        configs: spec.configs,
        topic_id: spec.topic_id.map(TopicId),
        assignments: spec.assignments,
    }
}

/// Records as one encoded batch (empty bytes for none), decoded strictly.
fn to_batch(records: &[MetadataRecord]) -> Result<Vec<u8>, String> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    sluice_cluster::encode_batch(records).map_err(|e| e.to_string())
}

fn from_batch(bytes: &[u8]) -> Result<Vec<MetadataRecord>, String> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    sluice_cluster::decode_batch(bytes).map_err(|e| e.to_string())
}

/// A registration in the records' codec.
mod one_record {
    use super::*;
    use serde::{Deserializer, Serializer, de::Error as _, ser::Error as _};

    pub fn serialize<S: Serializer>(r: &BrokerRegistration, s: S) -> Result<S::Ok, S::Error> {
        let bytes =
            to_batch(&[MetadataRecord::RegisterBroker(r.clone())]).map_err(S::Error::custom)?;
        serde_bytes_ser(&bytes, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BrokerRegistration, D::Error> {
        let bytes: Vec<u8> = Deserialize::deserialize(d)?;
        match from_batch(&bytes).map_err(D::Error::custom)?.as_slice() {
            [MetadataRecord::RegisterBroker(r)] => Ok(r.clone()),
            _ => Err(D::Error::custom("expected one broker registration")),
        }
    }
}

/// A plugin version in the records' codec.
mod plugin_record {
    use super::*;
    use serde::{Deserializer, Serializer, de::Error as _, ser::Error as _};

    pub fn serialize<S: Serializer>(v: &PluginVersion, s: S) -> Result<S::Ok, S::Error> {
        let bytes =
            to_batch(&[MetadataRecord::PluginVersion(v.clone())]).map_err(S::Error::custom)?;
        serde_bytes_ser(&bytes, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PluginVersion, D::Error> {
        let bytes: Vec<u8> = Deserialize::deserialize(d)?;
        match from_batch(&bytes).map_err(D::Error::custom)?.as_slice() {
            [MetadataRecord::PluginVersion(v)] => Ok(v.clone()),
            _ => Err(D::Error::custom("expected one plugin version")),
        }
    }
}

/// Security changes in the records' codec.
mod security_records {
    use super::*;
    use serde::{Deserializer, Serializer, de::Error as _, ser::Error as _};

    pub fn serialize<S: Serializer>(v: &[SecurityRecord], s: S) -> Result<S::Ok, S::Error> {
        let records: Vec<MetadataRecord> =
            v.iter().cloned().map(MetadataRecord::Security).collect();
        serde_bytes_ser(&to_batch(&records).map_err(S::Error::custom)?, s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SecurityRecord>, D::Error> {
        let bytes: Vec<u8> = Deserialize::deserialize(d)?;
        from_batch(&bytes)
            .map_err(D::Error::custom)?
            .into_iter()
            .map(|r| match r {
                MetadataRecord::Security(s) => Ok(s),
                _ => Err(D::Error::custom("expected security records only")),
            })
            .collect()
    }
}

fn serde_bytes_ser<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    Serialize::serialize(bytes, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_cluster::records::{IncarnationId, Listener, SecurityProtocol};

    #[test]
    fn operations_round_trip_through_the_wire_encoding() {
        let registration = BrokerRegistration {
            node_id: 2,
            incarnation_id: IncarnationId([7; 16]),
            listeners: vec![Listener {
                name: "PLAINTEXT".into(),
                host: "127.0.0.2".into(),
                port: 9092,
                security_protocol: SecurityProtocol::Plaintext,
            }],
            rack: None,
        };
        let ops = [
            ControllerOp::RegisterBroker(registration),
            ControllerOp::CreateTopics(vec![TopicSpec {
                name: "orders".into(),
                num_partitions: 3,
                replication_factor: 1,
                configs: vec![("retention.ms".into(), "1000".into())],
                topic_id: Some([9; 16]),
                assignments: None,
            }]),
            ControllerOp::Security(vec![]),
        ];
        for op in ops {
            let bytes = postcard::to_allocvec(&op).unwrap();
            assert_eq!(postcard::from_bytes::<ControllerOp>(&bytes).unwrap(), op);
        }
    }
}
