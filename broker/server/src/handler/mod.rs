//! Request dispatch: one `match` from API key to handler, after the version table says the
//! version is served. Every handler has the same shape: `handle(ctx, request, version) ->
//! response`; request-level problems become Kafka error codes in the response, and only
//! frames we cannot parse close the connection.

mod acls;
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_configs;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_transactions;
mod elect_leaders;
mod end_txn;
mod fetch;
mod find_coordinator;
mod group_common;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod kip110;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
pub(crate) mod produce;
mod quotas;
mod sasl;
mod sync_group;
mod throttle;
mod txn_common;
mod txn_offset_commit;
mod users;
mod write_txn_markers;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use sluice_protocol::fetch_response::{self, FetchOutput};
use sluice_protocol::frame::{self, decode, header_and_body};
use sluice_protocol::{compat, versions};
use sluice_security::quota::QuotaKind;

use crate::admission::FrameBudget;
use crate::sasl::Session;
use crate::wire::{Chunk, ConnectionContext, FrameError, Reply, Response};

/// The (topic, partition) pairs listed more than once among `pairs` (bounded by the
/// request's own entries, which the shape guard bounded by the frame's bytes).
pub(crate) fn duplicates<'a>(
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

/// Handles one request frame; `Reply::Now(None)` when the request expects no response (acks=0).
/// The frame's `budget` is released once the request is decoded (a Produce's once its
/// records are appended): a request that then waits holds none of it.
pub async fn handle(
    ctx: &ConnectionContext,
    frame: Bytes,
    budget: FrameBudget,
) -> Result<Reply, FrameError> {
    let peeked = frame::peek(&frame)?;
    let support = frame::api(&peeked)?;
    let (key, version) = (support.key, peeked.version);
    if !support.serves(version) {
        return match key {
            ApiKey::ApiVersions => Ok(Reply::Now(Some(api_versions::unsupported_version(
                peeked.correlation_id,
            )?))),
            ApiKey::Produce if support.advertises(version) => {
                produce::unsupported_old_version(frame, version, peeked.correlation_id)
                    .map(|r| Reply::Now(Some(r)))
            }
            _ => Err(FrameError::malformed(format!(
                "{key:?} v{version} is not supported (this broker serves v{}..=v{})",
                support.served_min, support.max
            ))),
        };
    }
    let (header, body) = header_and_body(key, version, frame)?;
    tracing::trace!(peer = %ctx.peer, api = ?key, version, correlation_id = header.correlation_id, "request");
    // Latency of a deferred acks=all answer (Reply::Later) is measured to the append; the
    // fsync wait is shared by the group commit and shows in the produce p99 of the bench.
    let started = std::time::Instant::now();
    let result = if key == ApiKey::Produce {
        let correlation_id = header.correlation_id;
        let client_id = header.client_id.as_deref().unwrap_or_default().to_owned();
        drop(header);
        produce_frame(ctx, body, version, (correlation_id, &client_id), budget).await
    } else {
        dispatch(ctx, key, version, &header, body, budget)
            .await
            .map(Reply::Now)
    };
    if let Some(api) = ctx.broker.metrics.api(key) {
        api.latency.observe(started.elapsed());
        if result.is_err() {
            api.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    result
}

/// Handles a SaslHandshake or SaslAuthenticate frame (`sasl::Admit::Sasl`) with the
/// connection's SASL session, which a completed exchange turns into the connection's
/// principal. `true`: close the connection once the answer is written (a failed or refused
/// exchange, as Kafka closes it).
pub async fn handle_sasl(
    ctx: &mut ConnectionContext,
    session: &mut Session,
    frame: Bytes,
    budget: FrameBudget,
) -> Result<(Reply, bool), FrameError> {
    let peeked = frame::peek(&frame)?;
    let (key, version) = match versions::lookup(peeked.api_key) {
        Some(support) if support.serves(peeked.version) => (support.key, peeked.version),
        _ => {
            return Err(FrameError::malformed(format!(
                "API key {} v{} is not a SASL version this broker serves",
                peeked.api_key, peeked.version
            )));
        }
    };
    let (header, mut body) = header_and_body(key, version, frame)?;
    let (cid, hv) = (header.correlation_id, key.response_header_version(version));
    let started = std::time::Instant::now();
    let (response, close) = match key {
        ApiKey::SaslHandshake => {
            let request = decode(&mut body, key, version)?;
            drop(budget);
            let (response, close) = sasl::handshake(ctx, session, &request, version);
            (encode(cid, hv, &response, version)?, close)
        }
        ApiKey::SaslAuthenticate => {
            let request = decode(&mut body, key, version)?;
            drop(budget);
            let (response, close) = sasl::authenticate(ctx, session, request).await;
            (encode(cid, hv, &response, version)?, close)
        }
        other => {
            return Err(FrameError::malformed(format!(
                "{other:?} is not a SASL request"
            )));
        }
    };
    if let Some(api) = ctx.broker.metrics.api(key) {
        api.latency.observe(started.elapsed());
    }
    Ok((Reply::Now(Some(response)), close))
}

/// Produce, apart from `dispatch`: once the request is decoded, nothing but its record sets
/// keeps the frame alive (the header and the rest of the body are dropped here, the topic
/// names in `produce::append`), so the storage engine can take a partition's records
/// without copying them.
///
/// The append happens here, in request order; an acks=all answer that waits for the group
/// commit is finished by a task the connection writer awaits in order (`Reply::Later`), so
/// the next request's append need not wait for this one's fsync.
async fn produce_frame(
    ctx: &ConnectionContext,
    mut body: Bytes,
    version: i16,
    (correlation_id, client_id): (i32, &str),
    budget: FrameBudget,
) -> Result<Reply, FrameError> {
    let request_bytes = body.len() as u64;
    let request = decode(&mut body, ApiKey::Produce, version)?;
    drop(body);
    let throttle = throttle::record(ctx, QuotaKind::ProducerByteRate, client_id, request_bytes);
    let staged = produce::append(ctx, request, version, throttle).await;
    drop(budget);
    let later = staged.waits_for_sync();
    let header_version = ApiKey::Produce.response_header_version(version);
    let reply = async move {
        match staged.finish().await? {
            Some(response) => encode(correlation_id, header_version, &response, version).map(Some),
            None => Ok(None),
        }
    };
    if later {
        Ok(Reply::Later(tokio::spawn(reply)))
    } else {
        reply.await.map(Reply::Now)
    }
}

async fn dispatch(
    ctx: &ConnectionContext,
    key: ApiKey,
    version: i16,
    header: &RequestHeader,
    mut body: Bytes,
    budget: FrameBudget,
) -> Result<Option<Response>, FrameError> {
    let mut budget = Some(budget);
    let (cid, hv) = (header.correlation_id, key.response_header_version(version));
    let old = compat::request_as(key, version);
    let (decode_version, upgraded) =
        compat::upgrade(key, version, body).map_err(FrameError::malformed)?;
    body = upgraded;
    // Decodes the request at the version it is read as, and releases the frame's budget.
    macro_rules! request {
        () => {
            take_request(&mut body, &mut budget, key, decode_version)?
        };
    }
    // Encodes a response at the request's version (or the old-version shim's bytes).
    macro_rules! reply {
        ($response:expr) => {
            encode(cid, hv, &$response, version)?
        };
        ($response:expr, $old:expr) => {
            match old {
                Some(_) => encode_raw(cid, hv, $old(&$response))?,
                None => encode(cid, hv, &$response, version)?,
            }
        };
    }
    let response = match key {
        ApiKey::ApiVersions => reply!(api_versions::handle(request!())),
        ApiKey::Metadata => reply!(metadata::handle(ctx, request!(), version).await),
        ApiKey::Fetch => fetch_reply(ctx, header, request!(), version).await?,
        ApiKey::FindCoordinator => reply!(find_coordinator::handle(ctx, request!(), version)),
        ApiKey::ListOffsets => reply!(list_offsets::handle(ctx, request!(), version).await),
        ApiKey::CreateTopics => {
            let response = create_topics::handle(ctx, request!()).await;
            reply!(response, |r| compat::create_topics(r, version))
        }
        ApiKey::DeleteTopics => reply!(
            delete_topics::handle(ctx, request!()).await,
            compat::delete_topics
        ),
        ApiKey::DescribeConfigs => {
            let response = describe_configs::handle(ctx, request!(), decode_version);
            reply!(response, compat::describe_configs)
        }
        ApiKey::JoinGroup => reply!(join_group::handle(ctx, header, request!(), version).await),
        ApiKey::SyncGroup => reply!(sync_group::handle(ctx, request!()).await),
        ApiKey::Heartbeat => reply!(heartbeat::handle(ctx, request!()).await),
        ApiKey::LeaveGroup => reply!(leave_group::handle(ctx, request!(), version).await),
        ApiKey::OffsetCommit => {
            let response = offset_commit::handle(ctx, request!()).await;
            reply!(response, compat::offset_commit)
        }
        ApiKey::OffsetFetch => reply!(offset_fetch::handle(ctx, request!(), version).await),
        ApiKey::ListGroups => reply!(list_groups::handle(ctx, request!(), version).await),
        ApiKey::ConsumerGroupHeartbeat => {
            reply!(consumer_group_heartbeat::handle(ctx, header, request!()).await)
        }
        ApiKey::ConsumerGroupDescribe => {
            reply!(consumer_group_describe::handle(ctx, request!()).await)
        }
        ApiKey::DescribeGroups => reply!(describe_groups::handle(ctx, request!()).await),
        ApiKey::DeleteGroups => reply!(delete_groups::handle(ctx, request!()).await),
        ApiKey::CreateAcls => reply!(acls::create(ctx, request!())),
        ApiKey::DescribeAcls => reply!(acls::describe(ctx, request!())),
        ApiKey::DeleteAcls => reply!(acls::delete(ctx, request!())),
        ApiKey::DescribeUserScramCredentials => reply!(users::describe(ctx, request!())),
        ApiKey::AlterUserScramCredentials => reply!(users::alter(ctx, request!())),
        ApiKey::DescribeClientQuotas => reply!(quotas::describe(ctx, request!())),
        ApiKey::AlterClientQuotas => reply!(quotas::alter(ctx, request!())),
        ApiKey::IncrementalAlterConfigs => {
            reply!(incremental_alter_configs::handle(ctx, request!()).await)
        }
        // Their old versions (DescribeLogDirs v0) answer in the layout they are read as.
        other => return txn_dispatch(ctx, other, decode_version, (cid, hv), body, budget).await,
    };
    Ok(Some(response))
}

/// The idempotence and transaction APIs and the cluster admin APIs (CreatePartitions,
/// DeleteRecords, AlterConfigs, OffsetDelete, DescribeCluster, ElectLeaders,
/// DescribeLogDirs, OffsetForLeaderEpoch): `dispatch` for them (none has an
/// old-version shim).
async fn txn_dispatch(
    ctx: &ConnectionContext,
    key: ApiKey,
    version: i16,
    (cid, hv): (i32, i16),
    mut body: Bytes,
    mut budget: Option<FrameBudget>,
) -> Result<Option<Response>, FrameError> {
    macro_rules! request {
        () => {
            take_request(&mut body, &mut budget, key, version)?
        };
    }
    macro_rules! reply {
        ($response:expr) => {
            encode(cid, hv, &$response, version)?
        };
    }
    let response = match key {
        ApiKey::InitProducerId => {
            reply!(init_producer_id::handle(ctx, request!(), version).await)
        }
        ApiKey::AddPartitionsToTxn => {
            reply!(add_partitions_to_txn::handle(ctx, request!(), version).await)
        }
        ApiKey::AddOffsetsToTxn => {
            reply!(add_offsets_to_txn::handle(ctx, request!(), version).await)
        }
        ApiKey::TxnOffsetCommit => {
            reply!(txn_offset_commit::handle(ctx, request!(), version).await)
        }
        ApiKey::EndTxn => reply!(end_txn::handle(ctx, request!(), version).await),
        ApiKey::DescribeTransactions => {
            reply!(describe_transactions::handle(ctx, request!()).await)
        }
        ApiKey::ListTransactions => reply!(list_transactions::handle(ctx, request!()).await),
        ApiKey::DescribeProducers => reply!(describe_producers::handle(ctx, request!()).await),
        ApiKey::WriteTxnMarkers => reply!(write_txn_markers::handle(ctx, request!()).await),
        ApiKey::CreatePartitions => reply!(create_partitions::handle(ctx, request!()).await),
        ApiKey::DeleteRecords => reply!(delete_records::handle(ctx, request!()).await),
        ApiKey::AlterConfigs => reply!(alter_configs::handle(ctx, request!()).await),
        ApiKey::OffsetDelete => reply!(offset_delete::handle(ctx, request!()).await),
        ApiKey::DescribeCluster => reply!(describe_cluster::handle(ctx, &request!(), version)),
        ApiKey::ElectLeaders => reply!(elect_leaders::handle(ctx, request!(), version)),
        ApiKey::DescribeLogDirs => {
            reply!(describe_log_dirs::handle(ctx, request!(), version).await)
        }
        ApiKey::OffsetForLeaderEpoch => {
            reply!(offset_for_leader_epoch::handle(ctx, request!()))
        }
        other => {
            return Err(FrameError::malformed(format!(
                "{other:?} is in the version table but has no handler"
            )));
        }
    };
    Ok(Some(response))
}

/// Fetch: the records as file ranges, the consumer quota recorded (`throttle.rs`). A fetch
/// over its quota is answered as Kafka answers it: empty, with its throttle time, and its
/// bytes taken back from the quota (the client fetches them again once the throttle ends).
async fn fetch_reply(
    ctx: &ConnectionContext,
    header: &RequestHeader,
    request: kafka_protocol::messages::FetchRequest,
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

/// Decodes the request at the version it is read as, then releases the frame: what the
/// request kept of the frame it copied or shares stays, the rest and its budget go now.
fn take_request<T: Decodable>(
    body: &mut Bytes,
    budget: &mut Option<FrameBudget>,
    key: ApiKey,
    version: i16,
) -> Result<T, FrameError> {
    let request = decode(body, key, version)?;
    drop(std::mem::take(body));
    budget.take();
    Ok(request)
}

/// A response header followed by an already encoded message (old versions, see `compat`).
fn encode_raw(
    correlation_id: i32,
    header_version: i16,
    message: Bytes,
) -> Result<Response, FrameError> {
    let header = frame::response_header(correlation_id, header_version)?;
    Ok(Response {
        chunks: vec![Chunk::Bytes(header), Chunk::Bytes(message)],
    })
}

/// Encodes a response header and message into one chunk.
fn encode<M: Encodable>(
    correlation_id: i32,
    header_version: i16,
    message: &M,
    version: i16,
) -> Result<Response, FrameError> {
    let bytes = frame::encode_response(correlation_id, header_version, message, version)?;
    Ok(Response {
        chunks: vec![Chunk::Bytes(bytes)],
    })
}
