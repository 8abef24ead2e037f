//! The simulator's oracle (the list is in `sim_tests`' module docs).

use super::*;

impl Sim {
    pub(super) fn check(&mut self) -> Check {
        for i in 0..self.n {
            self.check_node(i)?;
        }
        for a in 0..self.n {
            for b in a + 1..self.n {
                self.check_agree(a, b)?;
            }
        }
        Ok(())
    }

    fn check_node(&mut self, i: usize) -> Check {
        let node = &self.nodes[i];
        let Some(r) = node.replica.as_ref() else {
            return Ok(());
        };
        let id = node.id;
        if let (Some(before), Some(now)) = (node.epoch_seen, r.leader_epoch())
            && now < before
        {
            return Err(format!("broker {id}: leader epoch {before} -> {now}"));
        }
        let log = r.log();
        if log
            .batches()
            .windows(2)
            .any(|w| w[1].leader_epoch < w[0].leader_epoch)
        {
            return Err(format!("broker {id}: batch epochs go down in its log"));
        }
        let cache = log.epochs();
        if cache
            .windows(2)
            .any(|w| w[1].epoch <= w[0].epoch || w[1].start_offset <= w[0].start_offset)
            || cache
                .last()
                .is_some_and(|e| e.start_offset > log.log_end_offset())
        {
            return Err(format!("broker {id}: epoch cache out of order: {cache:?}"));
        }
        if let Some(epoch) = r.leading_epoch() {
            let hw = r.high_watermark();
            if let Some((generation, e, before)) = node.leader_hw
                && generation == node.generation
                && e == epoch
                && hw < before
            {
                return Err(format!(
                    "broker {id}: leader high watermark went back {before} -> {hw} in epoch {epoch}"
                ));
            }
            for (&offset, &(payload, since)) in &self.committed {
                if since > epoch {
                    continue;
                }
                let found = log.batch_at(offset);
                if found.is_none_or(|b| b.base_offset != offset || b.payload != payload) {
                    return Err(format!(
                        "broker {id} leads at epoch {epoch} without the batch committed at \
                         {offset} in epoch {since} (payload {payload:#x}; it has {found:?})"
                    ));
                }
            }
        }
        let (generation, leading, hw, epoch) = (
            node.generation,
            r.leading_epoch(),
            r.high_watermark(),
            r.leader_epoch(),
        );
        let node = &mut self.nodes[i];
        node.epoch_seen = epoch.or(node.epoch_seen);
        if let Some(e) = leading {
            node.leader_hw = Some((generation, e, hw));
        }
        Ok(())
    }

    /// Two replicas hold the same batches below the smaller high watermark.
    fn check_agree(&self, a: usize, b: usize) -> Check {
        let (Some(ra), Some(rb)) = (&self.nodes[a].replica, &self.nodes[b].replica) else {
            return Ok(());
        };
        let hw = ra.high_watermark().min(rb.high_watermark());
        let below = |r: &Replica| r.log().batches().partition_point(|x| x.base_offset < hw);
        let (na, nb) = (below(ra), below(rb));
        let (la, lb) = (&ra.log().batches()[..na], &rb.log().batches()[..nb]);
        if la != lb {
            let at = la
                .iter()
                .zip(lb)
                .position(|(x, y)| x != y)
                .unwrap_or(na.min(nb));
            return Err(format!(
                "brokers {} and {} differ below the high watermark {hw}: batch {at}: {:?} vs {:?}",
                self.nodes[a].id,
                self.nodes[b].id,
                la.get(at),
                lb.get(at)
            ));
        }
        Ok(())
    }

    /// After the calm phase: everyone up, in the ISR, with the leader's log; producers'
    /// acknowledged batches in order, an idempotent producer's once each.
    pub(super) fn check_converged(&self) -> Check {
        let p = self.partition()?;
        let mut isr = p.isr.clone();
        isr.sort_unstable();
        let mut all = p.replicas.clone();
        all.sort_unstable();
        if p.leader == NO_LEADER || isr != all {
            return Err(format!("not converged: {p:?}"));
        }
        let li = self.index_of(p.leader).ok_or("no leader node")?;
        let leader = self.nodes[li]
            .replica
            .as_ref()
            .ok_or("the leader is down")?;
        if leader.leading_epoch() != Some(p.leader_epoch) {
            return Err(format!("broker {} does not lead: {leader:?}", p.leader));
        }
        for node in &self.nodes {
            let r = node
                .replica
                .as_ref()
                .ok_or(format!("broker {} is down", node.id))?;
            if r.log().batches() != leader.log().batches() {
                return Err(format!(
                    "broker {}'s log is not the leader's: {r:?}",
                    node.id
                ));
            }
            if r.high_watermark() != r.log().log_end_offset() {
                return Err(format!(
                    "broker {}'s high watermark is behind: {r:?}",
                    node.id
                ));
            }
        }
        self.check_producers(leader.log().batches())
    }

    fn check_producers(&self, log: &[crate::Batch]) -> Check {
        let mut first: BTreeMap<u64, (i64, usize)> = BTreeMap::new();
        for b in log {
            first.entry(b.payload).or_insert((b.base_offset, 0)).1 += 1;
        }
        for (p, producer) in self.producers.iter().enumerate() {
            let mut last = -1;
            for &(payload, offset) in &producer.acked {
                let Some(&(at, count)) = first.get(&payload) else {
                    if producer.acks == Acks::All {
                        return Err(format!(
                            "producer {p}: acked {payload:#x} at {offset} is lost"
                        ));
                    }
                    continue;
                };
                if at <= last {
                    return Err(format!(
                        "producer {p}: {payload:#x} at {at} is out of order"
                    ));
                }
                last = at;
                if producer.producer_id >= 0 && count > 1 {
                    return Err(format!(
                        "idempotent producer {p}: {payload:#x} {count} times"
                    ));
                }
            }
            if producer.producer_id >= 0 {
                let dups = first
                    .iter()
                    .filter(|(pl, (_, count))| producer.owns(**pl) && *count > 1)
                    .count();
                if dups > 0 {
                    return Err(format!("idempotent producer {p}: {dups} batches twice"));
                }
            }
        }
        Ok(())
    }
}
