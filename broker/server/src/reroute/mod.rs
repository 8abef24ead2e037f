//! Produce into a topic with a partitioner plugin (`sluice.partitioner`): the plugin, not
//! the client, decides the partition of every record.
//!
//! For each partition entry of a Produce request, each record batch is decoded
//! (decompressed if needed), handed to the plugin once as a columnar batch, and split into
//! one new batch per target partition (same codec, new CRC; see `crate::records`). A batch whose
//! records all stay in the partition the client sent it to is appended unchanged (the common
//! case when the client's partitioner agrees, and the fast path). The plugin runs for every
//! batch before anything is appended, so a plugin failure appends nothing of that entry.
//!
//! What the response says for the partition the client sent to (docs/plugins.md):
//! - every record stayed there: error NONE with the real base offset, as without a plugin;
//! - some went elsewhere: error NONE, base offset -1 (Kafka's "offset unknown", as for
//!   acks=0); clients report the records delivered with offset -1;
//! - the plugin failed (trap, timeout, memory, broken contract): POLICY_VIOLATION with the
//!   plugin's error in `error_message` (Produce v8), nothing appended;
//! - an append to a target partition failed: that append's error (KAFKA_STORAGE_ERROR, ...);
//!   batches already appended to other partitions stay;
//! - in a cluster, records routed to a partition another broker leads are forwarded to
//!   that leader ([`Forward`], a `BrokerMessage::AppendRouted` on the controller listener,
//!   which appends them there without running the plugin again, and under acks=all waits
//!   for their group commit there); the client's answer waits for every forward, and a
//!   failed forward is that partition's error, naming the target and its leader (what was
//!   appended elsewhere stays, as for a failed local append). A target with no live leader
//!   refuses the entry whole (LEADER_NOT_AVAILABLE) before anything is appended.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use sluice_storage::batch::iter_batches;

use sluice_plugin_host::Registry;

use crate::error::KafkaError;
use crate::plugins::{TopicPartitioner, call_error};
use crate::records::{self, CodecError, DecompressLimit};
use crate::topics::TopicRegistry;
use crate::topics::append::{Appended, append_one};
use crate::topics::{Partition, Topic};

/// How far a produced batch may decompress before the plugin sees it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: crate::limits::REROUTE_DECOMPRESSED_BYTES_MAX,
    name: "REROUTE_DECOMPRESSED_BYTES_MAX",
};

/// What a re-routed append gives back.
pub(crate) struct Rerouted {
    /// The response for the partition the client sent to.
    pub response: Appended,
    /// Every append made here (partition and log end after it, for acks=all to wait on).
    pub appends: Vec<(Arc<Partition>, i64)>,
    /// Records for partitions other brokers lead, still to be sent there.
    pub forwards: Vec<Forward>,
}

impl Rerouted {
    /// One append, no re-routing.
    pub(crate) fn one(appended: Appended) -> Self {
        let appends = vec![(Arc::clone(&appended.partition), appended.end_offset)];
        Self {
            response: appended,
            appends,
            forwards: Vec::new(),
        }
    }
}

/// Records the plugin routed to a partition another broker leads (`BrokerMessage::AppendRouted`).
#[derive(Debug)]
pub(crate) struct Forward {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    /// The target's leader, and its epoch, as this broker's image has them.
    pub leader: i32,
    pub leader_epoch: i32,
    /// Batches without producer ids (`records::encode_renumbered`).
    pub records: Bytes,
}

/// Appends one partition entry of a Produce request through the topic's partitioner.
pub(crate) fn append(
    (topics, plugins): (&TopicRegistry, &Registry),
    topic: &Topic,
    partitioner: &TopicPartitioner,
    index: i32,
    records: Option<Bytes>,
) -> Result<Rerouted, KafkaError> {
    let name = &topic.name;
    let partition_count = topic.partitions.len() as u32;
    let Some(sent_partition) = usize::try_from(index)
        .ok()
        .and_then(|i| topic.partitions.get(i))
    else {
        return Err(KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown partition {name}-{index}"),
        ));
    };
    let records = records
        .filter(|r| !r.is_empty())
        .ok_or_else(|| KafkaError::new(ResponseError::CorruptMessage, "no records"))?;
    let plan = route(
        plugins,
        topic,
        partitioner,
        index as u32,
        partition_count,
        &records,
    )?;
    // The client sent to this partition's leader. Before anything is appended, every other
    // target must have a live leader: here, or another broker the records are forwarded to.
    sent_partition.check_leader()?;
    let remote = remote_leaders(topic, index, plan.keys().copied())?;
    let stayed = plan.keys().all(|&t| t == index as u32);
    let mut sent = None;
    let mut appends = Vec::with_capacity(plan.len());
    let mut forwards = Vec::with_capacity(remote.len());
    for (target, bytes) in plan {
        if let Some(&(leader, leader_epoch)) = remote.get(&target) {
            forwards.push(Forward {
                topic: name.clone(),
                topic_id: topic.id,
                partition: target as i32,
                leader,
                leader_epoch,
                records: bytes,
            });
            continue;
        }
        let appended = append_one(topics, name, target as i32, Some(bytes), None)?;
        appends.push((Arc::clone(&appended.partition), appended.end_offset));
        if target == index as u32 {
            sent = Some(appended);
        }
    }
    let response = match sent {
        Some(appended) if stayed => appended,
        _ => Appended {
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
            partition: Arc::clone(sent_partition),
            end_offset: -1,
        },
    };
    Ok(Rerouted {
        response,
        appends,
        forwards,
    })
}

/// The targets another broker leads (their leader and its epoch); LEADER_NOT_AVAILABLE when
/// a target has no live leader, before anything is appended.
fn remote_leaders(
    topic: &Topic,
    index: i32,
    targets: impl Iterator<Item = u32>,
) -> Result<BTreeMap<u32, (i32, i32)>, KafkaError> {
    let name = &topic.name;
    let mut remote = BTreeMap::new();
    for target in targets {
        let Some(placement) = topic
            .partitions
            .get(target as usize)
            .and_then(|p| p.placement())
        else {
            continue;
        };
        if placement.here {
            continue;
        }
        if placement.leader < 0 {
            return Err(KafkaError::new(
                ResponseError::LeaderNotAvailable,
                format!(
                    "the partitioner plugin routed records of {name}-{index} to {name}-{target}, which has no live leader \
                     (nothing was appended)"
                ),
            ));
        }
        remote.insert(target, (placement.leader, placement.leader_epoch));
    }
    Ok(remote)
}

/// Runs the plugin on every batch and returns the bytes to append per target partition.
/// When every record stays, the plan is the request's own buffer (no copy).
fn route(
    plugins: &Registry,
    topic: &Topic,
    partitioner: &TopicPartitioner,
    sent: u32,
    partition_count: u32,
    records: &Bytes,
) -> Result<BTreeMap<u32, Bytes>, KafkaError> {
    let handle = partitioner.handle(plugins)?;
    let invalid = |e: CodecError| records::kafka_error(&topic.name, sent, e);
    let mut plan: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    // Bytes of the leading batches whose records all stay: appended as they are.
    let mut stayed_bytes = 0;
    // The thread's columns, kept between requests (no allocation and page faults per request).
    records::with_columns(|columns| {
        for item in iter_batches(records) {
            let (header, bytes) = item.map_err(|e| invalid(CodecError::Invalid(e)))?;
            if header.is_transactional() || header.is_control() {
                return Err(invalid(CodecError::Transactional));
            }
            columns.clear();
            let decoded = records::decode(bytes, columns, DECOMPRESS_LIMIT).map_err(invalid)?;
            let targets = handle.partition(columns, partition_count);
            let placed = targets.as_ref().ok().map(Vec::len);
            partitioner.stats.record(decoded.len(), placed);
            let targets = targets.map_err(|e| call_error(&topic.name, "partitioner", &e))?;
            debug_assert_eq!(targets.len(), decoded.len());
            if targets.iter().all(|&t| t == sent) {
                if plan.is_empty() {
                    stayed_bytes += bytes.len();
                } else {
                    plan.entry(sent).or_default().extend_from_slice(bytes);
                }
                continue;
            }
            if plan.is_empty() && stayed_bytes > 0 {
                plan.insert(sent, records[..stayed_bytes].to_vec());
            }
            let mut by_target: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for (i, &t) in targets.iter().enumerate() {
                by_target.entry(t).or_default().push(i as u32);
            }
            for (t, indices) in by_target {
                let batch = records::encode_renumbered(&decoded, &indices).map_err(invalid)?;
                plan.entry(t).or_default().extend_from_slice(&batch);
            }
        }
        Ok::<_, KafkaError>(())
    })?;
    if plan.is_empty() {
        return Ok(BTreeMap::from([(sent, records.slice(..stayed_bytes))]));
    }
    Ok(plan.into_iter().map(|(t, b)| (t, Bytes::from(b))).collect())
}

/// The leader's side of a [`Forward`] (`BrokerMessage::AppendRouted` from another broker):
/// the batches are checked as a client's would be (they crossed a network), appended as
/// they are if this broker leads the partition at the sender's epoch, and with `durable`
/// the answer waits for their group commit. Answers Kafka's error code (0: appended).
pub(crate) async fn append_forwarded(
    topics: &Arc<TopicRegistry>,
    forward: Forward,
    durable: bool,
) -> i16 {
    match append_forwarded_inner(topics, forward, durable).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::debug!(code = ?e.code, message = %e.message, "a forwarded re-routed append refused");
            e.code.code()
        }
    }
}

async fn append_forwarded_inner(
    topics: &Arc<TopicRegistry>,
    forward: Forward,
    durable: bool,
) -> Result<(), KafkaError> {
    let Forward {
        topic: name,
        topic_id,
        partition: index,
        leader_epoch,
        records,
        ..
    } = forward;
    let topic = topics
        .topic(&name)
        .filter(|t| t.id == topic_id)
        .ok_or_else(|| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("no topic {name} with id {topic_id} here"),
            )
        })?;
    let partition = topic
        .partitions
        .get(usize::try_from(index).unwrap_or(usize::MAX))
        .ok_or_else(|| {
            KafkaError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("unknown partition {name}-{index}"),
            )
        })?;
    partition.check_leader()?;
    partition.check_leader_epoch(leader_epoch).map_err(|code| {
        KafkaError::new(code, format!("{name}-{index}: leader epoch {leader_epoch}"))
    })?;
    let compacted =
        crate::topic_config::cleanup_policy(topics.config(), &topic.overrides).compacts();
    crate::records::validate::produced(&records, compacted)?;
    if iter_batches(&records).any(|b| b.map_or(true, |(h, _)| h.producer_id >= 0)) {
        return Err(KafkaError::new(
            ResponseError::InvalidRecord,
            "re-routed batches carry no producer id",
        ));
    }
    let appended = {
        let topics = Arc::clone(topics);
        tokio::task::spawn_blocking(move || append_one(&topics, &name, index, Some(records), None))
            .await
            .map_err(|e| KafkaError::new(ResponseError::UnknownServerError, e.to_string()))??
    };
    if durable {
        crate::topics::group_commit::wait_durable(&appended.partition, appended.end_offset).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::Broker;
    use crate::config::BrokerConfig;
    use crate::topic_config::TopicOverrides;
    use crate::topics::Placement;
    use sluice_storage::testing::{build_value_batch, set_producer};

    /// A forward from another broker is taken only for a partition led here, of the topic
    /// it names by id, at the sender's epoch, and only as batches without producer ids;
    /// each refusal names its reason and appends nothing.
    #[tokio::test]
    async fn a_forwarded_append_is_taken_only_by_the_current_leader() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_owned(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let topics = &broker.topics;
        let topic = topics.create_topic("t", 2, TopicOverrides::new()).unwrap();
        let place = |p: usize, here: bool, leader: i32| {
            topic.partitions[p].set_placement(Placement {
                leader,
                leader_epoch: 3,
                replicas: vec![leader],
                isr: vec![leader],
                here,
            });
        };
        place(0, true, 1);
        place(1, false, 2);
        let forward = |partition: i32, id: uuid::Uuid, epoch: i32, records: Vec<u8>| Forward {
            topic: "t".into(),
            topic_id: id,
            partition,
            leader: 1,
            leader_epoch: epoch,
            records: records.into(),
        };
        let plain = || build_value_batch(2, 8, 7, 1_000);
        let mut idempotent = plain();
        set_producer(&mut idempotent, 7, 0, 0, false);
        let refused = [
            (
                forward(0, uuid::Uuid::nil(), 3, plain()),
                ResponseError::UnknownTopicOrPartition,
            ),
            (
                forward(1, topic.id, 3, plain()),
                ResponseError::NotLeaderOrFollower,
            ),
            (
                forward(0, topic.id, 2, plain()),
                ResponseError::FencedLeaderEpoch,
            ),
            (
                forward(0, topic.id, 3, idempotent),
                ResponseError::InvalidRecord,
            ),
            (
                forward(0, topic.id, 3, vec![1, 2, 3]),
                ResponseError::CorruptMessage,
            ),
        ];
        for (f, expected) in refused {
            let what = format!("{}-{} epoch {}", f.topic_id, f.partition, f.leader_epoch);
            assert_eq!(
                append_forwarded(topics, f, true).await,
                expected.code(),
                "{what}"
            );
        }
        let end = |p: usize| {
            topic.partitions[p]
                .with_log(|l| l.log_end_offset().value())
                .unwrap()
        };
        assert_eq!((end(0), end(1)), (0, 0), "nothing appended by a refusal");
        assert_eq!(
            append_forwarded(topics, forward(0, topic.id, 3, plain()), true).await,
            0
        );
        assert_eq!(end(0), 2);
    }
}
