//! Where a transform's runners run, and where their state is read: as Redpanda places its
//! data transforms, a source partition's runner runs on the broker that leads the partition
//! (`Placement::here`, from the metadata image). The service starts a runner for each
//! partition led here and stops (committing first) one whose partition is led elsewhere now;
//! the new leader's runner fences it (InitProducerId) and resumes from the committed
//! position. So when leadership moves (a broker returning today; failover with replication)
//! the runner follows it, and nothing here depends on why it moved.
//!
//! `describe` and `list` in a cluster ask every live broker for its runners' state and keep,
//! for each source partition, the report of the broker leading it ([`merge`]); a partition
//! whose leader is down, or did not answer, is shown `unavailable`.

use std::collections::{BTreeMap, BTreeSet};

use sluice_transform::State;

use super::{PartitionReport, UNAUTHORIZED};
use crate::broker::Broker;

/// The state of a partition whose runner could not be asked: its leader is down or did not
/// answer (a cluster).
pub const UNAVAILABLE: &str = "unavailable";

/// Whether this broker runs `topic`-`index`'s runner: on a single node always; in a cluster
/// when the image has placed the partition here (not before the image is applied).
pub fn runs_here(broker: &Broker, topic: &str, index: usize) -> bool {
    if broker.kraft().is_none() {
        return true;
    }
    let index = i32::try_from(index).unwrap_or(i32::MAX);
    broker
        .topics
        .partition(topic, index)
        .and_then(|p| p.placement())
        .is_some_and(|p| p.here)
}

/// The runners to start and to stop.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Partitions led here without a runner.
    pub start: Vec<u32>,
    /// Runners whose partition is not led here (or no longer exists).
    pub stop: Vec<u32>,
}

/// What to start and stop, given whether each source partition is led here and the
/// partitions that have a runner here.
pub fn plan(led_here: &[bool], running: &BTreeSet<u32>) -> Plan {
    let mut plan = Plan::default();
    for (index, &here) in led_here.iter().enumerate() {
        let partition = u32::try_from(index).unwrap_or(u32::MAX);
        match (here, running.contains(&partition)) {
            (true, false) => plan.start.push(partition),
            (false, true) => plan.stop.push(partition),
            _ => {}
        }
    }
    plan.stop.extend(
        running
            .iter()
            .copied()
            .filter(|&p| usize::try_from(p).is_ok_and(|p| p >= led_here.len())),
    );
    plan
}

/// Each source partition's report, from the broker that leads it (`leaders[p]`, `None`
/// without a live leader) among the brokers that answered (`answers`: node id to the
/// reports of its runners); a partition without one is `unavailable` (its leader is down or
/// did not answer) or `starting` (its leader answered but runs no runner yet).
pub fn merge(
    outputs: &[String],
    leaders: &[Option<i32>],
    answers: &BTreeMap<i32, Vec<PartitionReport>>,
) -> Vec<PartitionReport> {
    leaders
        .iter()
        .enumerate()
        .map(|(index, leader)| {
            let partition = u32::try_from(index).unwrap_or(u32::MAX);
            let answered = leader.and_then(|node| answers.get(&node));
            let found =
                answered.and_then(|reports| reports.iter().find(|r| r.partition == partition));
            match (found, answered) {
                (Some(report), _) => PartitionReport {
                    broker: *leader,
                    ..report.clone()
                },
                (None, Some(_)) => placeholder(outputs, partition, State::Starting.as_str()),
                (None, None) => placeholder(outputs, partition, UNAVAILABLE),
            }
        })
        .collect()
}

/// A partition no runner reported on.
fn placeholder(outputs: &[String], partition: u32, state: &str) -> PartitionReport {
    PartitionReport {
        partition,
        broker: None,
        state: state.to_owned(),
        position: -1,
        log_start_offset: -1,
        last_stable_offset: -1,
        log_end_offset: -1,
        lag: 0,
        records_in: 0,
        records_out: outputs.iter().map(|o| (o.clone(), 0)).collect(),
        records_skipped: 0,
        records_dead_lettered: 0,
        records_lost_to_retention: 0,
        transactions: 0,
        aborts: 0,
        last_commit_ms: None,
        producer_id: -1,
        producer_epoch: -1,
        plugin_sha256: String::new(),
        last_error: None,
        waiting_on_transaction: None,
    }
}

/// A transform's `state`, `reason` and `lag` from its partitions (the API's rules:
/// `paused`; else `unauthorized` if any partition is; else `failed` if any is; else
/// `running`). `reason` names the first such partition's last error.
pub fn summarize(
    paused: bool,
    partitions: &[PartitionReport],
) -> (&'static str, Option<String>, i64) {
    let lag = partitions.iter().map(|p| p.lag).sum();
    let why = |state: &str| {
        partitions
            .iter()
            .find(|p| p.state == state)
            .map(|p| p.last_error.as_ref().map(|e| e.message.clone()))
    };
    if paused {
        return ("paused", None, lag);
    }
    if let Some(reason) = why(UNAUTHORIZED) {
        return (UNAUTHORIZED, reason, lag);
    }
    if let Some(reason) = why(State::Failed.as_str()) {
        return ("failed", reason, lag);
    }
    ("running", None, lag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transforms::ErrorReport;

    fn outputs() -> Vec<String> {
        vec!["out".to_owned()]
    }

    fn report(partition: u32, state: &str, lag: i64) -> PartitionReport {
        PartitionReport {
            state: state.to_owned(),
            lag,
            ..placeholder(&outputs(), partition, state)
        }
    }

    #[test]
    fn runners_start_where_partitions_are_led_and_stop_where_they_are_not() {
        let running = BTreeSet::from([0, 1, 5]);
        let plan = plan(&[true, false, true], &running);
        assert_eq!(plan.start, vec![2]);
        // 1 is led elsewhere now; 5 is past the partitions.
        assert_eq!(plan.stop, vec![1, 5]);
        // Nothing moves when every runner is where its partition is led.
        assert_eq!(
            super::plan(&[true, false], &BTreeSet::from([0])),
            Plan::default()
        );
    }

    #[test]
    fn each_partition_is_reported_by_its_leader_or_marked() {
        let answers = BTreeMap::from([
            // Broker 1 still reports partition 1 (moving away); broker 2 leads it now.
            (1, vec![report(0, "running", 3), report(1, "running", 99)]),
            (2, vec![report(1, "failed", 4)]),
            (3, vec![]),
        ]);
        let merged = merge(&outputs(), &[Some(1), Some(2), Some(3), None], &answers);
        let states: Vec<&str> = merged.iter().map(|p| p.state.as_str()).collect();
        assert_eq!(states, ["running", "failed", "starting", UNAVAILABLE]);
        assert_eq!(
            merged[1].lag, 4,
            "the leader's report, not the old runner's"
        );
        assert_eq!(merged[1].broker, Some(2));
        assert_eq!(merged[3].broker, None);
        assert_eq!(
            merged.iter().map(|p| p.partition).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        // A leader that did not answer leaves its partition unavailable.
        let merged = merge(&outputs(), &[Some(4)], &answers);
        assert_eq!(merged[0].state, UNAVAILABLE);
    }

    #[test]
    fn the_transform_state_follows_its_partitions() {
        let mut failed = report(1, "failed", 2);
        failed.last_error = Some(ErrorReport {
            kind: "trap".to_owned(),
            message: "boom".to_owned(),
            offset: Some(7),
            at_ms: 1,
        });
        let partitions = vec![report(0, "running", 5), failed];
        assert_eq!(
            summarize(false, &partitions),
            ("failed", Some("boom".to_owned()), 7)
        );
        assert_eq!(summarize(true, &partitions), ("paused", None, 7));
        let healthy = vec![report(0, "running", 1), report(1, UNAVAILABLE, 0)];
        assert_eq!(summarize(false, &healthy), ("running", None, 1));
    }
}
