//! The simulator's brokers and controller: commits, registration and heartbeats, metadata
//! each broker applies at its own pace, crashes with a crash image, power losses, pauses,
//! restarts, and the controller's session expiry.

use super::*;

impl Sim {
    /// Applies `records` to the image as the next entry (the Raft log, atomic here).
    pub(super) fn commit(&mut self, records: Vec<MetadataRecord>) -> Result<u64, String> {
        if records.is_empty() {
            return Ok(self.image.last_applied_index());
        }
        let index = self.next_index;
        self.next_index += 1;
        let refused = self
            .image
            .apply_batch(index, &records)
            .map_err(|e| e.to_string())?;
        if !refused.is_empty() {
            return Err(format!(
                "the image refused the controller's records: {refused:?}"
            ));
        }
        for record in &records {
            if matches!(record, MetadataRecord::FenceBroker { .. }) {
                self.stats.fenced += 1;
            }
        }
        self.note_partition()?;
        Ok(index)
    }

    /// Counts leader and ISR changes.
    fn note_partition(&mut self) -> Check {
        let Some(now) = self.image.partition(self.topic_id, 0).cloned() else {
            return Ok(());
        };
        if let Some(before) = &self.last_partition {
            if now.leader != before.leader {
                self.stats.leader_changes += 1;
            }
            if now.isr.len() < before.isr.len() {
                self.stats.isr_shrinks += 1;
            } else if now.isr.len() > before.isr.len() {
                self.stats.isr_expands += 1;
            }
            if now.leader_epoch < before.leader_epoch
                || now.partition_epoch < before.partition_epoch
            {
                return Err(format!("partition epochs went down: {before:?} -> {now:?}"));
            }
        }
        self.last_partition = Some(now);
        Ok(())
    }

    /// A new process on node `i`: a replica over what its disk holds, a new incarnation
    /// that registers.
    pub(super) fn start_node(&mut self, i: usize) -> Check {
        let config = self.config(self.nodes[i].id);
        let topic_id = self.topic_id;
        let node = &mut self.nodes[i];
        let log = ReplicaLog::recover(&node.disk).map_err(|e| format!("recovery: {e}"))?;
        node.replica = Some(Replica::new(config, topic_id, 0, log));
        node.generation += 1;
        node.incarnation += 1;
        node.broker_epoch = None;
        node.paused_until_ms = None;
        node.applied_index = 0;
        node.leader_hw = None;
        node.epoch_seen = None;
        node.held.clear();
        node.next_heartbeat_ms = self.now_ms + HEARTBEAT_MS;
        self.register(i)
    }

    fn register(&mut self, i: usize) -> Check {
        let node = &self.nodes[i];
        let mut incarnation = [0; 16];
        incarnation[..4].copy_from_slice(&node.id.to_be_bytes());
        incarnation[8..].copy_from_slice(&node.incarnation.to_be_bytes());
        let registration = BrokerRegistration {
            node_id: node.id,
            incarnation_id: IncarnationId(incarnation),
            listeners: vec![Listener {
                name: "PLAINTEXT".into(),
                host: format!("127.0.0.{}", node.id),
                port: 9092,
                security_protocol: SecurityProtocol::Plaintext,
            }],
            rack: None,
        };
        match self
            .controller
            .register_broker(&self.image, self.now_ms, registration)
        {
            Ok(d) => {
                let index = self.commit(d.records)?;
                self.nodes[i].broker_epoch = Some(match d.reply {
                    BrokerEpoch::OfCommit => index as i64,
                    BrokerEpoch::Existing(e) => e,
                });
                Ok(())
            }
            // The old incarnation's session is still live: try again at the next beat.
            Err(e) if e.code == ErrorCode::DuplicateBrokerRegistration => Ok(()),
            Err(e) => Err(format!("registration refused: {e}")),
        }
    }

    pub(super) fn heartbeat(&mut self, i: usize) -> Check {
        let Some(broker_epoch) = self.nodes[i].broker_epoch else {
            return self.register(i);
        };
        let hb = Heartbeat {
            node_id: self.nodes[i].id,
            broker_epoch,
            current_metadata_offset: self.nodes[i].applied_index as i64,
            want_fence: false,
            want_shut_down: false,
        };
        match self.controller.heartbeat(&self.image, self.now_ms, hb) {
            Ok(d) => self.commit(d.records).map(|_| ()),
            Err(e) if e.code == ErrorCode::StaleBrokerEpoch => {
                self.nodes[i].broker_epoch = None;
                Ok(())
            }
            Err(e) => Err(format!("heartbeat refused: {e}")),
        }
    }

    /// Node `i`'s timers: registration and heartbeats, the metadata it applies, its
    /// replica's tick.
    pub(super) fn node_timers(&mut self, i: usize) -> Check {
        let node = &self.nodes[i];
        if node.replica.is_none() || node.paused_until_ms.is_some() {
            return Ok(());
        }
        if self.now_ms >= node.next_heartbeat_ms {
            self.nodes[i].next_heartbeat_ms = self.now_ms + HEARTBEAT_MS;
            self.heartbeat(i)?;
        }
        let behind = self.nodes[i].applied_index < self.image.last_applied_index();
        if behind && (self.calm || self.rng.chance(300)) {
            self.apply_metadata(i)?;
        }
        self.feed(i, Event::Tick)
    }

    fn apply_metadata(&mut self, i: usize) -> Check {
        self.nodes[i].applied_index = self.image.last_applied_index();
        let Some(partition) = self.image.partition(self.topic_id, 0).cloned() else {
            return Ok(());
        };
        let id = self.nodes[i].id;
        let broker_epoch = self.nodes[i]
            .broker_epoch
            .filter(|&e| self.image.broker(id).is_some_and(|b| b.broker_epoch == e));
        self.feed(
            i,
            Event::Metadata {
                broker_epoch,
                partition,
            },
        )
    }

    /// The controller's session expiry, until it has nothing to do; then (mutant) an
    /// election outside the ISR.
    pub(super) fn controller_tick(&mut self) -> Check {
        for _ in 0..100 {
            let records = self.controller.tick(&self.image, self.now_ms);
            if records.is_empty() {
                break;
            }
            self.commit(records)?;
        }
        if crate::mutants::mutant(Mutant::ElectionOutsideIsr) {
            let p = self.partition()?;
            let outside = p
                .replicas
                .iter()
                .copied()
                .find(|id| !p.isr.contains(id) && self.image.is_active(*id));
            if let (NO_LEADER, Some(id)) = (p.leader, outside) {
                self.commit(vec![MetadataRecord::PartitionChange(PartitionChange {
                    topic_id: self.topic_id,
                    partition: 0,
                    leader: Some(id),
                    isr: Some(vec![id]),
                })])?;
            }
        }
        Ok(())
    }

    fn pick_node(&mut self, pred: impl Fn(&Node) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.n).filter(|&i| pred(&self.nodes[i])).collect();
        (!candidates.is_empty())
            .then(|| candidates[self.rng.below(candidates.len() as u64) as usize])
    }

    fn crash_image(&mut self) -> CrashImage {
        if !self.fsync {
            // Without fsync on ack nothing promises power-loss safety: process crashes only.
            return CrashImage::AllWritten;
        }
        match self.rng.below(3) {
            0 => CrashImage::DurableOnly,
            1 => CrashImage::AllWritten,
            _ => CrashImage::TornLastWrite,
        }
    }

    fn crash(&mut self, i: usize, image: CrashImage) {
        let down_ms = 100 + self.rng.below(3_000) as i64;
        let node = &mut self.nodes[i];
        if let Some(replica) = node.replica.take() {
            node.disk = replica.log().crash_image(image);
        }
        node.down_until_ms = self.now_ms + down_ms;
        node.paused_until_ms = None;
        node.held.clear();
        node.broker_epoch = None;
        self.stats.crashes += 1;
    }

    pub(super) fn crash_one(&mut self) -> Check {
        if let Some(i) = self.pick_node(|n| n.replica.is_some()) {
            let image = self.crash_image();
            self.crash(i, image);
        }
        Ok(())
    }

    /// Every broker loses power at once.
    pub(super) fn power_loss(&mut self) -> Check {
        let image = if self.fsync {
            CrashImage::DurableOnly
        } else {
            CrashImage::AllWritten
        };
        for i in 0..self.n {
            if self.nodes[i].replica.is_some() {
                self.crash(i, image);
            }
        }
        self.stats.power_losses += 1;
        Ok(())
    }

    pub(super) fn pause_one(&mut self) -> Check {
        let Some(i) = self.pick_node(|n| n.replica.is_some() && n.paused_until_ms.is_none()) else {
            return Ok(());
        };
        let pause_ms = 200 + self.rng.below(5_000) as i64;
        self.nodes[i].paused_until_ms = Some(self.now_ms + pause_ms);
        self.stats.pauses += 1;
        Ok(())
    }

    /// Restarts crashed nodes whose downtime is over and resumes paused ones.
    pub(super) fn wake_nodes(&mut self) -> Check {
        for i in 0..self.n {
            let node = &self.nodes[i];
            if node.replica.is_none() && self.now_ms >= node.down_until_ms {
                self.start_node(i)?;
            } else if node.paused_until_ms.is_some_and(|t| self.now_ms >= t) {
                self.nodes[i].paused_until_ms = None;
                self.release_held(i);
            }
        }
        Ok(())
    }

    /// No more faults: every broker comes back now.
    pub(super) fn begin_calm(&mut self) {
        self.calm = true;
        for node in &mut self.nodes {
            node.down_until_ms = node.down_until_ms.min(self.now_ms);
            if node.paused_until_ms.is_some() {
                node.paused_until_ms = Some(self.now_ms);
            }
        }
    }
}
