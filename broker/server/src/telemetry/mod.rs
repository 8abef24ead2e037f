//! Client telemetry (KIP-714): the metrics Kafka clients push about themselves, kept per
//! client instance and shown on `/metrics` and `GET /v1/clients`. Kafka serves
//! GetTelemetrySubscriptions and PushTelemetry only with a metrics-reporter plugin and a
//! `client-metrics` subscription; Sluice subscribes every client to
//! `client.telemetry.metrics` (all metrics by default) every
//! `client.telemetry.push.interval.ms`, so an operator sees every client's own view of its
//! latency, errors and throughput without touching the clients.
//!
//! The rules, as Kafka's `ClientMetricsManager` applies them:
//! - GetTelemetrySubscriptions with the nil instance id is given a new one; asking again
//!   before the push interval has passed is THROTTLING_QUOTA_EXCEEDED (unless the last push
//!   was refused for its subscription or compression, which the client fixes by asking).
//! - PushTelemetry needs a known instance id and its current subscription id
//!   (UNKNOWN_SUBSCRIPTION_ID: the client subscribes again), at most one push per half
//!   interval unless terminating (THROTTLING_QUOTA_EXCEEDED), one terminating push
//!   (INVALID_REQUEST after it), at most `telemetry.max.bytes` (TELEMETRY_TOO_LARGE), in a
//!   compression the subscription accepts (UNSUPPORTED_COMPRESSION_TYPE), and decodable as
//!   OTLP (INVALID_RECORD).
//! - Sluice's own: an instance belongs to the principal that subscribed it; a push for it by
//!   another principal is UNKNOWN_SUBSCRIPTION_ID, so one tenant cannot write another's
//!   metrics.
//!
//! Pure and bounded: time is a parameter, at most [`limits::TELEMETRY_CLIENTS_MAX`]
//! instances (the least recently seen is forgotten first), each keeping only its last push
//! (`otlp.rs` bounds the points). An instance not heard from for three push intervals (at
//! least [`limits::TELEMETRY_FORGET_AFTER_MS_MIN`]) is forgotten.

pub mod otlp;

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::limits;

/// Kafka's compression type ids, in the order offered (zstd first, as Kafka's broker).
pub const ACCEPTED_COMPRESSION: [i8; 5] = [4, 3, 1, 2, 0];

/// What every client is subscribed to (`client.telemetry.*`, `telemetry.max.bytes`).
#[derive(Debug, Clone)]
pub struct TelemetryConfig {
    /// Metric name prefixes as the wire has them: `[""]` every metric, `[]` none.
    pub requested_metrics: Vec<String>,
    /// How often clients push, ms.
    pub push_interval_ms: i32,
    /// Largest push accepted, bytes.
    pub max_bytes: i32,
}

impl TelemetryConfig {
    /// The subscription's id: a hash of what it asks for, so it changes when the config
    /// does (a client holding the old one is told UNKNOWN_SUBSCRIPTION_ID).
    fn subscription_id(&self) -> i32 {
        // FNV-1a over the prefixes (each ended by a 0 byte) and the interval.
        let mut h: u32 = 0x811c_9dc5;
        let bytes = self
            .requested_metrics
            .iter()
            .flat_map(|m| m.bytes().chain([0]))
            .chain(self.push_interval_ms.to_be_bytes());
        for b in bytes {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        i32::from_be_bytes(h.to_be_bytes())
    }
}

/// Who asks: the connection's principal and address and the request's client id.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// `User:name`.
    pub principal: String,
    /// The client's address.
    pub host: String,
    /// The request header's client id.
    pub client_id: String,
}

/// One client instance and its last push.
#[derive(Debug, Clone)]
pub struct ClientInstance {
    /// The instance id.
    pub id: Uuid,
    /// Who subscribed it.
    pub caller: Caller,
    /// When it last subscribed, ms.
    pub subscribed_ms: i64,
    /// When it last pushed, ms.
    pub pushed_ms: Option<i64>,
    /// Pushes accepted.
    pub pushes: u64,
    /// It said goodbye (a terminating push).
    pub terminated: bool,
    /// The last push: its resource attributes and points.
    pub metrics: otlp::Metrics,
    last_error: Option<ResponseError>,
}

impl ClientInstance {
    fn last_seen_ms(&self) -> i64 {
        self.pushed_ms
            .unwrap_or(self.subscribed_ms)
            .max(self.subscribed_ms)
    }
}

/// What GetTelemetrySubscriptions answers.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The instance id (assigned when the client sent the nil one).
    pub instance_id: Uuid,
    /// The subscription's id.
    pub subscription_id: i32,
}

/// A push: what the client sent.
#[derive(Debug)]
pub struct Push<'a> {
    /// Its instance id.
    pub instance_id: Uuid,
    /// The subscription it pushes for.
    pub subscription_id: i32,
    /// Its last push (the client is closing).
    pub terminating: bool,
    /// Kafka's compression type id of `metrics`.
    pub compression: i8,
    /// The OTLP bytes, compressed.
    pub metrics: &'a [u8],
}

/// The telemetry store.
#[derive(Debug)]
pub struct Telemetry {
    config: TelemetryConfig,
    clients: Mutex<BTreeMap<Uuid, ClientInstance>>,
}

impl Telemetry {
    /// An empty store subscribing clients to `config`.
    pub fn new(config: TelemetryConfig) -> Self {
        Self {
            config,
            clients: Mutex::new(BTreeMap::new()),
        }
    }

    /// The subscription clients get.
    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    fn forget_after_ms(&self) -> i64 {
        (3 * i64::from(self.config.push_interval_ms.max(1)))
            .max(limits::TELEMETRY_FORGET_AFTER_MS_MIN)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Uuid, ClientInstance>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// GetTelemetrySubscriptions. `new_id` makes an instance id for a client sending nil.
    pub fn subscribe(
        &self,
        instance_id: Uuid,
        caller: Caller,
        now_ms: i64,
        new_id: impl FnOnce() -> Uuid,
    ) -> Result<Subscription, ResponseError> {
        let mut clients = self.lock();
        self.expire(&mut clients, now_ms);
        let id = if instance_id.is_nil() {
            new_id()
        } else {
            instance_id
        };
        let interval = i64::from(self.config.push_interval_ms);
        if let Some(known) = clients.get_mut(&id) {
            if known.caller.principal != caller.principal {
                return Err(ResponseError::InvalidRequest);
            }
            let fixing = matches!(
                known.last_error,
                Some(
                    ResponseError::UnknownSubscriptionId
                        | ResponseError::UnsupportedCompressionType
                )
            );
            if now_ms - known.subscribed_ms < interval && !fixing {
                return Err(ResponseError::ThrottlingQuotaExceeded);
            }
            known.subscribed_ms = now_ms;
            known.last_error = None;
            known.caller.client_id = caller.client_id;
        } else {
            if clients.len() >= limits::TELEMETRY_CLIENTS_MAX {
                let oldest = clients
                    .values()
                    .min_by_key(|c| c.last_seen_ms())
                    .map(|c| c.id);
                if let Some(oldest) = oldest {
                    clients.remove(&oldest);
                }
            }
            clients.insert(
                id,
                ClientInstance {
                    id,
                    caller,
                    subscribed_ms: now_ms,
                    pushed_ms: None,
                    pushes: 0,
                    terminated: false,
                    metrics: otlp::Metrics::default(),
                    last_error: None,
                },
            );
        }
        Ok(Subscription {
            instance_id: id,
            subscription_id: self.config.subscription_id(),
        })
    }

    /// PushTelemetry by `principal`; `decompress` opens the metrics' compression (bounded by
    /// [`limits::TELEMETRY_DECOMPRESSED_BYTES_MAX`]).
    pub fn push(
        &self,
        push: &Push<'_>,
        principal: &str,
        now_ms: i64,
        decompress: impl FnOnce(i8, &[u8]) -> Option<Vec<u8>>,
    ) -> Result<(), ResponseError> {
        let mut clients = self.lock();
        self.expire(&mut clients, now_ms);
        if push.instance_id.is_nil() {
            return Err(ResponseError::InvalidRequest);
        }
        let Some(client) = clients
            .get_mut(&push.instance_id)
            .filter(|c| c.caller.principal == principal)
        else {
            return Err(ResponseError::UnknownSubscriptionId);
        };
        let outcome = self.accept(client, push, now_ms, decompress);
        client.last_error = outcome.as_ref().err().copied();
        outcome
    }

    fn accept(
        &self,
        client: &mut ClientInstance,
        push: &Push<'_>,
        now_ms: i64,
        decompress: impl FnOnce(i8, &[u8]) -> Option<Vec<u8>>,
    ) -> Result<(), ResponseError> {
        if push.subscription_id != self.config.subscription_id() {
            return Err(ResponseError::UnknownSubscriptionId);
        }
        if client.terminated {
            return Err(ResponseError::InvalidRequest);
        }
        let half = i64::from(self.config.push_interval_ms) / 2;
        if let Some(last) = client.pushed_ms
            && !push.terminating
            && now_ms - last < half
        {
            return Err(ResponseError::ThrottlingQuotaExceeded);
        }
        if push.metrics.len() > usize::try_from(self.config.max_bytes).unwrap_or(0) {
            return Err(ResponseError::TelemetryTooLarge);
        }
        if !ACCEPTED_COMPRESSION.contains(&push.compression) {
            return Err(ResponseError::UnsupportedCompressionType);
        }
        let opened = match push.compression {
            0 => Some(push.metrics.to_vec()),
            codec => decompress(codec, push.metrics),
        };
        let metrics = opened
            .and_then(|bytes| otlp::decode(&bytes).ok())
            .ok_or(ResponseError::InvalidRecord)?;
        client.metrics = metrics;
        client.pushed_ms = Some(now_ms);
        client.pushes += 1;
        client.terminated = push.terminating;
        Ok(())
    }

    fn expire(&self, clients: &mut BTreeMap<Uuid, ClientInstance>, now_ms: i64) {
        let after = self.forget_after_ms();
        clients.retain(|_, c| now_ms - c.last_seen_ms() <= after);
    }

    /// Every instance kept, as of `now_ms` (for `/metrics` and the admin API).
    pub fn clients(&self, now_ms: i64) -> Vec<ClientInstance> {
        let mut clients = self.lock();
        self.expire(&mut clients, now_ms);
        clients.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: i32 = 10_000;

    fn store() -> Telemetry {
        Telemetry::new(TelemetryConfig {
            requested_metrics: vec![String::new()],
            push_interval_ms: INTERVAL,
            max_bytes: 1024 * 1024,
        })
    }

    fn alice() -> Caller {
        Caller {
            principal: "User:alice".into(),
            host: "10.0.0.1".into(),
            client_id: "loader".into(),
        }
    }

    fn push(id: Uuid, sub: i32, terminating: bool, metrics: &[u8]) -> Push<'_> {
        Push {
            instance_id: id,
            subscription_id: sub,
            terminating,
            compression: 0,
            metrics,
        }
    }

    fn none(_: i8, _: &[u8]) -> Option<Vec<u8>> {
        None
    }

    #[test]
    fn a_client_subscribes_pushes_and_is_shown() {
        let t = store();
        let s = t
            .subscribe(Uuid::nil(), alice(), 0, || Uuid::from_u128(7))
            .unwrap();
        assert_eq!(s.instance_id, Uuid::from_u128(7));
        let sample = otlp::sample();
        let p = push(s.instance_id, s.subscription_id, false, &sample);
        assert_eq!(t.push(&p, "User:alice", 100, none), Ok(()));
        let clients = t.clients(100);
        assert_eq!(clients.len(), 1);
        assert_eq!(clients[0].metrics.points.len(), 2);
        assert_eq!(clients[0].caller.client_id, "loader");
        // Too early again, then the goodbye push is always taken, and nothing after it.
        assert_eq!(
            t.push(&p, "User:alice", 200, none),
            Err(ResponseError::ThrottlingQuotaExceeded)
        );
        let bye = push(s.instance_id, s.subscription_id, true, &sample);
        assert_eq!(t.push(&bye, "User:alice", 300, none), Ok(()));
        assert_eq!(
            t.push(&bye, "User:alice", 20_000, none),
            Err(ResponseError::InvalidRequest)
        );
        // Forgotten after three intervals of silence (at least the floor).
        let forget = (3 * i64::from(INTERVAL)).max(limits::TELEMETRY_FORGET_AFTER_MS_MIN);
        assert_eq!(t.clients(300 + forget).len(), 1);
        assert!(t.clients(300 + forget + 1).is_empty());
    }

    #[test]
    fn pushes_are_checked_as_kafka_checks_them() {
        let t = store();
        let s = t
            .subscribe(Uuid::nil(), alice(), 0, || Uuid::from_u128(1))
            .unwrap();
        let sample = otlp::sample();
        let id = s.instance_id;
        let sub = s.subscription_id;
        let cases: [(Push<'_>, &str, ResponseError); 5] = [
            (
                push(Uuid::nil(), sub, false, &sample),
                "User:alice",
                ResponseError::InvalidRequest,
            ),
            (
                push(Uuid::from_u128(9), sub, false, &sample),
                "User:alice",
                ResponseError::UnknownSubscriptionId,
            ),
            (
                push(id, sub + 1, false, &sample),
                "User:alice",
                ResponseError::UnknownSubscriptionId,
            ),
            (
                push(id, sub, false, &sample),
                "User:mallory",
                ResponseError::UnknownSubscriptionId,
            ),
            (
                push(id, sub, false, b"\x0a\xff"),
                "User:alice",
                ResponseError::InvalidRecord,
            ),
        ];
        for (p, who, want) in cases {
            assert_eq!(t.push(&p, who, 50, none), Err(want), "{p:?}");
        }
        let mut zipped = push(id, sub, false, &sample);
        zipped.compression = 9;
        assert_eq!(
            t.push(&zipped, "User:alice", 50, none),
            Err(ResponseError::UnsupportedCompressionType)
        );
        // After a compression refusal the client may ask again at once.
        assert!(t.subscribe(id, alice(), 60, || unreachable!()).is_ok());
        let big = vec![0u8; 1024 * 1024 + 1];
        assert_eq!(
            t.push(&push(id, sub, false, &big), "User:alice", 70, none),
            Err(ResponseError::TelemetryTooLarge)
        );
        zipped.compression = 4;
        let unzip = |codec: i8, _: &[u8]| (codec == 4).then(otlp::sample);
        assert_eq!(t.push(&zipped, "User:alice", 80, unzip), Ok(()));
    }

    #[test]
    fn subscribing_again_too_soon_is_throttled_and_others_cannot_take_an_instance() {
        let t = store();
        let s = t
            .subscribe(Uuid::nil(), alice(), 0, || Uuid::from_u128(3))
            .unwrap();
        assert_eq!(
            t.subscribe(s.instance_id, alice(), 10, || unreachable!())
                .map(|s| s.instance_id),
            Err(ResponseError::ThrottlingQuotaExceeded)
        );
        let mallory = Caller {
            principal: "User:mallory".into(),
            ..alice()
        };
        assert_eq!(
            t.subscribe(s.instance_id, mallory, 20_000, || unreachable!())
                .map(|s| s.instance_id),
            Err(ResponseError::InvalidRequest)
        );
        assert!(
            t.subscribe(s.instance_id, alice(), 20_000, || unreachable!())
                .is_ok()
        );
    }

    #[test]
    fn the_store_keeps_at_most_its_limit_forgetting_the_oldest() {
        let t = store();
        for i in 0..=limits::TELEMETRY_CLIENTS_MAX as u128 {
            let now = i64::try_from(i).unwrap();
            t.subscribe(Uuid::nil(), alice(), now, || Uuid::from_u128(i + 1))
                .unwrap();
        }
        let clients = t.clients(limits::TELEMETRY_CLIENTS_MAX as i64);
        assert_eq!(clients.len(), limits::TELEMETRY_CLIENTS_MAX);
        assert!(
            clients.iter().all(|c| c.id != Uuid::from_u128(1)),
            "the oldest went"
        );
    }
}
