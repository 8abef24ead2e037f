//! `/v1/topics`: list, describe (partitions with log start/end offsets and sizes, effective
//! configs, and for a quarantined topic or offline partition `online: false` with the
//! reason), create, delete. The same broker calls the CreateTopics and DeleteTopics
//! handlers make, so both paths validate and persist alike, and the same ACLs: DESCRIBE on
//! a topic to see it (lists are filtered), CREATE on the cluster or the topic to create it,
//! DELETE to delete it, ALTER_CONFIGS to change its configs.

use axum::Extension;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

use super::auth::Caller;
use super::{AdminState, ApiError};
use crate::broker::Broker;
use crate::error::KafkaError;
use crate::topic_config::{self, TopicOverrides};
use crate::topics::{ConfigChange, Topic};
use crate::{audit, authz};

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list).post(create))
        .route("/{name}", get(describe).delete(delete).patch(alter))
}

/// One topic as the API shows it.
#[derive(Debug, Serialize)]
pub struct TopicView {
    name: String,
    partition_count: usize,
    partitions: Vec<PartitionView>,
    /// Every topic key with its effective value.
    configs: std::collections::BTreeMap<&'static str, String>,
    /// The keys this topic overrides (the rest are broker defaults).
    overrides: TopicOverrides,
    /// `false` when the topic is quarantined or any partition is offline.
    online: bool,
    /// Why it is offline (naming the paths), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One partition's log (offsets and sizes `null` when offline).
#[derive(Debug, Serialize)]
pub struct PartitionView {
    partition: i32,
    log_start_offset: Option<i64>,
    log_end_offset: Option<i64>,
    size_bytes: Option<u64>,
    segments: Option<usize>,
    /// Why the partition is offline (quarantined at start), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The body of `POST /v1/topics`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateTopic {
    pub(crate) name: String,
    /// Defaults to `num.partitions`.
    pub(crate) partitions: Option<i32>,
    #[serde(default)]
    pub(crate) configs: TopicOverrides,
}

async fn list(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let broker = state.broker.clone();
    let topics = blocking(move || {
        broker
            .topics
            .topics()
            .iter()
            .filter(|t| caller.may(&broker, describe_on(&t.name)))
            .map(|t| view(&broker, t))
            .collect::<Vec<_>>()
    })
    .await?;
    Ok(axum::Json(serde_json::json!({ "topics": topics })).into_response())
}

/// DESCRIBE on the topic `name`.
fn describe_on(name: &str) -> (AclOperation, ResourceType, &str) {
    (AclOperation::Describe, ResourceType::Topic, name)
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[describe_on(&name)])?;
    let broker = state.broker.clone();
    let topic = broker.topics.topic(&name).ok_or_else(|| unknown(&name))?;
    let view = blocking(move || view(&broker, &topic)).await?;
    Ok(axum::Json(view).into_response())
}

async fn create(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    body: Result<axum::Json<CreateTopic>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(body) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "{e}: expected {{\"name\": \"...\", \"partitions\": N, \"configs\": {{\"retention.ms\": \"...\"}}}}"
        ))
    })?;
    caller.require(
        &state.broker,
        &[
            (AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME),
            (AclOperation::Create, ResourceType::Topic, &body.name),
        ],
    )?;
    require_plugins(
        &state,
        &caller,
        body.configs
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_str()))),
    )?;
    for (key, value) in &body.configs {
        topic_config::validate(key, value)?;
    }
    let broker = state.broker.clone();
    let partitions = body.partitions.unwrap_or(broker.config.num_partitions);
    let view = blocking(move || {
        let topic = broker
            .topics
            .create_topic(&body.name, partitions, body.configs)?;
        Ok::<_, KafkaError>(view(&broker, &topic))
    })
    .await??;
    Ok((StatusCode::CREATED, axum::Json(view)).into_response())
}

/// The body of `PATCH /v1/topics/{name}`: overrides to set and to drop.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AlterTopic {
    #[serde(default)]
    pub(crate) set: TopicOverrides,
    #[serde(default)]
    pub(crate) delete: Vec<String>,
}

async fn alter(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Result<axum::Json<AlterTopic>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::AlterConfigs, ResourceType::Topic, &name)],
    )?;
    let axum::Json(body) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "{e}: expected {{\"set\": {{\"retention.ms\": \"...\"}}, \"delete\": [\"segment.bytes\"]}}"
        ))
    })?;
    require_plugins(
        &state,
        &caller,
        body.set.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))),
    )?;
    let changes: Vec<ConfigChange> = body
        .set
        .into_iter()
        .map(|(key, value)| ConfigChange::Set { key, value })
        .chain(
            body.delete
                .into_iter()
                .map(|key| ConfigChange::Delete { key }),
        )
        .collect();
    let broker = state.broker.clone();
    let view = blocking(move || {
        let topic = broker.topics.alter_topic_config(&name, &changes, false)?;
        Ok::<_, KafkaError>(view(&broker, &topic))
    })
    .await??;
    Ok(axum::Json(view).into_response())
}

/// READ on every plugin the configs bind the topic to: the Kafka protocol's check
/// (`authz::unreadable_plugin`).
fn require_plugins<'a>(
    state: &AdminState,
    caller: &Caller,
    configs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<(), ApiError> {
    let may_read = |plugin: &str| {
        caller.may(
            &state.broker,
            (AclOperation::Read, ResourceType::Plugin, plugin),
        )
    };
    match authz::unreadable_plugin(configs, may_read) {
        Some(plugin) => Err(caller.refusal(&[(AclOperation::Read, ResourceType::Plugin, plugin)])),
        None => Ok(()),
    }
}

async fn delete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::Delete, ResourceType::Topic, &name)],
    )?;
    let broker = state.broker.clone();
    let deleting = name.clone();
    let deleted = blocking(move || broker.topics.delete_topic(&deleting)).await??;
    audit::topic_deleted(
        caller.actor(),
        &name,
        &deleted.views,
        &deleted.reading,
        &deleted.writing,
    );
    // Committed offsets of the topic go, and those of the views removed with it.
    for gone in std::iter::once(&name).chain(&deleted.views) {
        state.groups.delete_topic(gone.clone()).await;
    }
    Ok(axum::Json(serde_json::json!({
        "deleted": name,
        "views_deleted": deleted.views,
        "transforms_removed": deleted.reading,
        "transforms_failing": deleted.writing,
    }))
    .into_response())
}

fn view(broker: &Broker, topic: &Topic) -> TopicView {
    let partitions = topic
        .partitions
        .iter()
        .filter_map(|p| {
            if let Some(reason) = p.offline_reason() {
                return Some(PartitionView {
                    partition: p.index,
                    log_start_offset: None,
                    log_end_offset: None,
                    size_bytes: None,
                    segments: None,
                    error: Some(reason.to_owned()),
                });
            }
            p.with_log(|log| PartitionView {
                partition: p.index,
                log_start_offset: Some(log.log_start_offset().value()),
                log_end_offset: Some(log.log_end_offset().value()),
                size_bytes: Some(log.size_bytes()),
                segments: Some(log.segment_count()),
                error: None,
            })
            .ok()
        })
        .collect();
    let reasons = topic.offline_reasons();
    TopicView {
        name: topic.name.clone(),
        partition_count: topic.partitions.len(),
        partitions,
        configs: topic_config::describe(&broker.config, &topic.overrides)
            .into_iter()
            .map(|c| (c.key, c.value))
            .collect(),
        overrides: topic.overrides.clone(),
        online: reasons.is_empty(),
        error: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

fn unknown(name: &str) -> ApiError {
    KafkaError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("unknown topic {name:?} (GET /v1/topics lists them)"),
    )
    .into()
}

/// Runs partition-lock work (which may wait behind a disk append) on the blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            format!("admin task failed: {e}"),
        )
    })
}
