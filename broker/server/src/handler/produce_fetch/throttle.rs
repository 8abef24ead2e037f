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

use super::Ctx;
use crate::security::Security;

/// Records `bytes` of `kind` for the connection's user and `client_id`; the throttle time
/// in ms (0: within quota, or no quota applies). A throttle also mutes the connection
/// (`Client::mute_ms`) once the response is sent.
pub(crate) fn record(ctx: &Ctx<'_>, kind: QuotaKind, client_id: &str, bytes: u64) -> u32 {
    let throttle = record_for(
        (ctx.security, ctx.clock.now_ms()),
        kind,
        &ctx.client.principal.name,
        client_id,
        bytes,
    );
    if throttle > 0 {
        ctx.client
            .mute_ms
            .fetch_max(u64::from(throttle), Ordering::Relaxed);
        let counter = match kind {
            QuotaKind::ProducerByteRate => &ctx.metrics.produce_throttled,
            QuotaKind::ConsumerByteRate => &ctx.metrics.fetch_throttled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(principal = %ctx.client.principal, client_id, kind = kind.name(), throttle_ms = throttle, "throttled by a client quota");
    }
    throttle
}

/// Takes back `bytes` recorded by [`record`] for a request answered empty because it was
/// throttled (Kafka's `unrecordQuotaSensor`, for Fetch).
pub(crate) fn unrecord(ctx: &Ctx<'_>, kind: QuotaKind, client_id: &str, bytes: u64) {
    let now = ctx.clock.now_ms();
    ctx.security.store.read(|state| {
        ctx.security.quotas.unrecord(
            state.quotas(),
            kind,
            &ctx.client.principal.name,
            client_id,
            bytes,
            now,
        );
    });
}

fn record_for(
    (security, now): (&Security, i64),
    kind: QuotaKind,
    user: &str,
    client_id: &str,
    bytes: u64,
) -> u32 {
    security.store.read(|state| {
        let quotas = state.quotas();
        if quotas.is_empty() {
            return 0;
        }
        security
            .quotas
            .record(quotas, kind, user, client_id, bytes, now)
    })
}
