//! Topic-level configs (CreateTopics, DescribeConfigs): Kafka's topic key names, each the
//! per-topic override of a broker key. A topic stores only its overrides; the effective value
//! is the broker's value with the overrides applied, so changing a broker default reaches every
//! topic that did not override it.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::config::BrokerConfig;
use crate::error::KafkaError;

/// Topic key -> the broker key it overrides.
pub const TOPIC_KEYS: &[(&str, &str)] = &[
    ("cleanup.policy", "log.cleanup.policy"),
    (
        "min.cleanable.dirty.ratio",
        "log.cleaner.min.cleanable.ratio",
    ),
    ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
    ("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
    ("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    ("retention.ms", "log.retention.ms"),
    ("retention.bytes", "log.retention.bytes"),
    ("segment.bytes", "log.segment.bytes"),
    ("segment.ms", "log.roll.ms"),
    ("segment.index.bytes", "log.segment.index.bytes"),
    ("index.interval.bytes", "log.index.interval.bytes"),
    ("message.timestamp.type", "log.message.timestamp.type"),
    ("max.message.bytes", "message.max.bytes"),
    ("flush.messages", "log.flush.interval.messages"),
    ("flush.ms", "log.flush.interval.ms"),
    (PARTITIONER_KEY, ""),
    (PARTITIONER_PARAMS_KEY, ""),
    (VALIDATOR_KEY, ""),
    (VALIDATOR_PARAMS_KEY, ""),
    (VALIDATOR_ON_FAILURE_KEY, ""),
];

/// Topic key naming the partitioner plugin of a topic.
pub const PARTITIONER_KEY: &str = "sluice.partitioner";
/// Topic key with the partitioner's parameters: `k=v,k2=v2`.
pub const PARTITIONER_PARAMS_KEY: &str = "sluice.partitioner.params";

/// Topic key naming the validator plugin of a topic (produce time).
pub const VALIDATOR_KEY: &str = "sluice.validator";
/// Topic key with the validator's parameters: `k=v,k2=v2`.
pub const VALIDATOR_PARAMS_KEY: &str = "sluice.validator.params";
/// Topic key: what a produce gets when the validator itself fails (trap, timeout, memory,
/// broken contract): `reject` (the default: POLICY_VIOLATION, nothing appended) or `allow`
/// (the batch is appended unvalidated, and the failure counted and logged).
pub const VALIDATOR_ON_FAILURE_KEY: &str = "sluice.validator.on.failure";

/// The topic keys that name a plugin: binding one needs READ on that plugin.
pub const PLUGIN_KEYS: &[&str] = &[PARTITIONER_KEY, VALIDATOR_KEY];

/// What a produce does when its topic's validator fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidatorFailure {
    Reject,
    Allow,
}

/// The topic's `sluice.validator.on.failure` (`reject` unless set to `allow`).
pub fn validator_failure(overrides: &TopicOverrides) -> ValidatorFailure {
    match overrides.get(VALIDATOR_ON_FAILURE_KEY).map(String::as_str) {
        Some("allow") => ValidatorFailure::Allow,
        _ => ValidatorFailure::Reject,
    }
}

/// A topic's config overrides, validated.
pub type TopicOverrides = BTreeMap<String, String>;

/// Checks one override; the error names the key and is INVALID_CONFIG.
pub fn validate(key: &str, value: &str) -> Result<(), KafkaError> {
    let invalid = |msg: String| KafkaError::new(ResponseError::InvalidConfig, msg);
    let Some(&(_, broker_key)) = TOPIC_KEYS.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("unknown topic config {key:?}")));
    };
    if let Some(result) = validate_plugin_key(key, value) {
        return result;
    }
    let mut scratch = BrokerConfig::default();
    scratch
        .set(broker_key, value)
        .map_err(|e| invalid(format!("topic config {key}: {e}")))
}

/// Syntax checks of the plugin topic keys (`None` for other keys). Whether the plugin
/// exists and accepts the parameters is checked by `crate::plugins::TopicPlugin::bind`.
fn validate_plugin_key(key: &str, value: &str) -> Option<Result<(), KafkaError>> {
    let invalid = |msg: String| KafkaError::new(ResponseError::InvalidConfig, msg);
    match key {
        PARTITIONER_KEY if value.trim().is_empty() => Some(Err(invalid(format!(
            "{PARTITIONER_KEY} must name a partitioner plugin"
        )))),
        VALIDATOR_KEY if value.trim().is_empty() => Some(Err(invalid(format!(
            "{VALIDATOR_KEY} must name a validator plugin"
        )))),
        PARTITIONER_KEY | VALIDATOR_KEY => Some(Ok(())),
        PARTITIONER_PARAMS_KEY | VALIDATOR_PARAMS_KEY => Some(
            parse_params(value)
                .map(|_| ())
                .map_err(|e| invalid(format!("{key}: {e}"))),
        ),
        VALIDATOR_ON_FAILURE_KEY => Some(match value {
            "reject" | "allow" => Ok(()),
            other => Err(invalid(format!(
                "{VALIDATOR_ON_FAILURE_KEY} = {other:?} is not `reject` or `allow`"
            ))),
        }),
        _ => None,
    }
}

/// Parses `k=v,k2=v2` (spaces around items trimmed; a value may contain `=` but not `,`).
pub fn parse_params(text: &str) -> Result<Vec<(String, String)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is not key=value"))?;
            let k = k.trim();
            if k.is_empty() {
                return Err(format!("{item:?} has an empty key"));
            }
            Ok((k.to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// Checks every override and the storage engine's view of the result (ranges that depend on
/// more than one key, such as `segment.bytes` against the storage limits).
pub fn validate_all(broker: &BrokerConfig, overrides: &TopicOverrides) -> Result<(), KafkaError> {
    for (key, value) in overrides {
        validate(key, value)?;
    }
    log_config(broker, overrides)
        .validate()
        .map_err(|e| KafkaError::new(ResponseError::InvalidConfig, e.to_string()))
}

/// The broker key a topic key overrides (`None` for the plugin keys).
pub fn broker_key(topic_key: &str) -> Option<&'static str> {
    TOPIC_KEYS
        .iter()
        .find(|(k, _)| *k == topic_key)
        .map(|(_, b)| *b)
        .filter(|b| !b.is_empty())
}

/// The broker config as this topic sees it.
pub fn effective(broker: &BrokerConfig, overrides: &TopicOverrides) -> BrokerConfig {
    let mut config = broker.clone();
    for (key, value) in overrides {
        if let Some(&(_, broker_key)) = TOPIC_KEYS.iter().find(|(k, _)| k == key)
            && !broker_key.is_empty()
        {
            // Validated when the override was stored.
            let _ = config.set(broker_key, value);
        }
    }
    config
}

/// A topic's effective `cleanup.policy` (cheaper than `log_config`, for every produce).
pub fn cleanup_policy(
    broker: &BrokerConfig,
    overrides: &TopicOverrides,
) -> sluice_storage::CleanupPolicy {
    overrides
        .get("cleanup.policy")
        .and_then(|v| crate::config::cleaner_keys::parse_policy(v).ok())
        .unwrap_or(broker.log_cleanup_policy)
}

/// The storage engine's view of a topic's effective config.
pub fn log_config(broker: &BrokerConfig, overrides: &TopicOverrides) -> sluice_storage::LogConfig {
    let c = effective(broker, overrides);
    sluice_storage::LogConfig {
        segment_bytes: c.log_segment_bytes,
        segment_ms: c.log_roll_ms,
        segment_index_bytes: c.log_segment_index_bytes,
        index_interval_bytes: c.log_index_interval_bytes,
        retention_ms: c.log_retention_ms,
        retention_bytes: c.log_retention_bytes,
        flush_messages: c.log_flush_interval_messages,
        flush_ms: c.log_flush_interval_ms,
        message_timestamp_type: c.log_message_timestamp_type,
        max_message_bytes: c.message_max_bytes,
        producer_id_expiration_ms: broker.producer_id_expiration_ms,
        cleanup_policy: c.log_cleanup_policy,
        min_cleanable_dirty_ratio_ppm: c.log_cleaner_min_cleanable_ratio_ppm,
        min_compaction_lag_ms: c.log_cleaner_min_compaction_lag_ms,
        max_compaction_lag_ms: c.log_cleaner_max_compaction_lag_ms,
        delete_retention_ms: c.log_cleaner_delete_retention_ms,
    }
}

/// One described topic config: key, value, whether it is the topic's own override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedConfig {
    /// Kafka topic key.
    pub key: &'static str,
    /// Effective value.
    pub value: String,
    /// True when the topic overrides the broker default.
    pub overridden: bool,
}

/// Every topic key with its effective value (DescribeConfigs for a topic).
pub fn describe(broker: &BrokerConfig, overrides: &TopicOverrides) -> Vec<DescribedConfig> {
    let effective = effective(broker, overrides);
    TOPIC_KEYS
        .iter()
        .map(|&(key, broker_key)| DescribedConfig {
            key,
            value: if broker_key.is_empty() {
                overrides.get(key).cloned().unwrap_or_default()
            } else {
                effective.get(broker_key).unwrap_or_default()
            },
            overridden: overrides.contains_key(key),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_policies_reach_the_log_config() {
        for (value, policy) in [
            ("delete", sluice_storage::CleanupPolicy::Delete),
            ("compact", sluice_storage::CleanupPolicy::Compact),
            (
                "compact,delete",
                sluice_storage::CleanupPolicy::CompactDelete,
            ),
        ] {
            validate("cleanup.policy", value).unwrap();
            let overrides: TopicOverrides = [
                ("cleanup.policy".to_owned(), value.to_owned()),
                ("min.cleanable.dirty.ratio".to_owned(), "0.01".to_owned()),
            ]
            .into();
            let config = log_config(&BrokerConfig::default(), &overrides);
            assert_eq!(config.cleanup_policy, policy);
            assert_eq!(config.min_cleanable_dirty_ratio_ppm, 10_000);
        }
        let err = validate("cleanup.policy", "compress").unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig);
        assert!(err.message.contains("cleanup.policy"), "{}", err.message);
    }

    #[test]
    fn overrides_reach_the_effective_config() {
        let overrides: TopicOverrides = [("retention.ms".to_owned(), "1000".to_owned())].into();
        validate("retention.ms", "1000").unwrap();
        let c = effective(&BrokerConfig::default(), &overrides);
        assert_eq!(c.log_retention_ms, 1000);
        let described = describe(&BrokerConfig::default(), &overrides);
        let retention = described.iter().find(|d| d.key == "retention.ms").unwrap();
        assert!(retention.overridden);
        assert_eq!(retention.value, "1000");
    }

    #[test]
    fn unknown_and_bad_values_are_invalid_config() {
        assert_eq!(
            validate("retention.mss", "1").unwrap_err().code,
            ResponseError::InvalidConfig
        );
        assert_eq!(
            validate("segment.bytes", "huge").unwrap_err().code,
            ResponseError::InvalidConfig
        );
    }

    #[test]
    fn plugin_topic_keys_are_checked_for_syntax() {
        assert!(
            validate_plugin_key(PARTITIONER_KEY, "murmur2")
                .unwrap()
                .is_ok()
        );
        assert!(validate_plugin_key(PARTITIONER_KEY, " ").unwrap().is_err());
        let err = validate_plugin_key(PARTITIONER_PARAMS_KEY, "x")
            .unwrap()
            .unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig);
        assert!(validate_plugin_key("retention.ms", "1").is_none());
    }
}
