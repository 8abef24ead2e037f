//! Growing a live topic (CreatePartitions, `sluice topic add-partitions`): checked here,
//! then a `PartitionsAdded` change (`change.rs`): the new partitions' logs are created
//! first, then topic.json names the new count (the commit point), then the grown topic is
//! swapped into the registry and into the views that read it. A crash before topic.json leaves the old count (the extra directories hold empty logs
//! and are reset the next time the topic grows); after it, the new one.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_storage::Log;
use sluice_storage::io as storage_io;

use super::{Applied, Partition, Topic, TopicChange, TopicRegistry};
use crate::error::KafkaError;
use crate::{limits, topic_config};

impl TopicRegistry {
    /// Grows `name` to `count` partitions; with `validate_only` only checks. Kafka's
    /// errors: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (not more than now, or past
    /// `PARTITIONS_PER_TOPIC_MAX`), POLICY_VIOLATION (`sluice.partitions.max`),
    /// KAFKA_STORAGE_ERROR (an offline topic, or a failed write).
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<Arc<Topic>, KafkaError> {
        let admin = self.admin_lock();
        let topic = self.changeable_topic(name)?;
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if count <= current {
            return Err(KafkaError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "topic {name:?} has {current} partitions, which is not fewer than the requested {count}"
                ),
            ));
        }
        if count > limits::PARTITIONS_PER_TOPIC_MAX {
            return Err(KafkaError::new(
                ResponseError::InvalidPartitions,
                format!(
                    "{count} partitions is past PARTITIONS_PER_TOPIC_MAX ({})",
                    limits::PARTITIONS_PER_TOPIC_MAX
                ),
            ));
        }
        self.check_partition_budget(count - current)?;
        if validate_only {
            return Ok(topic);
        }
        let change = TopicChange::PartitionsAdded {
            name: name.to_owned(),
            partitions: count,
        };
        self.commit_decided(admin, change).map(Applied::into_topic)
    }

    /// A fresh, empty log for partition `index` of `topic` (a directory left by an
    /// interrupted earlier attempt is removed first: nothing was ever visible in it).
    pub(super) fn open_new_partition(
        &self,
        topic: &Topic,
        index: i32,
    ) -> Result<Partition, KafkaError> {
        let dir = self.topic_dir(&topic.name).join(index.to_string());
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            tracing::error!(topic = topic.name, partition = index, error = %e, "{what} failed");
            KafkaError::new(
                ResponseError::KafkaStorageError,
                format!("{what} {}: {e}", dir.display()),
            )
        };
        if dir.exists() {
            storage_io::remove_dir_durable(&sluice_storage::RealFs, &dir)
                .map_err(|e| failed("removing the stale", &e))?;
        }
        let log_config = topic_config::log_config(&self.config, &topic.overrides);
        let log = Log::open_shared(
            self.fs.clone(),
            &self.segment_files,
            &dir,
            log_config,
            self.now_ms(),
        )
        .map_err(|e| failed("creating", &e))?;
        Ok(Partition::new(&topic.name, index, log))
    }
}
