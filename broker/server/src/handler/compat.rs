//! Old versions of CreateTopics (v0-v1), DeleteTopics (v0) and DescribeConfigs (v0), which the
//! `kafka-protocol` crate no longer encodes. Their requests are a newer version's layout minus
//! trailing fields, so they decode as that version once the missing fields are appended at
//! their defaults; their responses are small and encoded here from the newer response struct.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsResponse, DeleteTopicsResponse, DescribeConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

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
        _ => None,
    }
}

/// Appends `suffix` to an old request body.
pub fn upgrade_body(body: Bytes, suffix: &[u8]) -> Bytes {
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
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::{Decodable, Encodable};

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
