//! DescribeConfigs v1-v3: a topic's configs (its overrides, else the broker's values), and
//! the broker's own config (resource name "" or our node id).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::NODE_ID;
use crate::config::{BROKER_KEYS, BrokerConfig};
use crate::connection::ConnectionContext;
use crate::topic_config;

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
    ctx: &ConnectionContext,
    request: DescribeConfigsRequest,
    _version: i16,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    response.results = request
        .resources
        .into_iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult::default();
            let wanted = |key: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == key))
            };
            match resource.resource_type {
                RESOURCE_TOPIC => match ctx.broker.topic(resource.resource_name.as_str()) {
                    Some(topic) => {
                        result.configs =
                            topic_config::describe(&ctx.broker.config, &topic.overrides)
                                .into_iter()
                                .filter(|d| wanted(d.key))
                                .map(|d| {
                                    entry(
                                        d.key,
                                        d.value,
                                        false,
                                        if d.overridden {
                                            SOURCE_TOPIC_CONFIG
                                        } else {
                                            SOURCE_DEFAULT_CONFIG
                                        },
                                    )
                                })
                                .collect();
                    }
                    None => result.error_code = ResponseError::UnknownTopicOrPartition.code(),
                },
                RESOURCE_BROKER if matches!(resource.resource_name.as_str(), "" | "0") => {
                    result.configs = broker_configs(&ctx.broker.config)
                        .into_iter()
                        .filter(|c| wanted(c.name.as_str()))
                        .collect();
                }
                RESOURCE_BROKER => {
                    result.error_code = ResponseError::InvalidRequest.code();
                    result.error_message =
                        Some(StrBytes::from_string(format!("this is broker {NODE_ID}")));
                }
                other => {
                    result.error_code = ResponseError::InvalidRequest.code();
                    result.error_message = Some(StrBytes::from_string(format!(
                        "resource type {other} is not supported"
                    )));
                }
            }
            result.resource_type = resource.resource_type;
            result.resource_name = resource.resource_name;
            result
        })
        .collect();
    response
}

fn broker_configs(config: &BrokerConfig) -> Vec<DescribeConfigsResourceResult> {
    let defaults = BrokerConfig::default();
    BROKER_KEYS
        .iter()
        .map(|key| {
            let value = config.get(key).unwrap_or_default();
            let source = if defaults.get(key).as_deref() == Some(value.as_str()) {
                SOURCE_DEFAULT_CONFIG
            } else {
                SOURCE_STATIC_BROKER_CONFIG
            };
            entry(key, value, true, source)
        })
        .collect()
}

fn entry(key: &str, value: String, read_only: bool, source: i8) -> DescribeConfigsResourceResult {
    let mut out = DescribeConfigsResourceResult::default();
    out.name = StrBytes::from_string(key.to_owned());
    out.value = Some(StrBytes::from_string(value));
    out.read_only = read_only;
    out.config_source = source;
    out.config_type = config_type(key);
    out
}

/// Kafka's ConfigType: BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7.
fn config_type(key: &str) -> i8 {
    match key {
        "auto.create.topics.enable" | "sluice.acks.all.fsync" => 1,
        "listeners" | "advertised.listeners" | "cleanup.policy" => 7,
        "data.dir" | "log.message.timestamp.type" | "message.timestamp.type" => 2,
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
