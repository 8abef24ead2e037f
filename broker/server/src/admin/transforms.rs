//! `/v1/transforms`: deploy (`POST` a [`DeployRequest`]), list, describe (spec, per-partition
//! state, position, lag, counters, last error), pause, resume, restart from an offset, and
//! delete materialized transforms (`crate::transforms`). Deploying binds the plugin, so an
//! unknown plugin or parameters it rejects fail the request, naming them.
//!
//! ACLs on the TRANSFORM resource: DESCRIBE to see one (lists are filtered), CREATE to deploy
//! it (with READ on the source topic and the plugin, WRITE on every output and the
//! dead-letter topic: a transform writes as the broker, so it may only write where its
//! deployer may), ALTER to pause, resume or restart, DELETE to delete. The deployer is the
//! transform's owner: its runners ask the owner's rights again before every read and append
//! (`transforms/rights.rs`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use sluice_security::acl::{AclOperation, ResourceType};
use sluice_transform::FromOffset;

use super::auth::Caller;
use super::{AdminState, ApiError};
use crate::audit;
use crate::transforms::{DeployRequest, TransformReport};

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list).post(deploy))
        .route("/{name}", get(describe).delete(delete))
        .route("/{name}/pause", post(pause))
        .route("/{name}/resume", post(resume))
        .route("/{name}/restart", post(restart))
}

/// `operation` on the transform `name`.
fn on(operation: AclOperation, name: &str) -> (AclOperation, ResourceType, &str) {
    (operation, ResourceType::Transform, name)
}

async fn list(State(state): State<AdminState>, Extension(caller): Extension<Caller>) -> Response {
    let transforms: Vec<TransformReport> = state
        .transforms
        .list_everywhere()
        .await
        .into_iter()
        .filter(|t| caller.may(&state.broker, on(AclOperation::Describe, &t.name)))
        .collect();
    axum::Json(serde_json::json!({ "transforms": transforms })).into_response()
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Describe, &name)])?;
    let report = state.transforms.describe(&name).await?;
    Ok(axum::Json(report).into_response())
}

async fn deploy(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    body: Result<axum::Json<DeployRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(request) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "{e}: expected {{\"name\": \"...\", \"source\": \"<topic>\", \"plugin\": \"...\", \"outputs\": [\"<topic>\", ...], \"params\": {{\"k\": \"v\"}}, \"from_offset\": \"earliest\" | \"latest\" | \"<offset>\" | \"<epoch ms>ms\", \"on_error\": \"stop\" | \"skip\" | \"dead-letter\", \"dead_letter_topic\": \"<topic>\", \"partitioning\": \"key\" | \"source\", \"partitioner\": \"<partitioner plugin>\", \"partitioner_params\": {{}}, \"commit_interval_ms\": 100, \"paused\": false}}"
        ))
    })?;
    require_deploy(&state, &caller, &request)?;
    let (principal, host) = caller.owner(&state.broker)?;
    let resource = format!("transform {}", request.name);
    let detail = format!(
        "source={} plugin={} outputs={}",
        request.source,
        request.plugin,
        request.outputs.join(",")
    );
    let report = state
        .transforms
        .deploy(request, principal, host)
        .await
        .inspect_err(|e| {
            audit::refused(
                caller.actor(),
                "transform.deploy",
                &resource,
                &e.to_string(),
            )
        })?;
    audit::done(caller.actor(), "transform.deploy", &resource, &detail);
    Ok((StatusCode::CREATED, axum::Json(report)).into_response())
}

/// CREATE on the transform, READ on its source topic and plugin, WRITE on every topic it
/// writes.
fn require_deploy(
    state: &AdminState,
    caller: &Caller,
    request: &DeployRequest,
) -> Result<(), ApiError> {
    let broker = &state.broker;
    caller.require(broker, &[on(AclOperation::Create, &request.name)])?;
    caller.require(
        broker,
        &[(AclOperation::Read, ResourceType::Topic, &request.source)],
    )?;
    caller.require(
        broker,
        &[(AclOperation::Read, ResourceType::Plugin, &request.plugin)],
    )?;
    if let Some(partitioner) = &request.partitioner {
        caller.require(
            broker,
            &[(AclOperation::Read, ResourceType::Plugin, partitioner)],
        )?;
    }
    for topic in request.outputs.iter().chain(&request.dead_letter_topic) {
        caller.require(broker, &[(AclOperation::Write, ResourceType::Topic, topic)])?;
    }
    Ok(())
}

async fn pause(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Alter, &name)])?;
    let report = state.transforms.set_paused(&name, true).await?;
    audit::done(
        caller.actor(),
        "transform.pause",
        &format!("transform {name}"),
        "paused",
    );
    Ok(axum::Json(report).into_response())
}

async fn resume(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Alter, &name)])?;
    let report = state.transforms.set_paused(&name, false).await?;
    audit::done(
        caller.actor(),
        "transform.resume",
        &format!("transform {name}"),
        "resumed",
    );
    Ok(axum::Json(report).into_response())
}

/// `POST /v1/transforms/{name}/restart` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Restart {
    from_offset: FromOffset,
}

async fn restart(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Result<axum::Json<Restart>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let axum::Json(body) = body.map_err(|e| {
        ApiError::bad_request(format!(
            "{e}: expected {{\"from_offset\": \"earliest\" | \"latest\" | \"<offset>\" | \"<epoch ms>ms\"}}"
        ))
    })?;
    caller.require(&state.broker, &[on(AclOperation::Alter, &name)])?;
    let detail = format!("from_offset={:?}", body.from_offset);
    let report = state.transforms.restart(&name, body.from_offset).await?;
    audit::done(
        caller.actor(),
        "transform.restart",
        &format!("transform {name}"),
        &detail,
    );
    Ok(axum::Json(report).into_response())
}

async fn delete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[on(AclOperation::Delete, &name)])?;
    state.transforms.delete(&name).await?;
    audit::done(
        caller.actor(),
        "transform.delete",
        &format!("transform {name}"),
        "deleted",
    );
    Ok(axum::Json(serde_json::json!({ "deleted": name })).into_response())
}
