//! DescribeConfigs v1-v4 (v4 is flexible): a topic's configs (its overrides, else the
//! broker's values), and the broker's own config (resource name "" or our node id), each
//! with its source, type, synonyms and (v3, on request) documentation from docs/config.md.
//! Resources past `DESCRIBE_CONFIGS_RESOURCES_MAX` in one request are answered
//! INVALID_REQUEST unread: each answered resource carries every config key, so the response
//! grows with their count. A topic with an offline partition (`broker/quarantine.rs`) is
//! KAFKA_STORAGE_ERROR, its error message the reasons.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::config::{BROKER_KEYS, BrokerConfig, is_sensitive};
use crate::limits;
use crate::topic_config::{self, TopicOverrides};

/// Kafka's resource type for a topic.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's resource type for a broker.
const RESOURCE_BROKER: i8 = 4;

/// Kafka's ConfigSource values.
const SOURCE_TOPIC_CONFIG: i8 = 1;
const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// Answers DescribeConfigs.
pub fn handle(
    ctx: &Ctx<'_>,
    request: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let synonyms = request.include_synonyms;
    let documentation = request.include_documentation;
    let mut response = DescribeConfigsResponse::default();
    let limit = limits::DESCRIBE_CONFIGS_RESOURCES_MAX;
    response.results = request
        .resources
        .into_iter()
        .enumerate()
        .map(|(i, resource)| {
            if i >= limit {
                let mut result = DescribeConfigsResult::default();
                result.error_code = ResponseError::InvalidRequest.code();
                result.error_message = Some(StrBytes::from_static_str(
                    "more resources than DESCRIBE_CONFIGS_RESOURCES_MAX in one request",
                ));
                result.resource_type = resource.resource_type;
                result.resource_name = resource.resource_name;
                return result;
            }
            // Null or empty: every key.
            let keys = resource.configuration_keys.as_deref().unwrap_or_default();
            let wanted = |key: &str| keys.is_empty() || keys.iter().any(|k| k.as_str() == key);
            let name = resource.resource_name.as_str();
            let configs = configs_of(ctx, resource.resource_type, name, synonyms);
            let mut result = DescribeConfigsResult::default();
            match configs {
                Ok(configs) => {
                    result.configs = configs
                        .into_iter()
                        .filter(|c| wanted(c.name.as_str()))
                        .collect();
                    if documentation {
                        document(&mut result.configs, resource.resource_type);
                    }
                }
                Err((code, message)) => {
                    result.error_code = code.code();
                    result.error_message = Some(StrBytes::from_string(message));
                }
            }
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name;
            result
        })
        .collect();
    response
}

/// One resource's configs, or the error it is answered with.
fn configs_of(
    ctx: &Ctx<'_>,
    resource_type: i8,
    name: &str,
    synonyms: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ResponseError, String)> {
    match resource_type {
        RESOURCE_TOPIC if !ctx.auth.topic(AclOperation::DescribeConfigs, name) => Err((
            ResponseError::TopicAuthorizationFailed,
            "Topic authorization failed.".to_owned(),
        )),
        RESOURCE_BROKER if !ctx.auth.cluster(AclOperation::DescribeConfigs) => Err((
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.".to_owned(),
        )),
        RESOURCE_TOPIC => match ctx.topics.topic(name) {
            // The one Kafka answer with room for why (the partition errors of
            // Metadata have none): the reasons, naming the paths.
            Some(topic) if !topic.offline_reasons().is_empty() => Err((
                ResponseError::KafkaStorageError,
                format!(
                    "topic {name:?} is offline: {}",
                    topic.offline_reasons().join("; ")
                ),
            )),
            Some(topic) => Ok(topic_configs(ctx.config, &topic.overrides, synonyms)),
            None => Err((
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name:?}"),
            )),
        },
        RESOURCE_BROKER if name.is_empty() || name == ctx.config.node_id.to_string() => {
            Ok(broker_configs(ctx.config, synonyms))
        }
        RESOURCE_BROKER => Err((
            ResponseError::InvalidRequest,
            format!("this is broker {}", ctx.config.node_id),
        )),
        other => Err((
            ResponseError::InvalidRequest,
            format!("resource type {other} is not supported"),
        )),
    }
}

/// v3's `documentation`: each key's meaning from docs/config.md (`config::docs`).
fn document(configs: &mut [DescribeConfigsResourceResult], resource_type: i8) {
    for config in configs {
        let key = config.name.as_str();
        let doc = match resource_type {
            RESOURCE_TOPIC => crate::config::docs::topic_key(key),
            _ => crate::config::docs::broker_key(key),
        };
        config.documentation = doc.map(StrBytes::from_static_str);
    }
}

/// A topic's configs: its override, else the broker's value. Synonyms list both, most
/// specific first, as Kafka does.
pub(super) fn topic_configs(
    broker: &BrokerConfig,
    overrides: &TopicOverrides,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    topic_config::describe(broker, overrides)
        .into_iter()
        .map(|d| {
            let broker_key = topic_config::broker_key(d.key);
            let broker_source = broker_key.map(|k| broker_source(broker, k));
            let source = if d.overridden {
                SOURCE_TOPIC_CONFIG
            } else {
                broker_source.unwrap_or(SOURCE_DEFAULT_CONFIG)
            };
            let mut out = entry(d.key, d.value.clone(), false, source);
            if synonyms {
                if d.overridden {
                    out.synonyms
                        .push(synonym(d.key, d.value, SOURCE_TOPIC_CONFIG));
                }
                if let (Some(key), Some(source)) = (broker_key, broker_source) {
                    out.synonyms
                        .push(synonym(key, broker.get(key).unwrap_or_default(), source));
                }
            }
            out
        })
        .collect()
}

fn broker_configs(config: &BrokerConfig, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    BROKER_KEYS
        .iter()
        .filter(|key| !is_sensitive(key))
        .map(|key| {
            let value = config.get(key).unwrap_or_default();
            let source = broker_source(config, key);
            let mut out = entry(key, value.clone(), true, source);
            if synonyms {
                out.synonyms.push(synonym(key, value, source));
            }
            out
        })
        .collect()
}

/// STATIC_BROKER_CONFIG if the broker's value was set (file, env or flag), else DEFAULT_CONFIG.
fn broker_source(config: &BrokerConfig, key: &str) -> i8 {
    if BrokerConfig::default().get(key) == config.get(key) {
        SOURCE_DEFAULT_CONFIG
    } else {
        SOURCE_STATIC_BROKER_CONFIG
    }
}

fn synonym(key: &str, value: String, source: i8) -> DescribeConfigsSynonym {
    let mut out = DescribeConfigsSynonym::default();
    out.name = StrBytes::from_string(key.to_owned());
    out.value = Some(StrBytes::from_string(value));
    out.source = source;
    out
}

fn entry(key: &str, value: String, read_only: bool, source: i8) -> DescribeConfigsResourceResult {
    let mut out = DescribeConfigsResourceResult::default();
    out.name = StrBytes::from_string(key.to_owned());
    out.value = Some(StrBytes::from_string(value));
    out.read_only = read_only;
    out.config_source = source;
    out.config_type = config_type(key);
    // Null unless asked for (the codec's default is an empty string).
    out.documentation = None;
    out
}

/// Kafka's ConfigType: BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7.
fn config_type(key: &str) -> i8 {
    match key {
        "auto.create.topics.enable" | "sluice.acks.all.fsync" => 1,
        "listeners"
        | "advertised.listeners"
        | "listener.security.protocol.map"
        | "cleanup.policy" => 7,
        "data.dir" | "log.message.timestamp.type" | "message.timestamp.type" => 2,
        k if k.starts_with("ssl.") => 2,
        k if k.ends_with(".ms")
            || k == "retention.bytes"
            || k == "log.retention.bytes"
            || k.starts_with("flush.")
            || k.contains("flush.interval") =>
        {
            5
        }
        _ => 3,
    }
}
