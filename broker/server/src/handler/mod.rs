//! Request dispatch. A frame is checked by the protocol crate (`sluice_protocol::frame`:
//! the version table says the version is served, the header decodes, the body fits its
//! shape), then handed to its domain, whose own `dispatch` is one `match` from API key to
//! handler. Every handler has the same shape: `handle(ctx, request, version) -> response`;
//! request-level problems become Kafka error codes in the response, and only frames we
//! cannot parse close the connection.
//!
//! A handler's `ctx` is its domain's `Ctx`, built by the domain's `dispatch` from the
//! connection's context: the client (`wire::Client`: principal, host, listener, quota
//! mute, shutdown signal), its [`crate::authz::Authz`], and only the services that domain
//! uses (groups: the group coordinator and the topics; topics: the topic registry, the
//! config and the group coordinator; security: the security store; and so on). No handler
//! is given the whole broker.
//!
//! # Layout
//! One folder per domain, one file per API, grouped by the state an API reads or changes
//! (as Kafka's `KafkaApis` hands requests to its replica manager, group coordinator,
//! transaction coordinator, config and ACL managers and metadata cache):
//! - `produce_fetch/`: a partition's log. Produce, Fetch, ListOffsets, OffsetForLeaderEpoch,
//!   DeleteRecords (an admin API, but it moves a log's start); with the client byte-rate
//!   quotas of Produce and Fetch (`throttle.rs`) and KIP-110's zstd rules (`kip110.rs`,
//!   which reads batch headers from segment files, so it stays beside the data path rather
//!   than in the sans-IO protocol crate).
//! - `groups/`: consumer groups and their committed offsets, everything the group
//!   coordinator answers: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//!   OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups, and KIP-848's
//!   ConsumerGroupHeartbeat and ConsumerGroupDescribe.
//! - `transactions/`: idempotent and transactional producers, everything the transaction
//!   coordinator answers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//!   TxnOffsetCommit (its offsets wait in the transaction until it commits), EndTxn,
//!   DescribeTransactions, ListTransactions, DescribeProducers (the producer state the
//!   transaction tools read, KIP-664) and WriteTxnMarkers (an operator ending a transaction).
//! - `topics/`: topics and their configs: CreateTopics, DeleteTopics, CreatePartitions,
//!   DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, ListConfigResources.
//! - `security/`: who a client is and what it may do: SaslHandshake and SaslAuthenticate
//!   (with the connection's SASL session, [`handle_sasl`]), the ACL APIs, the SCRAM user
//!   APIs, the client quota APIs, the delegation token APIs (KIP-48).
//! - `cluster/`: what the cluster is and where its pieces are: ApiVersions (the protocol
//!   crate's version table), Metadata, DescribeTopicPartitions, FindCoordinator (where a
//!   group's or a transaction's coordinator is), DescribeCluster, DescribeLogDirs,
//!   ElectLeaders.
//! - `telemetry/`: what clients report about themselves (KIP-714): GetTelemetrySubscriptions
//!   and PushTelemetry, into the broker's telemetry store.
//! - `topic_ids.rs`: topic and view names and ids both ways, for the APIs that name topics
//!   by id (KIP-848's group APIs, Fetch v13+).
//!
//! When an API could go to two domains, it goes with the state it changes (DeleteRecords to
//! the log, not to the admin APIs); [`domain`] is the one list.

mod cluster;
mod groups;
mod produce_fetch;
mod security;
mod telemetry;
mod topic_ids;
mod topics;
mod transactions;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use sluice_protocol::frame::{self, header_and_body};
use sluice_protocol::{compat, versions};

use crate::admission::FrameBudget;
use crate::sasl::Session;
use crate::wire::{Chunk, ConnectionContext, FrameError, Reply, Response};

/// The handler folders: the domain each API belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Domain {
    ProduceFetch,
    Groups,
    Transactions,
    Topics,
    Security,
    Cluster,
    Telemetry,
}

/// The domain of `key`, `None` for an API without a handler.
fn domain(key: ApiKey) -> Option<Domain> {
    use ApiKey::*;
    Some(match key {
        Produce | Fetch | ListOffsets | OffsetForLeaderEpoch | DeleteRecords => {
            Domain::ProduceFetch
        }
        JoinGroup
        | SyncGroup
        | Heartbeat
        | LeaveGroup
        | OffsetCommit
        | OffsetFetch
        | OffsetDelete
        | ListGroups
        | DescribeGroups
        | DeleteGroups
        | ConsumerGroupHeartbeat
        | ConsumerGroupDescribe => Domain::Groups,
        InitProducerId | AddPartitionsToTxn | AddOffsetsToTxn | TxnOffsetCommit | EndTxn
        | DescribeTransactions | ListTransactions | DescribeProducers | WriteTxnMarkers => {
            Domain::Transactions
        }
        CreateTopics
        | DeleteTopics
        | CreatePartitions
        | DescribeConfigs
        | AlterConfigs
        | IncrementalAlterConfigs
        | ListConfigResources => Domain::Topics,
        SaslHandshake
        | SaslAuthenticate
        | CreateAcls
        | DescribeAcls
        | DeleteAcls
        | DescribeUserScramCredentials
        | AlterUserScramCredentials
        | DescribeClientQuotas
        | AlterClientQuotas
        | CreateDelegationToken
        | RenewDelegationToken
        | ExpireDelegationToken
        | DescribeDelegationToken => Domain::Security,
        ApiVersions
        | Metadata
        | DescribeTopicPartitions
        | FindCoordinator
        | DescribeCluster
        | DescribeLogDirs
        | AlterReplicaLogDirs
        | DescribeQuorum
        | UnregisterBroker
        | ElectLeaders => Domain::Cluster,
        GetTelemetrySubscriptions | PushTelemetry => Domain::Telemetry,
        _ => return None,
    })
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
            ApiKey::ApiVersions => Ok(Reply::Now(Some(cluster::unsupported_api_versions(
                peeked.correlation_id,
            )?))),
            ApiKey::Produce if support.advertises(version) => {
                produce_fetch::unsupported_old_produce(frame, version, peeked.correlation_id)
                    .map(|r| Reply::Now(Some(r)))
            }
            _ => Err(FrameError::malformed(format!(
                "{key:?} v{version} is not supported (this broker serves v{}..=v{})",
                support.served_min, support.max
            ))),
        };
    }
    let (header, body) = header_and_body(key, version, frame)?;
    tracing::trace!(peer = %ctx.client.peer, api = ?key, version, correlation_id = header.correlation_id, "request");
    // Latency of a deferred acks=all answer (Reply::Later) is measured to the append; the
    // fsync wait is shared by the group commit and shows in the produce p99 of the bench.
    let started = std::time::Instant::now();
    let result = match Call::new(key, version, header, body, budget) {
        Ok(call) => dispatch(ctx, call).await,
        Err(e) => Err(e),
    };
    if let Some(api) = ctx.broker.metrics.api(key) {
        api.latency.observe(started.elapsed());
        api.requested(version);
        if result.is_err() {
            api.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    result
}

/// Hands a request to its domain.
async fn dispatch(ctx: &ConnectionContext, call: Call) -> Result<Reply, FrameError> {
    let Some(domain) = domain(call.key) else {
        return Err(no_handler(call.key));
    };
    let response = match domain {
        Domain::ProduceFetch => return produce_fetch::dispatch(ctx, call).await,
        Domain::Groups => groups::dispatch(ctx, call).await?,
        Domain::Transactions => transactions::dispatch(ctx, call).await?,
        Domain::Topics => topics::dispatch(ctx, call).await?,
        Domain::Security => security::dispatch(ctx, call)?,
        Domain::Cluster => cluster::dispatch(ctx, call).await?,
        Domain::Telemetry => telemetry::dispatch(ctx, call)?,
    };
    Ok(Reply::Now(Some(response)))
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
    let (header, body) = header_and_body(key, version, frame)?;
    let started = std::time::Instant::now();
    let call = Call::new(key, version, header, body, budget)?;
    let (response, close) = security::sasl(ctx, session, call).await?;
    if let Some(api) = ctx.broker.metrics.api(key) {
        api.latency.observe(started.elapsed());
        api.requested(version);
    }
    Ok((Reply::Now(Some(response)), close))
}

/// One request on its way to its handler: its header, its body still undecoded, and the
/// frame's budget, released once the body is decoded.
struct Call {
    key: ApiKey,
    /// The version the client sent.
    version: i16,
    /// The version its body is read as: `version`, or for an old version the codec crate
    /// dropped, the newer one `compat` reads it as.
    read_as: i16,
    header: RequestHeader,
    body: Bytes,
    budget: Option<FrameBudget>,
    answer: Answer,
}

impl Call {
    /// A request whose body is in the layout of the version it is read as (`compat`).
    fn new(
        key: ApiKey,
        version: i16,
        header: RequestHeader,
        body: Bytes,
        budget: FrameBudget,
    ) -> Result<Self, FrameError> {
        let old_layout = compat::request_as(key, version).is_some();
        let (read_as, body) = compat::upgrade(key, version, body).map_err(FrameError::malformed)?;
        let answer = Answer {
            correlation_id: header.correlation_id,
            header_version: key.response_header_version(version),
            version: read_as,
            old_layout,
        };
        Ok(Self {
            key,
            version,
            read_as,
            header,
            body,
            budget: Some(budget),
            answer,
        })
    }

    /// Decodes the request at the version it is read as, then releases the frame: what the
    /// request kept of the frame it copied or shares stays, the rest and its budget go now.
    fn request<T: Decodable>(&mut self) -> Result<T, FrameError> {
        let request = frame::decode(&mut self.body, self.key, self.read_as)?;
        drop(std::mem::take(&mut self.body));
        self.budget.take();
        Ok(request)
    }
}

/// How a request is answered: its correlation id, its response header's version (that of
/// the version sent), and the version the response is encoded at (the one the request is
/// read as), unless the version sent has an old layout of its own (`compat`).
#[derive(Debug, Clone, Copy)]
struct Answer {
    correlation_id: i32,
    header_version: i16,
    version: i16,
    old_layout: bool,
}

impl Answer {
    /// The response, encoded at the version the request was read as.
    fn reply<M: Encodable>(self, message: &M) -> Result<Response, FrameError> {
        encode(
            self.correlation_id,
            self.header_version,
            message,
            self.version,
        )
    }

    /// The response, or for an old version with a layout of its own, `old`'s bytes.
    fn reply_old<M: Encodable>(
        self,
        message: &M,
        old: impl FnOnce(&M) -> Bytes,
    ) -> Result<Response, FrameError> {
        if self.old_layout {
            encode_raw(self.correlation_id, self.header_version, old(message))
        } else {
            self.reply(message)
        }
    }
}

/// An API in the version table that its domain's `dispatch` does not answer.
fn no_handler(key: ApiKey) -> FrameError {
    FrameError::malformed(format!(
        "{key:?} is in the version table but has no handler"
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_api_in_the_version_table_has_a_domain() {
        for support in versions::SUPPORTED {
            assert!(domain(support.key).is_some(), "{:?}", support.key);
        }
    }
}
