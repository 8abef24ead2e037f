//! Changing a live topic's config overrides (IncrementalAlterConfigs and the admin API): the
//! new overrides are validated as a whole, persisted in topic.json (the commit point), applied
//! to every open partition's log, and swapped into the registry.

use std::sync::Arc;

use kafka_protocol::ResponseError;

use super::{TOPIC_FILE, Topic, TopicFile, TopicRegistry};
use crate::error::KafkaError;
use crate::files::write_durable;
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
        let overrides = changed(&topic.overrides, changes)?;
        topic_config::validate_all(&self.config, &overrides)?;
        let plugins = topic
            .plugins
            .rebind(&self.plugins, &topic.overrides, &overrides)?;
        if validate_only {
            return Ok(topic);
        }
        self.persist(&topic, topic.partitions.len(), &overrides)?;
        let log_config = topic_config::log_config(&self.config, &overrides);
        for partition in &topic.partitions {
            // A closed partition (broker shutting down) picks the config up at the next open.
            if let Ok(Err(e)) = partition.with_log(|log| log.try_set_config(log_config.clone())) {
                tracing::error!(topic = name, partition = partition.index, error = %e, "validated config refused by the log");
            }
        }
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            overrides,
            partitions: topic.partitions.clone(),
            plugins,
            offline: None,
        });
        self.topics_write().insert(name.to_owned(), altered.clone());
        tracing::info!(topic = name, overrides = ?altered.overrides, "altered topic config");
        Ok(altered)
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

    /// Writes topic.json, the commit point of a topic change, through the durable-write path.
    pub(super) fn persist(
        &self,
        topic: &Topic,
        partitions: usize,
        overrides: &TopicOverrides,
    ) -> Result<(), KafkaError> {
        let name = topic.name.as_str();
        let meta = TopicFile {
            name: name.to_owned(),
            partitions: partitions as i32,
            configs: overrides.clone(),
            topic_id: Some(topic.id.to_string()),
        };
        let path = self.topic_dir(name).join(TOPIC_FILE);
        serde_json::to_string_pretty(&meta)
            .map_err(std::io::Error::other)
            .and_then(|text| write_durable(&path, text.as_bytes()))
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::KafkaStorageError,
                    format!("writing {}: {e}", path.display()),
                )
            })
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
