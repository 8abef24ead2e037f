//! What a record must satisfy to be written, and so to be decoded: the bounds of
//! `limits.rs` (errors name them) and the shapes no controller writes (an empty name, a
//! leader outside the ISR, a spec that is not JSON).

use std::collections::BTreeSet;

use sluice_kafka::bytes::{Limit, ReadError};

use super::{DecodeError, MetadataRecord, NO_LEADER, PartitionRecord, TopicId};
use crate::limits::{self, named};

pub(super) fn record(record: &MetadataRecord) -> Result<(), DecodeError> {
    match record {
        MetadataRecord::ClusterId { cluster_id } => {
            text("cluster id", cluster_id, named::CLUSTER_ID)
        }
        MetadataRecord::RegisterBroker(r) => {
            node_id(r.node_id)?;
            count("listeners", r.listeners.len(), named::LISTENERS)?;
            let mut names = BTreeSet::new();
            for l in &r.listeners {
                text("listener name", &l.name, named::LISTENER_FIELD)?;
                text("listener host", &l.host, named::LISTENER_FIELD)?;
                if !names.insert(&l.name) {
                    return invalid(format!("listener {} registered twice", l.name));
                }
            }
            match &r.rack {
                Some(rack) => text("rack", rack, named::RACK),
                None => Ok(()),
            }
        }
        MetadataRecord::UnregisterBroker {
            node_id: id,
            broker_epoch,
        }
        | MetadataRecord::FenceBroker {
            node_id: id,
            broker_epoch,
        }
        | MetadataRecord::UnfenceBroker {
            node_id: id,
            broker_epoch,
        }
        | MetadataRecord::BrokerControlledShutdown {
            node_id: id,
            broker_epoch,
        } => {
            node_id(*id)?;
            non_negative("broker epoch", *broker_epoch)
        }
        MetadataRecord::Topic { name, topic_id } => {
            topic_name(name)?;
            topic(*topic_id)
        }
        MetadataRecord::Partition(p) => partition(p),
        MetadataRecord::PartitionChange(c) => {
            topic(c.topic_id)?;
            partition_index(c.partition)?;
            if c.leader.is_none() && c.isr.is_none() {
                return invalid("a partition change that changes nothing".into());
            }
            if let Some(leader) = c.leader {
                leader_id(leader)?;
            }
            match &c.isr {
                Some(isr) => broker_set("isr", isr),
                None => Ok(()),
            }
        }
        MetadataRecord::RemoveTopic { topic_id } => topic(*topic_id),
        MetadataRecord::Config {
            resource,
            key,
            value,
        } => config(resource, key, value.as_deref()),
        MetadataRecord::Security(record) => record.validate().map_err(DecodeError::from),
        _ => objects(record),
    }
}

fn objects(record: &MetadataRecord) -> Result<(), DecodeError> {
    match record {
        MetadataRecord::View { name, spec } | MetadataRecord::Transform { name, spec, .. } => {
            object_name(name)?;
            json_spec(spec)
        }
        MetadataRecord::RemoveView { name } | MetadataRecord::RemoveTransform { name } => {
            object_name(name)
        }
        MetadataRecord::PluginVersion(p) => {
            text("plugin name", &p.name, named::PLUGIN_NAME)?;
            if p.size_bytes == 0 || p.size_bytes > limits::PLUGIN_BYTES_MAX {
                return invalid(format!(
                    "plugin size of {} bytes is not in 1..=PLUGIN_BYTES_MAX ({})",
                    p.size_bytes,
                    limits::PLUGIN_BYTES_MAX
                ));
            }
            Ok(())
        }
        MetadataRecord::RemovePlugin { name } => text("plugin name", name, named::PLUGIN_NAME),
        MetadataRecord::ProducerIds(p) => {
            node_id(p.broker_id)?;
            non_negative("broker epoch", p.broker_epoch)?;
            if p.next_producer_id < limits::PRODUCER_ID_BLOCK_SIZE {
                return invalid(format!(
                    "next producer id {} is below one block (PRODUCER_ID_BLOCK_SIZE)",
                    p.next_producer_id
                ));
            }
            Ok(())
        }
        MetadataRecord::FeatureLevel { name, level } => {
            text("feature name", name, named::FEATURE_NAME)?;
            non_negative("feature level", i64::from(*level))
        }
        _ => unreachable!("record() handles the other records"),
    }
}

fn partition(p: &PartitionRecord) -> Result<(), DecodeError> {
    topic(p.topic_id)?;
    partition_index(p.partition)?;
    broker_set("replicas", &p.replicas)?;
    broker_set("isr", &p.isr)?;
    if let Some(id) = p.isr.iter().find(|id| !p.replicas.contains(id)) {
        return invalid(format!("isr member {id} is not a replica"));
    }
    leader_id(p.leader)?;
    if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
        return invalid(format!("leader {} is not in the isr", p.leader));
    }
    non_negative("leader epoch", i64::from(p.leader_epoch))?;
    non_negative("partition epoch", i64::from(p.partition_epoch))
}

fn config(
    resource: &super::ConfigResource,
    key: &str,
    value: Option<&str>,
) -> Result<(), DecodeError> {
    match resource.resource_type {
        super::ConfigResourceType::Topic => topic_name(&resource.name)?,
        super::ConfigResourceType::Broker => {
            let ok = resource.name.is_empty()
                || resource
                    .name
                    .parse::<i32>()
                    .is_ok_and(|id| id >= 0 && id.to_string() == resource.name);
            if !ok {
                return invalid(format!(
                    "broker config resource {:?} is neither \"\" nor a node id",
                    resource.name
                ));
            }
        }
    }
    text("config key", key, named::CONFIG_KEY)?;
    match value {
        Some(value) => bounded("config value", value.len(), named::CONFIG_VALUE),
        None => Ok(()),
    }
}

/// A legal topic name: Kafka's rules (`Topic.validate`): 1 to 249 bytes of
/// `[a-zA-Z0-9._-]`, and not `.` or `..`.
#[must_use]
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= limits::TOPIC_NAME_BYTES_MAX
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A legal view or transform name: 1 to [`limits::OBJECT_NAME_BYTES_MAX`] bytes of
/// `[a-zA-Z0-9._-]` (it names files and URL segments), and not `.` or `..`.
#[must_use]
pub fn valid_object_name(name: &str) -> bool {
    valid_topic_name(name) && name.len() <= limits::OBJECT_NAME_BYTES_MAX
}

fn topic_name(name: &str) -> Result<(), DecodeError> {
    bounded("topic name", name.len(), named::TOPIC_NAME)?;
    if !valid_topic_name(name) {
        return invalid(format!(
            "topic name {name:?} is not a legal Kafka topic name"
        ));
    }
    Ok(())
}

fn object_name(name: &str) -> Result<(), DecodeError> {
    bounded("name", name.len(), named::OBJECT_NAME)?;
    if !valid_object_name(name) {
        return invalid(format!("name {name:?} is not of [a-zA-Z0-9._-]"));
    }
    Ok(())
}

fn json_spec(spec: &[u8]) -> Result<(), DecodeError> {
    bounded("spec", spec.len(), named::SPEC)?;
    // serde_json bounds its recursion (128 levels), so hostile nesting is an error, not a
    // stack overflow.
    match serde_json::from_slice::<serde_json::Value>(spec) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => invalid("a spec that is not a JSON object".into()),
        Err(e) => invalid(format!("a spec that is not JSON: {e}")),
    }
}

fn topic(id: TopicId) -> Result<(), DecodeError> {
    if id.0 == [0; 16] {
        return invalid("the zero topic id".into());
    }
    Ok(())
}

fn partition_index(partition: i32) -> Result<(), DecodeError> {
    let ok = usize::try_from(partition).is_ok_and(|p| p < limits::PARTITIONS_PER_TOPIC_MAX);
    if !ok {
        return invalid(format!(
            "partition {partition} is not in 0..PARTITIONS_PER_TOPIC_MAX ({})",
            limits::PARTITIONS_PER_TOPIC_MAX
        ));
    }
    Ok(())
}

fn node_id(id: i32) -> Result<(), DecodeError> {
    non_negative("node id", i64::from(id))
}

fn leader_id(id: i32) -> Result<(), DecodeError> {
    if id < NO_LEADER {
        return invalid(format!("leader {id} is neither a node id nor -1"));
    }
    Ok(())
}

/// A non-empty list of distinct node ids within [`limits::REPLICAS_MAX`].
fn broker_set(what: &'static str, ids: &[i32]) -> Result<(), DecodeError> {
    count(what, ids.len(), named::REPLICAS)?;
    if ids.is_empty() {
        return invalid(format!("empty {what}"));
    }
    let mut seen = BTreeSet::new();
    for &id in ids {
        node_id(id)?;
        if !seen.insert(id) {
            return invalid(format!("{what} name broker {id} twice"));
        }
    }
    Ok(())
}

fn text(what: &'static str, s: &str, limit: Limit) -> Result<(), DecodeError> {
    if s.is_empty() {
        return invalid(format!("empty {what}"));
    }
    bounded(what, s.len(), limit)
}

fn bounded(what: &'static str, len: usize, limit: Limit) -> Result<(), DecodeError> {
    if len > limit.max {
        return Err(ReadError::TooLong { what, len, limit }.into());
    }
    Ok(())
}

fn count(what: &'static str, count: usize, limit: Limit) -> Result<(), DecodeError> {
    if count > limit.max {
        return Err(ReadError::TooMany { what, count, limit }.into());
    }
    Ok(())
}

fn non_negative(what: &str, value: i64) -> Result<(), DecodeError> {
    if value < 0 {
        return invalid(format!("{what} {value} is negative"));
    }
    Ok(())
}

fn invalid(why: String) -> Result<(), DecodeError> {
    Err(DecodeError::Invalid(why))
}
