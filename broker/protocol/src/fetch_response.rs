//! FetchResponse v4-v18, encoded by hand as a list of pieces so record sets go from the
//! segment file to the socket without being copied through user space. v4-v11 are a fixed
//! sequence of big-endian fields; v12+ are flexible (compact lengths as unsigned varints,
//! tagged fields: a partition's current leader, KIP-951's node endpoints), v13+ name topics by
//! id. The golden tests below prove the bytes equal kafka-protocol's encoding of the same
//! response for every version. This is the only hand-written codec of a whole response.
//!
//! A record set is whatever the server holds it as (a range of a segment file, or bytes a
//! view produced): anything that knows its length ([`RecordSet`]). [`encode`] gives the
//! encoded fields as [`Piece::Bytes`] around each record set, untouched, as
//! [`Piece::Records`]; the server writes them in order.

use bytes::{BufMut, Bytes, BytesMut};

/// A record set a fetch response carries, as the server holds it; the protocol needs only
/// its length.
pub trait RecordSet {
    /// Its length on the wire, in bytes.
    fn wire_len(&self) -> usize;
}

impl RecordSet for Bytes {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// A piece of an encoded fetch response, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<R> {
    /// Encoded fields.
    Bytes(Bytes),
    /// A partition's record set, as it was given.
    Records(R),
}

/// A fetch response whose record sets are still the server's (file ranges).
#[derive(Debug)]
pub struct FetchOutput<R> {
    /// Top-level error (v7+), 0 for none.
    pub error_code: i16,
    /// A client quota's throttle, 0 for none.
    pub throttle_time_ms: i32,
    /// Topics in request order.
    pub topics: Vec<TopicOutput<R>>,
    /// v16+ (KIP-951): the endpoints of the leaders named in partitions' `current_leader`,
    /// so a client redirected by NOT_LEADER_OR_FOLLOWER need not ask Metadata first.
    pub node_endpoints: Vec<NodeEndpoint>,
}

impl<R> Default for FetchOutput<R> {
    fn default() -> Self {
        Self {
            error_code: 0,
            throttle_time_ms: 0,
            topics: Vec::new(),
            node_endpoints: Vec::new(),
        }
    }
}

/// A broker's client endpoint, as v16+ responses name it (KIP-951).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// The broker's node id.
    pub node_id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
    /// Its rack, if configured.
    pub rack: Option<String>,
}

impl<R: RecordSet> FetchOutput<R> {
    /// The bytes of the record sets (what a consumer quota counts).
    pub fn record_bytes(&self) -> u64 {
        self.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref())
            .map(|r| r.wire_len() as u64)
            .sum()
    }
}

/// One topic of a fetch response.
#[derive(Debug)]
pub struct TopicOutput<R> {
    /// Topic name (v4-v12).
    pub name: String,
    /// Topic id (v13+, which name topics by id).
    pub topic_id: [u8; 16],
    /// Partitions in request order.
    pub partitions: Vec<PartitionOutput<R>>,
}

/// One partition of a fetch response.
#[derive(Debug)]
pub struct PartitionOutput<R> {
    /// Partition index.
    pub index: i32,
    /// Kafka error code, 0 for none.
    pub error_code: i16,
    /// High watermark (= log end offset on a single node); -1 if unknown.
    pub high_watermark: i64,
    /// Last stable offset (= high watermark without transactions); -1 if unknown.
    pub last_stable_offset: i64,
    /// Log start offset (v5+); -1 if unknown.
    pub log_start_offset: i64,
    /// read_committed: the aborted transactions overlapping the records, as
    /// (producer id, first offset); `None` (null on the wire) for read_uncommitted.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// The record batches, `None` for an empty record set.
    pub records: Option<R>,
    /// v12+: the partition's current leader id and epoch, told with NOT_LEADER_OR_FOLLOWER
    /// and FENCED_LEADER_EPOCH (KIP-951); `None` writes nothing.
    pub current_leader: Option<(i32, i32)>,
}

/// The versions [`encode`] writes.
pub const VERSIONS: std::ops::RangeInclusive<i16> = 4..=18;

/// The first flexible version (compact lengths, tagged fields).
const FIRST_FLEXIBLE: i16 = 12;

/// The first version that names topics by id.
const FIRST_TOPIC_ID: i16 = 13;

/// The first version with node endpoints (KIP-951).
const FIRST_NODE_ENDPOINTS: i16 = 16;

/// Tag of a partition's `CurrentLeader`.
const TAG_CURRENT_LEADER: u32 = 1;

/// Tag of the response's `NodeEndpoints`.
const TAG_NODE_ENDPOINTS: u32 = 0;

/// Encodes the response body (after the response header) for `version` (4..=18): the
/// fields as bytes, each record set as its own piece between them.
pub fn encode<R: RecordSet>(output: FetchOutput<R>, version: i16) -> Vec<Piece<R>> {
    debug_assert!(
        VERSIONS.contains(&version),
        "FetchResponse v{version} is not hand-encoded"
    );
    let flexible = version >= FIRST_FLEXIBLE;
    let mut chunks = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(output.throttle_time_ms);
    if version >= 7 {
        buf.put_i16(output.error_code);
        buf.put_i32(0); // session_id: sessionless fetches only
    }
    put_len(&mut buf, output.topics.len(), flexible);
    for topic in output.topics {
        if version >= FIRST_TOPIC_ID {
            buf.put_slice(&topic.topic_id);
        } else {
            put_string(&mut buf, &topic.name, flexible);
        }
        put_len(&mut buf, topic.partitions.len(), flexible);
        for partition in topic.partitions {
            put_partition_header(&mut buf, &partition, version);
            match partition.records {
                None => put_len(&mut buf, 0, flexible),
                Some(records) => {
                    put_len(&mut buf, records.wire_len(), flexible);
                    chunks.push(Piece::Bytes(buf.split().freeze()));
                    chunks.push(Piece::Records(records));
                }
            }
            if flexible {
                put_partition_tags(&mut buf, partition.current_leader);
            }
        }
        if flexible {
            put_uvarint(&mut buf, 0); // the topic's tagged fields: none
        }
    }
    if flexible {
        put_response_tags(&mut buf, &output.node_endpoints, version);
    }
    chunks.push(Piece::Bytes(buf.freeze()));
    chunks.retain(|c| !matches!(c, Piece::Bytes(b) if b.is_empty()));
    chunks
}

fn put_partition_header<R>(buf: &mut BytesMut, p: &PartitionOutput<R>, version: i16) {
    let flexible = version >= FIRST_FLEXIBLE;
    buf.put_i32(p.index);
    buf.put_i16(p.error_code);
    buf.put_i64(p.high_watermark);
    buf.put_i64(p.last_stable_offset);
    if version >= 5 {
        buf.put_i64(p.log_start_offset);
    }
    match &p.aborted_transactions {
        None if flexible => put_uvarint(buf, 0),
        None => buf.put_i32(-1),
        Some(aborted) => {
            put_len(buf, aborted.len(), flexible);
            for &(producer_id, first_offset) in aborted {
                buf.put_i64(producer_id);
                buf.put_i64(first_offset);
                if flexible {
                    put_uvarint(buf, 0);
                }
            }
        }
    }
    if version >= 11 {
        buf.put_i32(-1); // preferred_read_replica: none, read from the leader
    }
}

/// A partition's tagged fields: its current leader when there is one to tell.
fn put_partition_tags(buf: &mut BytesMut, current_leader: Option<(i32, i32)>) {
    match current_leader {
        None => put_uvarint(buf, 0),
        Some((leader_id, leader_epoch)) => {
            put_uvarint(buf, 1);
            put_uvarint(buf, TAG_CURRENT_LEADER);
            put_uvarint(buf, 4 + 4 + 1); // two int32s and the struct's empty tag buffer
            buf.put_i32(leader_id);
            buf.put_i32(leader_epoch);
            put_uvarint(buf, 0);
        }
    }
}

/// The response's tagged fields: v16+'s node endpoints when there are any.
fn put_response_tags(buf: &mut BytesMut, endpoints: &[NodeEndpoint], version: i16) {
    if version < FIRST_NODE_ENDPOINTS || endpoints.is_empty() {
        put_uvarint(buf, 0);
        return;
    }
    let mut field = BytesMut::new();
    put_len(&mut field, endpoints.len(), true);
    for e in endpoints {
        field.put_i32(e.node_id);
        put_string(&mut field, &e.host, true);
        field.put_i32(e.port);
        match &e.rack {
            None => put_uvarint(&mut field, 0),
            Some(rack) => put_string(&mut field, rack, true),
        }
        put_uvarint(&mut field, 0);
    }
    put_uvarint(buf, 1);
    put_uvarint(buf, TAG_NODE_ENDPOINTS);
    put_len_raw(buf, field.len());
    buf.put_slice(&field);
}

/// An array's or a byte string's length: int32 before v12, then compact (length + 1 as an
/// unsigned varint).
fn put_len(buf: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_uvarint(buf, u32::try_from(len + 1).unwrap_or(u32::MAX));
    } else {
        buf.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
    }
}

/// A tagged field's size: a plain unsigned varint.
fn put_len_raw(buf: &mut BytesMut, len: usize) {
    put_uvarint(buf, u32::try_from(len).unwrap_or(u32::MAX));
}

fn put_string(buf: &mut BytesMut, s: &str, flexible: bool) {
    if flexible {
        put_len(buf, s.len(), true);
    } else {
        buf.put_i16(i16::try_from(s.len()).unwrap_or(i16::MAX));
    }
    buf.put_slice(s.as_bytes());
}

fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    //! Golden tests: our chunked encoding equals kafka-protocol's for every served version.
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch,
        NodeEndpoint as TheirEndpoint, PartitionData,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    const TOPIC_ID: [u8; 16] = *b"0123456789abcdef";

    /// Flattens the pieces into one buffer.
    fn to_bytes(pieces: &[Piece<Bytes>]) -> Bytes {
        let mut out = BytesMut::new();
        for piece in pieces {
            match piece {
                Piece::Bytes(b) | Piece::Records(b) => out.put_slice(b),
            }
        }
        out.freeze()
    }

    fn ours(records: &Bytes, endpoints: Vec<NodeEndpoint>) -> FetchOutput<Bytes> {
        FetchOutput {
            error_code: 0,
            throttle_time_ms: 0,
            topics: vec![TopicOutput {
                name: "orders".into(),
                topic_id: TOPIC_ID,
                partitions: vec![
                    PartitionOutput {
                        index: 0,
                        error_code: 0,
                        high_watermark: 42,
                        last_stable_offset: 42,
                        log_start_offset: 3,
                        aborted_transactions: Some(vec![(7, 40)]),
                        records: Some(records.clone()),
                        current_leader: None,
                    },
                    PartitionOutput {
                        index: 1,
                        error_code: 6,
                        high_watermark: 9,
                        last_stable_offset: 9,
                        log_start_offset: 0,
                        aborted_transactions: None,
                        records: None,
                        current_leader: Some((2, 5)),
                    },
                ],
            }],
            node_endpoints: endpoints,
        }
    }

    fn theirs(records: Bytes, version: i16, endpoints: &[NodeEndpoint]) -> FetchResponse {
        let partition = |index, error_code, hw, lso, records: Bytes| {
            let mut p = PartitionData::default();
            p.partition_index = index;
            p.error_code = error_code;
            p.high_watermark = hw;
            p.last_stable_offset = hw;
            p.log_start_offset = lso;
            p.aborted_transactions = None;
            p.records = Some(records);
            p
        };
        let mut topic = FetchableTopicResponse::default();
        if version >= FIRST_TOPIC_ID {
            topic.topic_id = uuid::Uuid::from_bytes(TOPIC_ID);
        } else {
            topic.topic = TopicName(StrBytes::from_static_str("orders"));
        }
        let mut aborted = AbortedTransaction::default();
        aborted.producer_id = kafka_protocol::messages::ProducerId(7);
        aborted.first_offset = 40;
        let mut first = partition(0, 0, 42, 3, records);
        first.aborted_transactions = Some(vec![aborted]);
        let mut second = partition(1, 6, 9, 0, Bytes::new());
        if version >= FIRST_FLEXIBLE {
            let mut leader = LeaderIdAndEpoch::default();
            leader.leader_id = BrokerId(2);
            leader.leader_epoch = 5;
            second.current_leader = leader;
        }
        topic.partitions = vec![first, second];
        let mut response = FetchResponse::default();
        response.responses = vec![topic];
        if version >= FIRST_NODE_ENDPOINTS {
            response.node_endpoints = endpoints
                .iter()
                .map(|e| {
                    let mut t = TheirEndpoint::default();
                    t.node_id = BrokerId(e.node_id);
                    t.host = StrBytes::from_string(e.host.clone());
                    t.port = e.port;
                    t.rack = e.rack.clone().map(StrBytes::from_string);
                    t
                })
                .collect();
        }
        response
    }

    fn endpoints() -> Vec<NodeEndpoint> {
        vec![
            NodeEndpoint {
                node_id: 2,
                host: "127.0.0.2".into(),
                port: 9092,
                rack: Some("r1".into()),
            },
            NodeEndpoint {
                node_id: 3,
                host: "broker-3.example".into(),
                port: 19092,
                rack: None,
            },
        ]
    }

    #[test]
    fn chunked_encoding_equals_kafka_protocol_for_every_version() {
        let records = Bytes::from_static(b"\0\0\0\0\0\0\0\x07pretend-these-are-record-batches");
        for endpoints in [Vec::new(), endpoints()] {
            for version in VERSIONS {
                let chunks = encode(ours(&records, endpoints.clone()), version);
                let mut expected = BytesMut::new();
                theirs(records.clone(), version, &endpoints)
                    .encode(&mut expected, version)
                    .unwrap();
                assert_eq!(
                    to_bytes(&chunks),
                    expected.freeze(),
                    "FetchResponse v{version} with {} endpoints",
                    endpoints.len()
                );
            }
        }
    }

    #[test]
    fn records_become_their_own_chunk() {
        let records = Bytes::from_static(b"\0\0\0\0\0\0\0\x07pretend-these-are-record-batches");
        for version in [11, 18] {
            let chunks = encode(ours(&records, Vec::new()), version);
            assert_eq!(chunks.len(), 3, "prefix, records, suffix");
            assert!(matches!(&chunks[1], Piece::Records(b) if *b == records));
        }
    }
}
