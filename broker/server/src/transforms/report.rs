//! What `describe`, `list` and `/metrics` show of a transform: the spec, and per source
//! partition its runner's state, position, lag and counters (docs/transforms.md, "Status").
//! Partition reports cross brokers as JSON in a cluster (`placement.rs` merges them).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_transform::{OnError, Partitioning, State, TransformSpec};

use super::runner::Shared;
use crate::broker::Broker;

/// A transform as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TransformReport {
    pub name: String,
    pub source: String,
    pub plugin: String,
    pub params: BTreeMap<String, String>,
    pub outputs: Vec<String>,
    pub dead_letter_topic: Option<String>,
    pub on_error: OnError,
    pub partitioning: Partitioning,
    /// The partitioner plugin placing every output record, if any.
    pub partitioner: Option<String>,
    pub partitioner_params: BTreeMap<String, String>,
    pub commit_interval_ms: i64,
    pub from_offset: String,
    pub start_offsets: Vec<i64>,
    pub paused: bool,
    pub generation: u32,
    pub principal: String,
    pub created_ms: i64,
    /// The group holding the source positions (`sluice group describe` shows its lag too).
    pub group: String,
    /// `running`, `paused`, `unauthorized` (the owner lacks a right: `reason` names it) or
    /// `failed` (any partition failed).
    pub state: &'static str,
    /// Why the transform is `unauthorized` or `failed`: a partition's last error.
    pub reason: Option<String>,
    /// Records of the source not yet through the transform, over every partition.
    pub lag: i64,
    pub partitions: Vec<PartitionReport>,
}

/// One source partition of a transform.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionReport {
    pub partition: u32,
    /// In a cluster, the broker whose runner this is (the partition's leader); absent on a
    /// single node and for a partition no runner reported on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<i32>,
    pub state: String,
    /// The committed source position, -1 before the runner read it.
    pub position: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
    pub log_end_offset: i64,
    /// Records below the source's last stable offset not yet committed through the
    /// transform: what a read_committed consumer of the source would call lag.
    pub lag: i64,
    pub records_in: u64,
    pub records_out: BTreeMap<String, u64>,
    pub records_skipped: u64,
    pub records_dead_lettered: u64,
    pub records_lost_to_retention: u64,
    pub transactions: u64,
    pub aborts: u64,
    pub last_commit_ms: Option<i64>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub plugin_sha256: String,
    pub last_error: Option<ErrorReport>,
    /// The open transaction in the source that the runner waits on: everything below the
    /// last stable offset is through, and records above it wait for the transaction's
    /// marker (`lag` does not count them). `None` when the runner is not held back.
    pub waiting_on_transaction: Option<WaitReport>,
}

/// An open transaction holding a runner back (`sluice_transform::Held`, while it still
/// holds the source's last stable offset).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WaitReport {
    /// The producer whose transaction is open.
    pub producer_id: i64,
    /// Its first offset: the source's last stable offset.
    pub since_offset: i64,
    /// When the runner began waiting on it, ms since the Unix epoch.
    pub since_ms: i64,
    /// How long it has waited, in milliseconds.
    pub waiting_ms: i64,
    /// Records after its first offset, held back until its marker.
    pub records_held: i64,
}

/// The last error of a partition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorReport {
    pub kind: String,
    pub message: String,
    pub offset: Option<i64>,
    pub at_ms: i64,
}

/// The state of a partition whose owner lacks a right it needs (`rights::may_run`).
pub(super) const UNAUTHORIZED: &str = "unauthorized";

/// A partition's state: the machine's, or `unauthorized` while the owner lacks a right (the
/// machine then fails, or commits what it holds first).
fn partition_state(state: State, unauthorized: bool) -> &'static str {
    match state {
        State::Paused | State::Stopped => state.as_str(),
        _ if unauthorized => UNAUTHORIZED,
        _ => state.as_str(),
    }
}

/// A source partition's log start, last stable and log end offsets (-1 each if it is gone).
fn source_offsets(broker: &Broker, topic: &str, index: i32) -> (i64, i64, i64) {
    broker
        .topics
        .partition(topic, index)
        .and_then(|p| {
            let hw = p.high_watermark();
            p.with_log(|log| {
                let end = log.log_end_offset().value();
                let stable = log.last_stable_offset().value();
                (
                    log.log_start_offset().value(),
                    hw.map_or(stable, |hw| stable.min(hw)),
                    hw.map_or(end, |hw| end.min(hw)),
                )
            })
            .ok()
        })
        .unwrap_or((-1, -1, -1))
}

pub(super) fn partition_report(
    broker: &Broker,
    spec: &TransformSpec,
    shared: &Shared,
) -> PartitionReport {
    let status = shared.status();
    let unauthorized = shared.unauthorized().is_some();
    let index = i32::try_from(shared.partition).unwrap_or(i32::MAX);
    let (start, lso, end) = source_offsets(broker, &spec.source, index);
    let committed_at_start = *shared
        .committed_at_start
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let position = status.position.or(committed_at_start).unwrap_or(-1);
    let from = status
        .position
        .or(committed_at_start)
        .or_else(|| spec.start_offset(shared.partition))
        .unwrap_or(start);
    let producer = status.producer;
    let running = status.state == State::Running;
    let waiting_on_transaction = status
        .held
        .filter(|h| running && h.first_offset == lso && lso < end)
        .map(|h| WaitReport {
            producer_id: h.producer_id,
            since_offset: h.first_offset,
            since_ms: h.since_ms,
            waiting_ms: broker.now_ms().saturating_sub(h.since_ms).max(0),
            records_held: end - lso,
        });
    PartitionReport {
        partition: shared.partition,
        broker: None,
        state: partition_state(status.state, unauthorized).to_owned(),
        position,
        log_start_offset: start,
        last_stable_offset: lso,
        log_end_offset: end,
        lag: (lso - from.max(start)).max(0),
        records_in: status.records_in,
        records_out: spec
            .outputs
            .iter()
            .cloned()
            .zip(
                status
                    .records_out
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(0)),
            )
            .collect(),
        records_skipped: status.records_skipped,
        records_dead_lettered: status.records_dead_lettered,
        records_lost_to_retention: status.records_lost_to_retention,
        transactions: status.transactions,
        aborts: status.aborts,
        last_commit_ms: status.last_commit_ms,
        producer_id: producer.map_or(-1, |p| p.producer_id),
        producer_epoch: producer.map_or(-1, |p| p.producer_epoch),
        plugin_sha256: shared
            .plugin_sha256
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
        last_error: status.last_error.map(|e| ErrorReport {
            kind: e.kind.to_owned(),
            message: e.message,
            offset: e.offset,
            at_ms: e.at_ms,
        }),
        waiting_on_transaction,
    }
}

/// Whether the report shows every partition caught up (for tests and tools).
impl TransformReport {
    pub fn running(&self) -> bool {
        self.partitions
            .iter()
            .all(|p| p.state == State::Running.as_str())
    }
}
