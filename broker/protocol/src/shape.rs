//! A pre-decode check of every request body against its API's shape.
//!
//! kafka-protocol reserves `count` elements before decoding them, so a 20-byte frame that
//! claims 2^31 topics would make it allocate ~100 GB and abort the process. Before decoding,
//! we walk the body along the request's schema and refuse any array whose count exceeds the
//! bytes left divided by its element's minimum size, and any string or bytes field that runs
//! past the frame. Trailing fields after the last array are left to the decoder (which checks
//! every length against the bytes it has).
//!
//! Every advertised (API, version) has a shape: [`check`] refuses a request that has none,
//! and [`assert_complete`], run when the server binds, refuses to start a broker whose
//! version table names a version without one, so an API cannot be added unguarded.

use kafka_protocol::messages::ApiKey;

/// One field of a request schema.
#[derive(Debug, Clone)]
enum Field {
    /// A fixed-size field of this many bytes (int8..int64, bool).
    Fixed(usize),
    /// `string` / `nullable string`: i16 length, -1 for null.
    Str,
    /// `bytes` / `nullable bytes` (records): i32 length, -1 for null.
    Bytes,
    /// An array (nullable allowed): i32 count, then that many structs.
    Array(Vec<Field>),
    /// `compact string` or `compact bytes` (flexible versions): unsigned varint length + 1,
    /// 0 for null.
    CompactStr,
    /// `compact array` (flexible versions): unsigned varint count + 1 (0 for null), then
    /// that many structs.
    CompactArray(Vec<Field>),
    /// Tagged fields (flexible versions): unsigned varint count, then each tag's varint
    /// number, varint size and that many bytes.
    Tags,
}

use Field::{Array, Bytes, CompactArray, CompactStr, Fixed, Str, Tags};

const I8: Field = Fixed(1);
const I16: Field = Fixed(2);
const I32: Field = Fixed(4);
const I64: Field = Fixed(8);

/// Fields that exist only from version `since`.
fn since(version: i16, min: i16, field: Field) -> Option<Field> {
    (version >= min).then_some(field)
}

fn fields(list: impl IntoIterator<Item = Option<Field>>) -> Vec<Field> {
    list.into_iter().flatten().collect()
}

/// The request body schema of `key` at an advertised `version` (fields up to the last
/// array at least); `None` if we have none, which [`check`] refuses.
fn schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    Some(match key {
        // v0-v2 are answered UNSUPPORTED_VERSION after decoding (produce.rs), so they are
        // guarded too: v3's body without the leading transactional_id.
        ApiKey::Produce => fields([
            since(v, 3, Str),
            Some(I16),
            Some(I32),
            Some(Array(vec![Str, Array(vec![I32, Bytes])])),
        ]),
        ApiKey::Fetch => fields([
            Some(I32),
            Some(I32),
            Some(I32),
            Some(I32),
            Some(I8),
            since(v, 7, I32),
            since(v, 7, I32),
            Some(Array(vec![
                Str,
                Array(fields([
                    Some(I32),
                    since(v, 9, I32),
                    Some(I64),
                    since(v, 5, I64),
                    Some(I32),
                ])),
            ])),
            since(v, 7, Array(vec![Str, Array(vec![I32])])),
            since(v, 11, Str),
        ]),
        // Replica id, isolation level, topics [name, partitions [index, current leader
        // epoch, timestamp]], (v10) timeout.
        ApiKey::ListOffsets if v >= 6 => fields([
            Some(I32),
            Some(I8),
            Some(CompactArray(vec![
                CompactStr,
                CompactArray(vec![I32, I32, I64, Tags]),
                Tags,
            ])),
            since(v, 10, I32),
            Some(Tags),
        ]),
        ApiKey::ListOffsets => fields([
            Some(I32),
            since(v, 2, I8),
            Some(Array(vec![
                Str,
                Array(fields([Some(I32), since(v, 4, I32), Some(I64)])),
            ])),
        ]),
        // Topics [(v10+) id, name], allow auto-creation, (v8-v10) cluster and topic
        // authorized operations.
        ApiKey::Metadata if v >= 9 => fields([
            Some(CompactArray(fields([
                since(v, 10, Fixed(16)),
                Some(CompactStr),
                Some(Tags),
            ]))),
            Some(I8),
            (v <= 10).then_some(I8),
            Some(I8),
            Some(Tags),
        ]),
        ApiKey::Metadata => vec![Array(vec![Str])],
        ApiKey::CreateTopics => vec![Array(vec![
            Str,
            I32,
            I16,
            Array(vec![I32, Array(vec![I32])]),
            Array(vec![Str, Str]),
        ])],
        ApiKey::DeleteTopics => vec![Array(vec![Str]), I32],
        ApiKey::DescribeConfigs => vec![Array(vec![I8, Str, Array(vec![Str])])],
        _ => return group_schema(key, v),
    })
}

/// The schemas of the consumer-group and the remaining small APIs.
fn group_schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    Some(match key {
        ApiKey::JoinGroup => fields([
            Some(Str),
            Some(I32),
            since(v, 1, I32),
            Some(Str),
            since(v, 5, Str),
            Some(Str),
            Some(Array(vec![Str, Bytes])),
        ]),
        ApiKey::SyncGroup => fields([
            Some(Str),
            Some(I32),
            Some(Str),
            since(v, 3, Str),
            Some(Array(vec![Str, Bytes])),
        ]),
        ApiKey::Heartbeat => fields([Some(Str), Some(I32), Some(Str), since(v, 3, Str)]),
        ApiKey::LeaveGroup if v >= 3 => vec![Str, Array(vec![Str, Str])],
        ApiKey::LeaveGroup => vec![Str, Str],
        ApiKey::OffsetCommit => offset_commit(v),
        ApiKey::OffsetFetch => offset_fetch(v),
        ApiKey::ListGroups | ApiKey::ConsumerGroupHeartbeat | ApiKey::ConsumerGroupDescribe => {
            return listing_schema(key, v);
        }
        ApiKey::DescribeGroups | ApiKey::DeleteGroups => vec![Array(vec![Str])],
        ApiKey::FindCoordinator => fields([Some(Str), since(v, 1, I8)]),
        // Transactional id, timeout, (v3+) producer id and epoch.
        ApiKey::InitProducerId if v >= 2 => fields([
            Some(CompactStr),
            Some(I32),
            since(v, 3, I64),
            since(v, 3, I16),
            Some(Tags),
        ]),
        ApiKey::InitProducerId => vec![Str, I32],
        ApiKey::SaslHandshake => vec![Str],
        // v1: a binding is type, name, pattern type, principal, host, operation, permission.
        ApiKey::CreateAcls | ApiKey::DeleteAcls => vec![Array(vec![I8, Str, I8, Str, Str, I8, I8])],
        ApiKey::DescribeAcls => vec![I8, Str, I8, Str, Str, I8, I8],
        // v0: components [entity type, match type, match], strict.
        ApiKey::DescribeClientQuotas => vec![Array(vec![Str, I8, Str]), I8],
        // v0: entries [entity [type, name], ops [key, value, remove]], validate only.
        ApiKey::AlterClientQuotas => vec![
            Array(vec![Array(vec![Str, Str]), Array(vec![Str, Fixed(8), I8])]),
            I8,
        ],
        // v0 (flexible): users [name, tags], tags.
        ApiKey::DescribeUserScramCredentials => {
            vec![CompactArray(vec![CompactStr, Tags]), Tags]
        }
        // v0 (flexible): deletions [name, mechanism, tags], upsertions [name, mechanism,
        // iterations, salt, salted password, tags], tags.
        ApiKey::AlterUserScramCredentials => vec![
            CompactArray(vec![CompactStr, I8, Tags]),
            CompactArray(vec![CompactStr, I8, I32, CompactStr, CompactStr, Tags]),
            Tags,
        ],
        // v0 (flexible): topics [name, partition indexes, tags], tags.
        ApiKey::DescribeProducers => {
            vec![
                CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]),
                Tags,
            ]
        }
        ApiKey::SaslAuthenticate => vec![Bytes],
        ApiKey::ApiVersions if v >= 3 => vec![CompactStr, CompactStr, Tags],
        ApiKey::ApiVersions => vec![],
        _ => return txn_schema(key, v),
    })
}

/// The schemas of the transaction APIs and CreatePartitions.
fn txn_schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    Some(match key {
        ApiKey::AddPartitionsToTxn => add_partitions_to_txn(v),
        // Topics [name, count, assignments [broker ids]], timeout, validate only.
        ApiKey::CreatePartitions if v >= 2 => vec![
            CompactArray(vec![
                CompactStr,
                I32,
                CompactArray(vec![CompactArray(vec![I32]), Tags]),
                Tags,
            ]),
            I32,
            I8,
            Tags,
        ],
        ApiKey::CreatePartitions => vec![
            Array(vec![Str, I32, Array(vec![Array(vec![I32])])]),
            I32,
            I8,
        ],
        // Transactional id, producer id, epoch, group id.
        ApiKey::AddOffsetsToTxn => vec![Str, I64, I16, Str],
        // Transactional id, group, producer id, epoch, (v3+, flexible) generation, member
        // id, instance id, topics [name, partitions [index, offset, leader epoch, metadata]].
        ApiKey::TxnOffsetCommit if v >= 3 => vec![
            CompactStr,
            CompactStr,
            I64,
            I16,
            I32,
            CompactStr,
            CompactStr,
            CompactArray(vec![
                CompactStr,
                CompactArray(vec![I32, I64, I32, CompactStr, Tags]),
                Tags,
            ]),
            Tags,
        ],
        // Transactional id, group, producer id, epoch, topics [name, partitions [index,
        // offset, (v2+) leader epoch, metadata]].
        ApiKey::TxnOffsetCommit => vec![
            Str,
            Str,
            I64,
            I16,
            Array(vec![
                Str,
                Array(fields([Some(I32), Some(I64), since(v, 2, I32), Some(Str)])),
            ]),
        ],
        // Transactional id, producer id, epoch, committed.
        ApiKey::EndTxn if v >= 3 => vec![CompactStr, I64, I16, I8, Tags],
        ApiKey::EndTxn => vec![Str, I64, I16, I8],
        // v0 (flexible): transactional ids, tags.
        ApiKey::DescribeTransactions => vec![CompactArray(vec![CompactStr]), Tags],
        // v1 (flexible): markers [producer id, epoch, result, topics [name, partitions,
        // tags], coordinator epoch, tags], tags.
        ApiKey::WriteTxnMarkers => vec![
            CompactArray(vec![
                I64,
                I16,
                I8,
                CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]),
                I32,
                Tags,
            ]),
            Tags,
        ],
        // v0 (flexible): state filters, producer id filters, tags.
        ApiKey::ListTransactions => vec![
            CompactArray(vec![CompactStr]),
            CompactArray(vec![I64]),
            Tags,
        ],
        _ => return admin_schema(key, v),
    })
}

/// The schemas of the cluster admin APIs (DescribeCluster, ElectLeaders, DeleteRecords,
/// AlterConfigs, IncrementalAlterConfigs, DescribeLogDirs, OffsetForLeaderEpoch).
fn admin_schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    let topics = || CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]);
    Some(match key {
        // Include authorized operations, (v1) endpoint type.
        ApiKey::DescribeCluster => fields([Some(I8), since(v, 1, I8), Some(Tags)]),
        // (v1+) election type, topics [name, partitions], timeout.
        ApiKey::ElectLeaders if v >= 2 => vec![I8, topics(), I32, Tags],
        ApiKey::ElectLeaders => fields([
            since(v, 1, I8),
            Some(Array(vec![Str, Array(vec![I32])])),
            Some(I32),
        ]),
        // Topics [name, partitions [index, offset]], timeout.
        ApiKey::DeleteRecords if v >= 2 => vec![
            CompactArray(vec![CompactStr, CompactArray(vec![I32, I64, Tags]), Tags]),
            I32,
            Tags,
        ],
        ApiKey::DeleteRecords => vec![Array(vec![Str, Array(vec![I32, I64])]), I32],
        // Group, topics [name, partitions [index]].
        ApiKey::OffsetDelete => vec![Str, Array(vec![Str, Array(vec![I32])])],
        // Resources [type, name, configs [name, operation, value]], validate only.
        ApiKey::IncrementalAlterConfigs if v >= 1 => vec![
            CompactArray(vec![
                I8,
                CompactStr,
                CompactArray(vec![CompactStr, I8, CompactStr, Tags]),
                Tags,
            ]),
            I8,
            Tags,
        ],
        ApiKey::IncrementalAlterConfigs => vec![Array(vec![I8, Str, Array(vec![Str, I8, Str])])],
        // Resources [type, name, configs [name, value]], validate only.
        ApiKey::AlterConfigs if v >= 2 => vec![
            CompactArray(vec![
                I8,
                CompactStr,
                CompactArray(vec![CompactStr, CompactStr, Tags]),
                Tags,
            ]),
            I8,
            Tags,
        ],
        ApiKey::AlterConfigs => vec![Array(vec![I8, Str, Array(vec![Str, Str])]), I8],
        // Topics [name, partitions].
        ApiKey::DescribeLogDirs if v >= 2 => vec![topics(), Tags],
        ApiKey::DescribeLogDirs => vec![Array(vec![Str, Array(vec![I32])])],
        // (v3+) replica id, topics [name, partitions [index, current epoch, epoch]].
        ApiKey::OffsetForLeaderEpoch if v >= 4 => vec![
            I32,
            CompactArray(vec![
                CompactStr,
                CompactArray(vec![I32, I32, I32, Tags]),
                Tags,
            ]),
            Tags,
        ],
        ApiKey::OffsetForLeaderEpoch => fields([
            since(v, 3, I32),
            Some(Array(vec![Str, Array(vec![I32, I32, I32])])),
        ]),
        _ => return None,
    })
}

/// ListGroups and KIP-848's consumer group APIs.
fn listing_schema(key: ApiKey, v: i16) -> Option<Vec<Field>> {
    Some(match key {
        ApiKey::ListGroups => match v {
            0..=2 => vec![],
            3 => vec![Tags],
            // (v4) states filter, (v5) types filter.
            4 => vec![CompactArray(vec![CompactStr]), Tags],
            _ => vec![
                CompactArray(vec![CompactStr]),
                CompactArray(vec![CompactStr]),
                Tags,
            ],
        },
        // Group, member id, epoch, instance, rack, rebalance timeout, topic names, (v1)
        // regex, assignor, owned [topic id, partitions].
        ApiKey::ConsumerGroupHeartbeat => fields([
            Some(CompactStr),
            Some(CompactStr),
            Some(I32),
            Some(CompactStr),
            Some(CompactStr),
            Some(I32),
            Some(CompactArray(vec![CompactStr])),
            since(v, 1, CompactStr),
            Some(CompactStr),
            Some(CompactArray(vec![Fixed(16), CompactArray(vec![I32]), Tags])),
            Some(Tags),
        ]),
        // Group ids, include authorized operations.
        ApiKey::ConsumerGroupDescribe => vec![CompactArray(vec![CompactStr]), I8, Tags],
        _ => return None,
    })
}

/// AddPartitionsToTxn: v0-v2 one transaction (id, producer id, epoch, topics [name,
/// partitions]); v3 the same, flexible; v4-v5 (flexible) a list of such transactions, each
/// with a verify_only flag before its topics.
fn add_partitions_to_txn(v: i16) -> Vec<Field> {
    match v {
        0..=2 => vec![Str, I64, I16, Array(vec![Str, Array(vec![I32])])],
        3 => vec![
            CompactStr,
            I64,
            I16,
            CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]),
            Tags,
        ],
        _ => vec![
            CompactArray(vec![
                CompactStr,
                I64,
                I16,
                I8,
                CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]),
                Tags,
            ]),
            Tags,
        ],
    }
}

/// OffsetFetch: v1-5 one group [topics [name, partitions]]; v6-7 the same, flexible, v7
/// with require_stable; v8+ groups [id, (v9) member id and epoch, topics], require_stable.
fn offset_fetch(v: i16) -> Vec<Field> {
    let topics = || CompactArray(vec![CompactStr, CompactArray(vec![I32]), Tags]);
    match v {
        ..=5 => vec![Str, Array(vec![Str, Array(vec![I32])])],
        6 => vec![CompactStr, topics(), Tags],
        7 => vec![CompactStr, topics(), I8, Tags],
        _ => vec![
            CompactArray(fields([
                Some(CompactStr),
                since(v, 9, CompactStr),
                since(v, 9, I32),
                Some(topics()),
                Some(Tags),
            ])),
            I8,
            Tags,
        ],
    }
}

/// OffsetCommit: v1 has a per-partition commit_timestamp, v2-4 a retention_time_ms; v8+
/// are flexible.
fn offset_commit(v: i16) -> Vec<Field> {
    if v >= 8 {
        return vec![
            CompactStr,
            I32,
            CompactStr,
            CompactStr,
            CompactArray(vec![
                CompactStr,
                CompactArray(vec![I32, I64, I32, CompactStr, Tags]),
                Tags,
            ]),
            Tags,
        ];
    }
    fields([
        Some(Str),
        Some(I32),
        Some(Str),
        (2..=4).contains(&v).then_some(I64),
        since(v, 7, Str),
        Some(Array(vec![
            Str,
            Array(fields([
                Some(I32),
                Some(I64),
                since(v, 6, I32),
                (v == 1).then_some(I64),
                Some(Str),
            ])),
        ])),
    ])
}

/// Checks a request body (after the header) against its shape; refuses a request whose
/// (API, version) has no shape.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), String> {
    let Some(schema) = schema(key, version) else {
        return Err(format!("{key:?} v{version} has no request shape"));
    };
    let mut at = 0;
    walk(&schema, body, &mut at)
}

/// Every (API, version) the version table advertises has a shape. The server refuses to
/// start otherwise.
pub fn assert_complete() -> Result<(), String> {
    for support in crate::versions::SUPPORTED {
        for version in support.advertised_min..=support.max {
            if schema(support.key, version).is_none() {
                return Err(format!(
                    "{:?} v{version} is in the version table but has no request shape (sluice-protocol's shape.rs)",
                    support.key
                ));
            }
        }
    }
    Ok(())
}

fn walk(schema: &[Field], body: &[u8], at: &mut usize) -> Result<(), String> {
    for field in schema {
        match field {
            Fixed(n) => take(body, at, *n)?,
            Str => {
                let len = i16::from_be_bytes(read::<2>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            Bytes => {
                let len = i32::from_be_bytes(read::<4>(body, at)?);
                take(body, at, usize::try_from(len).unwrap_or(0))?;
            }
            CompactStr => {
                let len = read_uvarint(body, at)?;
                take(body, at, len.saturating_sub(1))?;
            }
            Tags => {
                let count = read_uvarint(body, at)?;
                if count > (body.len() - *at) / 2 {
                    return Err(format!(
                        "{count} tagged fields in the bytes left of the frame"
                    ));
                }
                for _ in 0..count {
                    read_uvarint(body, at)?;
                    let size = read_uvarint(body, at)?;
                    take(body, at, size)?;
                }
            }
            Array(element) => {
                let count = i32::from_be_bytes(read::<4>(body, at)?);
                elements(element, usize::try_from(count).unwrap_or(0), body, at)?;
            }
            CompactArray(element) => {
                let count = read_uvarint(body, at)?.saturating_sub(1);
                elements(element, count, body, at)?;
            }
        }
    }
    Ok(())
}

/// `count` structs of `element`, refused before any is read if they cannot fit.
fn elements(element: &[Field], count: usize, body: &[u8], at: &mut usize) -> Result<(), String> {
    let left = body.len() - *at;
    let min = min_size(element).max(1);
    if count > left / min {
        return Err(format!(
            "array of {count} elements (each at least {min} bytes) in the {left} bytes left of the frame"
        ));
    }
    for _ in 0..count {
        walk(element, body, at)?;
    }
    Ok(())
}

fn min_size(schema: &[Field]) -> usize {
    schema
        .iter()
        .map(|f| match f {
            Fixed(n) => *n,
            Str => 2,
            Bytes | Array(_) => 4,
            CompactStr | CompactArray(_) | Tags => 1,
        })
        .sum()
}

fn read<const N: usize>(body: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let bytes = body
        .get(*at..*at + N)
        .ok_or_else(|| format!("frame ends at byte {} inside a field", body.len()))?;
    *at += N;
    Ok(bytes.try_into().unwrap_or([0; N]))
}

/// An unsigned varint (flexible versions' lengths and counts), at most 5 bytes.
fn read_uvarint(body: &[u8], at: &mut usize) -> Result<usize, String> {
    let mut value = 0usize;
    for i in 0..5 {
        let [byte] = read::<1>(body, at)?;
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("an unsigned varint longer than 5 bytes".into())
}

fn take(body: &[u8], at: &mut usize, n: usize) -> Result<(), String> {
    if body.len() - *at < n {
        return Err(format!("a {n}-byte field runs past the end of the frame"));
    }
    *at += n;
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The walker agrees with kafka-protocol's encoding of real requests at every served version.
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn accepts<R: Encodable>(key: ApiKey, request: &R) {
        let support = crate::versions::lookup(key as i16).unwrap();
        let mut checked = 0;
        for version in support.served_min..=support.max {
            let mut buf = BytesMut::new();
            // Fields set for newer versions make older encodings fail; those are skipped.
            if request.encode(&mut buf, version).is_err() {
                continue;
            }
            assert_eq!(check(key, version, &buf), Ok(()), "{key:?} v{version}");
            checked += 1;
        }
        assert!(checked > 0, "{key:?}: no version encoded");
    }

    #[test]
    fn real_requests_pass() {
        let name = || TopicName(StrBytes::from_static_str("orders"));
        let mut produce = ProduceRequest::default();
        let mut topic = produce_request::TopicProduceData::default();
        topic.name = name();
        topic.partition_data = vec![produce_request::PartitionProduceData::default(); 3];
        produce.topic_data = vec![topic];
        accepts(ApiKey::Produce, &produce);

        let mut fetch = FetchRequest::default();
        let mut topic = fetch_request::FetchTopic::default();
        topic.topic = name();
        topic.partitions = vec![fetch_request::FetchPartition::default(); 2];
        fetch.topics = vec![topic];
        accepts(ApiKey::Fetch, &fetch);
        let mut forgotten = fetch_request::ForgottenTopic::default();
        forgotten.partitions = vec![1, 2];
        fetch.forgotten_topics_data = vec![forgotten];
        fetch.rack_id = StrBytes::from_static_str("rack");
        accepts(ApiKey::Fetch, &fetch);

        let mut list = ListOffsetsRequest::default();
        let mut topic = list_offsets_request::ListOffsetsTopic::default();
        topic.partitions = vec![list_offsets_request::ListOffsetsPartition::default(); 2];
        list.topics = vec![topic];
        accepts(ApiKey::ListOffsets, &list);

        let mut create = CreateTopicsRequest::default();
        let mut topic = create_topics_request::CreatableTopic::default();
        topic.assignments = vec![create_topics_request::CreatableReplicaAssignment::default()];
        topic.configs = vec![create_topics_request::CreatableTopicConfig::default()];
        create.topics = vec![topic];
        accepts(ApiKey::CreateTopics, &create);

        let mut delete = DeleteTopicsRequest::default();
        delete.topic_names = vec![name(), name()];
        accepts(ApiKey::DeleteTopics, &delete);

        let mut describe = DescribeConfigsRequest::default();
        describe.resources = vec![describe_configs_request::DescribeConfigsResource::default()];
        accepts(ApiKey::DescribeConfigs, &describe);

        let mut metadata = MetadataRequest::default();
        metadata.topics = Some(vec![metadata_request::MetadataRequestTopic::default()]);
        accepts(ApiKey::Metadata, &metadata);
        metadata.topics = None;
        accepts(ApiKey::Metadata, &metadata);
    }

    #[test]
    fn real_group_requests_pass() {
        let name = || TopicName(StrBytes::from_static_str("orders"));
        let mut join = JoinGroupRequest::default();
        join.protocols = vec![join_group_request::JoinGroupRequestProtocol::default(); 2];
        accepts(ApiKey::JoinGroup, &join);
        join.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::JoinGroup, &join);

        let mut sync = SyncGroupRequest::default();
        sync.assignments = vec![sync_group_request::SyncGroupRequestAssignment::default(); 2];
        accepts(ApiKey::SyncGroup, &sync);
        sync.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::SyncGroup, &sync);

        let mut leave = LeaveGroupRequest::default();
        accepts(ApiKey::LeaveGroup, &leave);
        leave.members = vec![leave_group_request::MemberIdentity::default(); 2];
        accepts(ApiKey::LeaveGroup, &leave);

        let mut commit = OffsetCommitRequest::default();
        let mut topic = offset_commit_request::OffsetCommitRequestTopic::default();
        topic.name = name();
        topic.partitions = vec![offset_commit_request::OffsetCommitRequestPartition::default(); 3];
        commit.topics = vec![topic];
        accepts(ApiKey::OffsetCommit, &commit);
        commit.group_instance_id = Some(StrBytes::from_static_str("static"));
        accepts(ApiKey::OffsetCommit, &commit);

        let mut fetch = OffsetFetchRequest::default();
        let mut topic = offset_fetch_request::OffsetFetchRequestTopic::default();
        topic.name = name();
        topic.partition_indexes = vec![0, 1];
        fetch.topics = Some(vec![topic]);
        accepts(ApiKey::OffsetFetch, &fetch);
        fetch.topics = None;
        accepts(ApiKey::OffsetFetch, &fetch);

        let mut describe = DescribeGroupsRequest::default();
        describe.groups = vec![GroupId(StrBytes::from_static_str("g")); 2];
        accepts(ApiKey::DescribeGroups, &describe);
        let mut delete = DeleteGroupsRequest::default();
        delete.groups_names = vec![GroupId(StrBytes::from_static_str("g")); 2];
        accepts(ApiKey::DeleteGroups, &delete);
        accepts(ApiKey::Heartbeat, &HeartbeatRequest::default());
        accepts(ApiKey::ListGroups, &ListGroupsRequest::default());
        accepts(ApiKey::FindCoordinator, &FindCoordinatorRequest::default());
        let mut init = InitProducerIdRequest::default();
        init.transactional_id = Some(TransactionalId(StrBytes::from_static_str("tx")));
        accepts(ApiKey::InitProducerId, &init);
        let mut versions = ApiVersionsRequest::default();
        versions.client_software_name = StrBytes::from_static_str("librdkafka");
        versions.client_software_version = StrBytes::from_static_str("2.3.0");
        accepts(ApiKey::ApiVersions, &versions);
        let mut alter = IncrementalAlterConfigsRequest::default();
        let mut resource = incremental_alter_configs_request::AlterConfigsResource::default();
        resource.configs = vec![incremental_alter_configs_request::AlterableConfig::default(); 2];
        alter.resources = vec![resource];
        accepts(ApiKey::IncrementalAlterConfigs, &alter);
    }

    #[test]
    fn every_advertised_version_has_a_shape() {
        assert_eq!(assert_complete(), Ok(()));
        assert!(
            check(ApiKey::SaslHandshake, 1, &[]).is_err(),
            "no shape, refused"
        );
    }

    #[test]
    fn the_20_byte_produce_v0_is_refused() {
        // acks, timeout, then a topic array claiming 2^31-1 topics.
        let body = [0, 1, 0, 0, 0x13, 0x88, 0x7f, 0xff, 0xff, 0xff, 0, 0];
        for version in 0..=2 {
            let e = check(ApiKey::Produce, version, &body).unwrap_err();
            assert!(e.contains("2147483647 elements"), "{e}");
        }
    }

    #[test]
    fn flexible_api_versions_lengths_are_checked() {
        let good = [4, b's', b'l', b'u', 2, b'1', 0];
        assert_eq!(check(ApiKey::ApiVersions, 3, &good), Ok(()));
        let long_name = [0xff, 0xff, 0xff, 0x7f, 0];
        assert!(check(ApiKey::ApiVersions, 3, &long_name).is_err());
        let tags = [1, 1, 1, 0, 0x7f];
        assert!(check(ApiKey::ApiVersions, 3, &tags).is_err());
    }

    #[test]
    fn a_huge_count_is_refused() {
        let body = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        assert!(check(ApiKey::DeleteTopics, 3, &body).is_err());
        assert!(check(ApiKey::Metadata, 8, &body).is_err());
    }
}
