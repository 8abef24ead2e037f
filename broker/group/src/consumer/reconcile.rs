//! Moving one member from its current assignment towards its target (Kafka's
//! `CurrentAssignmentBuilder`). A partition is handed to a member only when no other
//! member owns it (assigned or pending revocation), and a member gives partitions up by
//! revoking them itself, at its current epoch, before it moves to the target epoch: so no
//! partition is ever owned by two members at once.

use std::collections::{BTreeMap, BTreeSet};

use super::{Assignment, ConsumerMember, MemberState};

/// What reconciliation needs besides the member.
pub(crate) struct Reconcile<'a> {
    /// The group's target assignment epoch.
    pub target_epoch: i32,
    /// The member's target assignment.
    pub target: &'a Assignment,
    /// The partitions the member reported owning in this heartbeat, `None` if it did not.
    pub owned: Option<&'a Assignment>,
    /// Whether another member owns a partition (assigned or pending revocation).
    pub owned_by_other: &'a dyn Fn(&str, i32) -> bool,
}

impl Reconcile<'_> {
    /// The member's next state.
    pub(crate) fn next(&self, member: &ConsumerMember) -> ConsumerMember {
        match member.state {
            MemberState::Stable if member.member_epoch == self.target_epoch => member.clone(),
            MemberState::Stable | MemberState::UnreleasedPartitions => {
                self.compute(member, member.member_epoch)
            }
            MemberState::UnrevokedPartitions => {
                if self.owns_any(&member.pending_revocation) {
                    return member.clone();
                }
                // Revoked: the member moves on (Kafka bumps the epoch by one here; the
                // target epoch follows in `compute`).
                self.compute(member, member.member_epoch + 1)
            }
        }
    }

    /// True if the member still reports owning any of `partitions` (or reported nothing).
    fn owns_any(&self, partitions: &Assignment) -> bool {
        let Some(owned) = self.owned else {
            return true;
        };
        partitions
            .iter()
            .any(|(topic, ps)| owned.get(topic).is_some_and(|o| !o.is_disjoint(ps)))
    }

    fn compute(&self, member: &ConsumerMember, epoch: i32) -> ConsumerMember {
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<&String> = self.target.keys().chain(member.assigned.keys()).collect();
        for topic in topics {
            let empty = BTreeSet::new();
            let target = self.target.get(topic).unwrap_or(&empty);
            let current = member.assigned.get(topic).unwrap_or(&empty);
            let mut kept: BTreeSet<i32> = current.intersection(target).copied().collect();
            let revoked: BTreeSet<i32> = current.difference(target).copied().collect();
            for &p in target.difference(current) {
                if (self.owned_by_other)(topic, p) {
                    unreleased = true;
                } else {
                    kept.insert(p);
                }
            }
            if !revoked.is_empty() {
                revoking.insert(topic.clone(), revoked);
            }
            if !kept.is_empty() {
                assigned.insert(topic.clone(), kept);
            }
        }
        let mut next = member.clone();
        if !revoking.is_empty() && self.owns_any(&revoking) {
            // Keep only what stays; the new partitions wait until the revocation is acked.
            // The partitions being revoked keep their assignment epochs until they go.
            next.assigned = intersect(&member.assigned, self.target);
            next.pending_revocation = revoking;
            next.state = MemberState::UnrevokedPartitions;
            next.set_epoch(epoch);
            return next;
        }
        next.assigned = assigned;
        next.pending_revocation = Assignment::new();
        next.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        next.set_epoch(self.target_epoch);
        next.assignment_epochs = assignment_epochs(member, &next.assigned, self.target_epoch);
        next
    }
}

/// The assignment epoch of every partition in `assigned`: a partition the member already
/// had keeps its epoch, a new one is assigned at `epoch`.
fn assignment_epochs(
    member: &ConsumerMember,
    assigned: &Assignment,
    epoch: i32,
) -> BTreeMap<String, BTreeMap<i32, i32>> {
    assigned
        .iter()
        .map(|(topic, ps)| {
            let before = member.assignment_epochs.get(topic);
            let epochs = ps
                .iter()
                .map(|&p| (p, before.and_then(|b| b.get(&p)).copied().unwrap_or(epoch)))
                .collect();
            (topic.clone(), epochs)
        })
        .collect()
}

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    a.iter()
        .filter_map(|(t, ps)| {
            let both: BTreeSet<i32> = b
                .get(t)
                .map_or_else(BTreeSet::new, |q| ps.intersection(q).copied().collect());
            (!both.is_empty()).then(|| (t.clone(), both))
        })
        .collect()
}
