//! Topic-level configs (CreateTopics, DescribeConfigs): Kafka's topic key names. Most are
//! the per-topic override of a broker key, declared with it in the key table
//! (`config/keys.rs`: `topic "retention.ms"`), and parsed by that key's codec; the plugin
//! bindings (`sluice.partitioner`, `sluice.validator`, ...) are topic keys of their own. A
//! topic stores only its overrides; the effective value is the broker's value with the
//! overrides applied, so changing a broker default reaches every topic that did not override
//! it.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

use crate::config::{BrokerConfig, KEYS};
use crate::error::KafkaError;

/// Every topic key with the broker key it overrides (`None` for a key of its own), in the
/// order DescribeConfigs lists them: the overrides in the key table's order, then
/// `OWN_KEYS`.
pub fn topic_keys() -> impl Iterator<Item = (&'static str, Option<&'static str>)> {
    let overrides = KEYS.iter().filter_map(|k| Some((k.topic?, Some(k.name))));
    overrides.chain(OWN_KEYS.iter().map(|&k| (k, None)))
}

/// The topic keys that override no broker key: the plugin bindings.
pub const OWN_KEYS: &[&str] = &[
    PARTITIONER_KEY,
    PARTITIONER_PARAMS_KEY,
    VALIDATOR_KEY,
    VALIDATOR_PARAMS_KEY,
    VALIDATOR_ON_FAILURE_KEY,
];

/// Kafka's topic key: the fewest in-sync replicas an acks=all produce needs (a replicated
/// partition's high watermark also stands still below it).
pub const MIN_INSYNC_REPLICAS_KEY: &str = "min.insync.replicas";

/// Kafka's topic key: a partition whose in-sync replicas are all gone is led by any live
/// replica (`true`), losing what only they had, or waits for one of them (`false`, the
/// default). Read by the controller (`sluice_cluster::limits::UNCLEAN_LEADER_ELECTION_KEY`).
pub const UNCLEAN_LEADER_ELECTION_KEY: &str = sluice_cluster::limits::UNCLEAN_LEADER_ELECTION_KEY;

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

/// The topic keys whose values are comma-separated lists (Kafka's `ConfigDef.Type.LIST`):
/// the ones IncrementalAlterConfigs may APPEND to and SUBTRACT from (KIP-339).
pub const LIST_KEYS: &[&str] = &["cleanup.policy"];

/// True if `key` is list-typed ([`LIST_KEYS`]).
pub fn is_list(key: &str) -> bool {
    LIST_KEYS.contains(&key)
}

/// Checks one override; the error names the key and is INVALID_CONFIG.
pub fn validate(key: &str, value: &str) -> Result<(), KafkaError> {
    let invalid = |msg: String| KafkaError::new(ResponseError::InvalidConfig, msg);
    let Some((_, broker_key)) = topic_keys().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("unknown topic config {key:?}")));
    };
    let Some(broker_key) = broker_key else {
        return validate_plugin_key(key, value).unwrap_or(Ok(()));
    };
    let mut scratch = BrokerConfig::default();
    scratch
        .set(broker_key, value)
        .map_err(|e| invalid(format!("topic config {key}: {e}")))
}

/// A topic's `min.insync.replicas`: its override, else the broker's.
pub fn min_insync_replicas(broker: &BrokerConfig, overrides: &TopicOverrides) -> usize {
    overrides
        .get(MIN_INSYNC_REPLICAS_KEY)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(broker.min_insync_replicas as usize)
        .max(1)
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
    KEYS.iter()
        .find(|k| k.topic == Some(topic_key))
        .map(|k| k.name)
}

/// The broker config as this topic sees it.
pub fn effective(broker: &BrokerConfig, overrides: &TopicOverrides) -> BrokerConfig {
    let mut config = broker.clone();
    for (key, value) in overrides {
        if let Some(broker_key) = broker_key(key) {
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

/// The storage engine's view of a topic's effective config (the table's `log` fields).
pub fn log_config(broker: &BrokerConfig, overrides: &TopicOverrides) -> sluice_storage::LogConfig {
    effective(broker, overrides).log_config()
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
    topic_keys()
        .map(|(key, broker_key)| DescribedConfig {
            key,
            value: match broker_key {
                None => overrides.get(key).cloned().unwrap_or_default(),
                Some(broker_key) => effective.get(broker_key).unwrap_or_default(),
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

#[cfg(test)]
mod min_insync_tests {
    use super::validate;

    /// Kafka's key is taken (scripts set it on every topic); what one replica cannot meet
    /// is refused, naming why.
    #[test]
    fn min_insync_replicas_is_a_topic_key_up_to_replicas_max() {
        validate("min.insync.replicas", "1").unwrap();
        validate("min.insync.replicas", "2").unwrap();
        let refused = validate("min.insync.replicas", "33").unwrap_err();
        assert_eq!(refused.code, kafka_protocol::ResponseError::InvalidConfig);
        assert!(
            refused.message.contains("min.insync.replicas"),
            "{}",
            refused.message
        );
        assert!(validate("min.insync.replicas", "0").is_err());
        assert!(validate("unclean.leader.election.enable", "maybe").is_err());
        validate("unclean.leader.election.enable", "true").unwrap();
    }
}
