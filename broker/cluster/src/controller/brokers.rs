//! Brokers: registration, heartbeats, session expiry, controlled shutdown and
//! unregistration (KIP-631's lifecycle).

use std::collections::BTreeSet;

use sluice_kafka::ErrorCode;

use super::{Controller, ControllerError, Decision, elect_returning, move_away, repair};
use crate::image::{BrokerState, MetadataImage};
use crate::limits;
use crate::mutants::{Mutant, mutant};
use crate::records::{BrokerRegistration, MetadataRecord};

/// The broker epoch a registration answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerEpoch {
    /// The Raft index of the entry the decision's records commit in (a new registration).
    OfCommit,
    /// The current registration's (a retry by the same incarnation: nothing to commit).
    Existing(i64),
}

/// A broker's heartbeat (Kafka's BrokerHeartbeat, API 63).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Its node id.
    pub node_id: i32,
    /// Its registration's epoch.
    pub broker_epoch: i64,
    /// The last metadata index it has applied.
    pub current_metadata_offset: i64,
    /// It asks to be fenced.
    pub want_fence: bool,
    /// It asks for a controlled shutdown.
    pub want_shut_down: bool,
}

/// The answer to a heartbeat, as of after the decision's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatReply {
    /// It has applied the metadata up to its registration.
    pub is_caught_up: bool,
    /// It is fenced (leads nothing, joins no ISR).
    pub is_fenced: bool,
    /// Its controlled shutdown is complete: it may exit.
    pub should_shut_down: bool,
}

impl Controller {
    /// A broker registers (Kafka's BrokerRegistration, API 62). A new incarnation of a
    /// node id whose old session is still valid is refused; otherwise the old
    /// incarnation's leaderships move away and the new one registers, fenced until it
    /// catches up. The same incarnation again is a retry: its current epoch, no records.
    ///
    /// # Errors
    /// `INVALID_REQUEST` (a malformed registration, `BROKERS_MAX`),
    /// `DUPLICATE_BROKER_REGISTRATION`.
    pub fn register_broker(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
        registration: BrokerRegistration,
    ) -> Result<Decision<BrokerEpoch>, ControllerError> {
        let node_id = registration.node_id;
        let record = MetadataRecord::RegisterBroker(registration);
        record
            .validate()
            .map_err(|e| ControllerError::new(ErrorCode::InvalidRequest, e.to_string()))?;
        let MetadataRecord::RegisterBroker(registration) = &record else {
            unreachable!("built above")
        };
        let Some(old) = image.broker(node_id) else {
            if image.brokers().len() >= limits::BROKERS_MAX {
                return Err(ControllerError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "{} brokers are registered (BROKERS_MAX)",
                        limits::BROKERS_MAX
                    ),
                ));
            }
            self.touch(node_id, now_ms);
            return Ok(Decision::new(vec![record], BrokerEpoch::OfCommit));
        };
        if old.registration.incarnation_id == registration.incarnation_id {
            self.touch(node_id, now_ms);
            return Ok(Decision::new(
                vec![],
                BrokerEpoch::Existing(old.broker_epoch),
            ));
        }
        if self.session_valid(node_id, now_ms) {
            return Err(ControllerError::new(
                ErrorCode::DuplicateBrokerRegistration,
                format!("node {node_id} is registered by another incarnation with a live session"),
            ));
        }
        let mut records = move_away(
            image,
            &self.config,
            &BTreeSet::from([node_id]),
            &self.expired(now_ms),
        );
        records.push(record);
        self.touch(node_id, now_ms);
        Ok(Decision::new(records, BrokerEpoch::OfCommit))
    }

    /// A broker's heartbeat: renews its session; unfences it once it has caught up (its
    /// metadata offset reached its registration); fences it if it asks; runs its
    /// controlled shutdown.
    ///
    /// # Errors
    /// `BROKER_ID_NOT_REGISTERED`, `STALE_BROKER_EPOCH` (an old incarnation's heartbeat).
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
        hb: Heartbeat,
    ) -> Result<Decision<HeartbeatReply>, ControllerError> {
        let broker = current_broker(image, hb.node_id, hb.broker_epoch)?;
        let epoch = broker.broker_epoch;
        self.touch(hb.node_id, now_ms);
        let is_caught_up = hb.current_metadata_offset >= epoch;
        let reply = |is_fenced, should_shut_down| HeartbeatReply {
            is_caught_up,
            is_fenced,
            should_shut_down,
        };
        let node = BTreeSet::from([hb.node_id]);
        let avoid = self.expired(now_ms);
        let decision = if hb.want_shut_down {
            self.shut_down(image, broker, &avoid)
        } else if hb.want_fence && !broker.fenced {
            let mut records = vec![fence(broker)];
            records.extend(move_away(image, &self.config, &node, &avoid));
            Decision::new(records, reply(true, false))
        } else if broker.fenced && !broker.in_controlled_shutdown && is_caught_up && !hb.want_fence
        {
            let mut records = vec![MetadataRecord::UnfenceBroker {
                node_id: hb.node_id,
                broker_epoch: epoch,
            }];
            records.extend(elect_returning(image, &self.config, hb.node_id));
            Decision::new(records, reply(false, false))
        } else {
            Decision::new(vec![], reply(broker.fenced, false))
        };
        Ok(Decision {
            reply: HeartbeatReply {
                is_caught_up,
                ..decision.reply
            },
            ..decision
        })
    }

    /// A controlled shutdown: first its leaderships and ISR places move away (it is marked
    /// shutting down); once it leads nothing it is fenced and may exit.
    fn shut_down(
        &mut self,
        image: &MetadataImage,
        broker: &BrokerState,
        avoid: &BTreeSet<i32>,
    ) -> Decision<HeartbeatReply> {
        let node_id = broker.registration.node_id;
        let reply = |is_fenced, should_shut_down| HeartbeatReply {
            is_caught_up: false,
            is_fenced,
            should_shut_down,
        };
        if broker.fenced {
            self.deadlines_ms.remove(&node_id);
            return Decision::new(vec![], reply(true, true));
        }
        let node = BTreeSet::from([node_id]);
        if !broker.in_controlled_shutdown {
            let mut records = vec![MetadataRecord::BrokerControlledShutdown {
                node_id,
                broker_epoch: broker.broker_epoch,
            }];
            records.extend(move_away(image, &self.config, &node, avoid));
            return Decision::new(records, reply(false, false));
        }
        // Shutting down already: whatever it still leads moves, and it is fenced.
        let mut records = move_away(image, &self.config, &node, avoid);
        records.push(fence(broker));
        self.deadlines_ms.remove(&node_id);
        Decision::new(records, reply(true, true))
    }

    /// Session expiry: the first unfenced broker (by node id) whose session deadline has
    /// passed is fenced and its leaderships move (to brokers whose sessions are valid).
    /// One broker per call, as KRaft does; call again until it returns nothing.
    ///
    /// With nobody to fence, it repairs what a decision split over several entries
    /// ([`crate::records::encode_batches`]) and cut by a failover left behind: leaders and
    /// ISR members that are not active move away, and leaderless partitions with an
    /// active ISR member get it as leader. Call it until empty on becoming leader too.
    pub fn tick(&mut self, image: &MetadataImage, now_ms: i64) -> Vec<MetadataRecord> {
        // A broker unfenced under another controller's watch whose registration this one
        // never saw: it gets a full session from now.
        for (&id, _) in image.brokers().iter().filter(|(_, b)| !b.fenced) {
            if !self.deadlines_ms.contains_key(&id) {
                self.touch(id, now_ms);
            }
        }
        let expired = self.expired(now_ms);
        let Some(broker) = expired
            .iter()
            .filter_map(|id| image.broker(*id))
            .find(|b| !b.fenced)
        else {
            let repaired = repair(image, &self.config, &expired);
            if !repaired.is_empty() {
                return repaired;
            }
            return self.rebalance_if_due(image, now_ms);
        };
        let node = BTreeSet::from([broker.registration.node_id]);
        let mut records = vec![fence(broker)];
        records.extend(move_away(image, &self.config, &node, &expired));
        records
    }

    /// A broker leaves the cluster for good (Kafka's UnregisterBroker, API 64): its
    /// leaderships and ISR places move away, then its registration goes.
    ///
    /// # Errors
    /// `BROKER_ID_NOT_REGISTERED`.
    pub fn unregister_broker(
        &mut self,
        image: &MetadataImage,
        now_ms: i64,
        node_id: i32,
    ) -> Result<Decision<()>, ControllerError> {
        let broker = image
            .broker(node_id)
            .ok_or_else(|| not_registered(node_id))?;
        let mut records = move_away(
            image,
            &self.config,
            &BTreeSet::from([node_id]),
            &self.expired(now_ms),
        );
        records.push(MetadataRecord::UnregisterBroker {
            node_id,
            broker_epoch: broker.broker_epoch,
        });
        self.deadlines_ms.remove(&node_id);
        Ok(Decision::new(records, ()))
    }

    /// Brokers whose session deadline has passed.
    fn expired(&self, now_ms: i64) -> BTreeSet<i32> {
        self.deadlines_ms
            .iter()
            .filter(|&(_, &d)| d < now_ms)
            .map(|(&id, _)| id)
            .collect()
    }
}

/// The broker `node_id` if `broker_epoch` is its current registration's.
pub(super) fn current_broker(
    image: &MetadataImage,
    node_id: i32,
    broker_epoch: i64,
) -> Result<&BrokerState, ControllerError> {
    let broker = image
        .broker(node_id)
        .ok_or_else(|| not_registered(node_id))?;
    if broker.broker_epoch != broker_epoch && !mutant(Mutant::StaleBrokerEpochAccepted) {
        return Err(ControllerError::new(
            ErrorCode::StaleBrokerEpoch,
            format!(
                "broker {node_id}: epoch {broker_epoch} is not its current {}",
                broker.broker_epoch
            ),
        ));
    }
    Ok(broker)
}

fn not_registered(node_id: i32) -> ControllerError {
    ControllerError::new(
        ErrorCode::BrokerIdNotRegistered,
        format!("broker {node_id} is not registered"),
    )
}

fn fence(broker: &BrokerState) -> MetadataRecord {
    MetadataRecord::FenceBroker {
        node_id: broker.registration.node_id,
        broker_epoch: broker.broker_epoch,
    }
}
