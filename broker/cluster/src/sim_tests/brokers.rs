//! The simulator's broker steps: start (a new incarnation), register, heartbeat, crash,
//! controlled shutdown, unregistration, stale requests, time and session expiry.

use super::*;

/// Broker steps.
impl Sim {
    pub(super) fn pick_broker(&mut self, pred: impl Fn(&Broker) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.brokers.len())
            .filter(|&i| pred(&self.brokers[i]))
            .collect();
        (!candidates.is_empty())
            .then(|| candidates[self.rng.below(candidates.len() as u64) as usize])
    }

    pub(super) fn start_broker(&mut self) -> Check {
        let Some(i) = self.pick_broker(|b| !b.alive) else {
            return Ok(());
        };
        let mut incarnation = [0; 16];
        incarnation[..8].copy_from_slice(&self.rng.next_u64().to_be_bytes());
        let b = &mut self.brokers[i];
        b.old_epochs.extend(b.epoch.take());
        b.incarnation = IncarnationId(incarnation);
        b.alive = true;
        b.shutting_down = false;
        self.register(i)
    }

    pub(super) fn register(&mut self, i: usize) -> Check {
        let b = &self.brokers[i];
        let registration = BrokerRegistration {
            node_id: b.node_id,
            incarnation_id: b.incarnation,
            listeners: vec![Listener {
                name: "PLAINTEXT".into(),
                host: format!("127.0.0.{}", b.node_id),
                port: 9092,
                security_protocol: SecurityProtocol::Plaintext,
            }],
            rack: b.rack.clone(),
        };
        match self
            .controller
            .register_broker(&self.image, self.now_ms, registration)
        {
            Ok(d) => {
                let committed = self.commit(d.records)?;
                self.brokers[i].epoch = match (d.reply, committed) {
                    (BrokerEpoch::Existing(e), _) => Some(e),
                    (BrokerEpoch::OfCommit, Some(index)) => Some(index as i64),
                    (BrokerEpoch::OfCommit, None) => None,
                };
                let b = &self.brokers[i];
                let registered = self.image.broker(b.node_id);
                match (b.epoch, registered) {
                    (Some(e), Some(r)) if r.broker_epoch != e => Err(format!(
                        "broker {} was answered epoch {e}, registered as {}",
                        b.node_id, r.broker_epoch
                    )),
                    (Some(_), None) => {
                        Err(format!("broker {} answered, not registered", b.node_id))
                    }
                    _ => Ok(()),
                }
            }
            Err(e) if e.code == ErrorCode::DuplicateBrokerRegistration => {
                self.stats.duplicate_refused += 1;
                Ok(())
            }
            Err(e) => Err(format!("registration refused: {e}")),
        }
    }

    pub(super) fn heartbeat(&mut self) -> Check {
        let Some(i) = self.pick_broker(|b| b.alive) else {
            return Ok(());
        };
        let Some(epoch) = self.brokers[i].epoch else {
            return self.register(i);
        };
        let behind = self.rng.chance(100);
        let offset = if behind {
            epoch - 1
        } else {
            self.image.last_applied_index() as i64
        };
        let hb = Heartbeat {
            node_id: self.brokers[i].node_id,
            broker_epoch: epoch,
            current_metadata_offset: offset,
            want_fence: self.rng.chance(20),
            want_shut_down: self.brokers[i].shutting_down,
        };
        match self.controller.heartbeat(&self.image, self.now_ms, hb) {
            Ok(d) => {
                let committed = self.commit(d.records.clone())?;
                if d.reply.should_shut_down && (committed.is_some() || d.records.is_empty()) {
                    self.stats.shutdowns += 1;
                    let b = &mut self.brokers[i];
                    b.alive = false;
                }
                Ok(())
            }
            // Its registration was replaced or removed under it: it registers again.
            Err(e) if is_stale(&e) => {
                let b = &mut self.brokers[i];
                b.old_epochs.extend(b.epoch.take());
                Ok(())
            }
            Err(e) => Err(format!("heartbeat refused: {e}")),
        }
    }

    /// A broker that is down is removed from the cluster for good (or until it registers
    /// again).
    pub(super) fn unregister(&mut self) -> Check {
        let registered: Vec<i32> = self.image.brokers().keys().copied().collect();
        let Some(i) = self.pick_broker(|b| !b.alive && registered.contains(&b.node_id)) else {
            return Ok(());
        };
        let node_id = self.brokers[i].node_id;
        let d = self
            .controller
            .unregister_broker(&self.image, self.now_ms, node_id)
            .map_err(|e| format!("unregister refused: {e}"))?;
        if self.commit(d.records)?.is_some() {
            self.stats.unregistered += 1;
            let b = &mut self.brokers[i];
            b.old_epochs.extend(b.epoch.take());
        }
        Ok(())
    }

    pub(super) fn crash(&mut self) -> Check {
        if let Some(i) = self.pick_broker(|b| b.alive) {
            self.brokers[i].alive = false;
        }
        Ok(())
    }

    pub(super) fn controlled_shutdown(&mut self) -> Check {
        if let Some(i) = self.pick_broker(|b| b.alive && b.epoch.is_some()) {
            self.brokers[i].shutting_down = true;
        }
        Ok(())
    }

    /// A request with an epoch of an earlier incarnation: it must be refused as stale.
    pub(super) fn stale_request(&mut self) -> Check {
        let current: BTreeMap<i32, i64> = self
            .image
            .brokers()
            .iter()
            .map(|(&id, b)| (id, b.broker_epoch))
            .collect();
        let Some(i) = self.pick_broker(|b| {
            b.old_epochs
                .iter()
                .any(|&e| current.get(&b.node_id).is_some_and(|&c| c != e))
        }) else {
            return Ok(());
        };
        let node_id = self.brokers[i].node_id;
        let current = self.image.broker(node_id).map(|s| s.broker_epoch);
        let stale = *self.brokers[i]
            .old_epochs
            .iter()
            .find(|&&e| Some(e) != current)
            .expect("picked for one");
        let outcome = match self.rng.below(3) {
            0 => {
                let hb = Heartbeat {
                    node_id,
                    broker_epoch: stale,
                    current_metadata_offset: self.image.last_applied_index() as i64,
                    want_fence: false,
                    want_shut_down: false,
                };
                self.controller
                    .heartbeat(&self.image, self.now_ms, hb)
                    .map(|d| d.records)
            }
            1 => self
                .controller
                .allocate_producer_ids(&self.image, node_id, stale)
                .map(|d| d.records),
            _ => {
                let Some(req) = self.alter_request(Some(node_id), stale) else {
                    return Ok(());
                };
                self.controller
                    .alter_partition(&self.image, &req)
                    .map(|d| d.records)
            }
        };
        match outcome {
            Err(e) if e.code == ErrorCode::StaleBrokerEpoch => {
                self.stats.stale_refused += 1;
                Ok(())
            }
            other => Err(format!(
                "broker {node_id}'s stale epoch {stale} (current {current:?}) was not refused \
                 as STALE_BROKER_EPOCH: {other:?}"
            )),
        }
    }

    pub(super) fn advance_time(&mut self) -> Check {
        self.now_ms += self.rng.below(3_000) as i64;
        loop {
            let records = self.controller.tick(&self.image, self.now_ms);
            if records.is_empty() {
                return self.check_available();
            }
            // A decision split over several entries (encode_batches), the controller failing
            // over between them: the next one repairs what the first entries left.
            if records.len() > 1 && self.rng.chance(100) {
                let cut = 1 + self.rng.below(records.len() as u64 - 1) as usize;
                self.commit_surely(records[..cut].to_vec())?;
                self.stats.split += 1;
                self.stats.lost += 1;
                self.failover()?;
            } else if self.commit(records)?.is_none() {
                return self.check_available();
            }
            self.check()?;
        }
    }

    /// Availability: after the ticks, no partition is without a leader while an active ISR
    /// member with a live session could lead it.
    pub(super) fn check_available(&self) -> Check {
        for topic in self.image.topics().values() {
            for (partition, p) in &topic.partitions {
                let eligible = p.isr.iter().find(|&&id| {
                    self.image.is_active(id) && self.controller.session_valid(id, self.now_ms)
                });
                if let (NO_LEADER, Some(id)) = (p.leader, eligible) {
                    return Err(format!(
                        "{}-{partition} has no leader though broker {id} of its ISR could lead",
                        topic.name
                    ));
                }
            }
        }
        Ok(())
    }
}

pub(super) fn is_stale(e: &ControllerError) -> bool {
    matches!(
        e.code,
        ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerIdNotRegistered
    )
}
