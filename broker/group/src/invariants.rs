//! Invariants of the coordinator, checked after every call in debug builds and by the
//! simulation tests. A violation is always our bug, never the client's.

use std::collections::BTreeMap;

use crate::consumer::{ConsumerGroup, MemberState};
use crate::coordinator::Coordinator;
use crate::group::{Group, Phase};
use crate::limits;
use crate::state::GroupState;

impl Group {
    /// Panics if the group's bookkeeping is inconsistent.
    pub(crate) fn check_invariants(&self) {
        let id = &self.id;
        let state = self.state;
        assert!(
            state != GroupState::Dead,
            "group {id}: a Dead group is still registered"
        );
        assert!(self.generation >= 0, "group {id}: negative generation");
        assert!(
            self.members.len() + self.pending_members.len() <= limits::GROUP_MEMBERS_MAX,
            "group {id}: over {} members",
            limits::GROUP_MEMBERS_MAX
        );
        if state == GroupState::Empty {
            assert!(self.members.is_empty(), "group {id}: Empty with members");
        }
        if self.members.is_empty() {
            // PreparingRebalance without members: the last one left during the initial delay.
            let ok = matches!(state, GroupState::Empty | GroupState::PreparingRebalance);
            assert!(ok, "group {id}: {state} without members");
        }
        if let Some(leader) = &self.leader {
            assert!(
                self.members.contains_key(leader),
                "group {id}: leader {leader} is not a member"
            );
        }
        if matches!(state, GroupState::CompletingRebalance | GroupState::Stable) {
            assert!(
                self.leader.is_some(),
                "group {id}: {state} without a leader"
            );
            assert!(
                self.protocol_name.is_some(),
                "group {id}: {state} without a protocol"
            );
        }
        assert_eq!(
            state == GroupState::PreparingRebalance,
            matches!(self.phase, Phase::Join { .. }),
            "group {id}: the join timer runs exactly in PreparingRebalance"
        );
        self.check_members();
        if let Some(modern) = &self.modern {
            assert!(
                state == GroupState::Empty && self.members.is_empty(),
                "group {id}: classic members in a consumer-protocol group"
            );
            modern.check_invariants(id);
        }
    }

    fn check_members(&self) {
        let id = &self.id;
        for (instance_id, member_id) in &self.static_members {
            let member = self.members.get(member_id);
            assert!(
                member.is_some_and(|m| m.instance_id.as_ref() == Some(instance_id)),
                "group {id}: instance {instance_id} maps to {member_id}, which does not carry it"
            );
        }
        for (member_id, member) in &self.members {
            assert_eq!(
                member_id, &member.id,
                "group {id}: member filed under another id"
            );
            if let Some(instance_id) = &member.instance_id {
                assert_eq!(
                    self.static_members.get(instance_id),
                    Some(member_id),
                    "group {id}: unmapped static member"
                );
            }
            if member.join_request.is_some() {
                assert_eq!(
                    self.state,
                    GroupState::PreparingRebalance,
                    "group {id}: join waiting outside a rebalance"
                );
            }
            if member.sync_request.is_some() {
                assert_eq!(
                    self.state,
                    GroupState::CompletingRebalance,
                    "group {id}: sync waiting outside CompletingRebalance"
                );
            }
            assert!(
                !self.pending_members.contains_key(member_id),
                "group {id}: {member_id} is pending and a member"
            );
        }
        for member_id in &self.pending_sync {
            assert!(
                self.members.contains_key(member_id),
                "group {id}: pending sync for non-member {member_id}"
            );
        }
        if !self.pending_sync.is_empty() {
            assert!(
                matches!(
                    self.state,
                    GroupState::CompletingRebalance | GroupState::Stable
                ),
                "group {id}: pending syncs in {}",
                self.state
            );
        }
    }
}

impl Coordinator {
    /// Panics if any group or the deadline index is inconsistent. Runs after every call in
    /// debug builds; simulations call it too.
    pub fn check_invariants(&self) {
        let pending_commits = self.pending_commit_counts();
        for (id, group) in &self.groups {
            assert_eq!(id, &group.id, "group filed under another id");
            group.check_invariants();
            assert_eq!(
                self.indexed_deadline(id),
                group.next_deadline_ms(),
                "group {id}: stale deadline index"
            );
            let pending = pending_commits
                .get(&(id.as_str(), group.incarnation))
                .copied()
                .unwrap_or(0);
            assert_eq!(
                pending, group.pending_commits,
                "group {id}: pending commit count"
            );
        }
        assert!(
            self.pending.len() <= limits::PENDING_PERSISTS_MAX,
            "over {} pending persists",
            limits::PENDING_PERSISTS_MAX
        );
    }
}

impl ConsumerGroup {
    /// Panics if a partition is owned by two members, an epoch is ahead of the group's, or
    /// the static-member and target maps disagree with the members.
    pub(crate) fn check_invariants(&self, id: &str) {
        assert!(
            self.assignment_epoch <= self.group_epoch,
            "group {id}: assignment epoch {} ahead of group epoch {}",
            self.assignment_epoch,
            self.group_epoch
        );
        let mut owners: BTreeMap<(&str, i32), &str> = BTreeMap::new();
        for (member_id, m) in &self.members {
            assert_eq!(
                member_id, &m.member_id,
                "group {id}: member filed under another id"
            );
            assert!(
                m.member_epoch <= self.group_epoch,
                "group {id}: member {member_id} epoch {} ahead of group epoch {}",
                m.member_epoch,
                self.group_epoch
            );
            let revoking = m.state == MemberState::UnrevokedPartitions;
            assert_eq!(
                revoking,
                !m.pending_revocation.is_empty(),
                "group {id}: member {member_id} revokes exactly in unrevoked_partitions"
            );
            for (topic, ps) in m.assigned.iter().chain(&m.pending_revocation) {
                for &p in ps {
                    if let Some(other) = owners.insert((topic.as_str(), p), member_id.as_str()) {
                        panic!("group {id}: {topic}-{p} owned by {other} and {member_id}");
                    }
                    let at = m.assignment_epochs.get(topic).and_then(|e| e.get(&p));
                    assert!(
                        at.is_some_and(|&at| m.member_epoch < 0 || at <= m.member_epoch),
                        "group {id}: {topic}-{p} of {member_id} at epoch {} has assignment epoch {at:?}",
                        m.member_epoch
                    );
                }
            }
            if let Some(instance_id) = &m.instance_id {
                assert_eq!(
                    self.static_members.get(instance_id),
                    Some(member_id),
                    "group {id}: static member {member_id} not filed under {instance_id}"
                );
            }
        }
        assert!(
            self.static_members
                .values()
                .all(|m| self.members.contains_key(m)),
            "group {id}: a static member id is not a member"
        );
        assert!(
            self.target.keys().all(|m| self.members.contains_key(m)),
            "group {id}: a target assignment of a removed member"
        );
    }
}
