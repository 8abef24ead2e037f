//! Where new partitions' replicas go: Kafka's round robin from a random starting index
//! with a random shift for the followers (`AdminUtils.assignReplicasToBrokers`), over the
//! active brokers; rack-aware when every active broker has a rack (brokers listed
//! alternating racks, and each partition's replicas on distinct racks while racks remain).

use std::collections::{BTreeMap, BTreeSet};

use sluice_kafka::rng::SplitMix64;

use crate::image::MetadataImage;

/// The active brokers in placement order: by node id, or alternating racks when every one
/// has a rack (rack `a`'s first, rack `b`'s first, ..., rack `a`'s second, ...).
pub(super) fn brokers(image: &MetadataImage) -> Vec<(i32, Option<String>)> {
    let active: Vec<(i32, Option<String>)> = image
        .brokers()
        .iter()
        .filter(|(_, b)| b.is_active())
        .map(|(&id, b)| (id, b.registration.rack.clone()))
        .collect();
    if active.is_empty() || active.iter().any(|(_, rack)| rack.is_none()) {
        return active;
    }
    let mut by_rack: BTreeMap<Option<String>, Vec<(i32, Option<String>)>> = BTreeMap::new();
    for broker in active {
        by_rack.entry(broker.1.clone()).or_default().push(broker);
    }
    let mut out = Vec::new();
    let deepest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    for i in 0..deepest {
        out.extend(by_rack.values().filter_map(|rack| rack.get(i).cloned()));
    }
    out
}

/// Replicas for partitions `first..first + count` of one topic: `rf` distinct brokers each,
/// the first one the preferred leader. `rf` must be within `1..=brokers.len()`.
pub(super) fn place(
    brokers: &[(i32, Option<String>)],
    first: i32,
    count: i32,
    rf: usize,
    rng: &mut SplitMix64,
) -> Vec<Vec<i32>> {
    let n = brokers.len();
    assert!(rf >= 1 && rf <= n, "placement of rf {rf} over {n} brokers");
    let start = rng.below(n as u64) as usize;
    let mut shift = rng.below(n as u64) as usize;
    let racks: BTreeSet<&Option<String>> = brokers.iter().map(|(_, r)| r).collect();
    let mut out = Vec::with_capacity(count.max(0) as usize);
    for p in first..first + count {
        let p = p as usize;
        if p > 0 && p.is_multiple_of(n) {
            shift += 1;
        }
        let lead = (p + start) % n;
        let mut chosen = vec![lead];
        for j in 0..rf - 1 {
            // Kafka's follower index: a shift that varies per lap so that followers of
            // consecutive partitions spread too.
            let base = if n > 1 {
                (lead + 1 + (shift + j) % (n - 1)) % n
            } else {
                lead
            };
            chosen.push(pick(brokers, &chosen, base, racks.len()));
        }
        out.push(chosen.into_iter().map(|i| brokers[i].0).collect());
    }
    out
}

/// From `base` on, the first broker not chosen yet, preferring one on a rack not used yet
/// while some rack is unused.
fn pick(brokers: &[(i32, Option<String>)], chosen: &[usize], base: usize, racks: usize) -> usize {
    let n = brokers.len();
    let used: BTreeSet<&Option<String>> = chosen.iter().map(|&i| &brokers[i].1).collect();
    let fresh_rack = |i: usize| used.len() >= racks || !used.contains(&brokers[i].1);
    let free = |i: usize| !chosen.contains(&i);
    (0..n)
        .map(|k| (base + k) % n)
        .find(|&i| free(i) && fresh_rack(i))
        .or_else(|| (0..n).map(|k| (base + k) % n).find(|&i| free(i)))
        .expect("rf <= brokers: a free broker remains")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(brokers: &[(i32, Option<String>)], rf: usize) -> Vec<Vec<i32>> {
        place(brokers, 0, 12, rf, &mut SplitMix64::new(3))
    }

    #[test]
    fn replicas_are_distinct_and_leaders_round_robin() {
        let brokers: Vec<_> = (1..=4).map(|id| (id, None)).collect();
        let placed = spread(&brokers, 3);
        for replicas in &placed {
            let set: BTreeSet<_> = replicas.iter().collect();
            assert_eq!(set.len(), 3, "{placed:?}");
        }
        let mut leaders = BTreeMap::new();
        for replicas in &placed {
            *leaders.entry(replicas[0]).or_insert(0) += 1;
        }
        assert!(leaders.values().all(|&n| n == 3), "{leaders:?}");
    }

    #[test]
    fn with_racks_replicas_spread_over_racks() {
        let rack = |r: &str| Some(r.to_owned());
        let brokers = [
            (1, rack("a")),
            (2, rack("a")),
            (3, rack("b")),
            (4, rack("b")),
        ];
        let ordered: Vec<(i32, Option<String>)> = {
            // As `brokers()` orders them: alternating racks.
            vec![
                brokers[0].clone(),
                brokers[2].clone(),
                brokers[1].clone(),
                brokers[3].clone(),
            ]
        };
        for replicas in spread(&ordered, 2) {
            let racks: BTreeSet<_> = replicas
                .iter()
                .map(|id| brokers.iter().find(|b| b.0 == *id).unwrap().1.clone())
                .collect();
            assert_eq!(racks.len(), 2, "{replicas:?}");
        }
    }
}
