//! Client byte-rate quotas, enforced as Kafka does (KIP-13, KIP-219): each Produce's request
//! bytes and each Fetch's response bytes are recorded against the quota that applies to the
//! connection's user and client id (`sluice_security::quota`'s 8-level resolution over the
//! quotas in the security state); a client over its quota gets `throttle_time_ms` in the
//! response, and the connection is muted for that long after the response is sent (the
//! next request is not read until then). A throttled Fetch is answered empty, its bytes
//! taken back from the quota, as Kafka does; nothing is dropped.
//!
//! The sampled windows are the broker's (`security::QuotaWindows`: `quota.window.num` 11
//! samples of `quota.window.size.seconds` 1 s, Kafka's defaults), bounded by
//! `QUOTA_WINDOWS_MAX`.

use std::sync::atomic::Ordering;

use sluice_security::quota::QuotaKind;

use crate::broker::Broker;
use crate::wire::ConnectionContext;

/// Records `bytes` of `kind` for the connection's user and `client_id`; the throttle time
/// in ms (0: within quota, or no quota applies). A throttle also mutes the connection
/// (`ConnectionContext::mute_ms`) once the response is sent.
pub(crate) fn record(ctx: &ConnectionContext, kind: QuotaKind, client_id: &str, bytes: u64) -> u32 {
    let throttle = record_for(&ctx.broker, kind, &ctx.principal.name, client_id, bytes);
    if throttle > 0 {
        ctx.mute_ms
            .fetch_max(u64::from(throttle), Ordering::Relaxed);
        let counter = match kind {
            QuotaKind::ProducerByteRate => &ctx.broker.metrics.produce_throttled,
            QuotaKind::ConsumerByteRate => &ctx.broker.metrics.fetch_throttled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(principal = %ctx.principal, client_id, kind = kind.name(), throttle_ms = throttle, "throttled by a client quota");
    }
    throttle
}

/// Takes back `bytes` recorded by [`record`] for a request answered empty because it was
/// throttled (Kafka's `unrecordQuotaSensor`, for Fetch).
pub(crate) fn unrecord(ctx: &ConnectionContext, kind: QuotaKind, client_id: &str, bytes: u64) {
    let broker = &ctx.broker;
    let now = broker.now_ms();
    broker.security.store.read(|state| {
        broker.security.quotas.unrecord(
            state.quotas(),
            kind,
            &ctx.principal.name,
            client_id,
            bytes,
            now,
        );
    });
}

fn record_for(broker: &Broker, kind: QuotaKind, user: &str, client_id: &str, bytes: u64) -> u32 {
    let now = broker.now_ms();
    broker.security.store.read(|state| {
        let quotas = state.quotas();
        if quotas.is_empty() {
            return 0;
        }
        broker
            .security
            .quotas
            .record(quotas, kind, user, client_id, bytes, now)
    })
}
