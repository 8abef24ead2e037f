//! What clients report about themselves (KIP-714): GetTelemetrySubscriptions and
//! PushTelemetry, answered from the broker's telemetry store (`crate::telemetry`: the
//! rules, the bounds). No ACL guards them, as in Kafka: any authenticated client may push
//! its own metrics, and the store ties an instance to the principal that subscribed it.

use kafka_protocol::messages::{
    ApiKey, GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest, PushTelemetryResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::clock::SharedClock;
use crate::telemetry::{ACCEPTED_COMPRESSION, Caller, Push, Telemetry};
use crate::wire::{Client, ConnectionContext, FrameError, Response};
use crate::{codec, limits};

use super::{Call, no_handler};

/// What a telemetry handler is given: who asks, the store, and the clock.
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub telemetry: &'a Telemetry,
    pub clock: &'a SharedClock,
}

/// Answers a telemetry request.
pub(super) fn dispatch(conn: &ConnectionContext, mut call: Call) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        client: &conn.client,
        telemetry: &conn.broker.telemetry,
        clock: conn.broker.clock(),
    };
    let client_id = call
        .header
        .client_id
        .as_deref()
        .unwrap_or_default()
        .to_owned();
    let answer = call.answer;
    match call.key {
        ApiKey::GetTelemetrySubscriptions => {
            answer.reply(&subscriptions(ctx, client_id, call.request()?))
        }
        ApiKey::PushTelemetry => answer.reply(&push(ctx, &call.request()?)),
        other => Err(no_handler(other)),
    }
}

/// Answers GetTelemetrySubscriptions.
fn subscriptions(
    ctx: &Ctx<'_>,
    client_id: String,
    request: GetTelemetrySubscriptionsRequest,
) -> GetTelemetrySubscriptionsResponse {
    let caller = Caller {
        principal: ctx.client.principal.to_string(),
        host: ctx.client.host.to_string(),
        client_id,
    };
    let now = ctx.clock.now_ms();
    let mut response = GetTelemetrySubscriptionsResponse::default();
    let config = ctx.telemetry.config();
    match ctx
        .telemetry
        .subscribe(request.client_instance_id, caller, now, new_instance_id)
    {
        Ok(subscription) => {
            response.client_instance_id = subscription.instance_id;
            response.subscription_id = subscription.subscription_id;
            response.accepted_compression_types = ACCEPTED_COMPRESSION.to_vec();
            response.push_interval_ms = config.push_interval_ms;
            response.telemetry_max_bytes = config.max_bytes;
            // Cumulative sums: what a scrape of `/metrics` shows as they are.
            response.delta_temporality = false;
            response.requested_metrics = config
                .requested_metrics
                .iter()
                .map(|m| StrBytes::from_string(m.clone()))
                .collect();
        }
        Err(code) => {
            response.error_code = code.code();
            response.push_interval_ms = config.push_interval_ms;
        }
    }
    response
}

/// A new client instance id (a random v4 UUID, as Kafka's `Uuid.randomUuid`).
fn new_instance_id() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    crate::random::OsRng::fill(&mut bytes).expect("getrandom(2) failed");
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// Answers PushTelemetry.
fn push(ctx: &Ctx<'_>, request: &PushTelemetryRequest) -> PushTelemetryResponse {
    let push = Push {
        instance_id: request.client_instance_id,
        subscription_id: request.subscription_id,
        terminating: request.terminating,
        compression: request.compression_type,
        metrics: &request.metrics,
    };
    let principal = ctx.client.principal.to_string();
    let decompress = |codec_id: i8, bytes: &[u8]| {
        codec::decompress(
            sluice_storage::batch::compression(i16::from(codec_id)),
            bytes,
            limits::TELEMETRY_DECOMPRESSED_BYTES_MAX,
        )
        .ok()
        .flatten()
    };
    let mut response = PushTelemetryResponse::default();
    if let Err(code) = ctx
        .telemetry
        .push(&push, &principal, ctx.clock.now_ms(), decompress)
    {
        tracing::debug!(client = %ctx.client.peer, error = ?code, "client telemetry push refused");
        response.error_code = code.code();
    }
    response
}
