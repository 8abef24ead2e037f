//! `/v1/views`: create (`POST` a [`ViewSpec`]), list, describe (spec, partitions, plugin
//! kinds, counters) and delete views (`crate::views`; deleting drops the offsets committed
//! under the view's name, as for a topic). Creating binds every stage, so an
//! unknown plugin or parameters the plugin rejects fail the request, naming the stage.
//! ACLs on the VIEW resource: DESCRIBE to see one (lists are filtered), CREATE on it (with
//! READ on the source topic and on each stage's plugin) to create it, DELETE to delete it.
//! The creator is the view's owner (recorded in the spec, whatever the body says): every
//! fetch asks the owner's READ on the source and the plugins again (`authz::view_refusal`),
//! and `describe` shows whether it still holds them (`refused`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use kafka_protocol::ResponseError;
use serde::Serialize;
use sluice_plugin_host::ViewStats;
use sluice_security::acl::{AclOperation, ResourceType};

use super::auth::Caller;
use super::topics::blocking;
use super::{AdminState, ApiError};
use crate::error::KafkaError;
use crate::topics::ViewTopic;
use crate::views::{StageSpec, ViewSpec};
use crate::{audit, authz};

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list).post(create))
        .route("/{name}", get(describe).delete(delete))
}

/// One view as the API shows it.
#[derive(Debug, Serialize)]
pub struct ViewView {
    name: String,
    source: String,
    partition_count: usize,
    stages: Vec<StageView>,
    on_error: String,
    ephemeral: bool,
    /// The principal that created it, whose rights its reads use (absent for a view
    /// persisted before owners were recorded: each reader's own READ on the source is asked).
    owner: Option<String>,
    /// Why fetches through it are refused now (the owner lacks a right), if they are.
    refused: Option<String>,
    /// False while a stage's plugin is missing (fetches fail until it is deployed).
    bound: bool,
    stats: StatsView,
}

/// One stage: the configured plugin, its parameters, and its kind now.
#[derive(Debug, Serialize)]
pub struct StageView {
    #[serde(flatten)]
    spec: StageSpec,
    /// `filter` or `transform`; absent while the plugin is not deployed.
    kind: Option<&'static str>,
}

/// A view's counters since the broker started (or the view was created).
#[derive(Debug, Serialize)]
pub struct StatsView {
    batches: u64,
    records_in: u64,
    records_out: u64,
    batches_failed: u64,
    records_skipped: u64,
}

impl From<ViewStats> for StatsView {
    fn from(s: ViewStats) -> Self {
        Self {
            batches: s.batches,
            records_in: s.records_in,
            records_out: s.records_out,
            batches_failed: s.batches_failed,
            records_skipped: s.records_skipped,
        }
    }
}

fn show(state: &AdminState, view: &ViewTopic) -> ViewView {
    let registry = &state.broker.plugins.registry;
    // Without an owner the answer depends on the reader: nothing to show.
    let refused = view.spec.owner.as_ref().and_then(|_| {
        let nobody = sluice_security::principal::KafkaPrincipal::anonymous();
        authz::view_refusal(&state.broker.security, view, (&nobody, ""))
    });
    ViewView {
        name: view.spec.name.clone(),
        source: view.spec.source.clone(),
        partition_count: view.source.partitions.len(),
        stages: view
            .spec
            .stages
            .iter()
            .map(|s| StageView {
                kind: registry.describe(&s.plugin).map(|i| i.kind.as_str()),
                spec: s.clone(),
            })
            .collect(),
        on_error: view.spec.on_error.clone(),
        ephemeral: view.spec.ephemeral,
        owner: view.spec.owner.clone(),
        refused,
        bound: view.is_bound(),
        stats: view.stats().into(),
    }
}

async fn list(State(state): State<AdminState>, Extension(caller): Extension<Caller>) -> Response {
    let views: Vec<ViewView> = state
        .broker
        .topics
        .views()
        .iter()
        .filter(|v| caller.may(&state.broker, on(AclOperation::Describe, &v.spec.name)))
        .map(|v| show(&state, v))
        .collect();
    axum::Json(serde_json::json!({ "views": views })).into_response()
}

/// `operation` on the view `name`.
fn on(operation: AclOperation, name: &str) -> (AclOperation, ResourceType, &str) {
    (operation, ResourceType::View, name)
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Describe, &name)])?;
    let view = state
        .broker
        .topics
        .view(&name)
        .ok_or_else(|| unknown(&name))?;
    Ok(axum::Json(show(&state, &view)).into_response())
}

async fn create(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    body: Result<axum::Json<ViewSpec>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(mut spec) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "{e}: expected {{\"name\": \"...\", \"source\": \"<topic>\", \"stages\": [{{\"plugin\": \"...\", \"params\": {{\"k\": \"v\"}}}}], \"on_error\": \"fail\" | \"skip\"}}"
        ))
    })?;
    require_create(&state, &caller, &spec)?;
    let (owner, host) = caller.owner(&state.broker)?;
    (spec.owner, spec.owner_host) = (Some(owner), Some(host));
    let broker = state.broker.clone();
    let (resource, detail) = (format!("view {}", spec.name), view_detail(&spec));
    let copy = (spec.ephemeral && state.broker.kraft().is_some())
        .then(|| serde_json::to_vec(&spec))
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    // Binding runs each plugin's `init` (CPU, bounded by plugin.call.timeout.ms).
    let view = blocking(move || broker.topics.create_view(spec))
        .await?
        .inspect_err(|e| {
            audit::refused(caller.actor(), "view.create", &resource, &e.to_string());
        })?;
    audit::done(caller.actor(), "view.create", &resource, &detail);
    if let Some(spec) = copy {
        // An ephemeral view is this broker's own, not the cluster's metadata: it is made on
        // every live broker, where the consumer fetches the partitions each leads.
        let message = crate::cluster::BrokerMessage::PutEphemeralView { spec };
        super::plugins::require_every_broker(&state, &message, "the ephemeral view made").await?;
    }
    Ok((StatusCode::CREATED, axum::Json(show(&state, &view))).into_response())
}

/// What an audit line says a new view is: its source and stages.
fn view_detail(spec: &ViewSpec) -> String {
    let stages: Vec<&str> = spec.stages.iter().map(|s| s.plugin.as_str()).collect();
    format!("source={} stages={}", spec.source, stages.join(","))
}

/// CREATE on the view, READ on its source topic (else a view would read a topic its creator
/// may not), and READ on each stage's plugin (as a topic's `sluice.partitioner` needs).
fn require_create(state: &AdminState, caller: &Caller, spec: &ViewSpec) -> Result<(), ApiError> {
    let broker = &state.broker;
    caller.require(broker, &[on(AclOperation::Create, &spec.name)])?;
    caller.require(
        broker,
        &[(AclOperation::Read, ResourceType::Topic, &spec.source)],
    )?;
    for stage in &spec.stages {
        caller.require(
            broker,
            &[(AclOperation::Read, ResourceType::Plugin, &stage.plugin)],
        )?;
    }
    Ok(())
}

async fn delete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Delete, &name)])?;
    let broker = state.broker.clone();
    let deleting = name.clone();
    let ephemeral = broker.topics.view(&name).is_some_and(|v| v.spec.ephemeral);
    blocking(move || broker.topics.delete_view(&deleting)).await??;
    if ephemeral && state.broker.kraft().is_some() {
        // Best effort: a copy left behind expires once idle.
        let message = crate::cluster::BrokerMessage::RemoveEphemeralView { name: name.clone() };
        let _ =
            super::plugins::require_every_broker(&state, &message, "the ephemeral view deleted")
                .await;
    }
    audit::done(
        caller.actor(),
        "view.delete",
        &format!("view {name}"),
        "deleted",
    );
    // Offsets committed under the view's name go with it, as with a deleted topic.
    state.groups.delete_topic(name.clone()).await;
    Ok(axum::Json(serde_json::json!({ "deleted": name })).into_response())
}

fn unknown(name: &str) -> ApiError {
    KafkaError::new(
        ResponseError::UnknownTopicOrPartition,
        format!("unknown view {name:?} (GET /v1/views lists them)"),
    )
    .into()
}
