//! Fuzz entry points of the protocol: one plain function per cargo-fuzz target in
//! `tests/fuzz/` (each target is a one-line wrapper), replayed over the committed corpus by
//! this crate's `tests/fuzz_corpus.rs` under plain `cargo test`. Not an API: hidden from
//! the docs, for the fuzz targets only. The server's targets are `sluice_server::fuzz`.
//!
//! Every function takes untrusted bytes and must not panic, abort or allocate from a count
//! it has not checked, whatever the bytes (the fuzz runs cap memory: `-malloc_limit_mb=512`).
//! Each runs the broker's own code for its input, not a copy of it. [`seeds`] builds the
//! corpus from real encodings (`cargo run -p sluice-server --example fuzz_seeds`, which
//! writes the server's seeds too). docs/security.md ("Fuzzing") lists the targets.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;

use crate::compat;
use crate::frame::{self, FrameError};

pub mod seeds;

/// A fuzz target's entry: untrusted bytes in, no panic out.
pub type Target = fn(&[u8]);

/// This crate's fuzz targets, by name: the corpus directories under `tests/fuzz/corpus/`.
pub const TARGETS: &[(&str, Target)] = &[("request", request)];

/// A request frame (header and body, without the length prefix), through what the broker
/// runs before a handler sees it: peek, version lookup, header decode, the shape guard,
/// the old-version shims (Produce v0-v2 read as v3), and the body decode at the version the
/// handler reads it as.
pub fn request(frame: &[u8]) {
    let _ = decode_request(Bytes::copy_from_slice(frame));
}

/// [`request`], returning what it decoded: `Ok(Some((key, version)))` for a body that
/// decoded (`None` for frames the broker answers without decoding one).
///
/// # Errors
/// The framing error the connection would close with.
pub fn decode_request(frame: Bytes) -> Result<Option<(ApiKey, i16)>, FrameError> {
    let peeked = frame::peek(&frame)?;
    let support = frame::api(&peeked)?;
    let (key, version) = (support.key, peeked.version);
    if !support.serves(version) {
        if key != ApiKey::Produce || !support.advertises(version) {
            return Ok(None); // ApiVersions answers UNSUPPORTED_VERSION; others close
        }
        compat::produce_v0_to_v2(frame, version)?;
        return Ok(Some((key, version)));
    }
    let (_, body) = frame::header_and_body(key, version, frame)?;
    let malformed = |e: String| FrameError::Malformed(format!("{key:?} v{version} request: {e}"));
    let (decode_version, body) = compat::upgrade(key, version, body).map_err(malformed)?;
    decode_body(key, decode_version, body).map_err(malformed)?;
    Ok(Some((key, version)))
}

/// Decodes a request body as the handler of `key` reads it.
fn decode_body(key: ApiKey, version: i16, mut body: Bytes) -> Result<(), String> {
    fn d<T: Decodable>(body: &mut Bytes, version: i16) -> Result<(), String> {
        T::decode(body, version)
            .map(drop)
            .map_err(|e| e.to_string())
    }
    let b = &mut body;
    match key {
        ApiKey::Produce => d::<ProduceRequest>(b, version),
        ApiKey::Fetch => d::<FetchRequest>(b, version),
        ApiKey::ListOffsets => d::<ListOffsetsRequest>(b, version),
        ApiKey::Metadata => d::<MetadataRequest>(b, version),
        ApiKey::FindCoordinator => d::<FindCoordinatorRequest>(b, version),
        ApiKey::CreateTopics => d::<CreateTopicsRequest>(b, version),
        ApiKey::DeleteTopics => d::<DeleteTopicsRequest>(b, version),
        ApiKey::DescribeConfigs => d::<DescribeConfigsRequest>(b, version),
        ApiKey::IncrementalAlterConfigs => d::<IncrementalAlterConfigsRequest>(b, version),
        ApiKey::ApiVersions => d::<ApiVersionsRequest>(b, version),
        ApiKey::DescribeTopicPartitions => d::<DescribeTopicPartitionsRequest>(b, version),
        ApiKey::ListConfigResources => d::<ListConfigResourcesRequest>(b, version),
        ApiKey::JoinGroup => d::<JoinGroupRequest>(b, version),
        ApiKey::SyncGroup => d::<SyncGroupRequest>(b, version),
        ApiKey::Heartbeat => d::<HeartbeatRequest>(b, version),
        ApiKey::LeaveGroup => d::<LeaveGroupRequest>(b, version),
        ApiKey::OffsetCommit => d::<OffsetCommitRequest>(b, version),
        ApiKey::OffsetFetch => d::<OffsetFetchRequest>(b, version),
        ApiKey::ListGroups => d::<ListGroupsRequest>(b, version),
        ApiKey::ConsumerGroupHeartbeat => d::<ConsumerGroupHeartbeatRequest>(b, version),
        ApiKey::ConsumerGroupDescribe => d::<ConsumerGroupDescribeRequest>(b, version),
        ApiKey::DescribeGroups => d::<DescribeGroupsRequest>(b, version),
        ApiKey::DeleteGroups => d::<DeleteGroupsRequest>(b, version),
        ApiKey::InitProducerId => d::<InitProducerIdRequest>(b, version),
        ApiKey::SaslHandshake => d::<SaslHandshakeRequest>(b, version),
        ApiKey::SaslAuthenticate => d::<SaslAuthenticateRequest>(b, version),
        ApiKey::CreateAcls => d::<CreateAclsRequest>(b, version),
        ApiKey::DescribeAcls => d::<DescribeAclsRequest>(b, version),
        ApiKey::DeleteAcls => d::<DeleteAclsRequest>(b, version),
        ApiKey::DescribeClientQuotas => d::<DescribeClientQuotasRequest>(b, version),
        ApiKey::AlterClientQuotas => d::<AlterClientQuotasRequest>(b, version),
        ApiKey::CreateDelegationToken => d::<CreateDelegationTokenRequest>(b, version),
        ApiKey::RenewDelegationToken => d::<RenewDelegationTokenRequest>(b, version),
        ApiKey::ExpireDelegationToken => d::<ExpireDelegationTokenRequest>(b, version),
        ApiKey::DescribeDelegationToken => d::<DescribeDelegationTokenRequest>(b, version),
        ApiKey::GetTelemetrySubscriptions => d::<GetTelemetrySubscriptionsRequest>(b, version),
        ApiKey::PushTelemetry => d::<PushTelemetryRequest>(b, version),
        ApiKey::DescribeUserScramCredentials => {
            d::<DescribeUserScramCredentialsRequest>(b, version)
        }
        ApiKey::AlterUserScramCredentials => d::<AlterUserScramCredentialsRequest>(b, version),
        ApiKey::DescribeProducers => d::<DescribeProducersRequest>(b, version),
        ApiKey::AddPartitionsToTxn => d::<AddPartitionsToTxnRequest>(b, version),
        ApiKey::CreatePartitions => d::<CreatePartitionsRequest>(b, version),
        ApiKey::DescribeCluster => d::<DescribeClusterRequest>(b, version),
        ApiKey::DeleteRecords => d::<DeleteRecordsRequest>(b, version),
        ApiKey::AlterConfigs => d::<AlterConfigsRequest>(b, version),
        ApiKey::OffsetDelete => d::<OffsetDeleteRequest>(b, version),
        ApiKey::ElectLeaders => d::<ElectLeadersRequest>(b, version),
        ApiKey::DescribeLogDirs => d::<DescribeLogDirsRequest>(b, version),
        ApiKey::AlterReplicaLogDirs => d::<AlterReplicaLogDirsRequest>(b, version),
        ApiKey::UnregisterBroker => d::<UnregisterBrokerRequest>(b, version),
        ApiKey::DescribeQuorum => d::<DescribeQuorumRequest>(b, version),
        ApiKey::OffsetForLeaderEpoch => d::<OffsetForLeaderEpochRequest>(b, version),
        ApiKey::AddOffsetsToTxn => d::<AddOffsetsToTxnRequest>(b, version),
        ApiKey::TxnOffsetCommit => d::<TxnOffsetCommitRequest>(b, version),
        ApiKey::EndTxn => d::<EndTxnRequest>(b, version),
        ApiKey::DescribeTransactions => d::<DescribeTransactionsRequest>(b, version),
        ApiKey::ListTransactions => d::<ListTransactionsRequest>(b, version),
        ApiKey::WriteTxnMarkers => d::<WriteTxnMarkersRequest>(b, version),
        other => Err(format!(
            "{other:?} is in the version table but has no decoder here"
        )),
    }
}
