//! CreateTopics v2-v4: partition count (or -1 for `num.partitions`), replication factor 1 (or
//! -1), topic configs by Kafka's names (validated; `cleanup.policy=compact` is refused), and
//! `validate_only`. Each topic succeeds or fails on its own. Creating needs CREATE on the
//! cluster or the topic, and a topic bound to a partitioner plugin READ on the plugin
//! (TOPIC_AUTHORIZATION_FAILED otherwise).

use std::sync::Arc;

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::authz;
use crate::config::NODE_ID;
use crate::error::KafkaError;
use crate::limits;
use crate::topic_config::TopicOverrides;
use crate::topics::TopicRegistry;

/// Answers CreateTopics.
pub async fn handle(ctx: &Ctx<'_>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let denied: BTreeSet<String> = request
        .topics
        .iter()
        .filter(|t| !may_create(ctx, t))
        .map(|t| t.name.0.to_string())
        .collect();
    let registry = Arc::clone(ctx.topics);
    let topics = tokio::task::spawn_blocking(move || create_all(&registry, request, &denied))
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "create topics task failed");
            Vec::new()
        });
    let mut response = CreateTopicsResponse::default();
    response.topics = topics;
    response
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
) -> Vec<CreatableTopicResult> {
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
            if let Err(e) = result {
                out.error_code = e.code.code();
                out.error_message = Some(StrBytes::from_string(e.message));
            }
            out
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
) -> Result<(), KafkaError> {
    let name = topic.name.0.as_str();
    let partitions = partition_count(topics, topic)?;
    if !matches!(topic.replication_factor, -1 | 1) {
        return Err(KafkaError::new(
            ResponseError::InvalidReplicationFactor,
            format!(
                "replication factor {} is impossible on a single broker",
                topic.replication_factor
            ),
        ));
    }
    let mut overrides = TopicOverrides::new();
    for config in &topic.configs {
        if let Some(value) = &config.value {
            overrides.insert(config.name.to_string(), value.to_string());
        }
    }
    if validate_only {
        return topics.validate_new_topic(name, partitions, &overrides);
    }
    topics.create_topic(name, partitions, overrides).map(|_| ())
}

fn partition_count(topics: &TopicRegistry, topic: &CreatableTopic) -> Result<i32, KafkaError> {
    if topic.assignments.is_empty() {
        return Ok(if topic.num_partitions == -1 {
            topics.config().num_partitions
        } else {
            topic.num_partitions
        });
    }
    let valid = topic.assignments.iter().enumerate().all(|(i, a)| {
        a.partition_index == i as i32 && a.broker_ids.len() == 1 && a.broker_ids[0].0 == NODE_ID
    });
    if !valid || topic.num_partitions != -1 {
        return Err(KafkaError::new(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "assignments must list partitions 0.. in order, each on broker {NODE_ID} alone"
            ),
        ));
    }
    Ok(topic.assignments.len() as i32)
}
