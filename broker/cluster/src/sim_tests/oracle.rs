//! The simulator's oracle (the list is in `sim_tests`' module docs).

use super::*;

/// The oracle.
impl Sim {
    pub(super) fn check(&mut self) -> Check {
        self.check_partitions()?;
        self.check_topics()?;
        if self.follower != self.image {
            return Err("the follower's image differs from the leader's".into());
        }
        let bytes = self.image.snapshot_bytes().map_err(|e| e.to_string())?;
        let restored = MetadataImage::from_snapshot(&bytes).map_err(|e| e.to_string())?;
        if restored != self.image {
            return Err("the snapshot does not restore the image".into());
        }
        if let Some((index, bytes)) = self.log.last() {
            let records = decode_batch(bytes).map_err(|e| e.to_string())?;
            // An index at or below the last applied one is refused before anything changes,
            // so the follower can be asked directly.
            if self.follower.apply_batch(*index, &records).is_ok() {
                return Err(format!("index {index} applied twice"));
            }
        }
        Ok(())
    }

    pub(super) fn check_replay(&self) -> Check {
        let mut replay = MetadataImage::new();
        let mut last = 0;
        for (index, bytes) in &self.log {
            if *index <= last {
                return Err(format!("log index {index} after {last}"));
            }
            last = *index;
            let records = decode_batch(bytes).map_err(|e| e.to_string())?;
            let refused = replay
                .apply_batch(*index, &records)
                .map_err(|e| e.to_string())?;
            if !refused.is_empty() {
                return Err(format!("replay refused {refused:?}"));
            }
        }
        if replay != self.image {
            return Err("the image differs from a replay of the committed log".into());
        }
        Ok(())
    }

    pub(super) fn check_partitions(&mut self) -> Check {
        for (&topic_id, topic) in self.image.topics() {
            for (&partition, p) in &topic.partitions {
                let at = format!("{}-{partition}", topic.name);
                if p.leader != NO_LEADER && !self.image.is_active(p.leader) {
                    return Err(format!("{at}: leader {} is not an active broker", p.leader));
                }
                if p.leader != NO_LEADER && !p.isr.contains(&p.leader) {
                    return Err(format!("{at}: leader {} outside the ISR", p.leader));
                }
                if p.isr.iter().any(|id| !p.replicas.contains(id)) || p.isr.is_empty() {
                    return Err(format!("{at}: ISR {:?} not within {:?}", p.isr, p.replicas));
                }
                if p.leader != NO_LEADER && !p.isr.iter().all(|&id| self.image.is_active(id)) {
                    return Err(format!("{at}: ISR {:?} holds an inactive broker", p.isr));
                }
                let leader_broker_epoch =
                    self.image.broker(p.leader).map_or(-1, |b| b.broker_epoch);
                let now = Seen {
                    leader: (p.leader, leader_broker_epoch),
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    isr: p.isr.clone(),
                };
                if let Some(before) = self.seen.insert((topic_id, partition), now.clone()) {
                    epochs_grow(&at, &before, &now)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn check_topics(&self) -> Check {
        let ids = self.image.topic_ids();
        if ids.len() != self.image.topics().len() {
            return Err("topic names and ids are not one-to-one".into());
        }
        for (name, id) in ids {
            if self.image.topics().get(id).is_none_or(|t| &t.name != name) {
                return Err(format!("topic {name} maps to {id:?}, which is not it"));
            }
        }
        let partitions: usize = self
            .image
            .topics()
            .values()
            .map(|t| t.partitions.len())
            .sum();
        if partitions != self.image.partition_count() || partitions > limits::PARTITIONS_MAX {
            return Err("the partition count drifted".into());
        }
        Ok(())
    }
}

/// A partition as the oracle last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Seen {
    /// The leader and its broker epoch: a new incarnation of the same node id is a new
    /// leadership.
    pub(super) leader: (i32, i64),
    pub(super) leader_epoch: i32,
    pub(super) partition_epoch: i32,
    pub(super) isr: Vec<i32>,
}

pub(super) fn epochs_grow(at: &str, before: &Seen, now: &Seen) -> Check {
    if now.leader_epoch < before.leader_epoch || now.partition_epoch < before.partition_epoch {
        return Err(format!("{at}: epochs went down: {before:?} -> {now:?}"));
    }
    if now.leader != before.leader && now.leader_epoch <= before.leader_epoch {
        return Err(format!(
            "{at}: leader {:?} -> {:?} without a new leader epoch ({})",
            before.leader, now.leader, before.leader_epoch
        ));
    }
    let new_leader = now.leader.0;
    if new_leader != before.leader.0 && new_leader != NO_LEADER && !before.isr.contains(&new_leader)
    {
        return Err(format!(
            "{at}: unclean election of {new_leader}, outside the ISR {:?}",
            before.isr
        ));
    }
    let changed = now.leader.0 != before.leader.0 || now.isr != before.isr;
    if changed && now.partition_epoch <= before.partition_epoch {
        return Err(format!(
            "{at}: changed without a new partition epoch: {before:?} -> {now:?}"
        ));
    }
    Ok(())
}
