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
//! - in a cluster, a record routed to a partition another broker leads: POLICY_VIOLATION
//!   naming it, nothing appended (forwarding between brokers is not built yet).

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

/// What a re-routed append gives back: the response for the partition the client sent to,
/// and every append made (partition and log end after it, for acks=all to wait on).
pub(crate) type Rerouted = (Appended, Vec<(Arc<Partition>, i64)>);

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
    // The client sent to this partition's leader; before anything is appended, every target
    // must be led here too: in a cluster a record routed to a partition another broker leads
    // would need forwarding, which is not built yet (and a partial append retried would
    // duplicate the rest). Refused whole, not retriable, naming the partition.
    sent_partition.check_leader()?;
    if let Some((target, leader)) = plan.keys().find_map(|&t| {
        let placement = topic.partitions.get(t as usize)?.placement()?;
        (!placement.here).then_some((t, placement.leader))
    }) {
        return Err(KafkaError::new(
            ResponseError::PolicyViolation,
            format!(
                "the partitioner plugin routed records of {name}-{index} to {name}-{target}, led by broker {leader}: \
                 forwarding re-routed records between brokers is not supported yet (nothing was appended)"
            ),
        ));
    }
    let stayed = plan.keys().all(|&t| t == index as u32);
    let mut sent = None;
    let mut appends = Vec::with_capacity(plan.len());
    for (target, bytes) in plan {
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
    Ok((response, appends))
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
