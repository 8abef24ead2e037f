//! Changing a live topic's config overrides (IncrementalAlterConfigs and the admin API): the
//! new overrides are validated as a whole and become a `ConfigAltered` change (`change.rs`:
//! persisted in topic.json, the commit point, then applied to every open partition's log
//! and swapped into the registry).

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{Applied, Topic, TopicChange, TopicRegistry};
use crate::error::KafkaError;
use crate::topic_config::{self, TopicOverrides};

/// One change to a topic's overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Override `key` with `value`.
    Set { key: String, value: String },
    /// Drop the override of `key` (back to the broker's value).
    Delete { key: String },
    /// Add to a list-typed key the comma-separated `value`s it does not hold yet (KIP-339's
    /// APPEND), starting from its effective value.
    Append { key: String, value: String },
    /// Remove the comma-separated `value`s from a list-typed key (KIP-339's SUBTRACT).
    Subtract { key: String, value: String },
}

impl TopicRegistry {
    /// Applies `changes` to `name`'s overrides; with `validate_only` only checks them.
    /// Returns the topic as it now is.
    pub fn alter_topic_config(
        &self,
        name: &str,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<Arc<Topic>, KafkaError> {
        let admin = self.admin_lock();
        let topic = self.changeable_topic(name)?;
        let configs = changed(&self.config, &topic.overrides, changes)?;
        topic_config::validate_all(&self.config, &configs)?;
        if validate_only {
            // Applying rebinds them; checking binds them once, as applying would.
            topic
                .plugins
                .rebind(&self.plugins, &topic.overrides, &configs)?;
            return Ok(topic);
        }
        let change = TopicChange::ConfigAltered {
            name: name.to_owned(),
            configs,
        };
        self.commit_decided(admin, change).map(Applied::into_topic)
    }

    /// `name`, if a change may touch it: UNKNOWN_TOPIC_OR_PARTITION, or KAFKA_STORAGE_ERROR
    /// for a quarantined topic (its topic.json is what could not be read; rewriting it is the
    /// operator's call).
    pub(super) fn changeable_topic(&self, name: &str) -> Result<Arc<Topic>, KafkaError> {
        let topic = self.topic(name).ok_or_else(|| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown topic {name:?}"),
            )
        })?;
        if let Some(reason) = &topic.offline {
            return Err(KafkaError::new(
                ResponseError::KafkaStorageError,
                format!("topic {name:?} is offline ({reason}); delete it to recreate it"),
            ));
        }
        Ok(topic)
    }
}

fn changed(
    broker: &crate::BrokerConfig,
    current: &TopicOverrides,
    changes: &[ConfigChange],
) -> Result<TopicOverrides, KafkaError> {
    let mut overrides = current.clone();
    for change in changes {
        match change {
            ConfigChange::Set { key, value } => {
                topic_config::validate(key, value)?;
                overrides.insert(key.clone(), value.clone());
            }
            ConfigChange::Append { key, value } | ConfigChange::Subtract { key, value } => {
                let append = matches!(change, ConfigChange::Append { .. });
                let list = list_changed(broker, &overrides, key, value, append)?;
                topic_config::validate(key, &list)?;
                overrides.insert(key.clone(), list);
            }
            ConfigChange::Delete { key } => {
                let known =
                    topic_config::describe(&crate::BrokerConfig::default(), &TopicOverrides::new())
                        .iter()
                        .any(|c| c.key == key);
                if !known {
                    return Err(KafkaError::new(
                        ResponseError::InvalidConfig,
                        format!("unknown topic config {key:?}"),
                    ));
                }
                overrides.remove(key);
            }
        }
    }
    Ok(overrides)
}

/// A list-typed key's value after APPEND (`append`) or SUBTRACT of the comma-separated
/// `value`, as Kafka's controller computes it: from the override, else the effective value,
/// its empty items dropped; APPEND adds the items not yet present, in order, SUBTRACT
/// removes each item once. INVALID_CONFIG for a key that is not list-typed.
fn list_changed(
    broker: &crate::BrokerConfig,
    overrides: &TopicOverrides,
    key: &str,
    value: &str,
    append: bool,
) -> Result<String, KafkaError> {
    let op = if append { "APPEND" } else { "SUBTRACT" };
    if !topic_config::is_list(key) {
        return Err(KafkaError::new(
            ResponseError::InvalidConfig,
            format!("can't {op} to key {key} because its type is not LIST"),
        ));
    }
    let effective = match overrides.get(key) {
        Some(value) => value.clone(),
        None => topic_config::describe(broker, overrides)
            .into_iter()
            .find(|c| c.key == key)
            .map(|c| c.value)
            .unwrap_or_default(),
    };
    let mut list: Vec<&str> = effective.split(',').filter(|v| !v.is_empty()).collect();
    for item in value.split(',').filter(|v| !v.is_empty()) {
        match list.iter().position(|v| *v == item) {
            None if append => list.push(item),
            Some(at) if !append => {
                list.remove(at);
            }
            _ => {}
        }
    }
    Ok(list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(key: &str, value: &str) -> ConfigChange {
        ConfigChange::Set {
            key: key.into(),
            value: value.into(),
        }
    }

    #[test]
    fn set_and_delete_apply_in_order() {
        let mut current = TopicOverrides::new();
        current.insert("retention.ms".into(), "1000".into());
        let delete = ConfigChange::Delete {
            key: "retention.ms".into(),
        };
        let out = changed(
            &crate::BrokerConfig::default(),
            &current,
            &[set("segment.bytes", "1048576"), delete],
        )
        .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out["segment.bytes"], "1048576");
        let out = changed(
            &crate::BrokerConfig::default(),
            &current,
            &[set("retention.ms", "5"), set("retention.ms", "6")],
        )
        .unwrap();
        assert_eq!(out["retention.ms"], "6");
    }

    #[test]
    fn unknown_keys_and_unsupported_values_are_invalid_config() {
        let current = TopicOverrides::new();
        for change in [
            set("no.such.key", "1"),
            set("cleanup.policy", "compacted"),
            set("retention.ms", "soon"),
            ConfigChange::Delete {
                key: "no.such.key".into(),
            },
        ] {
            let err = changed(
                &crate::BrokerConfig::default(),
                &current,
                std::slice::from_ref(&change),
            )
            .unwrap_err();
            assert_eq!(err.code, ResponseError::InvalidConfig, "{change:?}");
        }
    }

    #[test]
    fn append_and_subtract_edit_a_list_from_its_effective_value() {
        let broker = crate::BrokerConfig::default();
        let list = |key: &str, value: &str, append: bool| {
            if append {
                ConfigChange::Append {
                    key: key.into(),
                    value: value.into(),
                }
            } else {
                ConfigChange::Subtract {
                    key: key.into(),
                    value: value.into(),
                }
            }
        };
        let none = TopicOverrides::new();
        let out = changed(&broker, &none, &[list("cleanup.policy", "compact", true)]).unwrap();
        assert_eq!(
            out["cleanup.policy"], "delete,compact",
            "from the broker's default"
        );
        let again = [
            list("cleanup.policy", "compact,delete", true),
            list("cleanup.policy", "delete", false),
        ];
        let out = changed(&broker, &out, &again).unwrap();
        assert_eq!(
            out["cleanup.policy"], "compact",
            "present values are not added twice"
        );
        let err = changed(&broker, &none, &[list("retention.ms", "5", true)]).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig, "not a list");
        let err = changed(&broker, &none, &[list("segment.bytes", "5", false)]).unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidConfig);
    }
}
