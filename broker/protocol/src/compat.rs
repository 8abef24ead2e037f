//! Old versions of CreateTopics (v0-v1), DeleteTopics (v0), DescribeConfigs (v0) and
//! OffsetCommit (v1), which the `kafka-protocol` crate no longer encodes. The first three's
//! requests are a newer version's layout minus trailing fields, so they decode as that
//! version once the missing fields are appended at their defaults; their responses are small
//! and encoded here from the newer response struct. OffsetCommit v1 (what sarama up to 1.x
//! sends by default, with `Consumer.Offsets.Retention` 0) is rewritten into v2's layout, see
//! [`offset_commit_v1_as_v2`].
//!
//! Produce v0-v2 are advertised but not served (old librdkafka enables compression only when
//! the broker lists Produce v0, KAFKA-18659): [`produce_v0_to_v2`] reads such a request as v3
//! so the server can answer UNSUPPORTED_VERSION for each of its partitions, and
//! [`produce_response_v0_to_v2`] writes that answer in the old layout.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsResponse, DeleteTopicsResponse, DescribeConfigsResponse,
    OffsetCommitResponse, ProduceRequest, ProduceResponse, RequestHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use crate::frame::FrameError;
use crate::shape;

/// For an old request version: the version to decode its body as, and the bytes to append
/// first (the fields that version added, at their defaults).
pub fn request_as(key: ApiKey, version: i16) -> Option<(i16, &'static [u8])> {
    match (key, version) {
        // v1 appended validate_only (false); v2 changed only the response.
        (ApiKey::CreateTopics, 0) => Some((2, &[0])),
        (ApiKey::CreateTopics, 1) => Some((2, &[])),
        // v1 changed only the response (throttle_time_ms).
        (ApiKey::DeleteTopics, 0) => Some((1, &[])),
        // v1 appended include_synonyms (false).
        (ApiKey::DescribeConfigs, 0) => Some((1, &[0])),
        // v1 changed only the throttle semantics; both layouts are the same, answers too
        // (kafka-python's describe_log_dirs asks v0 only).
        (ApiKey::DescribeLogDirs, 0) => Some((1, &[])),
        // Not a suffix: `offset_commit_v1_as_v2` rewrites the body.
        (ApiKey::OffsetCommit, 1) => Some((2, &[])),
        _ => None,
    }
}

/// An old request body in the layout of the version it is decoded as ([`request_as`]):
/// the version and the body. Bodies of versions without a shim come back as they are.
/// The one path from an old body to a decodable one: the handler and the `request` fuzz
/// target both take it.
///
/// # Errors
/// An OffsetCommit v1 body that ends early.
pub fn upgrade(key: ApiKey, version: i16, body: Bytes) -> Result<(i16, Bytes), String> {
    match request_as(key, version) {
        None => Ok((version, body)),
        Some((as_version, _)) if key == ApiKey::OffsetCommit => {
            Ok((as_version, offset_commit_v1_as_v2(&body)?))
        }
        Some((as_version, suffix)) => Ok((as_version, upgrade_body(body, suffix))),
    }
}

/// Appends `suffix` to an old request body.
fn upgrade_body(body: Bytes, suffix: &[u8]) -> Bytes {
    if suffix.is_empty() {
        return body;
    }
    let mut upgraded = BytesMut::with_capacity(body.len() + suffix.len());
    upgraded.put_slice(&body);
    upgraded.put_slice(suffix);
    upgraded.freeze()
}

/// CreateTopicsResponse v0 (name, error_code) and v1 (+ error_message); no throttle time.
pub fn create_topics(response: &CreateTopicsResponse, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(response.topics.len() as i32);
    for topic in &response.topics {
        put_string(&mut buf, Some(&topic.name.0));
        buf.put_i16(topic.error_code);
        if version >= 1 {
            put_string(&mut buf, topic.error_message.as_ref());
        }
    }
    buf.freeze()
}

/// DeleteTopicsResponse v0: (name, error_code) without throttle time.
pub fn delete_topics(response: &DeleteTopicsResponse) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(response.responses.len() as i32);
    for topic in &response.responses {
        put_string(&mut buf, topic.name.as_ref().map(|n| &n.0));
        buf.put_i16(topic.error_code);
    }
    buf.freeze()
}

/// DescribeConfigsResponse v0: like v1 but `is_default` where v1 has `config_source`, and no
/// synonyms.
pub fn describe_configs(response: &DescribeConfigsResponse) -> Bytes {
    /// Kafka's ConfigSource DEFAULT_CONFIG.
    const SOURCE_DEFAULT_CONFIG: i8 = 5;
    let mut buf = BytesMut::new();
    buf.put_i32(response.throttle_time_ms);
    buf.put_i32(response.results.len() as i32);
    for result in &response.results {
        buf.put_i16(result.error_code);
        put_string(&mut buf, result.error_message.as_ref());
        buf.put_i8(result.resource_type);
        put_string(&mut buf, Some(&result.resource_name));
        buf.put_i32(result.configs.len() as i32);
        for config in &result.configs {
            put_string(&mut buf, Some(&config.name));
            put_string(&mut buf, config.value.as_ref());
            buf.put_u8(config.read_only.into());
            buf.put_u8((config.config_source == SOURCE_DEFAULT_CONFIG).into());
            buf.put_u8(config.is_sensitive.into());
        }
    }
    buf.freeze()
}

/// Rewrites an OffsetCommit v1 body into v2's layout: v2 inserts `retention_time_ms` after
/// `member_id` (here -1, the broker's default, which Kafka since 2.1 applies anyway) and drops
/// each partition's `commit_timestamp` (v1 only; Kafka ignores it since 2.1 too, and so do
/// we: committed offsets expire by `offsets.retention.minutes`). The counts were checked
/// against the frame by `shape::check`; a body that ends early is an error.
pub fn offset_commit_v1_as_v2(body: &[u8]) -> Result<Bytes, String> {
    let mut v1 = Cursor { body, at: 0 };
    let mut out = BytesMut::with_capacity(body.len() + 8);
    out.put_slice(v1.string()?); // group_id
    out.put_slice(v1.take(4)?); // generation_id
    out.put_slice(v1.string()?); // member_id
    out.put_i64(-1); // retention_time_ms
    let topics = v1.take(4)?;
    out.put_slice(topics);
    for _ in 0..count(topics) {
        out.put_slice(v1.string()?); // name
        let partitions = v1.take(4)?;
        out.put_slice(partitions);
        for _ in 0..count(partitions) {
            out.put_slice(v1.take(4 + 8)?); // partition_index, committed_offset
            v1.take(8)?; // commit_timestamp, dropped
            out.put_slice(v1.string()?); // committed_metadata
        }
    }
    Ok(out.freeze())
}

/// Reads an old request body field by field.
struct Cursor<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let field = self.body.get(self.at..self.at + n).ok_or_else(|| {
            format!(
                "request body of {} bytes ends inside a field",
                self.body.len()
            )
        })?;
        self.at += n;
        Ok(field)
    }

    /// A (nullable) string with its i16 length prefix.
    fn string(&mut self) -> Result<&'a [u8], String> {
        let len = self
            .body
            .get(self.at..self.at + 2)
            .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]));
        self.take(2 + usize::try_from(len).unwrap_or(0))
    }
}

/// An i32 array count (negative: null, no elements).
fn count(field: &[u8]) -> usize {
    let n = i32::from_be_bytes(field.try_into().unwrap_or([0; 4]));
    usize::try_from(n).unwrap_or(0)
}

/// OffsetCommitResponse v1 is v2's layout (v3 added throttle_time_ms).
pub fn offset_commit(response: &OffsetCommitResponse) -> Bytes {
    let mut buf = BytesMut::new();
    // The handler only fills v2's fields, which always encode.
    let _ = response.encode(&mut buf, 2);
    buf.freeze()
}

/// A Produce v0-v2 frame (header and body) read as v3: the header decoded, the body checked
/// against its shape, then decoded as v3 behind a null transactional id (v0-v2's body is
/// v3's without it).
///
/// # Errors
/// What the frame closes the connection with: a header, shape or body that does not decode.
pub fn produce_v0_to_v2(frame: Bytes, version: i16) -> Result<ProduceRequest, FrameError> {
    let malformed = FrameError::Malformed;
    let mut body = frame;
    RequestHeader::decode(&mut body, ApiKey::Produce.request_header_version(version))
        .map_err(|e| malformed(format!("Produce v{version}: {e}")))?;
    shape::check(ApiKey::Produce, version, &body)
        .map_err(|e| malformed(format!("Produce v{version} request: {e}")))?;
    let mut v3 = BytesMut::with_capacity(body.len() + 2);
    v3.put_i16(-1);
    v3.put_slice(&body);
    ProduceRequest::decode(&mut v3.freeze(), 3)
        .map_err(|e| malformed(format!("Produce v{version}: {e}")))
}

/// A ProduceResponse in the layout of `version` (0..=2), after its v0 response header: v2
/// is v3's layout; v1 drops each partition's log_append_time; v0 also drops throttle_time.
///
/// # Errors
/// A v2 answer holding fields v3 cannot encode.
pub fn produce_response_v0_to_v2(
    response: &ProduceResponse,
    version: i16,
) -> Result<Bytes, FrameError> {
    let mut buf = BytesMut::new();
    if version == 2 {
        response
            .encode(&mut buf, 3)
            .map_err(|e| FrameError::Malformed(format!("encoding v3 response: {e}")))?;
        return Ok(buf.freeze());
    }
    buf.put_i32(response.responses.len() as i32);
    for topic in &response.responses {
        put_string(&mut buf, Some(&topic.name.0));
        buf.put_i32(topic.partition_responses.len() as i32);
        for p in &topic.partition_responses {
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.base_offset);
        }
    }
    if version == 1 {
        buf.put_i32(0); // throttle_time_ms
    }
    Ok(buf.freeze())
}

fn put_string(buf: &mut BytesMut, s: Option<&StrBytes>) {
    match s {
        None => buf.put_i16(-1),
        Some(s) => {
            buf.put_i16(s.len() as i16);
            buf.put_slice(s.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    //! The old layouts are the newer ones minus fields: checked against kafka-protocol's
    //! encoding of the newer version.
    use super::*;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{CreateTopicsRequest, GroupId, OffsetCommitRequest, TopicName};
    use kafka_protocol::protocol::Decodable;

    fn encoded<M: Encodable>(message: &M, version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn create_topics_v0_request_decodes_as_v2() {
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![Default::default()];
        request.topics[0].name = TopicName(StrBytes::from_static_str("t"));
        request.timeout_ms = 1234;
        let v2 = encoded(&request, 2);
        let v0 = v2.slice(..v2.len() - 1); // without validate_only
        let (as_version, suffix) = request_as(ApiKey::CreateTopics, 0).unwrap();
        let decoded =
            CreateTopicsRequest::decode(&mut upgrade_body(v0, suffix), as_version).unwrap();
        assert_eq!(decoded, request);
    }

    #[test]
    fn create_topics_v1_response_is_v2_without_throttle_time() {
        let mut response = CreateTopicsResponse::default();
        let mut topic = CreatableTopicResult::default();
        topic.name = TopicName(StrBytes::from_static_str("t"));
        topic.error_code = 40;
        topic.error_message = Some(StrBytes::from_static_str("bad config"));
        response.topics = vec![topic];
        assert_eq!(
            create_topics(&response, 1),
            encoded(&response, 2).slice(4..)
        );
    }

    /// OffsetCommit v1 as sarama 1.22.1 sends it (captured from its wire, header removed):
    /// group "group-a", generation 1, member "member-1", topic-a/0 at offset 42, commit
    /// timestamp -1 (sarama's ReceiveTime), metadata "meta".
    const SARAMA_OFFSET_COMMIT_V1: &str = "000767726f75702d610000000100086d656d6265722d31\
        000000010007746f7069632d610000000100000000000000000000002affffffffffffffff00046d657461";

    #[test]
    fn offset_commit_v1_from_sarama_decodes_as_v2() {
        let v1 = hex(SARAMA_OFFSET_COMMIT_V1);
        let v2 = offset_commit_v1_as_v2(&v1).unwrap();
        let decoded = OffsetCommitRequest::decode(&mut v2.clone(), 2).unwrap();
        let mut want = OffsetCommitRequest::default();
        want.group_id = GroupId(StrBytes::from_static_str("group-a"));
        want.generation_id_or_member_epoch = 1;
        want.member_id = StrBytes::from_static_str("member-1");
        want.retention_time_ms = -1;
        let mut partition = OffsetCommitRequestPartition::default();
        partition.committed_offset = 42;
        partition.committed_metadata = Some(StrBytes::from_static_str("meta"));
        let mut topic = OffsetCommitRequestTopic::default();
        topic.name = TopicName(StrBytes::from_static_str("topic-a"));
        topic.partitions = vec![partition];
        want.topics = vec![topic];
        assert_eq!(decoded, want);
        assert_eq!(v2, encoded(&want, 2), "nothing left over");
    }

    #[test]
    fn a_truncated_offset_commit_v1_is_an_error() {
        let v1 = hex(SARAMA_OFFSET_COMMIT_V1);
        for len in 0..v1.len() {
            assert!(offset_commit_v1_as_v2(&v1[..len]).is_err(), "{len} bytes");
        }
    }

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn produce_v0_to_v2_read_as_v3_behind_a_null_transactional_id() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let mut request = ProduceRequest::default();
        request.acks = -1;
        request.timeout_ms = 30_000;
        let mut topic = TopicProduceData::default();
        topic.name = TopicName(StrBytes::from_static_str("orders"));
        topic.partition_data = vec![PartitionProduceData::default(); 2];
        request.topic_data = vec![topic];
        let body = encoded(&request, 3).slice(2..); // v3 without transactional_id
        for version in 0..=2 {
            let mut header = RequestHeader::default();
            header.request_api_key = ApiKey::Produce as i16;
            header.request_api_version = version;
            let mut frame = BytesMut::from(&encoded(&header, 1)[..]);
            frame.put_slice(&body);
            let decoded = produce_v0_to_v2(frame.freeze(), version).unwrap();
            assert_eq!(decoded, request, "v{version}");
        }
    }

    #[test]
    fn produce_v2_response_is_v3_and_v1_v0_drop_fields() {
        use kafka_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        let mut partition = PartitionProduceResponse::default();
        partition.index = 1;
        partition.error_code = 35;
        partition.base_offset = -1;
        partition.log_append_time_ms = -1;
        let mut topic = TopicProduceResponse::default();
        topic.name = TopicName(StrBytes::from_static_str("t"));
        topic.partition_responses = vec![partition];
        let mut response = ProduceResponse::default();
        response.responses = vec![topic];
        let v3 = encoded(&response, 3);
        assert_eq!(produce_response_v0_to_v2(&response, 2).unwrap(), v3);
        // v3: topics, name, partitions, index, error, base offset, log append time, throttle.
        let v1 = produce_response_v0_to_v2(&response, 1).unwrap();
        let without_append_time = [&v3[..v3.len() - 12], &v3[v3.len() - 4..]].concat();
        assert_eq!(v1, without_append_time);
        let v0 = produce_response_v0_to_v2(&response, 0).unwrap();
        assert_eq!(v0, v1.slice(..v1.len() - 4));
    }

    #[test]
    fn delete_topics_v0_response_is_v1_without_throttle_time() {
        let mut response = DeleteTopicsResponse::default();
        let mut topic = DeletableTopicResult::default();
        topic.name = Some(TopicName(StrBytes::from_static_str("t")));
        topic.error_code = 3;
        response.responses = vec![topic];
        assert_eq!(delete_topics(&response), encoded(&response, 1).slice(4..));
    }
}
