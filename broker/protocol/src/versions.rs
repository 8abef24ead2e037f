//! The one version table: which Kafka APIs and versions this broker implements. The
//! ApiVersions response is derived from it ([`api_versions`]), and the server's dispatch
//! consults it before decoding.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

/// One implemented API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSupport {
    /// The API.
    pub key: ApiKey,
    /// Lowest version advertised in ApiVersions.
    pub advertised_min: i16,
    /// Lowest version actually served; advertised versions below it get UNSUPPORTED_VERSION.
    pub served_min: i16,
    /// Highest version advertised and served.
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ApiSupport {
    ApiSupport {
        key,
        advertised_min: min,
        served_min: min,
        max,
    }
}

/// Everything we implement, each API up to the highest version whose behaviour we serve
/// (docs/compatibility.md has the table against Kafka 4.4.0's). Flexible versions (compact
/// lengths, tagged fields) are decoded and encoded by kafka-protocol's generated codecs, except
/// FetchResponse, which `fetch_response` encodes for every version so records go out with
/// sendfile.
///
/// Produce advertises v0-v2 without serving them: librdkafka before 2.x only enables
/// compression when the broker advertises Produce v0 (KAFKA-18659); a v0-v2 request gets
/// UNSUPPORTED_VERSION. The oldest CreateTopics/DeleteTopics/DescribeConfigs versions and
/// OffsetCommit v1 (sarama 1.x's default), which the `kafka-protocol` crate no longer
/// encodes, go through [`crate::compat`].
/// FindCoordinator is advertised because librdkafka enables LZ4 only when it is.
pub const SUPPORTED: &[ApiSupport] = &[
    ApiSupport {
        key: ApiKey::Produce,
        advertised_min: 0,
        served_min: 3,
        max: 13,
    },
    api(ApiKey::Fetch, 4, 18),
    // v6+ are flexible; v7-v9 add the -3, -4 and -5 sentinels (KIP-734, KIP-405,
    // KIP-1005), v10 a timeout for remote storage, v11 the -6 sentinel (KIP-1023: the
    // earliest offset not yet uploaded to remote storage; none here). v11's codec is the
    // vendored kafka-protocol's (broker/protocol/kafka-protocol/VENDORED.md), as are the
    // other Kafka 4.4 versions below marked "(vendored codec)".
    api(ApiKey::ListOffsets, 1, 11),
    // v9+ are flexible; librdkafka trusts leader epochs only from v9 (KIP-320); v13's
    // top-level error code (KIP-1102's REBOOTSTRAP_REQUIRED) is always NONE: one broker.
    api(ApiKey::Metadata, 0, 13),
    // KIP-966, flexible; Java's Admin.describeTopics uses it from Kafka 3.8.
    api(ApiKey::DescribeTopicPartitions, 0, 0),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::CreateTopics, 0, 7),
    api(ApiKey::DeleteTopics, 0, 6),
    // v2-v3 are flexible.
    api(ApiKey::CreatePartitions, 0, 3),
    // Flexible: DescribeCluster always, DeleteRecords, AlterConfigs and ElectLeaders v2,
    // DescribeLogDirs v2+ (its v0, gone
    // from the codec crate, is read and answered as v1: `compat.rs`).
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::ElectLeaders, 0, 2),
    // v5 (vendored codec) says whether a log dir is cordoned: never, here.
    api(ApiKey::DescribeLogDirs, 0, 5),
    // The one log dir: a move to it is NONE, elsewhere LOG_DIR_NOT_FOUND; v2 is flexible.
    api(ApiKey::AlterReplicaLogDirs, 1, 2),
    // KIP-595/KIP-836/KIP-853: the metadata quorum's state (`kafka-metadata-quorum
    // describe`); v1 adds timestamps, v2 (flexible) directory ids and the voters' listeners.
    api(ApiKey::DescribeQuorum, 0, 2),
    // KIP-631: a broker gone for good leaves the cluster (`kafka-cluster unregister`).
    api(ApiKey::UnregisterBroker, 0, 0),
    // v4 is flexible; v0-v1 (replica fetchers before KIP-320) are gone from the codec
    // crate and from Kafka 4.0 (KIP-896).
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeConfigs, 0, 4),
    // v1 is flexible (APPEND and SUBTRACT, KIP-339, are in v0 already).
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    // Flexible; v0 is KIP-1000's ListClientMetricsResources, v1 KIP-1142's resource types.
    api(ApiKey::ListConfigResources, 0, 1),
    // v5 (KIP-1242, vendored codec): a client names the cluster and node it means to reach;
    // another one's is answered REBOOTSTRAP_REQUIRED.
    api(ApiKey::ApiVersions, 0, 5),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    // v8+ (OffsetCommit), v6+ (OffsetFetch), v3+ (ListGroups) are flexible; OffsetCommit
    // v9 and OffsetFetch v9 carry a consumer-protocol member's epoch (KIP-848), their v10
    // (vendored codecs) name topics by id; ListGroups v4-v5 filter by state and type.
    api(ApiKey::OffsetCommit, 1, 10),
    api(ApiKey::OffsetFetch, 1, 10),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    // v3 (vendored codec) carries an error message per group.
    api(ApiKey::DeleteGroups, 0, 3),
    api(ApiKey::OffsetDelete, 0, 0),
    // v2+ are flexible; v3 carries the producer's id and epoch (KIP-360), v4 answers
    // PRODUCER_FENCED (KIP-588), v5 may answer TRANSACTION_ABORTABLE (KIP-890).
    api(ApiKey::InitProducerId, 0, 5),
    // v3+ are flexible; v4 is the brokers' batched form (KIP-890), v5 the same with
    // TRANSACTION_ABORTABLE.
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    // v3+ are flexible; v4 may answer TRANSACTION_ABORTABLE (KIP-890).
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    // v3+ are flexible and carry the consumer's member, generation and instance (KIP-447);
    // v4 answers TRANSACTION_ABORTABLE (KIP-890); v5 adds its group to the transaction
    // (the transaction protocol v2, KIP-890 part 2); v6 names topics by id (KIP-1319).
    api(ApiKey::TxnOffsetCommit, 0, 6),
    // v3+ are flexible; v4 may answer TRANSACTION_ABORTABLE (KIP-890); v5 bumps the epoch
    // with every transaction and answers the next producer id and epoch (protocol v2).
    api(ApiKey::EndTxn, 0, 5),
    // v0 is answered UNSUPPORTED_VERSION (the server's SaslHandshake handler): librdkafka enables SASL only
    // when the broker lists v0, then uses v1 (SaslAuthenticate). After a v0 handshake the
    // client would send raw SASL tokens without Kafka framing, which is not built.
    api(ApiKey::SaslHandshake, 0, 1),
    // v2 is flexible.
    api(ApiKey::SaslAuthenticate, 0, 2),
    // v2+ are flexible; v3 names the USER resource type (7), which every version here
    // stores and matches alike.
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    // v1 is flexible.
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::CreateDelegationToken, 1, 3),
    api(ApiKey::RenewDelegationToken, 1, 2),
    api(ApiKey::ExpireDelegationToken, 1, 2),
    api(ApiKey::DescribeDelegationToken, 1, 3),
    api(ApiKey::GetTelemetrySubscriptions, 0, 0),
    api(ApiKey::PushTelemetry, 0, 0),
    // v0 is flexible (KIP-554 came after KIP-482); no other version exists.
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::DescribeProducers, 0, 0),
    // v0 is flexible (KIP-664); DescribeTransactions has no other version, ListTransactions
    // v1 adds a duration filter (KIP-994), v2 a transactional id pattern (KIP-1152).
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
    // v1 is flexible; `kafka-transactions.sh abort` ends a hanging transaction with it.
    // v2 (KIP-1228, vendored codec) says each marker's transaction version: a transaction
    // version 2 marker must carry an epoch above the producer's.
    api(ApiKey::WriteTxnMarkers, 1, 2),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    // KIP-848's consumer group protocol; flexible only. v1 adds the regex subscription.
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
];

/// The table entry for a raw API key, if we implement it.
pub fn lookup(api_key: i16) -> Option<&'static ApiSupport> {
    SUPPORTED.iter().find(|s| s.key as i16 == api_key)
}

impl ApiSupport {
    /// True if `version` is advertised.
    pub fn advertises(&self, version: i16) -> bool {
        (self.advertised_min..=self.max).contains(&version)
    }

    /// True if `version` is served (decoded and handled).
    pub fn serves(&self, version: i16) -> bool {
        (self.served_min..=self.max).contains(&version)
    }
}

/// The ApiVersions answer: the version table, as is. Default-valued tagged fields of v3 are
/// left out (kafka-protocol omits them), which librdkafka 2.0.2 (Debian's kcat 1.7.1)
/// needs: it mis-parses them.
pub fn api_versions() -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = SUPPORTED
        .iter()
        .map(|s| {
            let mut v = ApiVersion::default();
            v.api_key = s.key as i16;
            v.min_version = s.advertised_min;
            v.max_version = s.max;
            v
        })
        .collect();
    response
}

/// The answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION with the
/// table, to be encoded in v0 (as its response header always is, KIP-511), so the client
/// can retry with a version we do.
pub fn api_versions_unsupported() -> ApiVersionsResponse {
    let mut response = api_versions();
    response.error_code = ResponseError::UnsupportedVersion.code();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_version_has_a_codec() {
        for s in SUPPORTED {
            let codec = s.key.valid_versions();
            assert!(s.max <= codec.max, "{:?} {codec}", s.key);
            assert!(s.advertised_min <= s.served_min);
            for version in s.served_min..codec.min {
                assert!(
                    crate::compat::request_as(s.key, version).is_some(),
                    "{:?} v{version} has no codec",
                    s.key
                );
            }
        }
    }
}
