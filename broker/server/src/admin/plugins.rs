//! `/v1/plugins`: deploy (`PUT /v1/plugins/{name}` with the `.wasm` as body), list,
//! describe (kind, WIT version, sha256, size, users, and call statistics), its own log
//! (`/v1/plugins/{name}/logs`) and delete (`?force=true` for a plugin a topic uses). The registry validates and compiles an upload before anything is written,
//! so a bad upload never replaces a working version (docs/plugins.md). ACLs on the PLUGIN
//! resource: DESCRIBE to see one (lists are filtered), ALTER on it to replace it (or to
//! deploy it new), CREATE on the cluster to deploy a new name only, DELETE to delete it.
//! Every deploy and delete is an audit line with its principal (`crate::audit`).

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use sluice_plugin_host::{Install, PluginInfo, PluginStats, RegistryError};
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

use super::auth::Caller;
use super::topics::blocking;
use super::{AdminState, ApiError};
use crate::audit;

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list))
        .route(
            "/{name}",
            get(describe)
                .put(deploy)
                .delete(delete)
                // The upload is capped by plugin.module.bytes.max in `deploy`, not the API limit.
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/{name}/logs", get(logs))
}

/// `GET /v1/plugins/{name}/logs?after=SEQ&limit=N`.
#[derive(Debug, Deserialize)]
struct LogsQuery {
    /// Lines after this one (0: from the oldest kept).
    #[serde(default)]
    after: u64,
    /// At most this many (default and cap: the ring's size).
    limit: Option<usize>,
}

/// One line of a plugin's log as the API shows it.
#[derive(Debug, Serialize)]
struct LogLineView {
    seq: u64,
    time_ms: i64,
    level: &'static str,
    version: String,
    message: String,
}

/// A plugin's own log (what its guest wrote through the WIT `log` import): ALTER on the
/// plugin, its owner's right. A plugin several tenants use logs while it runs for each of
/// them, and a guest may log record contents: DESCRIBE (which shows its kind, hash and
/// aggregate statistics) is not enough to read them.
async fn logs(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(query): Query<LogsQuery>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::Alter, ResourceType::Plugin, &name)],
    )?;
    let limit = query
        .limit
        .unwrap_or(sluice_plugin_host::limits::LOG_LINES_KEPT_MAX);
    let Some(page) = state
        .broker
        .plugins
        .registry
        .logs(&name, query.after, limit)
    else {
        return Err(registry_error(RegistryError::NotFound(name)));
    };
    let lines: Vec<LogLineView> = page
        .lines
        .into_iter()
        .map(|l| LogLineView {
            seq: l.seq,
            time_ms: l.time_ms,
            level: l.level,
            version: l.version,
            message: l.message,
        })
        .collect();
    Ok(axum::Json(serde_json::json!({
        "plugin": name,
        "lines": lines,
        "first_seq": page.first_seq,
        "next_after": page.next_after,
        "dropped": page.dropped,
    }))
    .into_response())
}

/// One plugin as the API shows it.
#[derive(Debug, Serialize)]
pub struct PluginView {
    name: String,
    kind: &'static str,
    wit_version: String,
    sha256: String,
    size_bytes: u64,
    /// Whether the component imports WASI (a componentize-py or -js guest).
    wasi: bool,
    /// Topics using the plugin now.
    users: usize,
}

impl From<PluginInfo> for PluginView {
    fn from(i: PluginInfo) -> Self {
        Self {
            name: i.name,
            kind: i.kind.as_str(),
            wit_version: i.wit_version,
            sha256: i.sha256,
            size_bytes: i.size_bytes,
            wasi: i.imports_wasi,
            users: i.users,
        }
    }
}

/// `GET /v1/plugins/{name}`: the plugin and its call statistics.
#[derive(Debug, Serialize)]
struct PluginDescription {
    #[serde(flatten)]
    plugin: PluginView,
    stats: StatsView,
}

/// A plugin's calls since it was loaded (across hot reloads), as `/metrics` counts them.
#[derive(Debug, Serialize)]
struct StatsView {
    calls: u64,
    /// Failed calls by kind (timeout, memory, trap, guest, contract, instantiate, params, busy).
    errors: BTreeMap<&'static str, u64>,
    /// Sum of call latencies, in microseconds (mean = sum / calls).
    latency_sum_us: u64,
    /// Records into and out of successful calls.
    records_in: u64,
    records_out: u64,
    /// CPU time of the calling threads during calls, in microseconds.
    cpu_us: u64,
}

impl From<PluginStats> for StatsView {
    fn from(s: PluginStats) -> Self {
        Self {
            calls: s.calls,
            errors: s.errors.iter().map(|(k, n)| (k.as_str(), *n)).collect(),
            latency_sum_us: s.latency_sum_us,
            records_in: s.records_in,
            records_out: s.records_out,
            cpu_us: s.cpu_ns / 1_000,
        }
    }
}

#[derive(Debug, Deserialize)]
struct DeleteQuery {
    #[serde(default)]
    force: bool,
}

async fn list(State(state): State<AdminState>, Extension(caller): Extension<Caller>) -> Response {
    let plugins: Vec<PluginView> = state
        .broker
        .plugins
        .registry
        .list()
        .into_iter()
        .filter(|p| caller.may(&state.broker, describe_on(&p.name)))
        .map(PluginView::from)
        .collect();
    axum::Json(plugins).into_response()
}

/// DESCRIBE on the plugin `name`.
fn describe_on(name: &str) -> (AclOperation, ResourceType, &str) {
    (AclOperation::Describe, ResourceType::Plugin, name)
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(&state.broker, &[describe_on(&name)])?;
    let registry = &state.broker.plugins.registry;
    let (Some(info), Some(stats)) = (registry.describe(&name), registry.stats_of(&name)) else {
        return Err(registry_error(RegistryError::NotFound(name)));
    };
    let description = PluginDescription {
        plugin: PluginView::from(info),
        stats: StatsView::from(stats),
    };
    Ok(axum::Json(description).into_response())
}

async fn deploy(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let path_name = name.clone();
    // Checked before the body is read: a refused caller cannot make the broker buffer it.
    let mode = install_mode(&state, &caller, &name).inspect_err(|e| {
        audit::refused(
            caller.actor(),
            "plugin.deploy",
            &format!("plugin {name}"),
            &e.message,
        );
    })?;
    let registry = state.broker.plugins.registry.clone();
    let max_bytes = registry.engine().config().module_bytes_max;
    let limit = usize::try_from(max_bytes.saturating_add(1)).unwrap_or(usize::MAX);
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        registry_error(RegistryError::TooLarge {
            size_bytes: max_bytes.saturating_add(1),
            max_bytes,
        })
    })?;
    let sent = bytes.clone();
    let outcome = blocking(move || registry.install_as(&name, &bytes, mode)).await?;
    let info = outcome.map_err(|e| {
        let error = registry_error(e);
        audit::refused(
            caller.actor(),
            "plugin.deploy",
            &format!("plugin {path_name}"),
            &error.message,
        );
        error
    })?;
    audit::done(
        caller.actor(),
        "plugin.deploy",
        &format!("plugin {}", info.name),
        &format!("sha256={} kind={}", info.sha256, info.kind.as_str()),
    );
    let message = crate::cluster::BrokerMessage::InstallPlugin {
        name: info.name.clone(),
        sha256: sluice_plugin_host::sha256_hex(&sent),
        bytes: sent.to_vec(),
        replace: mode == Install::NewOrReplace,
    };
    if let Some(kraft) = state.broker.kraft() {
        kraft.plugin_installed(&info.name, &info.sha256);
    }
    let stored = to_every_broker(&state, &message, "installed").await;
    if let Some(kraft) = state.broker.kraft() {
        // The version record: committed once a majority of the live brokers store it (the
        // others fetch it from one that does: `kraft::plugins`).
        let (ok, live, failed) = stored;
        crate::kraft::plugins::publish(kraft, &info, ok, live)
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "NOT_ON_ENOUGH_BROKERS",
                    format!("installed here; {e}{}", failures(&failed)),
                )
            })?;
        if !failed.is_empty() {
            tracing::warn!(plugin = %info.name, "committed; the brokers the copy failed on fetch it{}", failures(&failed));
        }
    }
    Ok((StatusCode::OK, axum::Json(PluginView::from(info))).into_response())
}

/// In a cluster, the same change on every other live broker (the bytes verified by their
/// SHA-256 there, and compiled there): (brokers holding the change, this one included; live
/// brokers; the failures, naming each broker). `(1, 1, [])` on a single node.
async fn to_every_broker(
    state: &AdminState,
    message: &crate::cluster::BrokerMessage,
    what: &str,
) -> (usize, usize, Vec<String>) {
    let Some(kraft) = state.broker.kraft() else {
        return (1, 1, Vec::new());
    };
    let others: Vec<i32> = kraft
        .image()
        .brokers()
        .iter()
        .filter(|(id, b)| **id != kraft.node_id() && b.is_active())
        .map(|(id, _)| *id)
        .collect();
    let live = others.len() + 1;
    let mut failed = Vec::new();
    for node in others {
        match kraft.message(node, message).await {
            Ok(0) => {}
            Ok(code) => failed.push(format!("broker {node}: error {code}")),
            Err(e) => failed.push(format!("broker {node}: {e}")),
        }
    }
    if !failed.is_empty() {
        tracing::warn!("{what} here, not on every broker{}", failures(&failed));
    }
    (live - failed.len(), live, failed)
}

/// [`to_every_broker`], where every live broker must take it: `NOT_ON_EVERY_BROKER` (502)
/// naming those that did not.
pub(super) async fn require_every_broker(
    state: &AdminState,
    message: &crate::cluster::BrokerMessage,
    what: &str,
) -> Result<(), ApiError> {
    let (_, _, failed) = to_every_broker(state, message, what).await;
    if failed.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::BAD_GATEWAY,
        "NOT_ON_EVERY_BROKER",
        format!("{what} here, not on every broker{}", failures(&failed)),
    ))
}

fn failures(failed: &[String]) -> String {
    if failed.is_empty() {
        String::new()
    } else {
        format!(" (failed: {})", failed.join("; "))
    }
}

/// ALTER on the plugin replaces it (or makes it new); CREATE on the cluster only makes a
/// new name, and the registry refuses it if the name exists by the time it is written.
fn install_mode(state: &AdminState, caller: &Caller, name: &str) -> Result<Install, ApiError> {
    let alter = (AclOperation::Alter, ResourceType::Plugin, name);
    if caller.may(&state.broker, alter) {
        return Ok(Install::NewOrReplace);
    }
    if state.broker.plugins.registry.describe(name).is_some() {
        return Err(caller.refusal(&[alter]));
    }
    caller.require(
        &state.broker,
        &[
            alter,
            (AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME),
        ],
    )?;
    Ok(Install::NewOnly)
}

async fn delete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Query(query): Query<DeleteQuery>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::Delete, ResourceType::Plugin, &name)],
    )?;
    let registry = state.broker.plugins.registry.clone();
    let deleted = name.clone();
    let message = crate::cluster::BrokerMessage::RemovePlugin {
        name: name.clone(),
        force: query.force,
    };
    blocking(move || registry.delete(&name, query.force))
        .await?
        .map_err(registry_error)?;
    to_every_broker(&state, &message, "deleted").await;
    if let Some(kraft) = state.broker.kraft() {
        // The removal record: a broker that missed the message deletes it from its image.
        crate::kraft::plugins::unpublish(kraft, &deleted)
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "CONTROLLER_NOT_AVAILABLE",
                    format!("deleted here; the cluster's record of it is not removed yet (delete again): {e}"),
                )
            })?;
    }
    audit::done(
        caller.actor(),
        "plugin.delete",
        &format!("plugin {deleted}"),
        &format!("force={}", query.force),
    );
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn registry_error(e: RegistryError) -> ApiError {
    let (status, code) = match &e {
        RegistryError::NotFound(_) => (StatusCode::NOT_FOUND, "NOT_FOUND"),
        RegistryError::InUse { .. } => (StatusCode::CONFLICT, "PLUGIN_IN_USE"),
        RegistryError::KindChange { .. } => (StatusCode::CONFLICT, "PLUGIN_KIND_CHANGE"),
        RegistryError::Exists(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
        RegistryError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "PLUGIN_TOO_LARGE"),
        RegistryError::OverLimit(_) | RegistryError::CompileTimeout { .. } => {
            (StatusCode::BAD_REQUEST, "PLUGIN_OVER_LIMIT")
        }
        RegistryError::CompileBusy { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "PLUGIN_COMPILE_BUSY")
        }
        RegistryError::Io { .. } | RegistryError::Watch(_) | RegistryError::Engine(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL")
        }
        _ => (StatusCode::BAD_REQUEST, "INVALID_PLUGIN"),
    };
    ApiError::new(status, code, e.to_string())
}
