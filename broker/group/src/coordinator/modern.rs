//! Consumer-protocol groups (KIP-848) at the coordinator: routing ConsumerGroupHeartbeat,
//! the shared group id namespace with classic groups, topic metadata, timers, and the
//! member checks of OffsetCommit / OffsetFetch.

use std::collections::BTreeMap;

use super::Coordinator;
use crate::api::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse};
use crate::consumer::heartbeat::{check_request, heartbeat_error};
use crate::consumer::{ConsumerGroup, ModernCtx, TopicMatcher};
use crate::error::ErrorCode;
use crate::state::GroupState;
use crate::subscription::CONSUMER_PROTOCOL_TYPE;

impl Coordinator {
    /// ConsumerGroupHeartbeat. A classic group with members answers `GROUP_ID_NOT_FOUND`
    /// (as Kafka: it is not a consumer group); an empty classic group becomes a consumer
    /// group on a join. A heartbeat with a non-zero epoch to a group or member the
    /// coordinator does not know (e.g. after a restart) gets `UNKNOWN_MEMBER_ID`, and the
    /// client rejoins with epoch 0.
    pub(crate) fn consumer_heartbeat(
        &mut self,
        now_ms: u64,
        req: &ConsumerHeartbeatRequest,
    ) -> ConsumerHeartbeatResponse {
        if let Err(e) = check_request(req, self.matcher.as_ref()) {
            return heartbeat_error(e);
        }
        match self.groups.get(&req.group_id) {
            Some(g) if g.state != GroupState::Empty || !g.pending_members.is_empty() => {
                return heartbeat_error(ErrorCode::GroupIdNotFound);
            }
            Some(g) if g.modern.is_none() && req.member_epoch != 0 => {
                return heartbeat_error(ErrorCode::UnknownMemberId);
            }
            Some(_) => {}
            None if req.member_epoch != 0 => return heartbeat_error(ErrorCode::UnknownMemberId),
            None => {
                if let Err(e) = self.create_group(now_ms, &req.group_id) {
                    return heartbeat_error(e);
                }
            }
        }
        let group = self
            .groups
            .get_mut(&req.group_id)
            .expect("found or created");
        group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_owned());
        group.modern.get_or_insert_with(Box::default);
        let mut response = Err(ErrorCode::CoordinatorNotAvailable);
        self.with_modern(now_ms, &req.group_id, |modern, cx| {
            response = modern.heartbeat(cx, req);
        });
        response.unwrap_or_else(heartbeat_error)
    }

    /// Tells the coordinator every topic and its partition count (at start, and after
    /// every topic creation, deletion or partition increase). Consumer groups whose
    /// subscribed topics changed get a new group epoch and target assignment; their
    /// members reconcile at their next heartbeat.
    pub fn update_topics(&mut self, now_ms: u64, topics: BTreeMap<String, i32>) {
        self.topics = topics;
        let ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| g.modern.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.with_modern(now_ms, &id, |modern, cx| modern.refresh(cx, false));
        }
        self.debug_check();
    }

    /// Resolves every consumer group's subscriptions again with the topics it has (after a
    /// change of what members may see: ACLs filter regex matches,
    /// [`TopicMatcher::may_describe`]); groups whose topics changed get a new target.
    pub fn resolve_subscriptions_again(&mut self, now_ms: u64) {
        let topics = self.topics.clone();
        self.update_topics(now_ms, topics);
    }

    /// Sets the regex engine for `SubscribedTopicRegex` (the default,
    /// [`crate::consumer::LiteralMatcher`], matches only the identical name).
    pub fn set_topic_matcher(&mut self, matcher: Box<dyn TopicMatcher>) {
        self.matcher = matcher;
    }

    /// A consumer-protocol group, for inspection and ConsumerGroupDescribe.
    pub fn consumer_group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(group_id).and_then(|g| g.modern.as_deref())
    }

    /// The member check of OffsetFetch v9+ (and of OffsetCommit for consumer groups):
    /// `UNKNOWN_MEMBER_ID` for a member the group does not have, `STALE_MEMBER_EPOCH` for
    /// another epoch. A request without a member (epoch < 0, empty id) passes; OffsetCommit
    /// checks separately that the group is then empty.
    pub fn check_member_epoch(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ErrorCode> {
        if member_epoch < 0 && member_id.is_empty() {
            return Ok(());
        }
        let Some(modern) = self.consumer_group(group_id) else {
            // A classic group's fetches name no member epoch; an unknown group has none.
            return match self.groups.get(group_id) {
                Some(g) if g.modern.is_none() && !g.members.is_empty() => Ok(()),
                _ => Err(ErrorCode::UnknownMemberId),
            };
        };
        let member = modern
            .members
            .get(member_id)
            .ok_or(ErrorCode::UnknownMemberId)?;
        if member.member_epoch != member_epoch {
            return Err(ErrorCode::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Runs `f` on a consumer group with a fresh [`ModernCtx`], then refreshes its deadline.
    pub(crate) fn with_modern(
        &mut self,
        now_ms: u64,
        group_id: &str,
        f: impl FnOnce(&mut ConsumerGroup, &mut ModernCtx<'_>),
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(modern) = group.modern.as_deref_mut() else {
            return;
        };
        let had_members = !modern.members.is_empty();
        let mut cx = ModernCtx {
            now_ms,
            config: &self.config,
            rng: self.rng.as_mut(),
            topics: &self.topics,
            matcher: self.matcher.as_ref(),
        };
        f(modern, &mut cx);
        if had_members && modern.members.is_empty() {
            group.state_since_ms = now_ms;
        }
        self.reindex(group_id);
    }
}
