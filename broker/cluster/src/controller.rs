//! [`Controller`]: the active controller's decisions. Pure: each call takes the current
//! image and the time and returns the records to commit with the answer to give once they
//! are committed ([`Decision`]); it never changes the image itself.
//!
//! # How the server drives it
//!
//! ```text
//! becoming leader:  c = Controller::new(config, &image, now_ms, seed)
//!                   (every unfenced broker gets a fresh session: nobody is fenced for
//!                   the silence of a failover), then tick until empty (repairs a decision
//!                   a failover cut between entries)
//! each request:     d = c.<operation>(&image, now_ms, ...)?
//!                   commit d.records as one Raft entry (skip if empty; encode_batches if
//!                   a fence is too large for one), apply it to the image, then answer with
//!                   d.reply (a registration's broker epoch is the entry's index)
//! timer:            at c.next_deadline_ms(&image):
//!                   loop { records = c.tick(&image, now_ms); if empty break; commit }
//! ```
//!
//! The operations: `register_broker`, `heartbeat`, `unregister_broker`, `tick` (brokers);
//! `create_topics`, `delete_topics`, `create_partitions`, `alter_configs`,
//! `elect_preferred_leaders`, `alter_partition` (topics and partitions); `security`,
//! `put_view` / `remove_view`, `put_transform` / `remove_transform`, `put_plugin` /
//! `remove_plugin`, `allocate_producer_ids`, `set_feature_level`, and
//! `Controller::bootstrap_records` for a new cluster's first entry.
//!
//! One decision is in flight at a time: each call decides against an image that holds
//! every record this controller returned before (docs/design/cluster-brief.md §4a, "one batch in flight").
//! A decision whose entry is lost in a failover is simply not there: the new controller
//! decides again from the committed image, and the client retries.
//!
//! What is soft state here and not in the log: each broker's session deadline
//! (heartbeats never write unless the broker's state changes, as KAFKA-15019 asks).

use std::collections::{BTreeMap, BTreeSet};

use sluice_kafka::ErrorCode;
use sluice_kafka::rng::SplitMix64;

use crate::image::{MetadataImage, PartitionState};
use crate::limits;
use crate::mutants::{Mutant, mutant};
use crate::records::{MetadataRecord, PartitionChange, TopicId};

mod brokers;
mod objects;
mod placement;
mod topics;

pub use brokers::{BrokerEpoch, Heartbeat, HeartbeatReply};
pub use objects::ProducerIdBlock;
pub use topics::{AlterPartition, ConfigChange, IsrMember, NewTopic, TopicResult};

/// The controller's settings (Kafka's keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`: a broker not heard from for longer is fenced.
    pub broker_session_timeout_ms: i64,
    /// `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`: how
    /// often (ms) leadership moves back to preferred replicas; `None`: never by itself.
    pub leader_imbalance_check_interval_ms: Option<i64>,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: u32,
    /// The cluster's `unclean.leader.election.enable` (a topic's config overrides it).
    pub unclean_leader_election: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            broker_session_timeout_ms: limits::DEFAULT_BROKER_SESSION_TIMEOUT_MS,
            leader_imbalance_check_interval_ms: Some(
                limits::DEFAULT_LEADER_IMBALANCE_CHECK_INTERVAL_MS,
            ),
            leader_imbalance_per_broker_percentage:
                limits::DEFAULT_LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
            unclean_leader_election: false,
        }
    }
}

impl ControllerConfig {
    /// Checks the settings against `limits.rs`.
    ///
    /// # Errors
    /// A message naming the key and the bound.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.broker_session_timeout_ms;
        if !(limits::BROKER_SESSION_TIMEOUT_MS_MIN..=limits::BROKER_SESSION_TIMEOUT_MS_MAX)
            .contains(&t)
        {
            return Err(format!(
                "broker.session.timeout.ms = {t} is not within {}..={} \
                 (BROKER_SESSION_TIMEOUT_MS_MIN/MAX)",
                limits::BROKER_SESSION_TIMEOUT_MS_MIN,
                limits::BROKER_SESSION_TIMEOUT_MS_MAX
            ));
        }
        if self
            .leader_imbalance_check_interval_ms
            .is_some_and(|ms| ms < 1)
            || self.leader_imbalance_per_broker_percentage > 100
        {
            return Err(format!(
                "leader.imbalance.check.interval.seconds must be positive and \
                 leader.imbalance.per.broker.percentage at most 100, not {:?} and {}",
                self.leader_imbalance_check_interval_ms,
                self.leader_imbalance_per_broker_percentage
            ));
        }
        Ok(())
    }
}

/// A request the controller refuses: Kafka's code and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ControllerError {
    /// Kafka's error code for the answer.
    pub code: ErrorCode,
    /// A message for the answer's error message and the log.
    pub message: String,
}

impl ControllerError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// What a call decided: the records to commit as one Raft entry (none: nothing to
/// commit) and the answer to give once they are committed and applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision<R> {
    /// The records, in order.
    pub records: Vec<MetadataRecord>,
    /// The answer.
    pub reply: R,
}

impl<R> Decision<R> {
    const fn new(records: Vec<MetadataRecord>, reply: R) -> Self {
        Self { records, reply }
    }
}

/// The active controller (module docs).
#[derive(Debug)]
pub struct Controller {
    config: ControllerConfig,
    /// Each registered broker's session deadline, in ms: it is fenced by `tick` past it.
    /// Soft state: a new controller starts every broker at `now + timeout`.
    deadlines_ms: BTreeMap<i32, i64>,
    /// When the next automatic preferred-leader election is due (soft state).
    next_rebalance_ms: i64,
    /// Topic ids and placement starting points.
    rng: SplitMix64,
}

impl Controller {
    /// The controller of a new leader, deciding from `image` (the committed metadata).
    /// `seed` seeds topic ids and placement (the server draws it from the OS).
    ///
    /// Every unfenced broker starts with a full session (KRaft does the same after a
    /// failover: nobody is fenced for the controller's own silence). Fenced brokers start
    /// without one until they heartbeat, so a broker that shut down cleanly may come back
    /// as a new incarnation at once.
    ///
    /// # Panics
    /// If `config` is invalid (the server validates it first with
    /// [`ControllerConfig::validate`]).
    #[must_use]
    pub fn new(config: ControllerConfig, image: &MetadataImage, now_ms: i64, seed: u64) -> Self {
        if let Err(e) = config.validate() {
            panic!("an unchecked controller config: {e}");
        }
        let deadline = now_ms.saturating_add(config.broker_session_timeout_ms);
        Self {
            config,
            deadlines_ms: image
                .brokers()
                .iter()
                .filter(|(_, b)| !b.fenced)
                .map(|(&id, _)| (id, deadline))
                .collect(),
            rng: SplitMix64::new(seed),
            next_rebalance_ms: config
                .leader_imbalance_check_interval_ms
                .map_or(i64::MAX, |ms| now_ms.saturating_add(ms)),
        }
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// When `tick` next has something to do (the earliest session deadline of an unfenced
    /// broker), if ever.
    #[must_use]
    pub fn next_deadline_ms(&self, image: &MetadataImage) -> Option<i64> {
        let sessions = image
            .brokers()
            .iter()
            .filter(|(_, b)| !b.fenced)
            .filter_map(|(id, _)| self.deadlines_ms.get(id))
            .min()
            .copied();
        let rebalance = (self.next_rebalance_ms < i64::MAX).then_some(self.next_rebalance_ms);
        sessions.into_iter().chain(rebalance).min()
    }

    /// Kafka's automatic preferred-leader election, when due: for each broker with more
    /// than `leader.imbalance.per.broker.percentage` of its preferred partitions led
    /// elsewhere, those whose preferred replica is active and in the ISR move back to it.
    pub(crate) fn rebalance_if_due(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
    ) -> Vec<MetadataRecord> {
        let Some(interval) = self.config.leader_imbalance_check_interval_ms else {
            return Vec::new();
        };
        if now_ms < self.next_rebalance_ms {
            return Vec::new();
        }
        self.next_rebalance_ms = now_ms.saturating_add(interval);
        let mut preferred: BTreeMap<i32, (usize, Vec<(TopicId, i32)>)> = BTreeMap::new();
        for (topic_id, topic) in image.topics() {
            for (&partition, p) in &topic.partitions {
                let Some(&first) = p.replicas.first() else {
                    continue;
                };
                let entry = preferred.entry(first).or_default();
                entry.0 += 1;
                if p.leader != first && p.isr.contains(&first) && image.is_active(first) {
                    entry.1.push((*topic_id, partition));
                }
            }
        }
        let percent = u64::from(self.config.leader_imbalance_per_broker_percentage);
        let mut out = Vec::new();
        for (broker, (total, movable)) in preferred {
            let imbalanced = (movable.len() as u64) * 100 > percent * (total as u64);
            if !imbalanced {
                continue;
            }
            for (topic_id, partition) in movable {
                let p = &image.topics()[&topic_id].partitions[&partition];
                out.extend(change(topic_id, partition, p, broker, p.isr.clone()));
            }
        }
        out
    }

    fn touch(&mut self, node_id: i32, now_ms: i64) {
        let deadline = now_ms.saturating_add(self.config.broker_session_timeout_ms);
        self.deadlines_ms.insert(node_id, deadline);
    }

    pub(crate) fn session_valid(&self, node_id: i32, now_ms: i64) -> bool {
        self.deadlines_ms
            .get(&node_id)
            .is_some_and(|&d| d >= now_ms)
    }
}

/// Leadership and ISR membership taken from the brokers in `gone` (fenced, shutting down,
/// or replaced by a new incarnation), in one change per partition: a new leader from the
/// remaining ISR that is active and not in `avoid`, or [`crate::records::NO_LEADER`]. An
/// ISR left empty keeps its last members (no unclean election: they are the only ones with
/// every acknowledged record).
fn move_away(
    image: &MetadataImage,
    config: &ControllerConfig,
    gone: &BTreeSet<i32>,
    avoid: &BTreeSet<i32>,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for (topic_id, topic) in image.topics() {
        for (&partition, p) in &topic.partitions {
            if !gone.contains(&p.leader) && !p.isr.iter().any(|id| gone.contains(id)) {
                continue;
            }
            let mut isr: Vec<i32> = p
                .isr
                .iter()
                .copied()
                .filter(|id| !gone.contains(id))
                .collect();
            if isr.is_empty() {
                isr.clone_from(&p.isr);
            }
            let allowed = |id: i32| !gone.contains(&id) && !avoid.contains(&id);
            let mut leader = if gone.contains(&p.leader) || p.leader == crate::records::NO_LEADER {
                elect(image, p, &isr, allowed)
            } else {
                p.leader
            };
            if leader == crate::records::NO_LEADER
                && (unclean(image, config, &topic.name) || mutant(Mutant::UncleanElection))
            {
                let any = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|&id| image.is_active(id) && allowed(id));
                if let Some(id) = any {
                    (leader, isr) = (id, vec![id]);
                }
            }
            out.extend(change(*topic_id, partition, p, leader, isr));
        }
    }
    out
}

/// Leaders for the partitions without one whose ISR holds `node_id` (it was just
/// unfenced): a returning broker takes back what only it can lead. With unclean election
/// (the topic's `unclean.leader.election.enable`), it also takes a leaderless partition it
/// is only a replica of, as the ISR of its own.
fn elect_returning(
    image: &MetadataImage,
    config: &ControllerConfig,
    node_id: i32,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for (topic_id, topic) in image.topics() {
        for (&partition, p) in &topic.partitions {
            if p.leader != crate::records::NO_LEADER {
                continue;
            }
            if p.isr.contains(&node_id) {
                out.extend(change(*topic_id, partition, p, node_id, p.isr.clone()));
            } else if p.replicas.contains(&node_id)
                && !p.isr.iter().any(|&id| image.is_active(id))
                && unclean(image, config, &topic.name)
            {
                out.extend(change(*topic_id, partition, p, node_id, vec![node_id]));
            }
        }
    }
    out
}

/// Whether `topic` takes an unclean election: its `unclean.leader.election.enable`, else
/// the cluster's.
fn unclean(image: &MetadataImage, config: &ControllerConfig, topic: &str) -> bool {
    let resource = crate::records::ConfigResource {
        resource_type: crate::records::ConfigResourceType::Topic,
        name: topic.to_owned(),
    };
    image
        .configs()
        .get(&resource)
        .and_then(|c| c.get(limits::UNCLEAN_LEADER_ELECTION_KEY))
        .map_or(config.unclean_leader_election, |v| v.trim() == "true")
}

/// Every partition brought back to the shape the controller keeps: no inactive leader, no
/// inactive ISR member (unless it is the last), a leader wherever an active ISR member not
/// in `avoid` can lead. Nothing, when every decision committed whole.
fn repair(
    image: &MetadataImage,
    config: &ControllerConfig,
    avoid: &BTreeSet<i32>,
) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for (topic_id, topic) in image.topics() {
        for (&partition, p) in &topic.partitions {
            let mut isr: Vec<i32> = p
                .isr
                .iter()
                .copied()
                .filter(|&id| image.is_active(id))
                .collect();
            if isr.is_empty() {
                isr.clone_from(&p.isr);
            }
            let mut leader = if image.is_active(p.leader) {
                p.leader
            } else {
                elect(image, p, &isr, |id| !avoid.contains(&id))
            };
            if leader == crate::records::NO_LEADER && unclean(image, config, &topic.name) {
                let any = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|&id| image.is_active(id) && !avoid.contains(&id));
                if let Some(id) = any {
                    (leader, isr) = (id, vec![id]);
                }
            }
            out.extend(change(*topic_id, partition, p, leader, isr));
        }
    }
    out
}

/// The first replica (in preference order) in `isr` that is active and `allowed`.
fn elect(
    image: &MetadataImage,
    p: &PartitionState,
    isr: &[i32],
    allowed: impl Fn(i32) -> bool,
) -> i32 {
    let eligible = |id: i32| {
        if mutant(Mutant::LeaderOnFencedBroker) {
            return true;
        }
        image.is_active(id) && allowed(id)
    };
    p.replicas
        .iter()
        .copied()
        .find(|&id| isr.contains(&id) && eligible(id))
        .unwrap_or(crate::records::NO_LEADER)
}

/// The change from `p` to `leader` and `isr`, if anything changes.
fn change(
    topic_id: TopicId,
    partition: i32,
    p: &PartitionState,
    leader: i32,
    isr: Vec<i32>,
) -> Option<MetadataRecord> {
    let leader = (leader != p.leader).then_some(leader);
    let isr = (isr != p.isr).then_some(isr);
    if leader.is_none() && isr.is_none() {
        return None;
    }
    Some(MetadataRecord::PartitionChange(PartitionChange {
        topic_id,
        partition,
        leader,
        isr,
    }))
}

#[cfg(test)]
mod tests;
