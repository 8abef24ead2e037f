//! Consumer-protocol groups (KIP-848): the coordinator computes the assignment and each
//! member reconciles towards it through ConsumerGroupHeartbeat.
//!
//! A group has a *group epoch*, bumped whenever its members, their subscriptions or the
//! subscribed topics' partition counts change; a *target assignment* computed by the
//! server assignor at the group epoch (its *assignment epoch*); and per member a *member
//! epoch* and a *current assignment*, which `reconcile.rs` moves towards the member's
//! target: first revoking (the member keeps its epoch until it reports the partitions
//! gone), then assigning partitions nobody else owns, at the target epoch.
//!
//! Membership is soft state (as for classic groups): after a restart members get
//! `UNKNOWN_MEMBER_ID` and rejoin with epoch 0; their committed offsets are kept.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::api::Assignment;
use crate::api::CommitPartition;
use crate::error::ErrorCode;
pub use crate::state::ConsumerGroupState;

pub mod assignor;
pub(crate) mod heartbeat;
mod reconcile;

pub(crate) use heartbeat::ModernCtx;

/// Epoch sent to leave the group.
pub const LEAVE_EPOCH: i32 = -1;
/// Epoch sent by a static member leaving for a while (it keeps its partitions until
/// its session times out or it rejoins).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// Matches subscribed topic regexes; the server injects one (the group crate has no regex
/// engine and no authorizer). The default matches a regex only against the identical topic
/// name.
pub trait TopicMatcher: std::fmt::Debug + Send {
    /// Whether `regex` compiles.
    fn is_valid(&self, regex: &str) -> bool;
    /// Whether `topic` matches all of `regex`.
    fn matches(&self, regex: &str, topic: &str) -> bool;
    /// Whether the member's `principal`, connected from `client_host` (`/10.0.0.1`), may
    /// DESCRIBE `topic`. A regex's matches it may not describe are dropped silently at every
    /// resolution, as Kafka drops them: a regex never discloses or assigns a topic its
    /// member could not see by name.
    fn may_describe(&self, _principal: &str, _client_host: &str, _topic: &str) -> bool {
        true
    }
}

/// The default [`TopicMatcher`]: a regex matches the topic spelled the same.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiteralMatcher;

impl TopicMatcher for LiteralMatcher {
    fn is_valid(&self, _regex: &str) -> bool {
        true
    }
    fn matches(&self, regex: &str, topic: &str) -> bool {
        regex == topic
    }
}

/// Where a member is in its reconciliation (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// At the target epoch with its whole target (or waiting for a newer target).
    Stable,
    /// Must revoke `pending_revocation` before it gets anything new.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's name (ConsumerGroupDescribe shows none; logs and the admin API do).
    pub fn name(self) -> &'static str {
        match self {
            Self::Stable => "stable",
            Self::UnrevokedPartitions => "unrevoked_partitions",
            Self::UnreleasedPartitions => "unreleased_partitions",
        }
    }
}

/// One member of a consumer-protocol group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// The principal of its latest heartbeat (`ConsumerHeartbeatRequest::principal`).
    pub principal: String,
    /// Current epoch ([`STATIC_LEAVE_EPOCH`] while a static member is away).
    pub member_epoch: i32,
    /// The epoch before the last change (a heartbeat whose answer was lost may still use
    /// it).
    pub previous_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Rebalance timeout in ms: how long it may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic regex.
    pub subscribed_topic_regex: Option<String>,
    /// Requested server assignor.
    pub server_assignor: Option<String>,
    /// Partitions the member owns.
    pub assigned: Assignment,
    /// The member epoch at which each partition of `assigned` (and `pending_revocation`)
    /// was assigned to it (KIP-1251): a commit at an older epoch is still the owner's
    /// commit if the partition was assigned at or before that epoch.
    pub assignment_epochs: BTreeMap<String, BTreeMap<i32, i32>>,
    /// Partitions the member must revoke (it still owns them).
    pub pending_revocation: Assignment,
    /// Removed when no heartbeat came by then, in ms.
    pub(crate) session_deadline_ms: u64,
    /// Removed if it has not revoked by then, in ms (only while revoking).
    pub(crate) revocation_deadline_ms: Option<u64>,
}

impl ConsumerMember {
    pub(crate) fn set_epoch(&mut self, epoch: i32) {
        if epoch != self.member_epoch {
            self.previous_epoch = self.member_epoch;
            self.member_epoch = epoch;
        }
    }

    /// Whether the member owns `topic`-`partition` (assigned or still revoking).
    pub fn owns(&self, topic: &str, partition: i32) -> bool {
        let has = |a: &Assignment| a.get(topic).is_some_and(|ps| ps.contains(&partition));
        has(&self.assigned) || has(&self.pending_revocation)
    }

    fn next_deadline_ms(&self) -> u64 {
        self.revocation_deadline_ms
            .map_or(self.session_deadline_ms, |at| {
                at.min(self.session_deadline_ms)
            })
    }
}

/// One consumer-protocol group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub(crate) group_epoch: i32,
    pub(crate) assignment_epoch: i32,
    pub(crate) members: BTreeMap<String, ConsumerMember>,
    /// `group.instance.id` -> member id.
    pub(crate) static_members: BTreeMap<String, String>,
    /// Target assignment per member id.
    pub(crate) target: BTreeMap<String, Assignment>,
    /// Subscribed topics that exist -> partition count, as of the group epoch.
    pub(crate) subscribed: BTreeMap<String, i32>,
    /// The assignor of the current target.
    pub(crate) assignor: String,
}

impl ConsumerGroup {
    /// The group epoch.
    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    /// The target assignment's epoch.
    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    /// Members by id.
    pub fn members(&self) -> &BTreeMap<String, ConsumerMember> {
        &self.members
    }

    /// A member's target assignment.
    pub fn target(&self, member_id: &str) -> Option<&Assignment> {
        self.target.get(member_id)
    }

    /// The assignor that computed the target (`uniform` before the first one).
    pub fn assignor(&self) -> &str {
        if self.assignor.is_empty() {
            assignor::UNIFORM
        } else {
            &self.assignor
        }
    }

    /// The subscribed topics that exist, with their partition counts.
    pub fn subscribed_topics(&self) -> &BTreeMap<String, i32> {
        &self.subscribed
    }

    /// Kafka's state of the group.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.assignment_epoch < self.group_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .all(|m| m.state == MemberState::Stable && m.member_epoch == self.assignment_epoch)
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// The member owning a partition, if any.
    pub fn owner(&self, topic: &str, partition: i32) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.owns(topic, partition))
            .map(|m| m.member_id.as_str())
    }

    /// Topics some member subscribes to (by name, or by a regex matching an existing
    /// topic), for offset expiry and OffsetDelete's `GROUP_SUBSCRIBED_TO_TOPIC`.
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.subscribed.keys().cloned().collect();
        for m in self.members.values() {
            names.extend(m.subscribed_topic_names.iter().cloned());
        }
        names
    }

    /// OffsetCommit from a consumer group's member (Kafka's `ConsumerGroup.validateOffsetCommit`
    /// with KIP-1251's assignment epochs): a commit without a member (epoch < 0, as the admin
    /// client or a consumer without group management sends) only while the group has no
    /// members; else the member must exist (`UNKNOWN_MEMBER_ID`) and commit at its epoch, or
    /// at an older one for partitions it was assigned at or before that epoch
    /// (`STALE_MEMBER_EPOCH` otherwise). The older epoch is the race every consumer runs: it
    /// commits at the epoch it knows while the heartbeat that acknowledged a revocation
    /// moves it to the next; the partitions it still owns are its own to commit.
    pub(crate) fn validate_commit(
        &self,
        member_epoch: i32,
        member_id: &str,
        partitions: &[CommitPartition],
    ) -> Result<(), ErrorCode> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if member.member_epoch == member_epoch {
            return Ok(());
        }
        let owned_since = |p: &CommitPartition| {
            member
                .assignment_epochs
                .get(&p.tp.topic)
                .and_then(|ps| ps.get(&p.tp.partition))
                .is_some_and(|&at| at <= member_epoch)
        };
        if member_epoch > member.member_epoch || !partitions.iter().all(owned_since) {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }

    /// When the next member times out (session or revocation), in ms.
    pub(crate) fn next_deadline_ms(&self) -> Option<u64> {
        self.members
            .values()
            .map(ConsumerMember::next_deadline_ms)
            .min()
    }
}
