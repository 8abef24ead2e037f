//! FetchResponse v4-v11, encoded by hand as a list of pieces so record sets go from the
//! segment file to the socket without being copied through user space. These versions are
//! not flexible (no tagged fields), so the layout is a fixed sequence of big-endian fields;
//! the golden tests below prove the bytes equal kafka-protocol's encoding of the same
//! response. This is the only hand-written codec of a whole response.
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
}

impl<R> Default for FetchOutput<R> {
    fn default() -> Self {
        Self {
            error_code: 0,
            throttle_time_ms: 0,
            topics: Vec::new(),
        }
    }
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
    /// Topic name.
    pub name: String,
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
}

/// Encodes the response body (after the response header) for `version` (4..=11): the
/// fields as bytes, each record set as its own piece between them.
pub fn encode<R: RecordSet>(output: FetchOutput<R>, version: i16) -> Vec<Piece<R>> {
    debug_assert!(
        (4..=11).contains(&version),
        "FetchResponse v{version} is not hand-encoded"
    );
    let mut chunks = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(output.throttle_time_ms);
    if version >= 7 {
        buf.put_i16(output.error_code);
        buf.put_i32(0); // session_id: sessionless fetches only
    }
    buf.put_i32(output.topics.len() as i32);
    for topic in output.topics {
        put_string(&mut buf, &topic.name);
        buf.put_i32(topic.partitions.len() as i32);
        for partition in topic.partitions {
            put_partition_header(&mut buf, &partition, version);
            match partition.records {
                None => buf.put_i32(0),
                Some(records) => {
                    buf.put_i32(records.wire_len() as i32);
                    chunks.push(Piece::Bytes(buf.split().freeze()));
                    chunks.push(Piece::Records(records));
                }
            }
        }
    }
    chunks.push(Piece::Bytes(buf.freeze()));
    chunks.retain(|c| !matches!(c, Piece::Bytes(b) if b.is_empty()));
    chunks
}

fn put_partition_header<R>(buf: &mut BytesMut, p: &PartitionOutput<R>, version: i16) {
    buf.put_i32(p.index);
    buf.put_i16(p.error_code);
    buf.put_i64(p.high_watermark);
    buf.put_i64(p.last_stable_offset);
    if version >= 5 {
        buf.put_i64(p.log_start_offset);
    }
    match &p.aborted_transactions {
        None => buf.put_i32(-1),
        Some(aborted) => {
            buf.put_i32(aborted.len() as i32);
            for &(producer_id, first_offset) in aborted {
                buf.put_i64(producer_id);
                buf.put_i64(first_offset);
            }
        }
    }
    if version >= 11 {
        buf.put_i32(-1); // preferred_read_replica: none, read from the leader
    }
}

fn put_string(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    //! Golden tests: our chunked encoding equals kafka-protocol's for every served version.
    use super::*;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

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

    fn sample() -> (FetchOutput<Bytes>, FetchResponse) {
        let records = Bytes::from_static(b"\0\0\0\0\0\0\0\x07pretend-these-are-record-batches");
        let ours = FetchOutput {
            error_code: 0,
            throttle_time_ms: 0,
            topics: vec![TopicOutput {
                name: "orders".into(),
                partitions: vec![
                    PartitionOutput {
                        index: 0,
                        error_code: 0,
                        high_watermark: 42,
                        last_stable_offset: 42,
                        log_start_offset: 3,
                        aborted_transactions: Some(vec![(7, 40)]),
                        records: Some(records.clone()),
                    },
                    PartitionOutput {
                        index: 1,
                        error_code: 1,
                        high_watermark: 9,
                        last_stable_offset: 9,
                        log_start_offset: 0,
                        aborted_transactions: None,
                        records: None,
                    },
                ],
            }],
        };
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
        topic.topic = TopicName(StrBytes::from_static_str("orders"));
        let mut aborted = AbortedTransaction::default();
        aborted.producer_id = kafka_protocol::messages::ProducerId(7);
        aborted.first_offset = 40;
        let mut first = partition(0, 0, 42, 3, records);
        first.aborted_transactions = Some(vec![aborted]);
        topic.partitions = vec![first, partition(1, 1, 9, 0, Bytes::new())];
        let mut theirs = FetchResponse::default();
        theirs.responses = vec![topic];
        (ours, theirs)
    }

    #[test]
    fn chunked_encoding_equals_kafka_protocol_for_v4_to_v11() {
        for version in 4..=11 {
            let (ours, theirs) = sample();
            let chunks = encode(ours, version);
            let mut expected = BytesMut::new();
            theirs.encode(&mut expected, version).unwrap();
            assert_eq!(
                to_bytes(&chunks),
                expected.freeze(),
                "FetchResponse v{version}"
            );
        }
    }

    #[test]
    fn records_become_their_own_chunk() {
        let (ours, _) = sample();
        let chunks = encode(ours, 11);
        assert_eq!(chunks.len(), 3, "prefix, records, suffix");
        assert!(matches!(&chunks[1], Piece::Records(b) if b.starts_with(b"\0\0\0\0\0\0\0\x07")));
    }
}
