//! The server-side assignors of consumer-protocol groups (KIP-848): `uniform` (Kafka's
//! default) and `range`. Both are pure functions of the members' subscriptions, the
//! subscribed topics' partition counts and (for `uniform`) the current target assignment.

use std::collections::{BTreeMap, BTreeSet};

use super::Assignment;

/// `uniform`: balanced and sticky (Kafka's `UniformAssignor`).
pub const UNIFORM: &str = "uniform";
/// `range`: per topic, contiguous ranges in member order (Kafka's `RangeAssignor`).
pub const RANGE: &str = "range";
/// The assignors, in preference order: the first is the default.
pub const ASSIGNORS: &[&str] = &[UNIFORM, RANGE];

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignorMember {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`: orders `range` members so a restarted static member gets its
    /// old ranges back.
    pub instance_id: Option<String>,
    /// Subscribed topics that exist.
    pub topics: BTreeSet<String>,
}

/// Computes the target assignment of every member (one entry per member, possibly empty).
/// `topics` holds the partition count of every subscribed topic; `current` is the previous
/// target (`uniform` keeps what it can of it). An unknown `assignor` falls back to
/// `uniform` (the coordinator refuses unknown names before they get here).
pub fn assign(
    assignor: &str,
    members: &[AssignorMember],
    topics: &BTreeMap<String, i32>,
    current: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        RANGE => range(members, topics),
        _ => uniform(members, topics, current),
    }
}

/// Per topic, the subscribers sorted by instance id then member id; each gets
/// `partitions / subscribers` contiguous partitions, the first `partitions % subscribers`
/// one more.
fn range(
    members: &[AssignorMember],
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out = empty_assignments(members);
    for (topic, &count) in topics {
        let mut subscribers: Vec<&AssignorMember> = members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        subscribers.sort_by(|a, b| {
            (a.instance_id.as_deref(), &a.member_id).cmp(&(b.instance_id.as_deref(), &b.member_id))
        });
        let n = i32::try_from(subscribers.len()).unwrap_or(i32::MAX);
        let (quota, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in (0..).zip(&subscribers) {
            let len = quota + i32::from(i < extra);
            let partitions: BTreeSet<i32> = (next..next + len).collect();
            next += len;
            if !partitions.is_empty() {
                let a = out
                    .get_mut(&m.member_id)
                    .expect("every member has an entry");
                a.insert(topic.clone(), partitions);
            }
        }
    }
    out
}

/// Sticky and balanced: every member keeps the partitions of its current target that it
/// still subscribes to; unowned partitions go to the eligible member with the fewest; then
/// partitions move from a member to an eligible one with at least two fewer until none
/// can. Each move lowers the sum of squared counts, so the loop ends; the result gives
/// every member of a homogeneous group `floor` or `ceil` of partitions / members, as
/// Kafka's does (for heterogeneous subscriptions it is balanced per partition's
/// subscribers, which may differ in detail from Kafka's).
fn uniform(
    members: &[AssignorMember],
    topics: &BTreeMap<String, i32>,
    current: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let eligible = |topic: &str| -> Vec<&str> {
        members
            .iter()
            .filter(|m| m.topics.contains(topic))
            .map(|m| m.member_id.as_str())
            .collect()
    };
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    for m in members {
        for (topic, partitions) in current.get(&m.member_id).into_iter().flatten() {
            let count = topics.get(topic).copied().unwrap_or(0);
            if !m.topics.contains(topic) {
                continue;
            }
            for &p in partitions.iter().filter(|&&p| p < count) {
                owner.insert((topic.clone(), p), m.member_id.clone());
            }
        }
    }
    let mut counts: BTreeMap<&str, usize> =
        members.iter().map(|m| (m.member_id.as_str(), 0)).collect();
    for id in owner.values() {
        *counts.get_mut(id.as_str()).expect("owners are members") += 1;
    }
    for (topic, &count) in topics {
        let candidates = eligible(topic);
        for p in 0..count {
            let key = (topic.clone(), p);
            if owner.contains_key(&key) {
                continue;
            }
            if let Some(&least) = candidates.iter().min_by_key(|id| (counts[**id], **id)) {
                *counts.get_mut(least).expect("candidate") += 1;
                owner.insert(key, least.to_owned());
            }
        }
    }
    balance(&mut owner, &mut counts, &eligible);
    let mut out = empty_assignments(members);
    for ((topic, p), id) in owner {
        let a = out.get_mut(&id).expect("every member has an entry");
        a.entry(topic).or_default().insert(p);
    }
    out
}

/// Moves partitions from fuller to emptier eligible members until no member holds two or
/// more partitions than an eligible one.
fn balance<'a>(
    owner: &mut BTreeMap<(String, i32), String>,
    counts: &mut BTreeMap<&'a str, usize>,
    eligible: &dyn Fn(&str) -> Vec<&'a str>,
) {
    let mut cache: BTreeMap<String, Vec<&'a str>> = BTreeMap::new();
    loop {
        let mut moved = false;
        let keys: Vec<(String, i32)> = owner.keys().cloned().collect();
        for key in keys {
            let from = owner[&key].clone();
            let candidates = cache
                .entry(key.0.clone())
                .or_insert_with(|| eligible(&key.0));
            let Some(&to) = candidates.iter().min_by_key(|id| (counts[**id], **id)) else {
                continue;
            };
            if counts[from.as_str()] > counts[to] + 1 {
                *counts.get_mut(from.as_str()).expect("owner") -= 1;
                *counts.get_mut(to).expect("candidate") += 1;
                owner.insert(key, to.to_owned());
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

fn empty_assignments(members: &[AssignorMember]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> AssignorMember {
        AssignorMember {
            member_id: id.into(),
            instance_id: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
        }
    }

    fn sizes(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn range_splits_each_topic_in_member_order() {
        let members = [member("b", &["t"]), member("a", &["t"])];
        let topics = BTreeMap::from([("t".to_owned(), 5)]);
        let a = assign(RANGE, &members, &topics, &BTreeMap::new());
        assert_eq!(a["a"]["t"], BTreeSet::from([0, 1, 2]));
        assert_eq!(a["b"]["t"], BTreeSet::from([3, 4]));
    }

    #[test]
    fn uniform_balances_and_sticks() {
        let topics = BTreeMap::from([("t".to_owned(), 4), ("u".to_owned(), 3)]);
        let two = [member("a", &["t", "u"]), member("b", &["t", "u"])];
        let first = assign(UNIFORM, &two, &topics, &BTreeMap::new());
        assert_eq!(sizes(&first), vec![4, 3]);
        let three = [
            member("a", &["t", "u"]),
            member("b", &["t", "u"]),
            member("c", &["t", "u"]),
        ];
        let second = assign(UNIFORM, &three, &topics, &first);
        let mut s = sizes(&second);
        s.sort_unstable();
        assert_eq!(s, vec![2, 2, 3]);
        // a and b only lost partitions; they gained none.
        for id in ["a", "b"] {
            for (t, ps) in &second[id] {
                assert!(
                    ps.is_subset(&first[id][t]),
                    "{id} gained a partition of {t}"
                );
            }
        }
    }

    #[test]
    fn uniform_respects_subscriptions() {
        let topics = BTreeMap::from([("t".to_owned(), 2), ("u".to_owned(), 4)]);
        let members = [member("a", &["t"]), member("b", &["t", "u"])];
        let a = assign(UNIFORM, &members, &topics, &BTreeMap::new());
        assert!(a["a"].keys().all(|t| t == "t"));
        assert_eq!(a["b"]["u"].len(), 4);
        assert_eq!(sizes(&a).iter().sum::<usize>(), 6);
    }
}
