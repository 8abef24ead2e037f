//! The simulator's admin steps: topics, partitions, configs, AlterPartition, preferred
//! elections, producer ids, security and objects, a follower restoring a snapshot.

use super::brokers::is_stale;
use super::*;

/// Admin steps.
impl Sim {
    pub(super) fn topic_name(&mut self) -> String {
        TOPIC_NAMES[self.rng.below(TOPIC_NAMES.len() as u64) as usize].to_owned()
    }

    pub(super) fn create_topic(&mut self) -> Check {
        let topic = NewTopic {
            name: self.topic_name(),
            num_partitions: 1 + self.rng.below(6) as i32,
            replication_factor: 1 + self.rng.below(3) as i16,
            configs: vec![("retention.ms".into(), "1000".into())],
            // The forwarding broker's id for this request, or none (the controller draws).
            topic_id: self.rng.chance(700).then(|| {
                let mut id = [0; 16];
                id[..8].copy_from_slice(&self.rng.next_u64().to_be_bytes());
                id[15] = 1;
                TopicId(id)
            }),
            assignments: None,
        };
        let existed = self.image.topic_ids().contains_key(&topic.name);
        let active = self
            .image
            .brokers()
            .values()
            .filter(|b| b.is_active())
            .count();
        let d = self
            .controller
            .create_topics(&self.image, std::slice::from_ref(&topic));
        let result = &d.reply[0].result;
        match result {
            Err(e) if existed && e.code != ErrorCode::TopicAlreadyExists => {
                return Err(format!("create of an existing topic answered {e}"));
            }
            Err(e) if existed => {
                let _ = e;
                self.stats.topic_exists += 1;
            }
            Ok(_) if existed => return Err("an existing topic was created again".into()),
            Ok(_) if topic.replication_factor as usize > active => {
                return Err("a replication factor above the active brokers was accepted".into());
            }
            Err(e)
                if e.code != ErrorCode::InvalidReplicationFactor
                    || topic.replication_factor as usize <= active =>
            {
                return Err(format!("create refused: {e}"));
            }
            _ => {}
        }
        let created = result.is_ok() && !d.records.is_empty();
        if self.commit(d.records)?.is_some() && created {
            self.stats.topics_created += 1;
        } else if created && topic.topic_id.is_some() {
            self.retry_create(&topic)?;
        }
        Ok(())
    }

    /// The client retries a create whose answer it never got: if it committed, the retry
    /// (same topic id) succeeds with nothing new to commit; if not, it creates the topic.
    fn retry_create(&mut self, topic: &NewTopic) -> Check {
        let committed = self.image.topic_by_name(&topic.name).map(|t| t.topic_id) == topic.topic_id;
        let d = self
            .controller
            .create_topics(&self.image, std::slice::from_ref(topic));
        match (&d.reply[0].result, committed) {
            (Ok((id, _)), true) if Some(*id) == topic.topic_id && d.records.is_empty() => {
                self.stats.retried_creates += 1;
                Ok(())
            }
            (_, true) => Err(format!("a retried create answered {:?}", d.reply[0])),
            _ => self.commit(d.records).map(drop),
        }
    }

    pub(super) fn delete_topic(&mut self) -> Check {
        let name = self.topic_name();
        let d = self.controller.delete_topics(&self.image, &[name]);
        self.commit(d.records).map(drop)
    }

    pub(super) fn create_partitions(&mut self) -> Check {
        let name = self.topic_name();
        let Some(topic) = self.image.topic_by_name(&name) else {
            return Ok(());
        };
        let count = topic.partitions.len() as i32 + 1 + self.rng.below(2) as i32;
        match self.controller.create_partitions(&self.image, &name, count) {
            Ok(d) => self.commit(d.records).map(drop),
            Err(e) if e.code == ErrorCode::InvalidReplicationFactor => Ok(()),
            Err(e) => Err(format!("create partitions refused: {e}")),
        }
    }

    pub(super) fn alter_configs(&mut self) -> Check {
        let resource = if self.rng.chance(500) {
            ConfigResource {
                resource_type: ConfigResourceType::Topic,
                name: self.topic_name(),
            }
        } else {
            ConfigResource {
                resource_type: ConfigResourceType::Broker,
                name: String::new(),
            }
        };
        let changes = vec![ConfigChange {
            key: ["retention.ms", "segment.bytes"][self.rng.below(2) as usize].into(),
            value: self
                .rng
                .chance(700)
                .then(|| self.rng.below(1000).to_string()),
        }];
        let replace = self.rng.chance(300);
        match self
            .controller
            .alter_configs(&self.image, &resource, &changes, replace)
        {
            Ok(d) => self.commit(d.records).map(drop),
            Err(e) if e.code == ErrorCode::UnknownTopicOrPartition => Ok(()),
            Err(e) => Err(format!("alter configs refused: {e}")),
        }
    }

    /// An ISR change by a partition's leader (or `from`, with `epoch`): shrink by one
    /// follower, or expand by one replica (eligible or not).
    pub(super) fn alter_request(
        &mut self,
        from: Option<i32>,
        epoch: i64,
    ) -> Option<AlterPartition> {
        let partitions: Vec<(TopicId, i32)> = self
            .image
            .topics()
            .iter()
            .flat_map(|(&id, t)| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.leader != NO_LEADER && from.is_none_or(|f| p.leader == f))
                    .map(move |(&p, _)| (id, p))
            })
            .collect();
        if partitions.is_empty() {
            return None;
        }
        let (topic_id, partition) = partitions[self.rng.below(partitions.len() as u64) as usize];
        let p = self.image.partition(topic_id, partition)?.clone();
        let mut isr = p.isr.clone();
        let outside: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| !isr.contains(r))
            .collect();
        if !outside.is_empty() && self.rng.chance(600) {
            isr.push(outside[self.rng.below(outside.len() as u64) as usize]);
        } else if isr.len() > 1 {
            let followers: Vec<i32> = isr.iter().copied().filter(|&r| r != p.leader).collect();
            let drop = followers[self.rng.below(followers.len() as u64) as usize];
            isr.retain(|&r| r != drop);
        }
        let image = &self.image;
        let new_isr = isr
            .iter()
            .map(|&id| IsrMember {
                broker_id: id,
                broker_epoch: image.broker(id).map_or(-1, |b| b.broker_epoch),
            })
            .collect();
        let stale_version = self.rng.chance(50);
        Some(AlterPartition {
            broker_id: p.leader,
            broker_epoch: epoch,
            topic_id,
            partition,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch - i32::from(stale_version && p.partition_epoch > 0),
            new_isr,
        })
    }

    pub(super) fn alter_partition(&mut self) -> Check {
        let Some(mut req) = self.alter_request(None, 0) else {
            return Ok(());
        };
        let Some(leader) = self.image.broker(req.broker_id) else {
            return Err(format!("leader {} is not registered", req.broker_id));
        };
        req.broker_epoch = leader.broker_epoch;
        let image = &self.image;
        let eligible = req.new_isr.iter().all(|m| image.is_active(m.broker_id));
        match self.controller.alter_partition(&self.image, &req) {
            Ok(_) if !eligible => Err("an ineligible replica joined an ISR".into()),
            Ok(d) => self.commit(d.records).map(drop),
            Err(e) if e.code == ErrorCode::IneligibleReplica && !eligible => {
                self.stats.ineligible += 1;
                Ok(())
            }
            Err(e) if e.code == ErrorCode::InvalidUpdateVersion => Ok(()),
            Err(e) => Err(format!("alter partition refused: {e}")),
        }
    }

    pub(super) fn elect_preferred(&mut self) -> Check {
        // Mostly a partition led by another than its preferred replica, which is in the ISR.
        let moved: Vec<(String, i32)> = self
            .image
            .topics()
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| p.leader != p.replicas[0] && p.isr.contains(&p.replicas[0]))
                    .map(|(&i, _)| (t.name.clone(), i))
            })
            .collect();
        let (name, partition) = if moved.is_empty() || self.rng.chance(200) {
            (self.topic_name(), self.rng.below(3) as i32)
        } else {
            moved[self.rng.below(moved.len() as u64) as usize].clone()
        };
        let d = self
            .controller
            .elect_preferred_leaders(&self.image, &[(name, partition)]);
        match &d.reply[0] {
            Ok(()) => self.stats.preferred += 1,
            Err(e)
                if matches!(
                    e.code,
                    ErrorCode::ElectionNotNeeded
                        | ErrorCode::PreferredLeaderNotAvailable
                        | ErrorCode::UnknownTopicOrPartition
                ) => {}
            Err(e) => return Err(format!("preferred election refused: {e}")),
        }
        self.commit(d.records).map(drop)
    }

    pub(super) fn allocate_producer_ids(&mut self) -> Check {
        let Some(i) = self.pick_broker(|b| b.alive && b.epoch.is_some()) else {
            return Ok(());
        };
        let (node_id, epoch) = (self.brokers[i].node_id, self.brokers[i].epoch.unwrap_or(-1));
        let d = match self
            .controller
            .allocate_producer_ids(&self.image, node_id, epoch)
        {
            Ok(d) => d,
            Err(e) if is_stale(&e) => return Ok(()),
            Err(e) => return Err(format!("allocate producer ids refused: {e}")),
        };
        let block = d.reply;
        let (first, end) = (block.first, block.first + block.len);
        if let Some(&(f, l)) = self.blocks.iter().find(|&&(f, l)| first < f + l && f < end) {
            return Err(format!(
                "producer-id block {first}..{end} overlaps {f}..{} handed out before",
                f + l
            ));
        }
        if self.commit(d.records)?.is_some() {
            self.blocks.push((block.first, block.len));
            self.stats.blocks += 1;
        }
        Ok(())
    }

    /// Security, views, transforms and plugins: state the snapshot must carry.
    pub(super) fn objects(&mut self) -> Check {
        let name = ["a", "b"][self.rng.below(2) as usize];
        let spec = format!("{{\"n\":{}}}", self.rng.below(100)).into_bytes();
        let c = &mut self.controller;
        let image = &self.image;
        let records = match self.rng.below(7) {
            0 => c.put_view(image, name, spec).map(|d| d.records),
            1 => c.remove_view(image, name).map(|d| d.records),
            2 => c.put_transform(image, name, spec).map(|d| d.records),
            3 => c.remove_transform(image, name).map(|d| d.records),
            4 => c
                .put_plugin(
                    image,
                    PluginVersion {
                        name: name.into(),
                        sha256: [self.rng.below(256) as u8; 32],
                        size_bytes: 1 + self.rng.below(1 << 20),
                        kind: PluginKind::Partitioner,
                    },
                )
                .map(|d| d.records),
            5 => c.remove_plugin(image, name).map(|d| d.records),
            _ => c
                .security(
                    image,
                    vec![SecurityRecord::ScramCredentialDelete {
                        user: name.into(),
                        mechanism: ScramMechanism::Sha512,
                    }],
                )
                .map(|d| d.records),
        };
        match records {
            Ok(records) => self.commit(records).map(drop),
            Err(e) if e.code == ErrorCode::ResourceNotFound => Ok(()),
            Err(e) => Err(format!("object change refused: {e}")),
        }
    }

    /// The follower restores the leader's current snapshot (it was down past it).
    pub(super) fn restore_follower(&mut self) -> Check {
        let bytes = self.image.snapshot_bytes().map_err(|e| e.to_string())?;
        self.follower = MetadataImage::from_snapshot(&bytes).map_err(|e| e.to_string())?;
        self.stats.snapshot_restores += 1;
        Ok(())
    }
}
