//! The controller, one behaviour at a time: each test drives it against an image that
//! applies every decision's records (as the server does after the commit).

use super::*;
use crate::records::{
    BrokerRegistration, ConfigResource, ConfigResourceType, IncarnationId, Listener,
    SecurityProtocol,
};

const TIMEOUT_MS: i64 = 9_000;

struct Harness {
    image: MetadataImage,
    index: u64,
    c: Controller,
}

impl Harness {
    fn new() -> Self {
        let image = MetadataImage::new();
        let c = Controller::new(ControllerConfig::default(), &image, 0, 1);
        Self { image, index: 0, c }
    }

    /// Commits and applies `records`; returns the entry's index.
    fn commit(&mut self, records: &[MetadataRecord]) -> u64 {
        self.index += 1;
        if !records.is_empty() {
            let refused = self.image.apply_batch(self.index, records).unwrap();
            assert!(refused.is_empty(), "{refused:?}");
        }
        self.index
    }

    /// Registers `node_id` (incarnation `inc`) and unfences it; returns its epoch.
    fn start(&mut self, node_id: i32, inc: u8, now_ms: i64) -> i64 {
        let d = self
            .c
            .register_broker(&self.image, now_ms, registration(node_id, inc))
            .unwrap();
        assert_eq!(d.reply, BrokerEpoch::OfCommit);
        let epoch = self.commit(&d.records) as i64;
        assert!(self.image.broker(node_id).unwrap().fenced);
        let hb = self.heartbeat(node_id, epoch, now_ms).unwrap();
        assert!(!hb.is_fenced && hb.is_caught_up);
        epoch
    }

    fn heartbeat(
        &mut self,
        node_id: i32,
        broker_epoch: i64,
        now_ms: i64,
    ) -> Result<HeartbeatReply, ControllerError> {
        let hb = Heartbeat {
            node_id,
            broker_epoch,
            current_metadata_offset: self.index as i64,
            want_fence: false,
            want_shut_down: false,
        };
        let d = self.c.heartbeat(&self.image, now_ms, hb)?;
        self.commit(&d.records);
        Ok(d.reply)
    }

    fn create(&mut self, name: &str, partitions: i32, rf: i16) -> Result<TopicId, ControllerError> {
        let topic = NewTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            configs: vec![],
            topic_id: None,
            assignments: None,
        };
        let d = self.c.create_topics(&self.image, &[topic]);
        self.commit(&d.records);
        d.reply[0].result.clone().map(|(id, _)| id)
    }

    fn tick(&mut self, now_ms: i64) {
        loop {
            let records = self.c.tick(&self.image, now_ms);
            if records.is_empty() {
                return;
            }
            self.commit(&records);
        }
    }
}

fn registration(node_id: i32, inc: u8) -> BrokerRegistration {
    BrokerRegistration {
        node_id,
        incarnation_id: IncarnationId([inc; 16]),
        listeners: vec![Listener {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            security_protocol: SecurityProtocol::Plaintext,
        }],
        rack: None,
    }
}

#[test]
fn rf1_partition_goes_offline_with_its_broker_and_returns_with_a_new_epoch() {
    let mut h = Harness::new();
    h.start(1, 1, 0);
    let id = h.create("t", 1, 1).unwrap();
    let p = h.image.partition(id, 0).unwrap().clone();
    assert_eq!((p.leader, p.leader_epoch), (1, 0));
    // Silence past the session: fenced, the partition has no leader, epochs bump.
    h.tick(TIMEOUT_MS + 1);
    assert!(h.image.broker(1).unwrap().fenced);
    let p = h.image.partition(id, 0).unwrap().clone();
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (-1, 1, vec![1]));
    // A new incarnation: a new epoch; it takes its partition back with a newer epoch.
    let epoch = h.start(1, 2, TIMEOUT_MS + 2);
    assert_eq!(h.image.broker(1).unwrap().broker_epoch, epoch);
    let p = h.image.partition(id, 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
}

#[test]
fn a_new_incarnation_waits_for_the_old_session_and_a_retry_is_idempotent() {
    let mut h = Harness::new();
    let epoch = h.start(1, 1, 0);
    let again =
        h.c.register_broker(&h.image, 10, registration(1, 1))
            .unwrap();
    assert_eq!(
        (again.records.len(), again.reply),
        (0, BrokerEpoch::Existing(epoch))
    );
    let err =
        h.c.register_broker(&h.image, 20, registration(1, 2))
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::DuplicateBrokerRegistration);
    // Once the old session expired, the new incarnation registers, before any fencing.
    let d =
        h.c.register_broker(&h.image, 20 + TIMEOUT_MS + 1, registration(1, 2))
            .unwrap();
    let new_epoch = h.commit(&d.records) as i64;
    assert!(new_epoch > epoch);
    let stale = h.heartbeat(1, epoch, 20 + TIMEOUT_MS + 2).unwrap_err();
    assert_eq!(stale.code, ErrorCode::StaleBrokerEpoch);
    let unknown = h.heartbeat(9, 1, 0).unwrap_err();
    assert_eq!(unknown.code, ErrorCode::BrokerIdNotRegistered);
}

#[test]
fn a_fenced_leader_hands_over_to_the_next_isr_member() {
    let mut h = Harness::new();
    let epochs: Vec<i64> = (1..=3).map(|id| h.start(id, 1, 0)).collect();
    let id = h.create("t", 3, 3).unwrap();
    let leader = h.image.partition(id, 0).unwrap().leader;
    // Everyone but the leader keeps heartbeating.
    for (i, &epoch) in epochs.iter().enumerate() {
        let node = i as i32 + 1;
        if node != leader {
            h.heartbeat(node, epoch, TIMEOUT_MS).unwrap();
        }
    }
    h.tick(TIMEOUT_MS + 1);
    let p = h.image.partition(id, 0).unwrap();
    assert!(p.leader != leader && p.leader != NO_LEADER_FOR_TESTS);
    assert!(!p.isr.contains(&leader) && p.isr.len() == 2);
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
}

const NO_LEADER_FOR_TESTS: i32 = crate::records::NO_LEADER;

#[test]
fn a_new_controller_gives_every_broker_a_fresh_session() {
    let mut h = Harness::new();
    h.start(1, 1, 0);
    h.c = Controller::new(ControllerConfig::default(), &h.image, 50_000, 2);
    assert!(h.c.tick(&h.image, 50_000 + TIMEOUT_MS).is_empty());
    assert_eq!(h.c.next_deadline_ms(&h.image), Some(50_000 + TIMEOUT_MS));
    assert!(!h.c.tick(&h.image, 50_001 + TIMEOUT_MS).is_empty());
}

#[test]
fn controlled_shutdown_moves_leadership_then_fences() {
    let mut h = Harness::new();
    let e1 = h.start(1, 1, 0);
    h.start(2, 1, 0);
    let id = h.create("t", 4, 2).unwrap();
    let hb = Heartbeat {
        node_id: 1,
        broker_epoch: e1,
        current_metadata_offset: h.index as i64,
        want_fence: false,
        want_shut_down: true,
    };
    let d = h.c.heartbeat(&h.image, 1, hb).unwrap();
    assert!(!d.reply.should_shut_down);
    h.commit(&d.records);
    assert!(h.image.broker(1).unwrap().in_controlled_shutdown);
    for p in h.image.topics()[&id].partitions.values() {
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    }
    let d = h.c.heartbeat(&h.image, 2, hb).unwrap();
    assert!(d.reply.should_shut_down && d.reply.is_fenced);
    h.commit(&d.records);
    assert!(h.image.broker(1).unwrap().fenced);
    // It restarts at once as a new incarnation, under this controller or a new one.
    h.c = Controller::new(ControllerConfig::default(), &h.image, 3, 2);
    let d =
        h.c.register_broker(&h.image, 3, registration(1, 2))
            .unwrap();
    assert_eq!(d.reply, BrokerEpoch::OfCommit);
}

#[test]
fn create_topics_answers_each_topic() {
    let mut h = Harness::new();
    h.start(1, 1, 0);
    h.start(2, 1, 0);
    assert_eq!(
        h.create("t", 1, 3).unwrap_err().code,
        ErrorCode::InvalidReplicationFactor
    );
    assert_eq!(
        h.create("a/b", 1, 1).unwrap_err().code,
        ErrorCode::InvalidTopicException
    );
    assert_eq!(
        h.create("t", 0, 1).unwrap_err().code,
        ErrorCode::InvalidPartitions
    );
    h.create("t", 2, 2).unwrap();
    assert_eq!(
        h.create("t", 1, 1).unwrap_err().code,
        ErrorCode::TopicAlreadyExists
    );
    let twice = NewTopic {
        name: "u".into(),
        num_partitions: 1,
        replication_factor: 1,
        configs: vec![("retention.ms".into(), "1".into())],
        topic_id: None,
        assignments: None,
    };
    let d = h.c.create_topics(&h.image, &[twice.clone(), twice]);
    assert!(d.reply[0].result.is_ok());
    assert_eq!(
        d.reply[1].result.clone().unwrap_err().code,
        ErrorCode::InvalidRequest
    );
    h.commit(&d.records);
    let resource = ConfigResource {
        resource_type: ConfigResourceType::Topic,
        name: "u".into(),
    };
    assert_eq!(h.image.configs()[&resource]["retention.ms"], "1");
    // Growing it, then deleting it.
    let d = h.c.create_partitions(&h.image, "t", 5).unwrap();
    assert_eq!(d.reply.len(), 3);
    h.commit(&d.records);
    assert_eq!(h.image.topic_by_name("t").unwrap().partitions.len(), 5);
    let err = h.c.create_partitions(&h.image, "t", 5).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidPartitions);
    let d = h.c.delete_topics(&h.image, &["t".into(), "nope".into()]);
    assert!(d.reply[0].1.is_ok());
    assert_eq!(
        d.reply[1].1.clone().unwrap_err().code,
        ErrorCode::UnknownTopicOrPartition
    );
    h.commit(&d.records);
    assert!(h.image.topic_by_name("t").is_none());
}

#[test]
fn alter_partition_is_a_compare_and_set() {
    let mut h = Harness::new();
    let epochs: Vec<i64> = (1..=3).map(|id| h.start(id, 1, 0)).collect();
    let id = h.create("t", 1, 3).unwrap();
    let p = h.image.partition(id, 0).unwrap().clone();
    let member = |id: i32| IsrMember {
        broker_id: id,
        broker_epoch: epochs[id as usize - 1],
    };
    let follower = *p.isr.iter().find(|&&r| r != p.leader).unwrap();
    let shrink = AlterPartition {
        broker_id: p.leader,
        broker_epoch: epochs[p.leader as usize - 1],
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: p
            .isr
            .iter()
            .filter(|&&r| r != follower)
            .map(|&r| member(r))
            .collect(),
    };
    let code = |h: &mut Harness, req: &AlterPartition| {
        h.c.alter_partition(&h.image, req).unwrap_err().code
    };
    let stale_leader = AlterPartition {
        leader_epoch: p.leader_epoch + 1,
        ..shrink.clone()
    };
    assert_eq!(code(&mut h, &stale_leader), ErrorCode::FencedLeaderEpoch);
    let stale_broker = AlterPartition {
        broker_epoch: 0,
        ..shrink.clone()
    };
    assert_eq!(code(&mut h, &stale_broker), ErrorCode::StaleBrokerEpoch);
    let d = h.c.alter_partition(&h.image, &shrink).unwrap();
    h.commit(&d.records);
    assert_eq!(h.image.partition(id, 0).unwrap(), &d.reply);
    assert_eq!(d.reply.partition_epoch, 1);
    // The same request again: its partition epoch is now stale.
    assert_eq!(code(&mut h, &shrink), ErrorCode::InvalidUpdateVersion);
    // Expanding with a member of a stale epoch, or a fenced one, is refused.
    let mut expand = AlterPartition {
        partition_epoch: 1,
        new_isr: p.isr.iter().map(|&r| member(r)).collect(),
        ..shrink.clone()
    };
    expand
        .new_isr
        .iter_mut()
        .find(|m| m.broker_id == follower)
        .unwrap()
        .broker_epoch = 0;
    assert_eq!(code(&mut h, &expand), ErrorCode::IneligibleReplica);
    let not_leader = AlterPartition {
        broker_id: follower,
        broker_epoch: epochs[follower as usize - 1],
        ..expand
    };
    assert_eq!(code(&mut h, &not_leader), ErrorCode::InvalidRequest);
}

#[test]
fn producer_id_blocks_follow_each_other() {
    let mut h = Harness::new();
    let epoch = h.start(1, 1, 0);
    let mut firsts = vec![];
    for _ in 0..3 {
        let d = h.c.allocate_producer_ids(&h.image, 1, epoch).unwrap();
        h.commit(&d.records);
        firsts.push(d.reply.first);
    }
    assert_eq!(firsts, [0, 1000, 2000]);
    let err =
        h.c.allocate_producer_ids(&h.image, 1, epoch - 1)
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::StaleBrokerEpoch);
}

#[test]
fn transforms_get_a_new_generation_per_deploy() {
    let mut h = Harness::new();
    for expected in 1..=3 {
        let d =
            h.c.put_transform(&h.image, "enrich", b"{}".to_vec())
                .unwrap();
        assert_eq!(d.reply, expected);
        h.commit(&d.records);
    }
    let err =
        h.c.put_view(&h.image, "v", b"not json".to_vec())
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    let err = h.c.remove_plugin(&h.image, "nope").unwrap_err();
    assert_eq!(err.code, ErrorCode::ResourceNotFound);
}

#[test]
fn an_invalid_config_is_refused_before_anything_is_written() {
    let mut h = Harness::new();
    let broker = ConfigResource {
        resource_type: ConfigResourceType::Broker,
        name: String::new(),
    };
    let long = ConfigChange {
        key: "k".into(),
        value: Some("x".repeat(crate::limits::CONFIG_VALUE_BYTES_MAX + 1)),
    };
    let err =
        h.c.alter_configs(&h.image, &broker, &[long], false)
            .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert!(err.message.contains("CONFIG_VALUE_BYTES_MAX"), "{err}");
    let set = ConfigChange {
        key: "a".into(),
        value: Some("1".into()),
    };
    let d =
        h.c.alter_configs(&h.image, &broker, std::slice::from_ref(&set), false)
            .unwrap();
    h.commit(&d.records);
    let other = ConfigChange {
        key: "b".into(),
        value: Some("2".into()),
    };
    let d =
        h.c.alter_configs(&h.image, &broker, &[other], true)
            .unwrap();
    h.commit(&d.records);
    assert_eq!(h.image.configs()[&broker].keys().collect::<Vec<_>>(), ["b"]);
}

#[test]
fn an_expired_isr_member_that_heartbeats_again_before_its_fence_leads_again() {
    // Found by the simulator (seed 56): both replicas' sessions expire; the leader is fenced
    // first and leadership may not go to the other, expired one; that one then heartbeats
    // before its own fence. It was never fenced, so never unfenced: only the repair in
    // `tick` gives the partition a leader again.
    let mut h = Harness::new();
    let e1 = h.start(1, 1, 0);
    let e2 = h.start(2, 1, 0);
    let id = h.create("t", 1, 2).unwrap();
    let first = h.image.partition(id, 0).unwrap().leader;
    let (other, other_epoch) = if first == 1 { (2, e2) } else { (1, e1) };
    let records = h.c.tick(&h.image, TIMEOUT_MS + 1);
    h.commit(&records);
    let p = h.image.partition(id, 0).unwrap().clone();
    assert_eq!(
        (p.leader, p.isr.clone()),
        (NO_LEADER_FOR_TESTS, vec![other])
    );
    h.heartbeat(other, other_epoch, TIMEOUT_MS + 2).unwrap();
    h.tick(TIMEOUT_MS + 3);
    assert!(!h.image.broker(other).unwrap().fenced);
    assert_eq!(h.image.partition(id, 0).unwrap().leader, other);
}

#[test]
fn a_preferred_leader_election_moves_leadership_back() {
    let mut h = Harness::new();
    let epochs: Vec<i64> = (1..=2).map(|id| h.start(id, 1, 0)).collect();
    let id = h.create("t", 1, 2).unwrap();
    let p = h.image.partition(id, 0).unwrap().clone();
    let preferred = p.replicas[0];
    let t0 = vec![("t".to_owned(), 0)];
    let d = h.c.elect_preferred_leaders(&h.image, &t0);
    assert_eq!(
        d.reply[0].clone().unwrap_err().code,
        ErrorCode::ElectionNotNeeded
    );
    // The preferred leader leaves and comes back into the ISR: then it can lead again.
    let other = p.replicas[1];
    for (node, &epoch) in (1..).zip(&epochs) {
        if node == other {
            h.heartbeat(node, epoch, TIMEOUT_MS).unwrap();
        }
    }
    h.tick(TIMEOUT_MS + 1);
    assert_eq!(h.image.partition(id, 0).unwrap().leader, other);
    let d = h.c.elect_preferred_leaders(&h.image, &t0);
    assert_eq!(
        d.reply[0].clone().unwrap_err().code,
        ErrorCode::PreferredLeaderNotAvailable
    );
    let pe = epochs[preferred as usize - 1];
    h.heartbeat(preferred, pe, TIMEOUT_MS + 2).unwrap();
    let p = h.image.partition(id, 0).unwrap().clone();
    let expand = AlterPartition {
        broker_id: other,
        broker_epoch: epochs[other as usize - 1],
        topic_id: id,
        partition: 0,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![
            IsrMember {
                broker_id: other,
                broker_epoch: -1,
            },
            IsrMember {
                broker_id: preferred,
                broker_epoch: pe,
            },
        ],
    };
    let d = h.c.alter_partition(&h.image, &expand).unwrap();
    h.commit(&d.records);
    let d =
        h.c.elect_preferred_leaders(&h.image, &[t0[0].clone(), ("nope".into(), 0)]);
    assert!(d.reply[0].is_ok());
    assert_eq!(
        d.reply[1].clone().unwrap_err().code,
        ErrorCode::UnknownTopicOrPartition
    );
    h.commit(&d.records);
    let after = h.image.partition(id, 0).unwrap();
    assert_eq!(
        (after.leader, after.leader_epoch),
        (preferred, p.leader_epoch + 1)
    );
}

#[test]
fn a_create_retried_with_its_topic_id_is_idempotent() {
    let mut h = Harness::new();
    h.start(1, 1, 0);
    let topic = NewTopic {
        name: "t".into(),
        num_partitions: 2,
        replication_factor: 1,
        configs: vec![],
        topic_id: Some(TopicId([5; 16])),
        assignments: None,
    };
    let d = h.c.create_topics(&h.image, std::slice::from_ref(&topic));
    h.commit(&d.records);
    // The answer was lost in a failover; the forwarding broker retries the same request.
    h.c = Controller::new(ControllerConfig::default(), &h.image, 1, 9);
    let again = h.c.create_topics(&h.image, std::slice::from_ref(&topic));
    assert!(again.records.is_empty());
    assert_eq!(again.reply, d.reply);
    // Another request for the same name (another id) is told the topic exists.
    let other = NewTopic {
        topic_id: Some(TopicId([6; 16])),
        assignments: None,
        ..topic.clone()
    };
    let d = h.c.create_topics(&h.image, &[other]);
    assert_eq!(
        d.reply[0].result.clone().unwrap_err().code,
        ErrorCode::TopicAlreadyExists
    );
    // An id already taken by another topic is refused.
    let taken = NewTopic {
        name: "u".into(),
        ..topic
    };
    let d = h.c.create_topics(&h.image, &[taken]);
    assert_eq!(
        d.reply[0].result.clone().unwrap_err().code,
        ErrorCode::InvalidRequest
    );
}

#[test]
fn manual_assignments_place_partitions_where_asked_as_kafka_checks_them() {
    let mut h = Harness::new();
    h.start(1, 1, 0);
    h.start(2, 1, 0);
    let topic = |assignments: Vec<Vec<i32>>, rf: i16| NewTopic {
        name: "m".into(),
        num_partitions: assignments.len().max(1) as i32,
        replication_factor: rf,
        configs: Vec::new(),
        topic_id: None,
        assignments: Some(assignments),
    };
    let refused = |t: NewTopic, h: &mut Harness| {
        h.c.create_topics(&h.image, &[t]).reply[0]
            .result
            .clone()
            .unwrap_err()
            .code
    };
    // Not registered, repeated, or of another size than the replication factor.
    assert_eq!(
        refused(topic(vec![vec![9]], 1), &mut h),
        ErrorCode::InvalidReplicaAssignment
    );
    assert_eq!(
        refused(topic(vec![vec![1, 1]], 2), &mut h),
        ErrorCode::InvalidReplicaAssignment
    );
    assert_eq!(
        refused(topic(vec![vec![1]], 2), &mut h),
        ErrorCode::InvalidReplicaAssignment
    );
    let d =
        h.c.create_topics(&h.image, &[topic(vec![vec![2], vec![2], vec![1]], 1)]);
    assert_eq!(
        d.reply[0].result.clone().unwrap().1,
        vec![vec![2], vec![2], vec![1]]
    );
    h.commit(&d.records);
    let placed = h.image.topic_by_name("m").unwrap();
    let leaders: Vec<i32> = placed.partitions.values().map(|p| p.leader).collect();
    assert_eq!(leaders, vec![2, 2, 1]);
}

#[test]
fn leadership_returns_to_the_preferred_replica_once_it_is_back_in_the_isr() {
    let mut h = Harness::new();
    let interval = 20_000;
    h.c = Controller::new(
        ControllerConfig {
            leader_imbalance_check_interval_ms: Some(interval),
            ..ControllerConfig::default()
        },
        &h.image,
        0,
        1,
    );
    let mut epochs: BTreeMap<i32, i64> = (1..=3).map(|id| (id, h.start(id, 1, 0))).collect();
    let id = h.create("t", 1, 3).unwrap();
    let p = h.image.partition(id, 0).unwrap().clone();
    let preferred = p.replicas[0];
    assert_eq!(p.leader, preferred);
    // The preferred replica goes silent: fenced, leadership moves.
    for (&node, &epoch) in &epochs {
        if node != preferred {
            h.heartbeat(node, epoch, TIMEOUT_MS).unwrap();
        }
    }
    h.tick(TIMEOUT_MS + 1);
    let moved = h.image.partition(id, 0).unwrap().clone();
    assert_ne!(moved.leader, preferred);
    // It returns and its new leader takes it back into the ISR.
    epochs.insert(preferred, h.start(preferred, 2, TIMEOUT_MS + 2));
    let mut isr = moved.isr.clone();
    isr.push(preferred);
    let alter = AlterPartition {
        broker_id: moved.leader,
        broker_epoch: epochs[&moved.leader],
        topic_id: id,
        partition: 0,
        leader_epoch: moved.leader_epoch,
        partition_epoch: moved.partition_epoch,
        new_isr: isr
            .iter()
            .map(|&broker_id| IsrMember {
                broker_id,
                broker_epoch: -1,
            })
            .collect(),
    };
    let d = h.c.alter_partition(&h.image, &alter).unwrap();
    h.commit(&d.records);
    // Before the check interval nothing moves; at it, leadership goes back.
    for (&node, &epoch) in &epochs {
        h.heartbeat(node, epoch, interval - 1).unwrap();
    }
    h.tick(interval - 1);
    assert_eq!(h.image.partition(id, 0).unwrap().leader, moved.leader);
    h.tick(interval + 1);
    let back = h.image.partition(id, 0).unwrap();
    assert_eq!(back.leader, preferred);
    assert!(back.leader_epoch > moved.leader_epoch);
}

#[test]
fn unclean_election_only_for_a_topic_that_enables_it() {
    let mut h = Harness::new();
    let epochs: BTreeMap<i32, i64> = (1..=2).map(|id| (id, h.start(id, 1, 0))).collect();
    let mut make = |name: &str, unclean: bool| {
        let topic = NewTopic {
            name: name.into(),
            num_partitions: 1,
            replication_factor: 2,
            configs: if unclean {
                vec![(
                    crate::limits::UNCLEAN_LEADER_ELECTION_KEY.into(),
                    "true".into(),
                )]
            } else {
                vec![]
            },
            topic_id: None,
            assignments: Some(vec![vec![1, 2]]),
        };
        let d = h.c.create_topics(&h.image, &[topic]);
        h.commit(&d.records);
        d.reply[0].result.clone().unwrap().0
    };
    let clean = make("clean", false);
    let unclean = make("unclean", true);
    // Broker 2 goes first (ISR {1}), then broker 1: no in-sync replica is left.
    h.heartbeat(1, epochs[&1], TIMEOUT_MS).unwrap();
    h.tick(TIMEOUT_MS + 1);
    h.tick(2 * TIMEOUT_MS + 2);
    for id in [clean, unclean] {
        let p = h.image.partition(id, 0).unwrap();
        assert_eq!((p.leader, p.isr.clone()), (NO_LEADER_FOR_TESTS, vec![1]));
    }
    // Broker 2 returns: only the topic that enables it takes it as leader (and sole ISR).
    h.start(2, 2, 2 * TIMEOUT_MS + 3);
    let p = h.image.partition(unclean, 0).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    let p = h.image.partition(clean, 0).unwrap();
    assert_eq!((p.leader, p.isr.clone()), (NO_LEADER_FOR_TESTS, vec![1]));
}
