//! CreateTopics v2-v7: partition count (or -1 for `num.partitions`), replication factor 1 (or
//! -1), topic configs by Kafka's names (validated), and `validate_only`. Each topic succeeds
//! or fails on its own. Creating needs CREATE on the cluster or the topic, and a topic bound
//! to a partitioner plugin READ on the plugin (TOPIC_AUTHORIZATION_FAILED otherwise). v5 is
//! flexible and answers a created (or validated) topic's partition count, replication factor
//! and every config with its source, sorted by name (KIP-525), as Kafka's controller does:
//! only with DESCRIBE_CONFIGS on the topic, else the topic's config error code is
//! TOPIC_AUTHORIZATION_FAILED; v6 changes nothing here (no controller mutation quota); v7
//! answers the new topic's id (nil for `validate_only`).

use std::sync::Arc;

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::authz;
use crate::error::KafkaError;
use crate::limits;
use crate::topic_config::TopicOverrides;
use crate::topics::TopicRegistry;

/// Answers CreateTopics.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let denied: BTreeSet<String> = request
        .topics
        .iter()
        .filter(|t| !may_create(ctx, t))
        .map(|t| t.name.0.to_string())
        .collect();
    // KIP-525's configs go only to a principal that may read them.
    let undescribable: BTreeSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|name| !ctx.auth.topic(AclOperation::DescribeConfigs, name))
        .collect();
    // In a cluster the registry commits each creation through the controller
    // (`TopicRegistry::commit_decided`): the same path.
    let registry = Arc::clone(ctx.topics);
    let created = tokio::task::spawn_blocking(move || create_all(&registry, request, &denied))
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "create topics task failed");
            Vec::new()
        });
    let mut response = CreateTopicsResponse::default();
    response.topics = created
        .into_iter()
        .map(|(mut out, created)| {
            if let Some(created) = created.filter(|_| version >= 5) {
                describe_created(ctx, &mut out, created, &undescribable);
            }
            out
        })
        .collect();
    response
}

/// What a created (or validated) topic is, for KIP-525's answer.
struct Created {
    partitions: i32,
    overrides: TopicOverrides,
    id: crate::topics::topic_id::Uuid,
    replication_factor: i16,
}

/// v5+: the topic's partitions, replication factor, configs (sorted by name, as Kafka's
/// controller lists them) and, v7, id.
fn describe_created(
    ctx: &Ctx<'_>,
    out: &mut CreatableTopicResult,
    created: Created,
    undescribable: &BTreeSet<String>,
) {
    out.num_partitions = created.partitions;
    out.replication_factor = created.replication_factor;
    out.topic_id = created.id;
    if undescribable.contains(out.name.0.as_str()) {
        out.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
        return;
    }
    let mut configs: Vec<CreatableTopicConfigs> =
        super::describe_configs::topic_configs(ctx.config, &created.overrides, false)
            .into_iter()
            .map(|c| {
                let mut config = CreatableTopicConfigs::default();
                config.name = c.name;
                config.value = c.value;
                config.read_only = c.read_only;
                config.config_source = c.config_source;
                config.is_sensitive = c.is_sensitive;
                config
            })
            .collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    out.configs = Some(configs);
}

/// CREATE on the cluster or on the topic (Kafka's check), and READ on each plugin the topic
/// names (`sluice.partitioner`, `sluice.validator`).
fn may_create(ctx: &Ctx<'_>, topic: &CreatableTopic) -> bool {
    let name = topic.name.0.as_str();
    let create =
        ctx.auth.cluster(AclOperation::Create) || ctx.auth.topic(AclOperation::Create, name);
    let configs = topic
        .configs
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_deref()));
    create && authz::unreadable_plugin(configs, ctx.auth.may_read_plugin()).is_none()
}

fn create_all(
    topics: &TopicRegistry,
    request: CreateTopicsRequest,
    denied: &BTreeSet<String>,
) -> Vec<(CreatableTopicResult, Option<Created>)> {
    let duplicates = named_twice(request.topics.iter().map(|t| t.name.0.as_str()));
    request
        .topics
        .into_iter()
        .enumerate()
        .map(|(i, topic)| {
            let result = match refusal(i, topic.name.0.as_str(), denied, &duplicates) {
                Some(e) => Err(e),
                None => create_one(topics, &topic, request.validate_only),
            };
            let mut out = CreatableTopicResult::default();
            out.name = topic.name;
            match result {
                Ok(created) => (out, Some(created)),
                Err(e) => {
                    out.error_code = e.code.code();
                    out.error_message = Some(StrBytes::from_string(e.message));
                    (out, None)
                }
            }
        })
        .collect()
}

/// The names a request lists more than once.
pub(super) fn named_twice<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    names
        .filter(|n| !seen.insert(*n))
        .map(str::to_owned)
        .collect()
}

/// Why the `i`-th topic of a CreateTopics or CreatePartitions request is refused before
/// anything is done: past `TOPICS_PER_REQUEST_MAX`, denied, or named twice.
pub(super) fn refusal(
    i: usize,
    name: &str,
    denied: &BTreeSet<String>,
    duplicates: &BTreeSet<String>,
) -> Option<KafkaError> {
    if i >= limits::TOPICS_PER_REQUEST_MAX {
        return Some(KafkaError::new(
            ResponseError::PolicyViolation,
            format!(
                "more than {} topics in one request",
                limits::TOPICS_PER_REQUEST_MAX
            ),
        ));
    }
    if denied.contains(name) {
        return Some(KafkaError::new(
            ResponseError::TopicAuthorizationFailed,
            "Authorization failed.",
        ));
    }
    duplicates.contains(name).then(|| {
        KafkaError::new(
            ResponseError::InvalidRequest,
            "topic named twice in one request",
        )
    })
}

fn create_one(
    topics: &TopicRegistry,
    topic: &CreatableTopic,
    validate_only: bool,
) -> Result<Created, KafkaError> {
    let name = topic.name.0.as_str();
    let partitions = partition_count(topics, topic)?;
    // A cluster's controller checks the factor against its live brokers; one broker holds
    // one replica.
    let rf = topic.replication_factor;
    let refused = if topics.in_cluster() {
        rf == 0 || rf < -1
    } else {
        !matches!(rf, -1 | 1)
    };
    if refused {
        let why = if topics.in_cluster() {
            "must be at least 1 (or -1: default.replication.factor)"
        } else {
            "is impossible on a single broker"
        };
        return Err(KafkaError::new(
            ResponseError::InvalidReplicationFactor,
            format!("replication factor {rf} {why}"),
        ));
    }
    let mut overrides = TopicOverrides::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            overrides.insert(config.name.to_string(), value.to_string());
        }
    }
    let replication_factor = match (rf, topic.assignments.first()) {
        (_, Some(a)) => i16::try_from(a.broker_ids.len()).unwrap_or(i16::MAX),
        (-1, None) if topics.in_cluster() => topics.config().default_replication_factor,
        (-1, None) => 1,
        (rf, None) => rf,
    };
    if validate_only {
        topics.validate_new_topic(name, partitions, &overrides)?;
        return Ok(Created {
            partitions,
            overrides,
            id: crate::topics::topic_id::Uuid::nil(),
            replication_factor,
        });
    }
    let created = topics.create_topic_assigned(
        name,
        partitions,
        overrides,
        assignments(topics, topic),
        if topic.assignments.is_empty() { rf } else { -1 },
    )?;
    Ok(Created {
        partitions,
        overrides: created.overrides.clone(),
        id: created.id,
        replication_factor,
    })
}

fn partition_count(topics: &TopicRegistry, topic: &CreatableTopic) -> Result<i32, KafkaError> {
    if topic.assignments.is_empty() {
        return Ok(if topic.num_partitions == -1 {
            topics.config().num_partitions
        } else {
            topic.num_partitions
        });
    }
    let in_order = topic
        .assignments
        .iter()
        .enumerate()
        .all(|(i, a)| a.partition_index == i as i32);
    if topics.in_cluster() {
        // The controller checks the brokers (registered, none twice); here the shape.
        if !in_order || topic.num_partitions != -1 {
            return Err(KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                "assignments must list partitions 0.. in order, with no partition count",
            ));
        }
        let rf = topic.assignments[0].broker_ids.len();
        if let Some(a) = topic
            .assignments
            .iter()
            .find(|a| a.broker_ids.is_empty() || a.broker_ids.len() != rf)
        {
            return Err(KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "partition {} is assigned {} replicas and partition 0 {rf}: every partition needs the same number, at least one",
                    a.partition_index,
                    a.broker_ids.len(),
                ),
            ));
        }
        return Ok(topic.assignments.len() as i32);
    }
    let valid = in_order
        && topic
            .assignments
            .iter()
            .all(|a| a.broker_ids.len() == 1 && a.broker_ids[0].0 == topics.config().node_id);
    if !valid || topic.num_partitions != -1 {
        return Err(KafkaError::new(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "assignments must list partitions 0.. in order, each on broker {} alone",
                topics.config().node_id
            ),
        ));
    }
    Ok(topic.assignments.len() as i32)
}

/// The request's assignments for the controller (a cluster), after [`partition_count`]
/// checked their shape.
fn assignments(topics: &TopicRegistry, topic: &CreatableTopic) -> Option<Vec<Vec<i32>>> {
    (topics.in_cluster() && !topic.assignments.is_empty()).then(|| {
        topic
            .assignments
            .iter()
            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
            .collect()
    })
}
