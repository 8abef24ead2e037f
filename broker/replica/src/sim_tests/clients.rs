//! The simulator's clients: producers (idempotent at acks=all, plain at acks=all or
//! acks=1) with one batch in flight, retried until answered; consumers reading below the
//! high watermark of a replica that thinks it leads.

use super::*;

/// A client's own timeout for an unanswered produce before it sends it again.
const CLIENT_TIMEOUT_MS: i64 = 1_500;
/// The produce request's `timeout_ms` (how long the leader waits for acks=all).
const REQUEST_TIMEOUT_MS: i64 = 1_000;
const RETRY_BACKOFF_MS: i64 = 50;

/// The producer whose request id this is.
pub(super) const fn producer_of(request_id: u64) -> usize {
    (request_id >> 40) as usize
}

/// One batch a producer sends until it is answered.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    request_id: u64,
    payload: u64,
    base_sequence: i32,
    records: i64,
    /// When it was last sent (`None`: not yet).
    sent_ms: Option<i64>,
}

#[derive(Debug)]
pub(super) struct Producer {
    index: usize,
    /// An idempotent producer's id, or -1.
    pub(super) producer_id: i64,
    pub(super) acks: Acks,
    next_sequence: i32,
    batches: u64,
    requests: u64,
    in_flight: Option<InFlight>,
    next_send_ms: i64,
    /// Its acknowledged batches, in order: (payload, base offset).
    pub(super) acked: Vec<(u64, i64)>,
}

impl Producer {
    pub(super) fn new(index: usize, rng: &mut SplitMix64) -> Self {
        let kind = if index < 3 {
            index
        } else {
            rng.below(3) as usize
        };
        let (producer_id, acks) = match kind {
            0 => (1_000 + index as i64, Acks::All),
            1 => (-1, Acks::All),
            _ => (-1, Acks::Leader),
        };
        Self {
            index,
            producer_id,
            acks,
            next_sequence: 0,
            batches: 0,
            requests: 0,
            in_flight: None,
            next_send_ms: 0,
            acked: Vec::new(),
        }
    }

    pub(super) const fn owns(&self, payload: u64) -> bool {
        payload >> 32 == self.index as u64 + 1
    }
}

#[derive(Debug, Default)]
pub(super) struct Consumer {
    position: i64,
}

impl Sim {
    pub(super) fn clients_step(&mut self) -> Check {
        for p in 0..self.producers.len() {
            self.producer_step(p);
        }
        if !self.calm && self.rng.chance(60) {
            let c = self.rng.below(self.consumers.len() as u64) as usize;
            self.consume(c)?;
        }
        Ok(())
    }

    fn producer_step(&mut self, p: usize) {
        let now = self.now_ms;
        let calm = self.calm;
        let start = !calm && self.rng.chance(150);
        let records = 1 + self.rng.below(3) as i64;
        let producer = &mut self.producers[p];
        if now < producer.next_send_ms {
            return;
        }
        match producer.in_flight {
            Some(f) if f.sent_ms.is_some_and(|t| now - t < CLIENT_TIMEOUT_MS) => return,
            Some(_) => {}
            None if !start => return,
            None => {
                producer.batches += 1;
                producer.in_flight = Some(InFlight {
                    request_id: 0,
                    payload: ((p as u64 + 1) << 32) | producer.batches,
                    base_sequence: if producer.producer_id >= 0 {
                        producer.next_sequence
                    } else {
                        -1
                    },
                    records,
                    sent_ms: None,
                });
            }
        }
        self.send_produce(p);
    }

    /// Sends (again) the producer's batch to the leader its metadata names.
    fn send_produce(&mut self, p: usize) {
        let leader = self
            .image
            .partition(self.topic_id, 0)
            .map_or(NO_LEADER, |s| s.leader);
        let target = self.index_of(leader);
        let now = self.now_ms;
        let producer = &mut self.producers[p];
        let Some(f) = producer.in_flight.as_mut() else {
            return;
        };
        let Some(j) = target else {
            producer.next_send_ms = now + RETRY_BACKOFF_MS;
            return;
        };
        producer.requests += 1;
        f.request_id = ((p as u64) << 40) | producer.requests;
        f.sent_ms = Some(now);
        let request = ProduceRequest {
            request_id: f.request_id,
            acks: producer.acks,
            records: f.records,
            producer_id: producer.producer_id,
            base_sequence: f.base_sequence,
            payload: f.payload,
            deadline_ms: now + REQUEST_TIMEOUT_MS,
        };
        if self.nodes[j].replica.is_none() {
            return;
        }
        let msg = network::Msg {
            dest: network::Dest::Node(j, self.nodes[j].generation),
            body: network::Body::Event(Event::Produce(request)),
        };
        self.send_client(p, msg);
    }

    pub(super) fn on_produce_answer(
        &mut self,
        p: usize,
        request_id: u64,
        result: Result<crate::ProduceAck, ErrorCode>,
    ) -> Check {
        let now = self.now_ms;
        let producer = &mut self.producers[p];
        let Some(f) = producer.in_flight.filter(|f| f.request_id == request_id) else {
            return Ok(());
        };
        let ack = match result {
            Ok(ack) => ack,
            Err(ErrorCode::OutOfOrderSequenceNumber) => {
                return Err(format!(
                    "producer {p} (id {}) got OUT_OF_ORDER_SEQUENCE_NUMBER for sequence {}",
                    producer.producer_id, f.base_sequence
                ));
            }
            Err(code) => {
                match code {
                    ErrorCode::NotEnoughReplicas => self.stats.not_enough_replicas += 1,
                    ErrorCode::RequestTimedOut => self.stats.timeouts += 1,
                    _ => {}
                }
                let producer = &mut self.producers[p];
                if let Some(f) = producer.in_flight.as_mut() {
                    f.sent_ms = None;
                }
                producer.next_send_ms = now + RETRY_BACKOFF_MS;
                return Ok(());
            }
        };
        producer.in_flight = None;
        producer.acked.push((f.payload, ack.base_offset));
        if producer.producer_id >= 0 {
            producer.next_sequence += f.records as i32;
        }
        if producer.acks == Acks::Leader {
            self.stats.acked_one += 1;
            return Ok(());
        }
        self.stats.acked_all += 1;
        self.claim(ack.base_offset, f.payload, ack.leader_epoch)
    }

    /// A consumer reads below the high watermark of a replica that thinks it leads (which
    /// may be a paused, replaced leader).
    fn consume(&mut self, c: usize) -> Check {
        let leaders: Vec<usize> = (0..self.n)
            .filter(|&i| self.nodes[i].paused_until_ms.is_none())
            .filter(|&i| {
                self.nodes[i]
                    .replica
                    .as_ref()
                    .is_some_and(|r| r.leading_epoch().is_some())
            })
            .collect();
        if leaders.is_empty() {
            return Ok(());
        }
        let i = leaders[self.rng.below(leaders.len() as u64) as usize];
        let replica = self.nodes[i].replica.as_ref().expect("filtered above");
        let epoch = replica.leading_epoch().expect("filtered above");
        let hw = replica.high_watermark();
        let position = self.consumers[c].position;
        let read: Vec<(i64, u64, i64)> = replica
            .log()
            .read(position, 16)
            .iter()
            .filter(|b| b.last_offset < hw)
            .map(|b| (b.base_offset, b.payload, b.last_offset))
            .collect();
        for (base, payload, last) in read {
            self.stats.reads += 1;
            self.consumers[c].position = last + 1;
            self.claim(base, payload, epoch)?;
        }
        Ok(())
    }

    /// The batch `payload` at `base_offset` is committed as of leader epoch `epoch`.
    pub(super) fn claim(&mut self, base_offset: i64, payload: u64, epoch: i32) -> Check {
        match self.committed.get_mut(&base_offset) {
            Some((p, _)) if *p != payload => Err(format!(
                "two batches committed at offset {base_offset}: payload {p:#x} and {payload:#x}"
            )),
            Some((_, e)) => {
                *e = (*e).min(epoch);
                Ok(())
            }
            None => {
                self.committed.insert(base_offset, (payload, epoch));
                Ok(())
            }
        }
    }
}
