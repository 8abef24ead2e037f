//! Metadata v0-v13: this broker as the only node, leader of every partition at the
//! partition's leader epoch (v7+; librdkafka trusts epochs from v9), the advertised host and
//! port, and the requested topics, auto-creating unknown ones when the client allows it
//! (v4+) and `auto.create.topics.enable` is on. v10+ carries each topic's id
//! (`broker/topic_id.rs`; consumer-protocol members learn the names of their assigned topic
//! ids here), and a topic may be asked for by id alone (UNKNOWN_TOPIC_ID if none has it). A
//! view is listed as a topic with its source's partitions and an id derived from its name
//! (ephemeral views only when named). An
//! offline partition (`broker/quarantine.rs`) is LEADER_NOT_AVAILABLE with leader -1.
//! v13's top-level error code (KIP-1102) is NONE: it exists for a broker to send a client
//! back to its bootstrap servers (REBOOTSTRAP_REQUIRED), which one broker never needs.
//!
//! Authorization, as Kafka: a listing of all topics leaves out those the principal may not
//! DESCRIBE (views: DESCRIBE on the view); a named one it may not describe is
//! TOPIC_AUTHORIZATION_FAILED, and so is one that would be auto-created without CREATE on
//! the cluster or the topic.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::{AclOperation, ResourceType};

use super::Ctx;
use crate::authz;
use crate::error::KafkaError;
use crate::limits;
use crate::topics::Topic;

/// Answers Metadata.
pub async fn handle(ctx: &Ctx<'_>, request: MetadataRequest, version: i16) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    response.brokers = brokers(ctx);
    response.cluster_id = Some(StrBytes::from_string(ctx.cluster_id.to_owned()));
    response.controller_id = BrokerId(ctx.controller_id());
    let asked_operations = (
        request.include_cluster_authorized_operations,
        request.include_topic_authorized_operations,
    );
    let requested = match request.topics {
        None => None,
        Some(topics) if topics.is_empty() && version == 0 => None,
        Some(topics) => Some(
            topics
                .into_iter()
                // A non-zero id names the topic (Java's consumer asks by id with an empty
                // name for the topics of a regex subscription's assignment).
                .map(|t| match t.name {
                    Some(name) if t.topic_id.is_nil() => Ok(name.0.to_string()),
                    _ => Err(t.topic_id),
                })
                .collect::<Vec<_>>(),
        ),
    };
    response.topics = match requested {
        None => {
            let topics = ctx.topics.topics();
            let views = ctx.topics.views();
            let topics = topics
                .iter()
                .filter(|t| ctx.listed(&t.name))
                .filter(|t| ctx.auth.topic(AclOperation::Describe, &t.name))
                .map(|t| describe(ctx.config.node_id, &t.name, t.id, t));
            let views = views
                .iter()
                .filter(|v| !v.spec.ephemeral)
                .filter(|v| {
                    ctx.auth
                        .allowed(AclOperation::Describe, ResourceType::View, v.name())
                })
                .map(|v| describe(ctx.config.node_id, v.name(), view_id(v.name()), &v.source));
            topics.chain(views).collect()
        }
        Some(names) => {
            let allow_create = version < 4 || request.allow_auto_topic_creation;
            let mut topics = Vec::with_capacity(names.len().min(limits::TOPICS_PER_REQUEST_MAX));
            for name in names.into_iter().take(limits::TOPICS_PER_REQUEST_MAX) {
                topics.push(match name {
                    Ok(name) => lookup_or_create(ctx, name, allow_create).await,
                    Err(topic_id) => lookup_id(ctx, topic_id),
                });
            }
            topics
        }
    };
    authorized_operations(ctx, asked_operations, &mut response);
    if version < 7 {
        // No leader epoch field before v7 (the codec refuses a set one).
        for p in response
            .topics
            .iter_mut()
            .flat_map(|t| t.partitions.iter_mut())
        {
            p.leader_epoch = -1;
        }
    }
    if version < 10 {
        // No topic id before v10 (the codec refuses a set one).
        for t in &mut response.topics {
            t.topic_id = uuid::Uuid::nil();
        }
    }
    response
}

/// The brokers to list (`Ctx::nodes`).
fn brokers(ctx: &Ctx<'_>) -> Vec<MetadataResponseBroker> {
    ctx.nodes()
        .into_iter()
        .map(|n| {
            let mut node = MetadataResponseBroker::default();
            node.node_id = BrokerId(n.node_id);
            node.host = StrBytes::from_string(n.host);
            node.port = n.port;
            node.rack = n.rack.map(StrBytes::from_string);
            node
        })
        .collect()
}

/// KIP-430: the operations the principal may do on the cluster and on each listed topic,
/// when the request asks (v8+; Kafka's "not requested" value otherwise). librdkafka's
/// `describe_cluster` and `describe_topics` read them from here.
fn authorized_operations(
    ctx: &Ctx<'_>,
    (cluster, topics): (bool, bool),
    response: &mut MetadataResponse,
) {
    if cluster {
        response.cluster_authorized_operations = ctx.auth.operations(
            ResourceType::Cluster,
            sluice_security::acl::CLUSTER_NAME,
            &authz::CLUSTER_OPERATIONS,
        );
    }
    if topics {
        for topic in response.topics.iter_mut().filter(|t| t.error_code == 0) {
            let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
            topic.topic_authorized_operations =
                ctx.auth
                    .operations(ResourceType::Topic, name, &authz::TOPIC_OPERATIONS);
        }
    }
}

async fn lookup_or_create(
    ctx: &Ctx<'_>,
    name: String,
    allow_create: bool,
) -> MetadataResponseTopic {
    let denied = |name: String| {
        let mut topic = MetadataResponseTopic::default();
        topic.name = Some(TopicName(StrBytes::from_string(name)));
        topic.error_code = ResponseError::TopicAuthorizationFailed.code();
        topic
    };
    if let Some(view) = ctx.topics.view(&name) {
        if !ctx
            .auth
            .allowed(AclOperation::Describe, ResourceType::View, &name)
        {
            return denied(name);
        }
        return describe(
            ctx.config.node_id,
            view.name(),
            view_id(view.name()),
            &view.source,
        );
    }
    if !ctx.auth.topic(AclOperation::Describe, &name) {
        return denied(name);
    }
    if let Some(topic) = ctx.topics.topic(&name).filter(|t| ctx.listed(&t.name)) {
        return describe(ctx.config.node_id, &topic.name, topic.id, &topic);
    }
    let may_create =
        ctx.auth.cluster(AclOperation::Create) || ctx.auth.topic(AclOperation::Create, &name);
    if allow_create && ctx.config.auto_create_topics_enable && !may_create {
        return denied(name);
    }
    let result = if allow_create {
        let registry = std::sync::Arc::clone(ctx.topics);
        let topic_name = name.clone();
        tokio::task::spawn_blocking(move || registry.auto_create(&topic_name))
            .await
            .unwrap_or_else(|e| {
                Err(KafkaError::new(
                    ResponseError::UnknownServerError,
                    e.to_string(),
                ))
            })
    } else {
        Err(KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown topic {name:?}"),
        ))
    };
    match result {
        Ok(topic) => describe(ctx.config.node_id, &topic.name, topic.id, &topic),
        Err(e) => {
            let mut topic = MetadataResponseTopic::default();
            topic.name = Some(TopicName(StrBytes::from_string(name)));
            topic.error_code = e.code.code();
            topic
        }
    }
}

/// A partition in a cluster: where the image places it.
fn placed(
    mut partition: MetadataResponsePartition,
    placement: &crate::topics::Placement,
) -> MetadataResponsePartition {
    partition.leader_epoch = placement.leader_epoch;
    partition.replica_nodes = placement.replicas.iter().copied().map(BrokerId).collect();
    partition.isr_nodes = placement.isr.iter().copied().map(BrokerId).collect();
    partition.leader_id = BrokerId(placement.leader);
    if placement.leader < 0 {
        partition.error_code = ResponseError::LeaderNotAvailable.code();
    }
    partition
}

/// A topic asked for by id alone (v10+): the topic with that id, if the principal may
/// describe it (else, as Kafka, TOPIC_AUTHORIZATION_FAILED without the name).
fn lookup_id(ctx: &Ctx<'_>, topic_id: uuid::Uuid) -> MetadataResponseTopic {
    let found = ctx
        .topics
        .topics()
        .into_iter()
        .find(|t| t.id == topic_id && ctx.listed(&t.name));
    match found {
        Some(topic) if ctx.auth.topic(AclOperation::Describe, &topic.name) => {
            describe(ctx.config.node_id, &topic.name, topic.id, &topic)
        }
        found => {
            let mut topic = MetadataResponseTopic::default();
            topic.topic_id = topic_id;
            topic.error_code = if found.is_some() {
                ResponseError::TopicAuthorizationFailed.code()
            } else {
                ResponseError::UnknownTopicId.code()
            };
            topic
        }
    }
}

/// A view's id: derived from its name, so stable across restarts (`broker/topic_id.rs`).
pub(super) fn view_id(name: &str) -> uuid::Uuid {
    crate::topics::topic_id::derived_topic_id(name)
}

/// `name` with `topic`'s partitions (a topic's own, or a view's source) and the id `id`.
pub(super) fn describe(
    node_id: i32,
    name: &str,
    id: uuid::Uuid,
    topic: &Topic,
) -> MetadataResponseTopic {
    let mut out = MetadataResponseTopic::default();
    out.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    out.topic_id = id;
    out.partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = p.index;
            if let Some(placement) = p.placement() {
                return placed(partition, &placement);
            }
            partition.leader_epoch = p.leader_epoch;
            partition.replica_nodes = vec![BrokerId(node_id)];
            if p.offline_reason().is_some() {
                // Kafka's answer for a partition whose only replica is on a failed log dir.
                partition.error_code = ResponseError::LeaderNotAvailable.code();
                partition.leader_id = BrokerId(-1);
                partition.offline_replicas = vec![BrokerId(node_id)];
            } else {
                partition.leader_id = BrokerId(node_id);
                partition.isr_nodes = vec![BrokerId(node_id)];
            }
            partition
        })
        .collect();
    if topic.offline.is_some() && out.partitions.is_empty() {
        // Quarantined with no partition directory left: nothing to list but the error.
        out.error_code = ResponseError::KafkaStorageError.code();
    }
    out
}
