//! The simulator's network and the effects of a replica: messages between brokers are
//! dropped, duplicated, delayed and so reordered; a client's connection loses requests and
//! answers but keeps their order; an fsync completes after a while on its own disk. A
//! message to a broker is for the process that was there when it was sent: a restart
//! breaks the connection and it is dropped.

use super::*;

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dest {
    /// A broker's process (node index, generation).
    Node(usize, u64),
    /// The controller, from a broker's process.
    Controller(usize, u64),
    /// A producer.
    Producer(usize),
}

/// What a message carries.
#[derive(Debug, Clone)]
pub(super) enum Body {
    Event(Event),
    AlterPartition(AlterPartition),
    ProduceAnswer(u64, Result<crate::ProduceAck, ErrorCode>),
}

#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub(super) dest: Dest,
    pub(super) body: Body,
}

#[derive(Debug, Default)]
pub(super) struct Network {
    queue: BTreeMap<(i64, u64), Msg>,
    seq: u64,
    /// Each client connection's last delivery time (its order is kept).
    fifo: BTreeMap<usize, i64>,
}

impl Network {
    fn push(&mut self, at_ms: i64, msg: Msg) {
        if self.queue.len() >= NETWORK_MESSAGES_MAX {
            return;
        }
        self.seq += 1;
        self.queue.insert((at_ms, self.seq), msg);
    }

    fn pop_due(&mut self, now_ms: i64) -> Option<Msg> {
        let (&key, _) = self.queue.first_key_value()?;
        if key.0 > now_ms {
            return None;
        }
        self.queue.remove(&key)
    }
}

impl Sim {
    /// Between brokers (and to the controller): dropped, duplicated, delayed.
    pub(super) fn send_lossy(&mut self, msg: Msg) {
        if !self.calm && self.rng.chance(30) {
            return;
        }
        let copies = if !self.calm && self.rng.chance(20) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if !self.calm && self.rng.chance(20) {
                1 + self.rng.below(400) as i64
            } else {
                1 + self.rng.below(15) as i64
            };
            self.net.push(self.now_ms + delay, msg.clone());
        }
    }

    /// On a client connection `channel`: lost sometimes, never reordered or duplicated.
    pub(super) fn send_client(&mut self, channel: usize, msg: Msg) {
        if !self.calm && self.rng.chance(10) {
            return;
        }
        let at = self.now_ms + 1 + self.rng.below(8) as i64;
        let at = at.max(self.net.fifo.get(&channel).copied().unwrap_or(0));
        self.net.fifo.insert(channel, at);
        self.net.push(at, msg);
    }

    /// Delivers every message due by now, in time order (a delivery may send more, later).
    pub(super) fn deliver_due(&mut self) -> Check {
        while let Some(msg) = self.net.pop_due(self.now_ms) {
            self.deliver(msg)?;
        }
        Ok(())
    }

    pub(super) fn deliver(&mut self, msg: Msg) -> Check {
        match msg.dest {
            Dest::Node(i, generation) => {
                let node = &mut self.nodes[i];
                if node.replica.is_none() || node.generation != generation {
                    return Ok(());
                }
                if node.paused_until_ms.is_some() {
                    if node.held.len() < NETWORK_MESSAGES_MAX {
                        node.held.push(msg);
                    }
                    return Ok(());
                }
                let Body::Event(event) = msg.body else {
                    return Err("a non-event message to a broker".into());
                };
                self.feed(i, event)
            }
            Dest::Controller(i, generation) => {
                let Body::AlterPartition(req) = msg.body else {
                    return Err("a non-AlterPartition message to the controller".into());
                };
                self.alter_partition(i, generation, &req)
            }
            Dest::Producer(p) => {
                let Body::ProduceAnswer(request_id, result) = msg.body else {
                    return Err("a non-answer message to a producer".into());
                };
                self.on_produce_answer(p, request_id, result)
            }
        }
    }

    /// The node's index for a node id.
    pub(super) fn index_of(&self, node_id: i32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == node_id)
    }

    /// Hands `event` to node `i`'s replica and carries out the effects.
    pub(super) fn feed(&mut self, i: usize, event: Event) -> Check {
        let now = self.now_ms;
        let node = &mut self.nodes[i];
        let Some(replica) = node.replica.as_mut() else {
            return Ok(());
        };
        let hw_before = replica.high_watermark();
        let effects = replica.handle(now, event);
        let generation = node.generation;
        for effect in effects {
            self.effect(i, generation, hw_before, effect)?;
        }
        Ok(())
    }

    fn effect(&mut self, i: usize, generation: u64, hw_before: i64, effect: Effect) -> Check {
        let me = self.nodes[i].id;
        match effect {
            Effect::Append(_) | Effect::BeginEpoch { .. } => {}
            Effect::Truncate { offset } => {
                self.stats.truncations += 1;
                if offset < hw_before {
                    return Err(format!(
                        "broker {me} truncated to {offset}, below its high watermark {hw_before}"
                    ));
                }
            }
            Effect::Fsync { token, .. } => {
                // A disk's fsync: usually a few ms, sometimes a slow one.
                let took_ms = if self.rng.chance(200) {
                    100 + self.rng.below(200)
                } else {
                    1 + self.rng.below(40)
                };
                let at = self.now_ms + took_ms as i64;
                let msg = Msg {
                    dest: Dest::Node(i, generation),
                    body: Body::Event(Event::Fsynced { token }),
                };
                self.net.push(at, msg);
            }
            Effect::SendFetch { to, request } => self.send_to_broker(to, Event::Fetch(request)),
            Effect::SendFetchResponse { to, response } => {
                self.send_to_broker(to, Event::FetchResponse(response));
            }
            Effect::SendAlterPartition(req) => {
                let msg = Msg {
                    dest: Dest::Controller(i, generation),
                    body: Body::AlterPartition(req),
                };
                self.send_lossy(msg);
            }
            Effect::ProduceAnswer { request_id, result } => {
                let p = clients::producer_of(request_id);
                let replaced = result.is_ok_and(|ack| {
                    self.image
                        .partition(self.topic_id, 0)
                        .is_some_and(|s| s.leader_epoch > ack.leader_epoch)
                });
                if replaced && self.producers[p].acks == Acks::All {
                    self.stats.zombie_acks += 1;
                }
                let msg = Msg {
                    dest: Dest::Producer(p),
                    body: Body::ProduceAnswer(request_id, result),
                };
                self.send_client(p, msg);
            }
        }
        Ok(())
    }

    fn send_to_broker(&mut self, node_id: i32, event: Event) {
        let Some(j) = self.index_of(node_id) else {
            return;
        };
        if self.nodes[j].replica.is_none() {
            return;
        }
        let msg = Msg {
            dest: Dest::Node(j, self.nodes[j].generation),
            body: Body::Event(event),
        };
        self.send_lossy(msg);
    }

    /// The controller decides a broker's AlterPartition; the answer goes back to the
    /// process that asked.
    fn alter_partition(&mut self, i: usize, generation: u64, req: &AlterPartition) -> Check {
        let result = match self.controller.alter_partition(&self.image, req) {
            Ok(d) => {
                self.commit(d.records)?;
                Ok(d.reply)
            }
            Err(e) => {
                self.stats.alter_refused += 1;
                Err(e.code)
            }
        };
        let msg = Msg {
            dest: Dest::Node(i, generation),
            body: Body::Event(Event::AlterPartitionResponse(result)),
        };
        self.send_lossy(msg);
        Ok(())
    }

    /// A paused node's held messages, back in the queue on resume.
    pub(super) fn release_held(&mut self, i: usize) {
        for msg in std::mem::take(&mut self.nodes[i].held) {
            self.net.push(self.now_ms, msg);
        }
    }
}
