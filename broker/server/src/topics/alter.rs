//! Changing a live topic's config overrides (IncrementalAlterConfigs and the admin API): the
//! new overrides are validated as a whole and become a `ConfigAltered` change (`change.rs`:
//! persisted in topic.json, the commit point, then applied to every open partition's log
//! and swapped into the registry).

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{Applied, Recorded, Topic, TopicChange, TopicRegistry};
use crate::error::KafkaError;
use crate::topic_config::{self, TopicOverrides};

/// One change to a topic's overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    /// Override `key` with `value`.
    Set { key: String, value: String },
    /// Drop the override of `key` (back to the broker's value).
    Delete { key: String },
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
        let _admin = self
            .admin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let topic = self.changeable_topic(name)?;
        let configs = changed(&topic.overrides, changes)?;
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
        self.apply_locked(change, Recorded::InFiles)
            .map(Applied::into_topic)
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
        let out = changed(&current, &[set("segment.bytes", "1048576"), delete]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out["segment.bytes"], "1048576");
        let out = changed(
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
            let err = changed(&current, std::slice::from_ref(&change)).unwrap_err();
            assert_eq!(err.code, ResponseError::InvalidConfig, "{change:?}");
        }
    }
}
