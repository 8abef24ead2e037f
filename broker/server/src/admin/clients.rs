//! `GET /v1/clients` and `GET /v1/clients/{instance_id}`: the client instances that push
//! their metrics (KIP-714), with who they are and, for one, every point of their last push;
//! and the `sluice_client_metric` family of `/metrics`. Needs DESCRIBE on the cluster (a
//! client's metrics name its topics, groups and brokers).

use std::fmt::Write;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use serde_json::json;
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

use super::auth::Caller;
use super::{AdminState, ApiError};
use crate::broker::Broker;
use crate::telemetry::ClientInstance;

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list))
        .route("/{id}", get(describe))
}

fn summary(c: &ClientInstance) -> serde_json::Value {
    json!({
        "client_instance_id": c.id.to_string(),
        "client_id": c.caller.client_id,
        "principal": c.caller.principal,
        "host": c.caller.host,
        "subscribed_ms": c.subscribed_ms,
        "last_push_ms": c.pushed_ms,
        "pushes": c.pushes,
        "terminated": c.terminated,
        "points": c.metrics.points.len(),
        "dropped": c.metrics.dropped,
    })
}

async fn list(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let broker = &state.broker;
    caller.require(
        broker,
        &[(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME)],
    )?;
    let clients = broker.telemetry.clients(broker.now_ms());
    let listed: Vec<_> = clients.iter().map(summary).collect();
    Ok(Json(json!({ "clients": listed })).into_response())
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let broker = &state.broker;
    caller.require(
        broker,
        &[(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME)],
    )?;
    let clients = broker.telemetry.clients(broker.now_ms());
    let Some(client) = clients.iter().find(|c| c.id.to_string() == id) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("no client instance {id} has subscribed to telemetry (or it was forgotten)"),
        ));
    };
    let mut body = summary(client);
    body["resource"] = json!(client.metrics.resource);
    body["metrics"] = client
        .metrics
        .points
        .iter()
        .map(|p| json!({"name": p.name, "attributes": p.attributes, "value": p.value}))
        .collect();
    Ok(Json(body).into_response())
}

/// `sluice_client_metric`: every point of every kept client's last push, labelled with the
/// client (instance id, client id, principal), the metric's OTLP name and its attributes
/// (`attr_` + the key with every character outside `[a-zA-Z0-9_]` made `_`).
pub(super) fn render(out: &mut String, broker: &Broker) {
    let clients = broker.telemetry.clients(broker.now_ms());
    super::prometheus::family(
        out,
        "sluice_client_metric",
        "gauge",
        "The metrics Kafka clients pushed (KIP-714), their last push each.",
    );
    for c in &clients {
        let client = format!(
            "client_instance_id=\"{}\",client_id=\"{}\",principal=\"{}\"",
            c.id,
            super::prometheus::escape(&c.caller.client_id),
            super::prometheus::escape(&c.caller.principal)
        );
        for point in &c.metrics.points {
            let mut labels = format!(
                "{client},metric=\"{}\"",
                super::prometheus::escape(&point.name)
            );
            for (key, value) in &point.attributes {
                let _ = write!(
                    labels,
                    ",attr_{}=\"{}\"",
                    label_name(key),
                    super::prometheus::escape(value)
                );
            }
            let _ = writeln!(out, "sluice_client_metric{{{labels}}} {}", point.value);
        }
    }
}

fn label_name(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
