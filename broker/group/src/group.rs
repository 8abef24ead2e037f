//! One group (Kafka's `GroupMetadata`): members, generation, protocol, and the timers of
//! the current phase. The rebalance moves live in `rebalance.rs`; the requests that only
//! check membership (heartbeat, leave, commit validation) and the descriptions live here.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::api::{
    CommitPartition, DescribedMember, Effect, GroupDescription, HeartbeatRequest, JoinGroupMember,
    JoinGroupResponse, LeavingMember, LeftMember, Protocol, RequestId, Response, SyncGroupResponse,
};
use crate::config::GroupConfig;
use crate::consumer::ConsumerGroup;
use crate::error::ErrorCode;
use crate::member::Member;
use crate::rng::MemberIdRng;
use crate::state::GroupState;

/// What the coordinator passes to every group operation: the time and the injected rng.
pub(crate) struct Ctx<'a> {
    /// Current time, in ms since the Unix epoch.
    pub now_ms: u64,
    /// Settings.
    pub config: &'a GroupConfig,
    /// Randomness for member ids.
    pub rng: &'a mut dyn MemberIdRng,
}

/// The timer of the current phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No phase timer.
    Idle,
    /// PreparingRebalance: complete the join at `deadline_ms` (or earlier when all joined,
    /// unless this is the initial delayed join, which always waits).
    Join {
        deadline_ms: u64,
        initial: Option<InitialDelay>,
    },
    /// CompletingRebalance/Stable: members still in `pending_sync` at `deadline_ms` are
    /// removed and the group rebalances.
    Sync { deadline_ms: u64 },
}

/// `group.initial.rebalance.delay.ms` bookkeeping (Kafka's `InitialDelayedJoin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InitialDelay {
    /// Rebalance timeout left to spend on further delays, in ms.
    pub remaining_ms: u64,
}

/// One consumer group.
#[derive(Debug, Clone)]
pub struct Group {
    pub(crate) id: String,
    pub(crate) state: GroupState,
    /// When the group entered `state`, in ms.
    pub(crate) state_since_ms: u64,
    pub(crate) generation: i32,
    /// Set by the first member; `None` for offset-only (simple consumer) groups.
    pub(crate) protocol_type: Option<String>,
    /// Selected protocol of the current generation.
    pub(crate) protocol_name: Option<String>,
    pub(crate) leader: Option<String>,
    /// Members by id (a `BTreeMap` so every iteration, and thus every test, is ordered).
    pub(crate) members: BTreeMap<String, Member>,
    /// `group.instance.id` -> member id.
    pub(crate) static_members: BTreeMap<String, String>,
    /// Member ids handed out with `MEMBER_ID_REQUIRED`, with their expiry in ms.
    pub(crate) pending_members: BTreeMap<String, u64>,
    /// Members that have not sent SyncGroup for the current generation.
    pub(crate) pending_sync: BTreeSet<String>,
    pub(crate) phase: Phase,
    /// A member joined during the initial delayed join (extends the delay once more).
    pub(crate) new_member_added: bool,
    /// Distinguishes a re-created group from a deleted one of the same id.
    pub(crate) incarnation: u64,
    /// Offset commits of this group waiting for persistence (blocks expiry and removal).
    pub(crate) pending_commits: usize,
    /// Topics the members of a `consumer` group subscribe to (current generation), `None`
    /// if unknown: then no offset of a live group expires.
    pub(crate) subscribed_topics: Option<BTreeSet<String>>,
    /// The consumer-protocol (KIP-848) part, once a ConsumerGroupHeartbeat joined it. The
    /// classic part is then Empty: the two share the group id and the offsets, and a group
    /// has members of one protocol only.
    pub(crate) modern: Option<Box<ConsumerGroup>>,
}

impl Group {
    pub(crate) fn new(id: &str, now_ms: u64, incarnation: u64) -> Self {
        Self {
            id: id.to_owned(),
            state: GroupState::Empty,
            state_since_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending_members: BTreeMap::new(),
            pending_sync: BTreeSet::new(),
            phase: Phase::Idle,
            new_member_added: false,
            incarnation,
            pending_commits: 0,
            subscribed_topics: None,
            modern: None,
        }
    }

    /// The group's state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// The current generation.
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// The leader's member id.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// The selected protocol of the current generation.
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    /// Member ids, in order.
    pub fn member_ids(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// A member by id.
    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.get(member_id)
    }

    pub(crate) fn transition(&mut self, to: GroupState, now_ms: u64) {
        assert!(
            self.state.can_move_to(to),
            "group {}: illegal move {} -> {to}",
            self.id,
            self.state
        );
        self.state = to;
        self.state_since_ms = now_ms;
    }

    /// Largest rebalance timeout of the members, in ms (Kafka's `rebalanceTimeoutMs`).
    pub(crate) fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// The earliest time something must happen in this group, in ms.
    /// The classic state, except that a consumer group with members counts as Stable
    /// (DeleteGroups, offset expiry).
    pub(crate) fn overall_state(&self) -> GroupState {
        match self.modern.as_deref() {
            Some(m) if !m.members().is_empty() => GroupState::Stable,
            _ => self.state,
        }
    }

    /// The consumer-protocol part, if any.
    pub fn consumer_group(&self) -> Option<&ConsumerGroup> {
        self.modern.as_deref()
    }

    pub(crate) fn next_deadline_ms(&self) -> Option<u64> {
        let phase = match self.phase {
            Phase::Idle => None,
            Phase::Join { deadline_ms, .. } => Some(deadline_ms),
            Phase::Sync { deadline_ms } => (!self.pending_sync.is_empty()).then_some(deadline_ms),
        };
        let pending = self.pending_members.values().copied().min();
        let members = self.members.values().filter_map(Member::expiry_ms).min();
        let modern = self
            .modern
            .as_deref()
            .and_then(ConsumerGroup::next_deadline_ms);
        [phase, pending, members, modern]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether a member with these protocols may join (Kafka's `supportsProtocols`).
    pub(crate) fn supports(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|q| q.name == p.name))
            })
    }

    /// The protocol supported by every member with the most first-choice votes; ties go
    /// to the leader's preference (Kafka's `selectProtocol`, made deterministic).
    pub(crate) fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let supported_by_all = |name: &str| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|p| p.name == name))
        };
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|n| supported_by_all(n))
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for vote in self.members.values().filter_map(|m| m.vote(&candidates)) {
            *votes.entry(vote).or_default() += 1;
        }
        let most = votes.values().copied().max()?;
        let leader = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .unwrap_or(first);
        let pick = leader
            .protocols
            .iter()
            .find(|p| votes.get(p.name.as_str()) == Some(&most));
        pick.map(|p| p.name.clone())
    }

    /// Kafka's `validateCurrentMember`: a given `group.instance.id` must be registered
    /// (else `UNKNOWN_MEMBER_ID`) to this member id (else `FENCED_INSTANCE_ID`), and the
    /// member id must be in the group.
    pub(crate) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ErrorCode> {
        if let Some(instance_id) = instance_id {
            match self.static_members.get(instance_id) {
                Some(current) if current != member_id => return Err(ErrorCode::FencedInstanceId),
                Some(_) => {}
                None => return Err(ErrorCode::UnknownMemberId),
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ErrorCode::UnknownMemberId);
        }
        Ok(())
    }

    /// Member list for the leader's JoinGroup response (metadata of the selected protocol).
    pub(crate) fn join_members(&self) -> Vec<JoinGroupMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        let to_entry = |m: &Member| JoinGroupMember {
            member_id: m.id.clone(),
            group_instance_id: m.instance_id.clone(),
            metadata: m.metadata(protocol),
        };
        self.members.values().map(to_entry).collect()
    }

    /// A successful JoinGroup response for `member_id` in the current generation.
    pub(crate) fn join_response(&self, member_id: &str, leader: Option<&str>) -> JoinGroupResponse {
        let leader = leader
            .or(self.leader.as_deref())
            .unwrap_or_default()
            .to_owned();
        let members = if leader == member_id {
            self.join_members()
        } else {
            Vec::new()
        };
        JoinGroupResponse {
            error: ErrorCode::None,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
            skip_assignment: false,
        }
    }

    /// A SyncGroup response carrying `assignment`.
    pub(crate) fn sync_response(&self, error: ErrorCode, assignment: Bytes) -> SyncGroupResponse {
        SyncGroupResponse {
            error,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }

    /// Handles a heartbeat (Kafka's `handleHeartbeat` after the group lookup).
    pub(crate) fn heartbeat(&mut self, now_ms: u64, req: &HeartbeatRequest) -> ErrorCode {
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return e;
        }
        if req.generation_id != self.generation {
            return ErrorCode::IllegalGeneration;
        }
        let member = self
            .members
            .get_mut(&req.member_id)
            .expect("validated member");
        member.last_heartbeat_ms = now_ms;
        match self.state {
            GroupState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            GroupState::CompletingRebalance | GroupState::Stable => ErrorCode::None,
            GroupState::Empty | GroupState::Dead => ErrorCode::UnknownMemberId,
        }
    }

    /// Handles one leaving member of a LeaveGroup (Kafka's `handleLeaveGroup` loop body).
    pub(crate) fn leave(
        &mut self,
        ctx: &mut Ctx<'_>,
        leaving: &LeavingMember,
        out: &mut Vec<Effect>,
    ) -> LeftMember {
        let instance_id = leaving.group_instance_id.as_deref();
        let error = if leaving.member_id.is_empty() {
            match instance_id
                .and_then(|i| self.static_members.get(i))
                .cloned()
            {
                Some(member_id) => {
                    self.remove_member_and_update(ctx, &member_id, out);
                    ErrorCode::None
                }
                None => ErrorCode::UnknownMemberId,
            }
        } else if self.pending_members.remove(&leaving.member_id).is_some() {
            self.try_complete_join(ctx, out);
            ErrorCode::None
        } else {
            match self.validate_member(&leaving.member_id, instance_id) {
                Ok(()) => {
                    self.remove_member_and_update(ctx, &leaving.member_id, out);
                    ErrorCode::None
                }
                Err(e) => e,
            }
        };
        LeftMember {
            member_id: leaving.member_id.clone(),
            group_instance_id: leaving.group_instance_id.clone(),
            error,
        }
    }

    /// Kafka's `validateOffsetCommit` plus the state check of `doCommitOffsets`; a valid
    /// commit from a member counts as a heartbeat.
    pub(crate) fn validate_commit(
        &mut self,
        now_ms: u64,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        partitions: &[CommitPartition],
    ) -> Result<(), ErrorCode> {
        let from_member = generation_id >= 0 || !member_id.is_empty() || instance_id.is_some();
        if let Some(modern) = self.modern.as_deref() {
            return modern.validate_commit(generation_id, member_id, partitions);
        }
        if from_member {
            self.validate_member(member_id, instance_id)?;
            if generation_id != self.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            return Err(ErrorCode::UnknownMemberId);
        }
        match self.state {
            GroupState::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
            GroupState::Dead => Err(ErrorCode::CoordinatorNotAvailable),
            GroupState::Empty | GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(member) = self.members.get_mut(member_id) {
                    member.last_heartbeat_ms = now_ms;
                }
                Ok(())
            }
        }
    }

    /// A TxnOffsetCommit's member fields (Kafka's `validateOffsetCommit` with
    /// `isTransactional`): as for OffsetCommit, a given member, instance and generation must
    /// be the group's (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION), but none
    /// given (v0-v2) is allowed whatever the state, and the state is not otherwise enforced
    /// (no REBALANCE_IN_PROGRESS). A consumer-protocol group checks the member's epoch, a
    /// stale one answered ILLEGAL_GENERATION. Read-only: not a heartbeat.
    pub(crate) fn validate_txn_commit(
        &self,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        partitions: &[CommitPartition],
    ) -> Result<(), ErrorCode> {
        if let Some(modern) = self.modern.as_deref() {
            return modern
                .validate_commit(generation_id, member_id, partitions)
                .map_err(|e| match e {
                    ErrorCode::StaleMemberEpoch => ErrorCode::IllegalGeneration,
                    e => e,
                });
        }
        if self.state == GroupState::Dead {
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation_id != self.generation {
                return Err(ErrorCode::IllegalGeneration);
            }
        }
        Ok(())
    }

    /// DescribeGroups entry (Kafka's `GroupMetadata.summary`).
    pub(crate) fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = if stable {
            self.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = self
            .members
            .values()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            group_id: self.id.clone(),
            error: ErrorCode::None,
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }
}

/// Pushes a response effect.
pub(crate) fn respond(out: &mut Vec<Effect>, request_id: RequestId, response: Response) {
    out.push(Effect::Respond {
        request_id,
        response,
    });
}

/// A JoinGroup error response.
pub(crate) fn join_error(member_id: &str, error: ErrorCode) -> Response {
    Response::JoinGroup(JoinGroupResponse {
        error,
        generation_id: -1,
        protocol_type: None,
        protocol_name: None,
        leader: String::new(),
        member_id: member_id.to_owned(),
        members: Vec::new(),
        skip_assignment: false,
    })
}

/// A SyncGroup error response.
pub(crate) fn sync_error(error: ErrorCode) -> Response {
    Response::SyncGroup(SyncGroupResponse {
        error,
        protocol_type: None,
        protocol_name: None,
        assignment: Bytes::new(),
    })
}
