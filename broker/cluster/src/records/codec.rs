//! The byte forms of each record's fields (layout in `records`' module docs): the writers
//! and the strict readers, one pair per field shape.

use sluice_kafka::bytes::{Limit, ReadError, Reader, Writer};
use sluice_security::records::SecurityRecord;

use super::{
    BrokerRegistration, ConfigResource, ConfigResourceType, DecodeError, IncarnationId, Listener,
    MetadataRecord, PartitionChange, PartitionRecord, PluginKind, PluginVersion, ProducerIdsRecord,
    SecurityProtocol, TopicId,
};
use crate::limits::{self, named};

mod kind {
    pub const CLUSTER_ID: u8 = 0;
    pub const REGISTER_BROKER: u8 = 1;
    pub const UNREGISTER_BROKER: u8 = 2;
    pub const FENCE_BROKER: u8 = 3;
    pub const UNFENCE_BROKER: u8 = 4;
    pub const CONTROLLED_SHUTDOWN: u8 = 5;
    pub const TOPIC: u8 = 6;
    pub const PARTITION: u8 = 7;
    pub const PARTITION_CHANGE: u8 = 8;
    pub const REMOVE_TOPIC: u8 = 9;
    pub const CONFIG: u8 = 10;
    pub const SECURITY: u8 = 11;
    pub const VIEW: u8 = 12;
    pub const REMOVE_VIEW: u8 = 13;
    pub const TRANSFORM: u8 = 14;
    pub const REMOVE_TRANSFORM: u8 = 15;
    pub const PLUGIN_VERSION: u8 = 16;
    pub const REMOVE_PLUGIN: u8 = 17;
    pub const PRODUCER_IDS: u8 = 18;
    pub const FEATURE_LEVEL: u8 = 19;
}

pub(super) fn encode_fields(record: &MetadataRecord, w: &mut Writer) {
    match record {
        MetadataRecord::ClusterId { cluster_id } => {
            w.u8(kind::CLUSTER_ID).str_u16(cluster_id);
        }
        MetadataRecord::RegisterBroker(r) => put_registration(w.u8(kind::REGISTER_BROKER), r),
        MetadataRecord::UnregisterBroker {
            node_id,
            broker_epoch,
        } => put_broker(w, kind::UNREGISTER_BROKER, *node_id, *broker_epoch),
        MetadataRecord::FenceBroker {
            node_id,
            broker_epoch,
        } => put_broker(w, kind::FENCE_BROKER, *node_id, *broker_epoch),
        MetadataRecord::UnfenceBroker {
            node_id,
            broker_epoch,
        } => put_broker(w, kind::UNFENCE_BROKER, *node_id, *broker_epoch),
        MetadataRecord::BrokerControlledShutdown {
            node_id,
            broker_epoch,
        } => put_broker(w, kind::CONTROLLED_SHUTDOWN, *node_id, *broker_epoch),
        MetadataRecord::Topic { name, topic_id } => {
            w.u8(kind::TOPIC).str_u16(name).raw(&topic_id.0);
        }
        MetadataRecord::Partition(p) => {
            w.u8(kind::PARTITION).raw(&p.topic_id.0).i32(p.partition);
            put_ids(w, &p.replicas);
            put_ids(w, &p.isr);
            w.i32(p.leader).i32(p.leader_epoch).i32(p.partition_epoch);
        }
        MetadataRecord::PartitionChange(c) => put_change(w, c),
        MetadataRecord::RemoveTopic { topic_id } => {
            w.u8(kind::REMOVE_TOPIC).raw(&topic_id.0);
        }
        MetadataRecord::Config {
            resource,
            key,
            value,
        } => {
            w.u8(kind::CONFIG).i8(resource.resource_type.code());
            w.str_u16(&resource.name).str_u16(key);
            put_opt_str(w, value.as_deref());
        }
        MetadataRecord::Security(record) => {
            w.u8(kind::SECURITY).bytes_u16(&record.encode());
        }
        _ => encode_objects(record, w),
    }
}

fn encode_objects(record: &MetadataRecord, w: &mut Writer) {
    match record {
        MetadataRecord::View { name, spec } => {
            w.u8(kind::VIEW).str_u16(name);
            put_spec(w, spec);
        }
        MetadataRecord::RemoveView { name } => {
            w.u8(kind::REMOVE_VIEW).str_u16(name);
        }
        MetadataRecord::Transform {
            name,
            generation,
            spec,
        } => {
            w.u8(kind::TRANSFORM).str_u16(name).u32(*generation);
            put_spec(w, spec);
        }
        MetadataRecord::RemoveTransform { name } => {
            w.u8(kind::REMOVE_TRANSFORM).str_u16(name);
        }
        MetadataRecord::PluginVersion(p) => {
            w.u8(kind::PLUGIN_VERSION).str_u16(&p.name).raw(&p.sha256);
            w.u64(p.size_bytes).u8(p.kind.code());
        }
        MetadataRecord::RemovePlugin { name } => {
            w.u8(kind::REMOVE_PLUGIN).str_u16(name);
        }
        MetadataRecord::ProducerIds(p) => {
            w.u8(kind::PRODUCER_IDS).i32(p.broker_id);
            w.i64(p.broker_epoch).i64(p.next_producer_id);
        }
        MetadataRecord::FeatureLevel { name, level } => {
            w.u8(kind::FEATURE_LEVEL).str_u16(name).i16(*level);
        }
        _ => unreachable!("encode_fields handles the other records"),
    }
}

pub(super) fn decode_fields(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let record = match r.u8("record type")? {
        kind::CLUSTER_ID => MetadataRecord::ClusterId {
            cluster_id: r.str_u16("cluster id", named::CLUSTER_ID)?,
        },
        kind::REGISTER_BROKER => MetadataRecord::RegisterBroker(get_registration(r)?),
        kind::UNREGISTER_BROKER => {
            let (node_id, broker_epoch) = get_broker(r)?;
            MetadataRecord::UnregisterBroker {
                node_id,
                broker_epoch,
            }
        }
        kind::FENCE_BROKER => {
            let (node_id, broker_epoch) = get_broker(r)?;
            MetadataRecord::FenceBroker {
                node_id,
                broker_epoch,
            }
        }
        kind::UNFENCE_BROKER => {
            let (node_id, broker_epoch) = get_broker(r)?;
            MetadataRecord::UnfenceBroker {
                node_id,
                broker_epoch,
            }
        }
        kind::CONTROLLED_SHUTDOWN => {
            let (node_id, broker_epoch) = get_broker(r)?;
            MetadataRecord::BrokerControlledShutdown {
                node_id,
                broker_epoch,
            }
        }
        kind::TOPIC => MetadataRecord::Topic {
            name: r.str_u16("topic name", named::TOPIC_NAME)?,
            topic_id: TopicId(r.array("topic id")?),
        },
        kind::PARTITION => MetadataRecord::Partition(get_partition(r)?),
        kind::PARTITION_CHANGE => MetadataRecord::PartitionChange(get_change(r)?),
        kind::REMOVE_TOPIC => MetadataRecord::RemoveTopic {
            topic_id: TopicId(r.array("topic id")?),
        },
        kind::CONFIG => get_config(r)?,
        kind::SECURITY => {
            let bytes = r.bytes_u16("security record", named::SECURITY_RECORD)?;
            MetadataRecord::Security(SecurityRecord::decode(bytes)?)
        }
        other => decode_objects(other, r)?,
    };
    Ok(record)
}

fn decode_objects(kind: u8, r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let name = |r: &mut Reader<'_>| r.str_u16("name", named::OBJECT_NAME);
    let record = match kind {
        kind::VIEW => MetadataRecord::View {
            name: name(r)?,
            spec: get_spec(r)?,
        },
        kind::REMOVE_VIEW => MetadataRecord::RemoveView { name: name(r)? },
        kind::TRANSFORM => MetadataRecord::Transform {
            name: name(r)?,
            generation: r.u32("generation")?,
            spec: get_spec(r)?,
        },
        kind::REMOVE_TRANSFORM => MetadataRecord::RemoveTransform { name: name(r)? },
        kind::PLUGIN_VERSION => {
            let name = r.str_u16("plugin name", named::PLUGIN_NAME)?;
            let sha256 = r.array("sha256")?;
            let size_bytes = r.u64("plugin size")?;
            let code = r.u8("plugin kind")?;
            let kind = PluginKind::ALL
                .into_iter()
                .find(|k| k.code() == code)
                .ok_or(DecodeError::Unknown {
                    what: "plugin kind",
                    value: i64::from(code),
                })?;
            MetadataRecord::PluginVersion(PluginVersion {
                name,
                sha256,
                size_bytes,
                kind,
            })
        }
        kind::REMOVE_PLUGIN => MetadataRecord::RemovePlugin {
            name: r.str_u16("plugin name", named::PLUGIN_NAME)?,
        },
        kind::PRODUCER_IDS => MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: r.i32("broker id")?,
            broker_epoch: r.i64("broker epoch")?,
            next_producer_id: r.i64("next producer id")?,
        }),
        kind::FEATURE_LEVEL => MetadataRecord::FeatureLevel {
            name: r.str_u16("feature name", named::FEATURE_NAME)?,
            level: r.i16("feature level")?,
        },
        other => {
            return Err(DecodeError::Unknown {
                what: "record type",
                value: i64::from(other),
            });
        }
    };
    Ok(record)
}

fn put_broker(w: &mut Writer, kind: u8, node_id: i32, broker_epoch: i64) {
    w.u8(kind).i32(node_id).i64(broker_epoch);
}

fn get_broker(r: &mut Reader<'_>) -> Result<(i32, i64), DecodeError> {
    Ok((r.i32("node id")?, r.i64("broker epoch")?))
}

pub(crate) fn put_registration(w: &mut Writer, r: &BrokerRegistration) {
    w.i32(r.node_id).raw(&r.incarnation_id.0);
    w.count_i32(r.listeners.len());
    for l in &r.listeners {
        w.str_u16(&l.name).str_u16(&l.host).u16(l.port);
        w.i16(l.security_protocol.id());
    }
    put_opt_str(w, r.rack.as_deref());
}

pub(crate) fn get_registration(r: &mut Reader<'_>) -> Result<BrokerRegistration, DecodeError> {
    let node_id = r.i32("node id")?;
    let incarnation_id = IncarnationId(r.array("incarnation id")?);
    // A listener is at least two empty strings, a port and a protocol.
    let count = r.count_i32("listeners", named::LISTENERS, 8)?;
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let name = r.str_u16("listener name", named::LISTENER_FIELD)?;
        let host = r.str_u16("listener host", named::LISTENER_FIELD)?;
        let port = r.u16("listener port")?;
        let id = r.i16("security protocol")?;
        let security_protocol = SecurityProtocol::from_id(id).ok_or(DecodeError::Unknown {
            what: "security protocol",
            value: i64::from(id),
        })?;
        listeners.push(Listener {
            name,
            host,
            port,
            security_protocol,
        });
    }
    let rack = get_opt_str(r, "rack", named::RACK)?;
    Ok(BrokerRegistration {
        node_id,
        incarnation_id,
        listeners,
        rack,
    })
}

fn get_partition(r: &mut Reader<'_>) -> Result<PartitionRecord, DecodeError> {
    Ok(PartitionRecord {
        topic_id: TopicId(r.array("topic id")?),
        partition: r.i32("partition")?,
        replicas: get_ids(r, "replicas")?,
        isr: get_ids(r, "isr")?,
        leader: r.i32("leader")?,
        leader_epoch: r.i32("leader epoch")?,
        partition_epoch: r.i32("partition epoch")?,
    })
}

fn put_change(w: &mut Writer, c: &PartitionChange) {
    w.u8(kind::PARTITION_CHANGE)
        .raw(&c.topic_id.0)
        .i32(c.partition);
    match c.leader {
        None => w.u8(0),
        Some(leader) => w.u8(1).i32(leader),
    };
    match &c.isr {
        None => {
            w.u8(0);
        }
        Some(isr) => put_ids(w.u8(1), isr),
    }
}

fn get_change(r: &mut Reader<'_>) -> Result<PartitionChange, DecodeError> {
    let topic_id = TopicId(r.array("topic id")?);
    let partition = r.i32("partition")?;
    let leader = match get_flag(r, "has leader")? {
        true => Some(r.i32("leader")?),
        false => None,
    };
    let isr = match get_flag(r, "has isr")? {
        true => Some(get_ids(r, "isr")?),
        false => None,
    };
    Ok(PartitionChange {
        topic_id,
        partition,
        leader,
        isr,
    })
}

fn get_config(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let code = r.i8("config resource type")?;
    let resource_type = match code {
        2 => ConfigResourceType::Topic,
        4 => ConfigResourceType::Broker,
        other => {
            return Err(DecodeError::Unknown {
                what: "config resource type",
                value: i64::from(other),
            });
        }
    };
    Ok(MetadataRecord::Config {
        resource: ConfigResource {
            resource_type,
            name: r.str_u16("config resource name", named::TOPIC_NAME)?,
        },
        key: r.str_u16("config key", named::CONFIG_KEY)?,
        value: get_opt_str(r, "config value", named::CONFIG_VALUE)?,
    })
}

fn put_ids(w: &mut Writer, ids: &[i32]) {
    w.count_i32(ids.len());
    for &id in ids {
        w.i32(id);
    }
}

fn get_ids(r: &mut Reader<'_>, what: &'static str) -> Result<Vec<i32>, DecodeError> {
    let count = r.count_i32(what, named::REPLICAS, 4)?;
    (0..count)
        .map(|_| r.i32(what).map_err(DecodeError::from))
        .collect()
}

fn put_opt_str(w: &mut Writer, s: Option<&str>) {
    match s {
        None => w.u8(0),
        Some(s) => w.u8(1).str_u16(s),
    };
}

fn get_opt_str(
    r: &mut Reader<'_>,
    what: &'static str,
    limit: Limit,
) -> Result<Option<String>, DecodeError> {
    match get_flag(r, what)? {
        true => Ok(Some(r.str_u16(what, limit)?)),
        false => Ok(None),
    }
}

fn get_flag(r: &mut Reader<'_>, what: &'static str) -> Result<bool, DecodeError> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(DecodeError::Unknown {
            what,
            value: i64::from(other),
        }),
    }
}

fn put_spec(w: &mut Writer, spec: &[u8]) {
    w.count_u32(spec.len()).raw(spec);
}

fn get_spec(r: &mut Reader<'_>) -> Result<Vec<u8>, DecodeError> {
    let len = r.u32("spec")? as usize;
    if len > limits::SPEC_BYTES_MAX {
        return Err(ReadError::TooLong {
            what: "spec",
            len,
            limit: named::SPEC,
        }
        .into());
    }
    Ok(r.take("spec", len)?.to_vec())
}
