//! ConsumerGroupHeartbeat on one group (Kafka's `GroupMetadataManager.consumerGroupHeartbeat`):
//! join, leave, epoch checks, subscription changes, the group epoch and target assignment,
//! reconciliation; and the member timeouts.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{self, AssignorMember};
use super::reconcile::Reconcile;
use super::{
    Assignment, ConsumerGroup, ConsumerMember, LEAVE_EPOCH, MemberState, STATIC_LEAVE_EPOCH,
    TopicMatcher,
};
use crate::api::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use crate::config::GroupConfig;
use crate::error::ErrorCode;
use crate::limits;
use crate::rng::{MemberIdRng, new_member_id};

/// What a consumer-protocol group operation needs from the coordinator.
pub(crate) struct ModernCtx<'a> {
    /// Current time, in ms.
    pub now_ms: u64,
    /// Settings.
    pub config: &'a GroupConfig,
    /// Randomness for member ids the coordinator picks.
    pub rng: &'a mut dyn MemberIdRng,
    /// Every topic with its partition count.
    pub topics: &'a BTreeMap<String, i32>,
    /// Regex matching.
    pub matcher: &'a dyn TopicMatcher,
}

impl ModernCtx<'_> {
    fn response(&self, member: &ConsumerMember) -> ConsumerHeartbeatResponse {
        ConsumerHeartbeatResponse {
            error: ErrorCode::None,
            member_id: Some(member.member_id.clone()),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: i32::try_from(self.config.consumer_heartbeat_interval_ms)
                .unwrap_or(i32::MAX),
            assignment: None,
        }
    }
}

/// The answer to a refused heartbeat.
pub(crate) fn heartbeat_error(error: ErrorCode) -> ConsumerHeartbeatResponse {
    ConsumerHeartbeatResponse {
        error,
        member_id: None,
        member_epoch: -1,
        heartbeat_interval_ms: 0,
        assignment: None,
    }
}

/// Request-level checks (Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, plus our
/// limits).
pub(crate) fn check_request(
    req: &ConsumerHeartbeatRequest,
    matcher: &dyn TopicMatcher,
) -> Result<(), ErrorCode> {
    let too_long = |s: &Option<String>, max: usize| s.as_ref().is_some_and(|s| s.len() > max);
    let names = req.subscribed_topic_names.as_deref().unwrap_or_default();
    let owned = req
        .owned
        .as_ref()
        .map_or(0, |o| o.values().map(BTreeSet::len).sum());
    let invalid = req.group_id.is_empty()
        || req.group_id.len() > limits::GROUP_ID_BYTES_MAX
        || req.member_id.len() > limits::MEMBER_ID_BYTES_MAX
        || (req.member_epoch != 0 && req.member_id.is_empty())
        || req.member_epoch < STATIC_LEAVE_EPOCH
        || (req.member_epoch == STATIC_LEAVE_EPOCH && req.instance_id.is_none())
        || req.instance_id.as_deref() == Some("")
        || req.rack_id.as_deref() == Some("")
        || too_long(&req.instance_id, limits::GROUP_INSTANCE_ID_BYTES_MAX)
        || too_long(&req.rack_id, limits::GROUP_INSTANCE_ID_BYTES_MAX)
        || too_long(&req.subscribed_topic_regex, limits::SUBSCRIPTION_BYTES_MAX)
        || req.client_id.len() > limits::CLIENT_ID_BYTES_MAX
        || req.client_host.len() > limits::CLIENT_HOST_BYTES_MAX
        || req.principal.len() > limits::PRINCIPAL_BYTES_MAX
        || names.len() > limits::SUBSCRIBED_TOPICS_MAX
        || names
            .iter()
            .any(|n| n.len() > limits::SUBSCRIPTION_BYTES_MAX)
        || owned > limits::OWNED_PARTITIONS_MAX
        || (req.member_epoch == 0 && !joins_completely(req));
    if invalid {
        return Err(ErrorCode::InvalidRequest);
    }
    if let Some(name) = &req.server_assignor
        && !assignor::ASSIGNORS.contains(&name.as_str())
    {
        return Err(ErrorCode::UnsupportedAssignor);
    }
    if let Some(regex) = &req.subscribed_topic_regex
        && !matcher.is_valid(regex)
    {
        return Err(ErrorCode::InvalidRegularExpression);
    }
    Ok(())
}

/// A join carries a rebalance timeout, a subscription and no owned partitions.
fn joins_completely(req: &ConsumerHeartbeatRequest) -> bool {
    req.rebalance_timeout_ms >= 0
        && (req.subscribed_topic_names.is_some() || req.subscribed_topic_regex.is_some())
        && req.owned.as_ref().is_none_or(Assignment::is_empty)
}

impl ConsumerGroup {
    /// A checked heartbeat (see [`check_request`]).
    pub(crate) fn heartbeat(
        &mut self,
        cx: &mut ModernCtx<'_>,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<ConsumerHeartbeatResponse, ErrorCode> {
        if req.member_epoch == LEAVE_EPOCH || req.member_epoch == STATIC_LEAVE_EPOCH {
            return self.leave(cx, req);
        }
        let (id, mut bump) = self.admit(cx, req)?;
        let before = self.members[&id].clone();
        let mut member = before.clone();
        bump |= update_member(&mut member, req);
        member.session_deadline_ms = cx.now_ms + u64::from(cx.config.consumer_session_timeout_ms);
        self.members.insert(id.clone(), member);
        self.refresh(cx, bump);
        self.reconcile_member(cx.now_ms, &id, req.owned.as_ref());
        let member = &self.members[&id];
        let mut response = cx.response(member);
        let full = req.member_epoch == 0
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        if full || member.assigned != before.assigned {
            response.assignment = Some(member.assigned.clone());
        }
        Ok(response)
    }

    /// Finds or creates the member; true if the group epoch must be bumped (new member).
    fn admit(
        &mut self,
        cx: &mut ModernCtx<'_>,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<(String, bool), ErrorCode> {
        if req.member_epoch != 0 {
            let member = self.known_member(req)?;
            check_epoch(member, req)?;
            return Ok((member.member_id.clone(), false));
        }
        let id = if req.member_id.is_empty() {
            new_member_id(&req.client_id, cx.rng)
        } else {
            req.member_id.clone()
        };
        if let Some(instance_id) = &req.instance_id
            && let Some(old_id) = self.static_members.get(instance_id).cloned()
        {
            self.replace_static(&old_id, &id)?;
            return Ok((id, false));
        }
        if let Some(member) = self.members.get_mut(&id) {
            // A fenced member rejoins: it dropped its partitions, so they are free.
            member.assigned.clear();
            member.assignment_epochs.clear();
            member.pending_revocation.clear();
            member.state = MemberState::Stable;
            member.revocation_deadline_ms = None;
            member.set_epoch(0);
            return Ok((id, false));
        }
        if self.members.len() >= cx.config.group_max_size {
            return Err(ErrorCode::GroupMaxSizeReached);
        }
        self.members.insert(id.clone(), new_member(&id, req));
        if let Some(instance_id) = &req.instance_id {
            self.static_members.insert(instance_id.clone(), id.clone());
        }
        Ok((id, true))
    }

    /// The member a non-join heartbeat names.
    fn known_member(&self, req: &ConsumerHeartbeatRequest) -> Result<&ConsumerMember, ErrorCode> {
        let member = self
            .members
            .get(&req.member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if req.instance_id.is_some() && member.instance_id != req.instance_id {
            return Err(ErrorCode::FencedInstanceId);
        }
        Ok(member)
    }

    /// A static member rejoining under `new_id` takes over the departed member's
    /// assignment, epoch and target.
    fn replace_static(&mut self, old_id: &str, new_id: &str) -> Result<(), ErrorCode> {
        let old = self
            .members
            .get(old_id)
            .expect("static members are members");
        if old.member_epoch != STATIC_LEAVE_EPOCH {
            return Err(ErrorCode::UnreleasedInstanceId);
        }
        let mut member = self.members.remove(old_id).expect("checked");
        member.member_id = new_id.to_owned();
        member.member_epoch = member.previous_epoch;
        if let Some(target) = self.target.remove(old_id) {
            self.target.insert(new_id.to_owned(), target);
        }
        if let Some(instance_id) = &member.instance_id {
            self.static_members
                .insert(instance_id.clone(), new_id.to_owned());
        }
        self.members.insert(new_id.to_owned(), member);
        Ok(())
    }

    /// Epoch -1 (leave) and -2 (static member away).
    fn leave(
        &mut self,
        cx: &mut ModernCtx<'_>,
        req: &ConsumerHeartbeatRequest,
    ) -> Result<ConsumerHeartbeatResponse, ErrorCode> {
        let member = self.known_member(req)?;
        let mut response = cx.response(member);
        response.member_epoch = req.member_epoch;
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            let member = self.members.get_mut(&req.member_id).expect("known");
            member.previous_epoch = member.member_epoch;
            member.member_epoch = STATIC_LEAVE_EPOCH;
            return Ok(response);
        }
        self.remove_member(cx, &req.member_id);
        Ok(response)
    }

    /// Removes a member (leave, session or revocation timeout) and bumps the group epoch.
    pub(crate) fn remove_member(&mut self, cx: &mut ModernCtx<'_>, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance_id) = &member.instance_id {
            self.static_members.remove(instance_id);
        }
        self.target.remove(member_id);
        self.refresh(cx, true);
    }

    /// Recomputes the subscribed topics' metadata; bumps the group epoch and computes a
    /// new target if it changed or `bump` is set.
    pub(crate) fn refresh(&mut self, cx: &ModernCtx<'_>, bump: bool) {
        let subscribed = self.resolve_subscriptions(cx);
        let bump = bump || subscribed != self.subscribed;
        if !bump {
            return;
        }
        self.subscribed = subscribed;
        self.group_epoch += 1;
        self.assignor = self.pick_assignor().to_owned();
        let members: Vec<AssignorMember> = self
            .members
            .values()
            .map(|m| AssignorMember {
                member_id: m.member_id.clone(),
                instance_id: m.instance_id.clone(),
                topics: member_topics(m, cx),
            })
            .collect();
        self.target = assignor::assign(&self.assignor, &members, &self.subscribed, &self.target);
        self.assignment_epoch = self.group_epoch;
    }

    /// Every subscribed topic that exists, with its partition count.
    fn resolve_subscriptions(&self, cx: &ModernCtx<'_>) -> BTreeMap<String, i32> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for topic in member_topics(m, cx) {
                let count = cx.topics[&topic];
                out.insert(topic, count);
            }
        }
        out
    }

    /// The assignor most members ask for; ties and no requests go to the first of
    /// [`assignor::ASSIGNORS`].
    fn pick_assignor(&self) -> &'static str {
        let votes = |name: &str| {
            self.members
                .values()
                .filter(|m| m.server_assignor.as_deref() == Some(name))
                .count()
        };
        let mut best = assignor::ASSIGNORS[0];
        for &name in assignor::ASSIGNORS {
            if votes(name) > votes(best) {
                best = name;
            }
        }
        best
    }

    /// Moves one member towards its target.
    fn reconcile_member(&mut self, now_ms: u64, member_id: &str, owned: Option<&Assignment>) {
        let empty = Assignment::new();
        let target = self.target.get(member_id).unwrap_or(&empty);
        let others: Vec<&ConsumerMember> = self
            .members
            .values()
            .filter(|m| m.member_id != member_id)
            .collect();
        let owned_by_other = |t: &str, p: i32| others.iter().any(|m| m.owns(t, p));
        let member = &self.members[member_id];
        let mut next = Reconcile {
            target_epoch: self.assignment_epoch,
            target,
            owned,
            owned_by_other: &owned_by_other,
        }
        .next(member);
        let revoking = next.state == MemberState::UnrevokedPartitions;
        next.revocation_deadline_ms = match (revoking, member.revocation_deadline_ms) {
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(now_ms + u64::try_from(next.rebalance_timeout_ms).unwrap_or(0)),
        };
        self.members.insert(member_id.to_owned(), next);
    }

    /// Removes every member whose session or revocation deadline has passed.
    pub(crate) fn on_tick(&mut self, cx: &mut ModernCtx<'_>) {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.next_deadline_ms() <= cx.now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            self.remove_member(cx, &id);
        }
    }
}

/// The topics a member subscribes to that exist.
fn member_topics(m: &ConsumerMember, cx: &ModernCtx<'_>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = m
        .subscribed_topic_names
        .iter()
        .filter(|t| cx.topics.contains_key(*t))
        .cloned()
        .collect();
    if let Some(regex) = &m.subscribed_topic_regex {
        out.extend(
            cx.topics
                .keys()
                .filter(|t| cx.matcher.matches(regex, t))
                .filter(|t| cx.matcher.may_describe(&m.principal, &m.client_host, t))
                .cloned(),
        );
    }
    out
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: an epoch ahead is fenced; one behind
/// only if it is not the previous epoch with a subset of the current assignment (the
/// answer that bumped the epoch may have been lost).
fn check_epoch(member: &ConsumerMember, req: &ConsumerHeartbeatRequest) -> Result<(), ErrorCode> {
    let epoch = req.member_epoch;
    if epoch > member.member_epoch {
        return Err(ErrorCode::FencedMemberEpoch);
    }
    if epoch < member.member_epoch {
        let subset = req.owned.as_ref().is_some_and(|owned| {
            owned.iter().all(|(t, ps)| {
                ps.is_empty() || member.assigned.get(t).is_some_and(|a| ps.is_subset(a))
            })
        });
        if epoch != member.previous_epoch || !subset {
            return Err(ErrorCode::FencedMemberEpoch);
        }
    }
    Ok(())
}

fn new_member(id: &str, req: &ConsumerHeartbeatRequest) -> ConsumerMember {
    ConsumerMember {
        member_id: id.to_owned(),
        instance_id: req.instance_id.clone(),
        rack_id: None,
        client_id: String::new(),
        client_host: String::new(),
        principal: String::new(),
        member_epoch: 0,
        previous_epoch: 0,
        state: MemberState::Stable,
        rebalance_timeout_ms: 0,
        subscribed_topic_names: Vec::new(),
        subscribed_topic_regex: None,
        server_assignor: None,
        assigned: Assignment::new(),
        assignment_epochs: BTreeMap::new(),
        pending_revocation: Assignment::new(),
        session_deadline_ms: 0,
        revocation_deadline_ms: None,
    }
}

/// Applies the heartbeat's non-null fields; true if the subscription or assignor changed.
fn update_member(m: &mut ConsumerMember, req: &ConsumerHeartbeatRequest) -> bool {
    let mut changed = false;
    if let Some(names) = &req.subscribed_topic_names {
        let mut names = names.clone();
        names.sort();
        names.dedup();
        changed |= names != m.subscribed_topic_names;
        m.subscribed_topic_names = names;
    }
    if let Some(regex) = &req.subscribed_topic_regex {
        let regex = (!regex.is_empty()).then(|| regex.clone());
        changed |= regex != m.subscribed_topic_regex;
        m.subscribed_topic_regex = regex;
    }
    if req.server_assignor.is_some() && req.server_assignor != m.server_assignor {
        changed = true;
        m.server_assignor.clone_from(&req.server_assignor);
    }
    if req.rebalance_timeout_ms >= 0 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if req.rack_id.is_some() {
        m.rack_id.clone_from(&req.rack_id);
    }
    m.client_id.clone_from(&req.client_id);
    m.client_host.clone_from(&req.client_host);
    // A regex resolves as its latest sender may see: a new principal resolves anew.
    changed |= m.subscribed_topic_regex.is_some() && m.principal != req.principal;
    m.principal.clone_from(&req.principal);
    changed
}
