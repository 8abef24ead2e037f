//! The consumer protocol's partition assignors, run by the group leader (the broker only
//! relays assignments): `range` and `roundrobin`, computed as Kafka's Java client does so a
//! `sluice consume --group` leader and a librdkafka or Java member agree on the outcome.
//! Pure functions over member subscriptions and topic partition counts.

use std::collections::{BTreeMap, BTreeSet};

/// The protocol names this client offers, in preference order.
pub const RANGE: &str = "range";
pub const ROUND_ROBIN: &str = "roundrobin";

/// Topic -> sorted partitions.
pub type TopicPartitions = BTreeMap<String, Vec<i32>>;

/// Member id -> its assignment.
pub type Assignment = BTreeMap<String, TopicPartitions>;

/// Runs the named assignor; `None` for a protocol this client does not implement.
pub fn assign(
    protocol: &str,
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &TopicPartitions,
) -> Option<Assignment> {
    match protocol {
        RANGE => Some(range(subscriptions, partitions)),
        ROUND_ROBIN => Some(round_robin(subscriptions, partitions)),
        _ => None,
    }
}

/// Kafka's `RangeAssignor`: per topic, the members subscribed to it (sorted by id) get
/// consecutive ranges; the first `partitions % members` of them get one partition more.
pub fn range(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &TopicPartitions,
) -> Assignment {
    let mut out = empty_assignment(subscriptions);
    for (topic, topic_partitions) in partitions {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        if members.is_empty() {
            continue;
        }
        let per_member = topic_partitions.len() / members.len();
        let extra = topic_partitions.len() % members.len();
        for (i, member) in members.into_iter().enumerate() {
            let start = per_member * i + i.min(extra);
            let len = per_member + usize::from(i < extra);
            let slice = topic_partitions[start..start + len].to_vec();
            if let Some(assigned) = out.get_mut(member) {
                assigned.insert(topic.clone(), slice);
            }
        }
    }
    out
}

/// Kafka's `RoundRobinAssignor`: every topic-partition in (topic, partition) order goes to
/// the next member, in id order and cycling, that subscribes to its topic.
pub fn round_robin(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &TopicPartitions,
) -> Assignment {
    let mut out = empty_assignment(subscriptions);
    let members: Vec<(&String, BTreeSet<&String>)> = subscriptions
        .iter()
        .map(|(member, topics)| (member, topics.iter().collect()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let mut next = 0usize;
    for (topic, topic_partitions) in partitions {
        if !members.iter().any(|(_, topics)| topics.contains(topic)) {
            continue;
        }
        for &partition in topic_partitions {
            while !members[next % members.len()].1.contains(topic) {
                next += 1;
            }
            let member = members[next % members.len()].0;
            next += 1;
            if let Some(assigned) = out.get_mut(member) {
                assigned.entry(topic.clone()).or_default().push(partition);
            }
        }
    }
    out
}

fn empty_assignment(subscriptions: &BTreeMap<String, Vec<String>>) -> Assignment {
    subscriptions
        .keys()
        .map(|m| (m.clone(), TopicPartitions::new()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        members
            .iter()
            .map(|(m, ts)| {
                (
                    (*m).to_owned(),
                    ts.iter().map(|t| (*t).to_owned()).collect(),
                )
            })
            .collect()
    }

    fn parts(topics: &[(&str, i32)]) -> TopicPartitions {
        topics
            .iter()
            .map(|(t, n)| ((*t).to_owned(), (0..*n).collect()))
            .collect()
    }

    #[test]
    fn range_gives_the_first_members_one_more() {
        let out = range(&subs(&[("a", &["t"]), ("b", &["t"])]), &parts(&[("t", 5)]));
        assert_eq!(out["a"]["t"], vec![0, 1, 2]);
        assert_eq!(out["b"]["t"], vec![3, 4]);
    }

    #[test]
    fn range_assigns_each_topic_to_its_subscribers_only() {
        let s = subs(&[("a", &["t", "u"]), ("b", &["t"]), ("c", &["u"])]);
        let out = range(&s, &parts(&[("t", 4), ("u", 2)]));
        assert_eq!(out["a"]["t"], vec![0, 1]);
        assert_eq!(out["b"]["t"], vec![2, 3]);
        assert_eq!(out["a"]["u"], vec![0]);
        assert_eq!(out["c"]["u"], vec![1]);
        assert!(!out["b"].contains_key("u"));
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let out = range(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
            &parts(&[("t", 2)]),
        );
        assert_eq!(out["a"]["t"], vec![0]);
        assert_eq!(out["b"]["t"], vec![1]);
        assert!(out["c"]["t"].is_empty());
    }

    #[test]
    fn round_robin_cycles_over_subscribers() {
        let s = subs(&[("a", &["t", "u"]), ("b", &["t", "u"])]);
        let out = round_robin(&s, &parts(&[("t", 3), ("u", 2)]));
        assert_eq!(out["a"]["t"], vec![0, 2]);
        assert_eq!(out["b"]["t"], vec![1]);
        assert_eq!(out["a"]["u"], vec![1]);
        assert_eq!(out["b"]["u"], vec![0]);
    }

    #[test]
    fn every_partition_is_assigned_exactly_once() {
        let s = subs(&[("m1", &["t"]), ("m2", &["t"]), ("m3", &["t"])]);
        for protocol in [RANGE, ROUND_ROBIN] {
            let out = assign(protocol, &s, &parts(&[("t", 10)])).unwrap();
            let mut all: Vec<i32> = out.values().flat_map(|a| a["t"].clone()).collect();
            all.sort_unstable();
            assert_eq!(all, (0..10).collect::<Vec<_>>(), "{protocol}");
        }
        assert!(assign("cooperative-sticky", &s, &parts(&[("t", 1)])).is_none());
    }
}
