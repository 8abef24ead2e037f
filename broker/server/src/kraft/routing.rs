//! Where a client goes, from the image: the live brokers as a listener advertises them
//! (Metadata, DescribeCluster), and the coordinator of a group or a transactional id.
//!
//! A coordinator is placed as Kafka places it: the leader of partition
//! `abs(javaHashCode(key)) % n` of `__consumer_offsets` (groups) or `__transaction_state`
//! (transactional ids), `n` their partition counts. Those two topics exist in the image
//! only, for this placement (created by the first FindCoordinator that needs one, as Kafka
//! auto-creates them); the coordinators keep their state in Sluice's own logs on the broker
//! that leads the partition. A coordinator partition without a leader (its broker is down:
//! replication factor 1) is COORDINATOR_NOT_AVAILABLE until the broker returns.

use kafka_protocol::ResponseError;
use sluice_cluster::MetadataImage;

use super::Kraft;
use crate::cluster::{ControllerOp, ControllerReply, TopicSpec};
use crate::error::KafkaError;
use crate::topic_name::{OFFSETS_TOPIC, TRANSACTION_TOPIC};

/// A live broker as one listener advertises it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// What a coordinator coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorKind {
    /// A consumer group (`__consumer_offsets`).
    Group,
    /// A transactional id (`__transaction_state`).
    Transaction,
}

impl CoordinatorKind {
    /// The internal topic whose partition leaders coordinate.
    pub const fn topic(self) -> &'static str {
        match self {
            Self::Group => OFFSETS_TOPIC,
            Self::Transaction => TRANSACTION_TOPIC,
        }
    }
}

/// A key's coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordinator {
    /// Its node id.
    pub node_id: i32,
    /// Its partition of the internal topic.
    pub partition: i32,
}

/// Java's `String.hashCode` (over UTF-16 code units), which Kafka's placement uses.
pub fn java_hash(key: &str) -> i32 {
    key.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs(hash) % partitions`.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    (java_hash(key) & 0x7fff_ffff) % partitions.max(1)
}

impl Kraft {
    /// The live (registered, unfenced, not shutting down) brokers as `listener` advertises
    /// them, by node id. A broker without that listener is left out (as Kafka does).
    pub fn live_brokers(&self, listener: &str) -> Vec<LiveBroker> {
        live_brokers(&self.image(), listener)
    }

    /// The node that coordinates `key` now, if its partition has a live leader.
    pub fn coordinator_node(&self, kind: CoordinatorKind, key: &str) -> Option<i32> {
        coordinator_in(&self.image(), kind, key)
            .ok()
            .map(|c| c.node_id)
    }

    /// Whether this broker coordinates `key` now (NOT_COORDINATOR otherwise).
    pub fn coordinates(&self, kind: CoordinatorKind, key: &str) -> bool {
        coordinator_in(&self.image(), kind, key).is_ok_and(|c| c.node_id == self.node_id)
    }

    /// The coordinator of `key`, creating the internal topic's placement first if the
    /// cluster has none yet.
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE (no leader, or the creation failed).
    pub async fn find_coordinator(
        &self,
        kind: CoordinatorKind,
        key: &str,
    ) -> Result<Coordinator, KafkaError> {
        if self.image().topic_by_name(kind.topic()).is_none() {
            let spec = TopicSpec {
                name: kind.topic().to_owned(),
                num_partitions: self.internal_partitions(kind),
                replication_factor: 1,
                configs: Vec::new(),
                topic_id: None,
                assignments: None,
            };
            match self.submit(ControllerOp::CreateTopics(vec![spec])).await {
                Ok(ControllerReply::Topics(answers)) => {
                    if let Some((_, Err(e))) = answers.first()
                        && e.code != ResponseError::TopicAlreadyExists.code()
                    {
                        tracing::warn!(topic = kind.topic(), error = %e, "creating the coordinators' placement failed");
                    }
                }
                Ok(other) => tracing::error!(?other, "unexpected answer to CreateTopics"),
                Err(e) => {
                    return Err(KafkaError::new(
                        ResponseError::CoordinatorNotAvailable,
                        format!("creating {}'s placement: {e}", kind.topic()),
                    ));
                }
            }
        }
        coordinator_in(&self.image(), kind, key)
    }
}

/// The live brokers of `image` as `listener` advertises them.
pub fn live_brokers(image: &MetadataImage, listener: &str) -> Vec<LiveBroker> {
    image
        .brokers()
        .iter()
        .filter(|(_, b)| b.is_active())
        .filter_map(|(&node_id, b)| {
            let l = b
                .registration
                .listeners
                .iter()
                .find(|l| l.name == listener)?;
            Some(LiveBroker {
                node_id,
                host: l.host.clone(),
                port: l.port,
                rack: b.registration.rack.clone(),
            })
        })
        .collect()
}

/// `key`'s coordinator in `image`.
fn coordinator_in(
    image: &MetadataImage,
    kind: CoordinatorKind,
    key: &str,
) -> Result<Coordinator, KafkaError> {
    let not_available = |why: String| KafkaError::new(ResponseError::CoordinatorNotAvailable, why);
    let topic = image
        .topic_by_name(kind.topic())
        .ok_or_else(|| not_available(format!("{} has no placement yet", kind.topic())))?;
    let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    let partition = partition_for(key, count);
    let state = topic
        .partitions
        .get(&partition)
        .ok_or_else(|| not_available(format!("{}-{partition} is missing", kind.topic())))?;
    if state.leader < 0 || !image.is_active(state.leader) {
        return Err(not_available(format!(
            "{}-{partition} has no live leader (replicas {:?})",
            kind.topic(),
            state.replicas
        )));
    }
    Ok(Coordinator {
        node_id: state.leader,
        partition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_javas_string_hash_code() {
        // Values from Java's "...".hashCode().
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("my-group"), -1_906_497_762);
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn placement_is_kafkas_abs_mod() {
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("my-group", 50), 36);
    }
}
