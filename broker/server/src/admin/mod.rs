//! The admin HTTP API (axum, `admin.listen`, 127.0.0.1:9644 by default): topics, groups,
//! plugins, views, `/health`, `/ready` and `/metrics` in Prometheus text format. Documented in
//! docs/admin-api.md.
//!
//! - `topics.rs`, `groups.rs`, `plugins.rs`, `views.rs`: the JSON resources under `/v1/`,
//!   one file per resource.
//! - `prometheus.rs`: renders [`crate::metrics`] and the gauges read at scrape time.
//! - `clients.rs`: the client instances that push their metrics (KIP-714), and their
//!   `sluice_client_metric` samples.
//! - `serve.rs`: the listener under axum: `admin.max.connections`, HTTPS (`admin.ssl.enabled`).
//! - `host.rs`: the `Host` check against DNS rebinding (`admin.allowed.hosts`), on every route.
//! - `auth.rs`: the caller (`admin.token`, `admin.auth = basic`) and its ACL checks, which
//!   every handler makes with the same engine the Kafka listener uses.
//!
//! Every error is JSON `{"error": "<what happened and what to do>", "code": "<NAME>"}` with
//! the matching HTTP status; `code` is Kafka's error name when the broker answered with a
//! Kafka error, else one of `UNAUTHORIZED`, `FORBIDDEN`, `MISDIRECTED_REQUEST`,
//! `TOO_MANY_FAILED_LOGINS`, `NOT_FOUND`, `BAD_REQUEST`, `UNAVAILABLE`.

mod auth;
mod clients;
mod groups;
mod host;
mod plugins;
mod prometheus;
mod serve;
pub(crate) mod topics;
mod transforms;
mod views;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kafka_protocol::ResponseError;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::error::{KafkaError, ServerError};
use crate::group::GroupHandle;
use crate::limits;
use crate::tls::Tls;

/// What every admin handler sees.
#[derive(Debug, Clone)]
pub struct AdminState {
    /// Topics, partitions, metrics.
    pub broker: Arc<Broker>,
    /// The group coordinator (list, describe, committed offsets).
    pub groups: GroupHandle,
    /// Materialized transforms (`/v1/transforms`).
    pub transforms: crate::transforms::TransformService,
    /// True once the broker is shutting down (`/ready` turns 503).
    pub shutdown: watch::Receiver<bool>,
}

/// The admin listener, bound but not yet serving.
#[derive(Debug)]
pub struct AdminServer {
    /// Bound at start, so a port conflict fails `sluice serve` before it says "listening".
    listener: TcpListener,
    /// The certificates when `admin.ssl.enabled` (the Kafka SSL listeners' keystore).
    tls: Option<Arc<Tls>>,
}

impl AdminServer {
    /// Binds `addr` (port 0 picks a free one); serves HTTPS with `tls`.
    pub async fn bind(addr: SocketAddr, tls: Option<Arc<Tls>>) -> Result<Self, ServerError> {
        let listener = TcpListener::bind(addr).await.map_err(ServerError::io(format!(
            "binding the admin API on {addr} (set admin.listen, e.g. --admin-listen 127.0.0.1:0, or admin.listen = \"\" to turn it off)"
        )))?;
        Ok(Self { listener, tls })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until `shutdown` resolves.
    pub async fn run(self, state: AdminState, shutdown: impl Future<Output = ()> + Send + 'static) {
        let (listener, acceptor) =
            serve::spawn_acceptor(self.listener, self.tls, state.broker.clone());
        let app = router(state).into_make_service_with_connect_info::<serve::Conn>();
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, "admin API stopped");
        }
        acceptor.abort();
    }
}

/// Every route: the Host check on all, authentication on all but `/health`.
fn router(state: AdminState) -> Router {
    let protected = Router::new()
        .route("/ready", get(ready))
        .route("/metrics", get(prometheus::handle))
        .nest("/v1/topics", topics::routes())
        .nest("/v1/groups", groups::routes())
        .nest("/v1/plugins", plugins::routes())
        .nest("/v1/views", views::routes())
        .nest("/v1/transforms", transforms::routes())
        .nest("/v1/clients", clients::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ));
    Router::new()
        .route("/health", get(health))
        .merge(protected)
        .layer(middleware::from_fn_with_state(state.clone(), host::check))
        .layer(DefaultBodyLimit::max(limits::ADMIN_BODY_BYTES_MAX))
        .with_state(state)
}

async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// Ready when the broker is not shutting down and the group coordinator answers.
async fn ready(State(state): State<AdminState>) -> Result<Response, ApiError> {
    if *state.shutdown.borrow() {
        return Err(ApiError::unavailable("the broker is shutting down"));
    }
    if state.groups.list_groups().await.is_none() {
        return Err(ApiError::unavailable(
            "the group coordinator is not running",
        ));
    }
    Ok(axum::Json(json!({"status": "ready"})).into_response())
}

async fn not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        format!(
            "no route for {} {} (see docs/admin-api.md)",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An admin API error: an HTTP status and the JSON body.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: String,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BAD_REQUEST", message)
    }

    fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", message)
    }
}

impl From<KafkaError> for ApiError {
    fn from(e: KafkaError) -> Self {
        let status = match e.code {
            ResponseError::UnknownTopicOrPartition | ResponseError::GroupIdNotFound => {
                StatusCode::NOT_FOUND
            }
            ResponseError::TopicAlreadyExists => StatusCode::CONFLICT,
            ResponseError::KafkaStorageError => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Self::new(status, &kafka_error_name(e.code), e.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.message, "code": self.code});
        (self.status, axum::Json(body)).into_response()
    }
}

/// Kafka's spelling of an error (`TOPIC_ALREADY_EXISTS`).
pub fn kafka_error_name(error: ResponseError) -> String {
    let camel = format!("{error:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_error_names_are_upper_snake() {
        assert_eq!(
            kafka_error_name(ResponseError::TopicAlreadyExists),
            "TOPIC_ALREADY_EXISTS"
        );
        assert_eq!(
            kafka_error_name(ResponseError::UnknownTopicOrPartition),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
