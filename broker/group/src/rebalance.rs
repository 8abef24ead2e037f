//! The rebalance moves of one group: JoinGroup (new, known, pending and static members),
//! SyncGroup, preparing a rebalance and completing its join phase (Kafka's
//! `GroupCoordinator` join/sync paths). Removal and timers are in `timers.rs`.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::api::{Effect, JoinGroupRequest, RequestId, Response, SyncGroupRequest};
use crate::error::ErrorCode;
use crate::group::{Ctx, Group, InitialDelay, Phase, join_error, respond, sync_error};
use crate::limits;
use crate::member::Member;
use crate::rng::new_member_id;
use crate::state::GroupState;
use crate::subscription::{self, CONSUMER_PROTOCOL_TYPE};

impl Group {
    /// Whether this join may add a member (Kafka's `acceptJoiningMember`, plus the hard
    /// cap that also counts pending members). A known member id, a pending one, or the
    /// registered `group.instance.id` of a restarting static member takes no new seat.
    pub(crate) fn accepts_member(&self, ctx: &Ctx<'_>, req: &JoinGroupRequest) -> bool {
        let instance = req.group_instance_id.as_ref();
        let static_id = instance.and_then(|i| self.static_members.get(i));
        let known = self
            .members
            .get(&req.member_id)
            .or(static_id.and_then(|id| self.members.get(id)));
        let seated = known.is_some() || self.pending_members.contains_key(&req.member_id);
        if !seated && self.members.len() + self.pending_members.len() >= limits::GROUP_MEMBERS_MAX {
            return false;
        }
        let max = ctx.config.group_max_size;
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                let joined = self
                    .members
                    .values()
                    .filter(|m| m.join_request.is_some())
                    .count();
                known.is_some_and(|m| m.join_request.is_some()) || joined < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                known.is_some() || self.members.len() < max
            }
        }
    }

    /// JoinGroup after the coordinator's checks (group id, session timeout, limits).
    pub(crate) fn join(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        if !self.accepts_member(ctx, &req) {
            return respond(out, rid, join_error("", ErrorCode::GroupMaxSizeReached));
        }
        if !self.supports(&req.protocol_type, &req.protocols) {
            return respond(
                out,
                rid,
                join_error(&req.member_id, ErrorCode::InconsistentGroupProtocol),
            );
        }
        if req.member_id.is_empty() {
            self.join_unknown(ctx, rid, req, out);
        } else {
            self.join_known(ctx, rid, req, out);
        }
        self.try_complete_join(ctx, out);
    }

    fn join_unknown(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        let member_id = new_member_id(&req.client_id, ctx.rng);
        let old_static = req
            .group_instance_id
            .as_ref()
            .and_then(|i| self.static_members.get(i))
            .cloned();
        if let Some(old_id) = old_static {
            self.rejoin_static(ctx, rid, &old_id, &member_id, req, out);
        } else if req.group_instance_id.is_none() && req.require_known_member_id {
            // A member id handed out but never used expires after the shorter of its
            // session and rebalance timeouts: it blocks an early end of the join phase and
            // takes a seat of `group.max.size` until then.
            let timeout_ms = req
                .session_timeout_ms
                .unsigned_abs()
                .min(req.rebalance_timeout_ms.unsigned_abs());
            let expiry_ms = ctx.now_ms + u64::from(timeout_ms);
            self.pending_members.insert(member_id.clone(), expiry_ms);
            respond(
                out,
                rid,
                join_error(&member_id, ErrorCode::MemberIdRequired),
            );
        } else {
            self.add_member(ctx, rid, member_id, req, out);
        }
    }

    fn join_known(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        // Pending ids come from the dynamic handshake only; one sent with an instance id
        // goes through the static checks below instead (Kafka treats it as a bug).
        let dynamic = req.group_instance_id.is_none();
        if dynamic && self.pending_members.remove(&req.member_id).is_some() {
            let member_id = req.member_id.clone();
            return self.add_member(ctx, rid, member_id, req, out);
        }
        if let Err(e) = self.validate_member(&req.member_id, req.group_instance_id.as_deref()) {
            return respond(out, rid, join_error(&req.member_id, e));
        }
        let member = &self.members[&req.member_id];
        let unchanged = member.matches(&req.protocols);
        let is_leader = self.leader.as_deref() == Some(req.member_id.as_str());
        match self.state {
            GroupState::PreparingRebalance => self.update_member(ctx, rid, req, out),
            GroupState::CompletingRebalance if unchanged => {
                let response = self.join_response(&req.member_id, None);
                respond(out, rid, Response::JoinGroup(response));
            }
            GroupState::Stable if unchanged && !is_leader => {
                let response = self.join_response(&req.member_id, None);
                respond(out, rid, Response::JoinGroup(response));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member(ctx, rid, req, out)
            }
            GroupState::Empty | GroupState::Dead => {
                respond(
                    out,
                    rid,
                    join_error(&req.member_id, ErrorCode::UnknownMemberId),
                );
            }
        }
    }

    /// Kafka's `addMemberAndRebalance`.
    fn add_member(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        id: String,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        if self.state == GroupState::PreparingRebalance && self.generation == 0 {
            self.new_member_added = true;
        }
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        if let Some(instance_id) = &req.group_instance_id {
            self.static_members.insert(instance_id.clone(), id.clone());
        }
        let member = Member {
            id: id.clone(),
            instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            session_timeout_ms: u64::from(req.session_timeout_ms.unsigned_abs()),
            rebalance_timeout_ms: u64::from(req.rebalance_timeout_ms.unsigned_abs()),
            protocols: req.protocols,
            assignment: Bytes::new(),
            join_request: Some(rid),
            sync_request: None,
            last_heartbeat_ms: ctx.now_ms,
            is_new: true,
            added_ms: ctx.now_ms,
        };
        self.members.insert(id, member);
        self.maybe_prepare_rebalance(ctx, out);
    }

    /// Kafka's `updateMemberAndRebalance`: new protocols/timeouts, wait for the rebalance.
    fn update_member(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        let member = self.members.get_mut(&req.member_id).expect("known member");
        member.protocols = req.protocols;
        member.session_timeout_ms = u64::from(req.session_timeout_ms.unsigned_abs());
        member.rebalance_timeout_ms = u64::from(req.rebalance_timeout_ms.unsigned_abs());
        member.last_heartbeat_ms = ctx.now_ms;
        if let Some(old) = member.join_request.replace(rid) {
            // A retried JoinGroup supersedes the first; answer it so nothing waits forever.
            respond(
                out,
                old,
                join_error(&req.member_id, ErrorCode::RebalanceInProgress),
            );
        }
        self.maybe_prepare_rebalance(ctx, out);
    }

    /// A static member rejoining with an unknown member id (Kafka's
    /// `updateStaticMemberAndRebalance`, KIP-345): the new id replaces the old one. In a
    /// Stable group, if the member's protocols (names and metadata) are unchanged, no
    /// rebalance happens: the member gets the current generation (leader field = the old
    /// leader id, so a restarted leader does not reassign) and syncs to its previous
    /// assignment. From JoinGroup v9 (KIP-814) the leader field is the current leader, and a
    /// rejoined leader gets the members with `skip_assignment`, as Kafka's
    /// `updateStaticMemberThenRebalanceOrCompleteJoin` answers. Kafka only compares the
    /// selected protocol, which misses a changed subscription; we rebalance on any metadata
    /// change.
    fn rejoin_static(
        &mut self,
        ctx: &mut Ctx<'_>,
        rid: RequestId,
        old_id: &str,
        new_id: &str,
        req: JoinGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        let old_leader = self.leader.clone();
        self.replace_member_id(old_id, new_id, out);
        let req = JoinGroupRequest {
            member_id: new_id.to_owned(),
            ..req
        };
        match self.state {
            GroupState::Stable => {
                let member = self.members.get_mut(new_id).expect("replaced member");
                let unchanged = member.matches(&req.protocols);
                member.protocols = req.protocols;
                member.session_timeout_ms = u64::from(req.session_timeout_ms.unsigned_abs());
                member.rebalance_timeout_ms = u64::from(req.rebalance_timeout_ms.unsigned_abs());
                member.last_heartbeat_ms = ctx.now_ms;
                if unchanged && self.select_protocol() == self.protocol_name {
                    let response = if req.supports_skip_assignment {
                        // KIP-814 (v9+): the current leader id, and a leader gets the
                        // members with `skip_assignment`: it knows who it leads without
                        // reassigning.
                        let mut response = self.join_response(new_id, None);
                        response.skip_assignment = response.leader == new_id;
                        response
                    } else {
                        self.join_response(new_id, old_leader.as_deref())
                    };
                    respond(out, rid, Response::JoinGroup(response));
                } else {
                    self.members
                        .get_mut(new_id)
                        .expect("replaced member")
                        .join_request = Some(rid);
                    self.maybe_prepare_rebalance(ctx, out);
                }
            }
            // CompletingRebalance: the leader may be assigning to the old id, so rebalance
            // (update_member moves the group to PreparingRebalance).
            GroupState::CompletingRebalance | GroupState::PreparingRebalance => {
                self.update_member(ctx, rid, req, out)
            }
            GroupState::Empty | GroupState::Dead => {
                unreachable!("static member in a group without members")
            }
        }
    }

    /// Moves a member to a new id; requests waiting under the old id are fenced.
    fn replace_member_id(&mut self, old_id: &str, new_id: &str, out: &mut Vec<Effect>) {
        let mut member = self
            .members
            .remove(old_id)
            .expect("static member is a member");
        if let Some(join) = member.join_request.take() {
            respond(out, join, join_error(old_id, ErrorCode::FencedInstanceId));
        }
        if let Some(sync) = member.sync_request.take() {
            respond(out, sync, sync_error(ErrorCode::FencedInstanceId));
        }
        member.id = new_id.to_owned();
        if let Some(instance_id) = &member.instance_id {
            self.static_members
                .insert(instance_id.clone(), new_id.to_owned());
        }
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.to_owned());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.to_owned());
        }
        self.members.insert(new_id.to_owned(), member);
    }

    /// SyncGroup (Kafka's `doSyncGroup`).
    pub(crate) fn sync(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: SyncGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        if let Err(e) = self.check_sync(&req) {
            return respond(out, rid, sync_error(e));
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => {
                respond(out, rid, sync_error(ErrorCode::UnknownMemberId))
            }
            GroupState::PreparingRebalance => {
                respond(out, rid, sync_error(ErrorCode::RebalanceInProgress))
            }
            GroupState::CompletingRebalance => self.sync_completing(now_ms, rid, req, out),
            GroupState::Stable => {
                self.pending_sync.remove(&req.member_id);
                let member = self
                    .members
                    .get_mut(&req.member_id)
                    .expect("validated member");
                member.last_heartbeat_ms = now_ms;
                let assignment = member.assignment.clone();
                let response = self.sync_response(ErrorCode::None, assignment);
                respond(out, rid, Response::SyncGroup(response));
            }
        }
    }

    fn check_sync(&self, req: &SyncGroupRequest) -> Result<(), ErrorCode> {
        self.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != self.generation {
            return Err(ErrorCode::IllegalGeneration);
        }
        let type_differs = req.protocol_type.is_some() && req.protocol_type != self.protocol_type;
        let name_differs = req.protocol_name.is_some() && req.protocol_name != self.protocol_name;
        if type_differs || name_differs {
            return Err(ErrorCode::InconsistentGroupProtocol);
        }
        if req
            .assignments
            .iter()
            .any(|(_, a)| a.len() > limits::ASSIGNMENT_BYTES_MAX)
        {
            return Err(ErrorCode::InvalidRequest);
        }
        Ok(())
    }

    /// SyncGroup in CompletingRebalance: wait for the leader, whose assignment completes
    /// the rebalance and answers every waiting member.
    fn sync_completing(
        &mut self,
        now_ms: u64,
        rid: RequestId,
        req: SyncGroupRequest,
        out: &mut Vec<Effect>,
    ) {
        self.pending_sync.remove(&req.member_id);
        let member = self
            .members
            .get_mut(&req.member_id)
            .expect("validated member");
        member.last_heartbeat_ms = now_ms;
        if let Some(old) = member.sync_request.replace(rid) {
            respond(out, old, sync_error(ErrorCode::RebalanceInProgress));
        }
        if self.leader.as_deref() != Some(req.member_id.as_str()) {
            return;
        }
        for member in self.members.values_mut() {
            let found = req.assignments.iter().find(|(id, _)| *id == member.id);
            member.assignment = found.map(|(_, a)| a.clone()).unwrap_or_default();
        }
        self.transition(GroupState::Stable, now_ms);
        for member in self.members.values_mut() {
            if let Some(sync) = member.sync_request.take() {
                member.last_heartbeat_ms = now_ms;
                let assignment = member.assignment.clone();
                let response = crate::api::SyncGroupResponse {
                    error: ErrorCode::None,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment,
                };
                respond(out, sync, Response::SyncGroup(response));
            }
        }
    }

    /// Kafka's `maybePrepareRebalance`.
    pub(crate) fn maybe_prepare_rebalance(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        let can = matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        );
        if can {
            self.prepare_rebalance(ctx, out);
        }
    }

    /// Kafka's `prepareRebalance`: cancel waiting syncs, arm the join timer.
    pub(crate) fn prepare_rebalance(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(sync) = member.sync_request.take() {
                    respond(out, sync, sync_error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        self.pending_sync.clear();
        let rebalance_timeout_ms = self.rebalance_timeout_ms();
        self.phase = if self.state == GroupState::Empty {
            let delay_ms = u64::from(ctx.config.initial_rebalance_delay_ms);
            let remaining_ms = rebalance_timeout_ms.saturating_sub(delay_ms);
            self.new_member_added = false;
            Phase::Join {
                deadline_ms: ctx.now_ms + delay_ms,
                initial: Some(InitialDelay { remaining_ms }),
            }
        } else {
            Phase::Join {
                deadline_ms: ctx.now_ms + rebalance_timeout_ms,
                initial: None,
            }
        };
        self.transition(GroupState::PreparingRebalance, ctx.now_ms);
        // Kafka's tryCompleteElseWatch: e.g. the last member left, nobody to wait for.
        self.try_complete_join(ctx, out);
    }

    /// Completes the join phase early if every member (and no pending one) has joined.
    pub(crate) fn try_complete_join(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        let Phase::Join { initial: None, .. } = self.phase else {
            return;
        };
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = self.members.values().all(|m| m.join_request.is_some());
        if all_joined && self.pending_members.is_empty() {
            self.complete_join(ctx, out);
        }
    }

    /// Kafka's `onCompleteJoin`: drop dynamic members that did not rejoin, elect a leader
    /// among those who did, start the next generation and answer every waiting join.
    pub(crate) fn complete_join(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_request.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &missing {
            self.remove_member(id, out);
        }
        if !self.members.is_empty() && !self.elect_joined_leader() {
            // Only static members that did not rejoin remain: wait another round.
            let deadline_ms = ctx.now_ms + self.rebalance_timeout_ms();
            self.phase = Phase::Join {
                deadline_ms,
                initial: None,
            };
            return;
        }
        self.generation += 1;
        self.phase = Phase::Idle;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = None;
            return self.transition(GroupState::Empty, ctx.now_ms);
        }
        self.protocol_name = self.select_protocol();
        self.subscribed_topics = self.compute_subscribed_topics();
        self.transition(GroupState::CompletingRebalance, ctx.now_ms);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let response = self.join_response(&id, None);
            let member = self.members.get_mut(&id).expect("member");
            if let Some(join) = member.join_request.take() {
                respond(out, join, Response::JoinGroup(response));
            }
            member.last_heartbeat_ms = ctx.now_ms;
            member.is_new = false;
            self.pending_sync.insert(id);
        }
        self.phase = Phase::Sync {
            deadline_ms: ctx.now_ms + self.rebalance_timeout_ms(),
        };
    }

    /// Union of the members' subscriptions for the selected protocol (`consumer` groups).
    fn compute_subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let metadata: Vec<Bytes> = self
            .members
            .values()
            .map(|m| m.metadata(protocol))
            .collect();
        subscription::union(metadata.iter().map(|m| &m[..]))
    }

    /// Keeps the leader if it rejoined, else picks the first member that did.
    fn elect_joined_leader(&mut self) -> bool {
        let rejoined = |id: &String| {
            self.members
                .get(id)
                .is_some_and(|m| m.join_request.is_some())
        };
        if self.leader.as_ref().is_some_and(rejoined) {
            return true;
        }
        self.leader = self
            .members
            .values()
            .find(|m| m.join_request.is_some())
            .map(|m| m.id.clone());
        self.leader.is_some()
    }
}
