//! The data path: the APIs that write or read a partition's log (Produce, Fetch,
//! ListOffsets, OffsetForLeaderEpoch, DeleteRecords), the client byte-rate quotas of Produce
//! and Fetch (`throttle.rs`), and KIP-110's zstd rules (`kip110.rs`). One `match` over
//! their API keys. A Fetch that names a broker (`ReplicaId` / `ReplicaState`) is a
//! follower's (`replica_fetch.rs`).

mod delete_records;
mod fetch;
mod kip110;
mod leader_hint;
mod list_offsets;
mod offset_for_leader_epoch;
mod produce;
mod replica_fetch;
mod throttle;

use kafka_protocol::messages::{ApiKey, FetchRequest, RequestHeader};
use sluice_protocol::fetch_response::{self, FetchOutput};
use sluice_protocol::frame;
use sluice_security::quota::QuotaKind;

use std::sync::Arc;

use sluice_plugin_host::Registry;

use crate::authz::Authz;
use crate::clock::SharedClock;
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::security::Security;
use crate::topics::TopicRegistry;
use crate::txn::TxnHandle;
use crate::wire::{Chunk, Client, ConnectionContext, FrameError, Reply, Response};

use super::{Call, encode, no_handler};

pub(super) use produce::unsupported_old_version as unsupported_old_produce;

/// What a data-path handler is given: who asks, what they may do, the topics (their
/// partitions and views), the plugin registry (views' chains, validators, partitioners),
/// the security store (its quota windows), the metrics (throttles, parked fetches), the
/// transaction coordinator (Produce verifies transactional batches with it), the config
/// (acks=all fsync) and the clock.
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub auth: Authz<'a>,
    pub topics: &'a Arc<TopicRegistry>,
    pub plugins: &'a Arc<Registry>,
    pub security: &'a Security,
    pub metrics: &'a Metrics,
    pub txns: &'a TxnHandle,
    pub config: &'a BrokerConfig,
    pub clock: &'a SharedClock,
    /// The cluster side, when this broker is in a cluster.
    pub kraft: Option<&'a Arc<crate::kraft::Kraft>>,
}

/// Answers a request of the data path.
pub(super) async fn dispatch(
    conn: &ConnectionContext,
    mut call: Call,
) -> Result<Reply, FrameError> {
    let broker = &conn.broker;
    let ctx = &Ctx {
        client: &conn.client,
        auth: Authz::new(&broker.security, &conn.client),
        topics: &broker.topics,
        plugins: &broker.plugins.registry,
        security: &broker.security,
        metrics: &broker.metrics,
        txns: &conn.txns,
        config: &broker.config,
        clock: broker.clock(),
        kraft: conn.broker.kraft(),
    };
    let (answer, v) = (call.answer, call.read_as);
    let response = match call.key {
        ApiKey::Produce => return produce(ctx, call).await,
        ApiKey::Fetch => {
            let request: FetchRequest = call.request()?;
            match replica_fetch::follower_of(&request, v) {
                Some(follower) => {
                    answer.reply(&replica_fetch::handle(ctx, request, v, follower).await)?
                }
                None => fetch_reply(ctx, &call.header, request, v).await?,
            }
        }
        ApiKey::ListOffsets => {
            answer.reply(&list_offsets::handle(ctx, call.request()?, v).await)?
        }
        ApiKey::OffsetForLeaderEpoch => {
            answer.reply(&offset_for_leader_epoch::handle(ctx, call.request()?))?
        }
        ApiKey::DeleteRecords => {
            answer.reply(&delete_records::handle(ctx, call.request()?).await)?
        }
        other => return Err(no_handler(other)),
    };
    Ok(Reply::Now(Some(response)))
}

/// Produce: once the request is decoded, nothing but its record sets keeps the frame alive
/// (the header and the rest of the body are dropped here, the topic names in
/// `produce::append`), so the storage engine can take a partition's records without
/// copying them.
///
/// The append happens here, in request order; an acks=all answer that waits for the group
/// commit is finished by a task the connection writer awaits in order (`Reply::Later`), so
/// the next request's append need not wait for this one's fsync.
async fn produce(ctx: &Ctx<'_>, call: Call) -> Result<Reply, FrameError> {
    let Call {
        header,
        mut body,
        budget,
        read_as: version,
        ..
    } = call;
    let correlation_id = header.correlation_id;
    let client_id = header.client_id.as_deref().unwrap_or_default().to_owned();
    drop(header);
    let request_bytes = body.len() as u64;
    let mut request = frame::decode(&mut body, ApiKey::Produce, version)?;
    drop(body);
    let by_id = produce::names_from_ids(ctx, &mut request, version);
    let throttle = throttle::record(ctx, QuotaKind::ProducerByteRate, &client_id, request_bytes);
    let staged = produce::append(ctx, request, version, throttle).await;
    drop(budget);
    let later = staged.waits_for_sync();
    let header_version = ApiKey::Produce.response_header_version(version);
    let reply = async move {
        match staged.finish().await? {
            Some(mut response) => {
                produce::ids_in_response(&mut response, by_id);
                encode(correlation_id, header_version, &response, version).map(Some)
            }
            None => Ok(None),
        }
    };
    if later {
        Ok(Reply::Later(tokio::spawn(reply)))
    } else {
        reply.await.map(Reply::Now)
    }
}

/// Fetch: the records as file ranges, the consumer quota recorded (`throttle.rs`). A fetch
/// over its quota is answered as Kafka answers it: empty, with its throttle time, and its
/// bytes taken back from the quota (the client fetches them again once the throttle ends).
async fn fetch_reply(
    ctx: &Ctx<'_>,
    header: &RequestHeader,
    request: FetchRequest,
    version: i16,
) -> Result<Response, FrameError> {
    let mut response = fetch::handle(ctx, request, version).await;
    let client_id = header.client_id.as_deref().unwrap_or_default();
    let bytes = response.record_bytes();
    let throttle = throttle::record(ctx, QuotaKind::ConsumerByteRate, client_id, bytes);
    if throttle > 0 {
        throttle::unrecord(ctx, QuotaKind::ConsumerByteRate, client_id, bytes);
        // Kafka's `getThrottledResponse`: no error, no partitions, the throttle time.
        response = FetchOutput::default();
    }
    response.throttle_time_ms = i32::try_from(throttle).unwrap_or(i32::MAX);
    let hv = ApiKey::Fetch.response_header_version(version);
    let mut chunks = vec![Chunk::Bytes(frame::response_header(
        header.correlation_id,
        hv,
    )?)];
    chunks.extend(
        fetch_response::encode(response, version)
            .into_iter()
            .map(Chunk::from),
    );
    Ok(Response { chunks })
}

/// The (topic, partition) pairs listed more than once among `pairs` (bounded by the
/// request's own entries, which the shape guard bounded by the frame's bytes).
fn duplicates<'a>(
    pairs: impl Iterator<Item = (&'a str, i32)>,
) -> std::collections::HashSet<(&'a str, i32)> {
    let mut seen = std::collections::HashSet::new();
    let mut twice = std::collections::HashSet::new();
    for pair in pairs {
        if !seen.insert(pair) {
            twice.insert(pair);
        }
    }
    twice
}
