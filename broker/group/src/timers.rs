//! Removing members and the group's timers: session expiry (Kafka's
//! `DelayedHeartbeat`), the new-member join timeout, pending-member expiry, the join
//! timer (`DelayedJoin` / `InitialDelayedJoin`) and the pending-sync timer (`DelayedSync`).

use crate::api::Effect;
use crate::error::ErrorCode;
use crate::group::{Ctx, Group, InitialDelay, Phase, join_error, respond, sync_error};
use crate::state::GroupState;

impl Group {
    /// Removes a member; its waiting requests get `UNKNOWN_MEMBER_ID` (so the client
    /// rejoins), and leadership passes to the first remaining member. False if it was
    /// not a member.
    pub(crate) fn remove_member(&mut self, member_id: &str, out: &mut Vec<Effect>) -> bool {
        let Some(member) = self.members.remove(member_id) else {
            return false;
        };
        if let Some(join) = member.join_request {
            respond(out, join, join_error("", ErrorCode::UnknownMemberId));
        }
        if let Some(sync) = member.sync_request {
            respond(out, sync, sync_error(ErrorCode::UnknownMemberId));
        }
        if let Some(instance_id) = &member.instance_id {
            self.static_members.remove(instance_id);
        }
        self.pending_sync.remove(member_id);
        if self.leader.as_deref() == Some(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        true
    }

    /// Kafka's `removeMemberAndUpdateGroup` (leave, session expiry).
    pub(crate) fn remove_member_and_update(
        &mut self,
        ctx: &mut Ctx<'_>,
        member_id: &str,
        out: &mut Vec<Effect>,
    ) {
        if !self.remove_member(member_id, out) {
            return;
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(ctx, out)
            }
            GroupState::PreparingRebalance => self.try_complete_join(ctx, out),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Fires every timer due at `ctx.now_ms`: pending-member and session expiry, then the
    /// phase timer.
    pub(crate) fn on_tick(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        let now_ms = ctx.now_ms;
        let before = self.pending_members.len();
        self.pending_members
            .retain(|_, expiry_ms| *expiry_ms > now_ms);
        if self.pending_members.len() != before {
            self.try_complete_join(ctx, out);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.expiry_ms().is_some_and(|at| at <= now_ms))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            // An earlier removal may have completed a join, which removes or revives others.
            let member = self.members.get(&id);
            if member
                .and_then(|m| m.expiry_ms())
                .is_some_and(|at| at <= now_ms)
            {
                self.remove_member_and_update(ctx, &id, out);
            }
        }
        match self.phase {
            Phase::Join {
                deadline_ms,
                initial,
            } if deadline_ms <= now_ms => self.join_timer(ctx, initial, out),
            Phase::Sync { deadline_ms } if deadline_ms <= now_ms => self.sync_timer(ctx, out),
            _ => {}
        }
    }

    /// The join timer: extend the initial delay while members keep arriving, else complete.
    fn join_timer(
        &mut self,
        ctx: &mut Ctx<'_>,
        initial: Option<InitialDelay>,
        out: &mut Vec<Effect>,
    ) {
        if let Some(InitialDelay { remaining_ms }) = initial
            && self.new_member_added
            && remaining_ms > 0
        {
            self.new_member_added = false;
            let delay_ms = u64::from(ctx.config.initial_rebalance_delay_ms).min(remaining_ms);
            let initial = Some(InitialDelay {
                remaining_ms: remaining_ms - delay_ms,
            });
            self.phase = Phase::Join {
                deadline_ms: ctx.now_ms + delay_ms,
                initial,
            };
            return;
        }
        self.complete_join(ctx, out);
    }

    /// The pending-sync timer: members that never sent SyncGroup are removed, and the
    /// group rebalances without them.
    fn sync_timer(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Effect>) {
        self.phase = Phase::Idle;
        if self.pending_sync.is_empty() {
            return;
        }
        let missing: Vec<String> = std::mem::take(&mut self.pending_sync).into_iter().collect();
        for id in &missing {
            self.remove_member(id, out);
        }
        self.prepare_rebalance(ctx, out);
    }
}
