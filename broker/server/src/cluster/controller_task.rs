//! The task that owns the [`Controller`] while this node leads: one task, no locks, fed
//! through a bounded queue ([`Command`], `CONTROLLER_COMMANDS_MAX`) by local submits and
//! the controller listener's forwards.
//!
//! On becoming leader (openraft's metrics: this node is the leader, in a new term) it waits
//! with `ensure_linearizable` until the image has applied everything the previous leaders
//! committed, then builds the controller from that image; a new cluster's first entry is
//! `bootstrap_records` (its cluster id). It ticks the controller at its next session
//! deadline (at most every `CONTROLLER_TICK_MAX_MS`) and commits what the ticks return. On
//! losing leadership it drops the controller and answers `NotLeader`.
//!
//! One operation at a time: its records commit (`client_write` returns once the entry is
//! applied here) before the next is decided, so every decision sees the image of all the
//! earlier ones.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openraft::async_runtime::watch::WatchReceiver;
use openraft::{ReadPolicy, ServerState};
use sluice_cluster::{Controller, ControllerConfig, MetadataImage, MetadataRecord, encode_batches};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until, timeout};

use super::MetaRaft;
use super::image::{ImageApplier, ImageWatch};
use super::limits::{CONTROLLER_TICK_MAX_MS, SUBMIT_DEADLINE_MS, TICK_ROUNDS_PER_WAKE_MAX};
use super::ops::{self, ControllerOp, ControllerReply};
use super::types::MetadataPayload;
use super::wire::{ForwardAnswer, ForwardRefusal};

/// An operation to run, and where its answer goes.
#[derive(Debug)]
pub(crate) struct Command {
    pub op: ControllerOp,
    pub answer: oneshot::Sender<ForwardAnswer>,
}

/// What woke the controller task.
enum Event {
    Stop,
    Command(Command),
    Metrics,
    Tick,
}

/// The controller task's state.
pub(crate) struct ControllerTask {
    pub node_id: u64,
    pub cluster_id: String,
    pub config: ControllerConfig,
    pub raft: MetaRaft<ImageApplier>,
    pub image: ImageWatch,
    pub commands: mpsc::Receiver<Command>,
    pub shutdown: watch::Receiver<bool>,
    /// The controller and the term it was built in, while this node leads.
    controller: Option<(Controller, u64)>,
}

/// Milliseconds since the Unix epoch, as the controller counts time.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

impl ControllerTask {
    pub(crate) fn new(
        node_id: u64,
        cluster_id: String,
        config: ControllerConfig,
        raft: MetaRaft<ImageApplier>,
        image: ImageWatch,
        commands: mpsc::Receiver<Command>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        ControllerTask {
            node_id,
            cluster_id,
            config,
            raft,
            image,
            commands,
            shutdown,
            controller: None,
        }
    }

    /// Runs until shutdown.
    pub(crate) async fn run(mut self) {
        let mut metrics = self.raft.metrics();
        loop {
            self.follow_leadership().await;
            let tick_at = self.next_tick();
            let event = tokio::select! {
                _ = self.shutdown.wait_for(|stop| *stop) => Event::Stop,
                command = self.commands.recv() => command.map_or(Event::Stop, Event::Command),
                changed = metrics.changed() => if changed.is_err() { Event::Stop } else { Event::Metrics },
                () = sleep_until(tick_at) => Event::Tick,
            };
            match event {
                Event::Stop => break,
                Event::Command(command) => self.handle(command).await,
                Event::Metrics => {}
                Event::Tick => self.tick().await,
            }
        }
    }

    fn image(&self) -> std::sync::Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Builds or drops the controller as leadership changed.
    async fn follow_leadership(&mut self) {
        let (leading, term) = {
            let m = self.raft.metrics().borrow_watched().clone();
            let leading = m.state == ServerState::Leader && m.current_leader == Some(self.node_id);
            (leading, m.current_term)
        };
        if !leading {
            if self.controller.take().is_some() {
                tracing::info!(node = self.node_id, "no longer the active controller");
            }
            return;
        }
        if self.controller.as_ref().is_some_and(|(_, t)| *t == term) {
            return;
        }
        self.controller = None;
        if let Err(e) = self.raft.ensure_linearizable(ReadPolicy::ReadIndex).await {
            tracing::info!(node = self.node_id, error = %e, "leadership not confirmed");
            return;
        }
        let image = self.image();
        let mut seed = [0u8; 8];
        crate::random::OsRng::fill(&mut seed).expect("getrandom(2) failed");
        let controller = Controller::new(self.config, &image, now_ms(), u64::from_le_bytes(seed));
        self.controller = Some((controller, term));
        tracing::info!(node = self.node_id, term, "active controller");
        if image.cluster_id().is_none() {
            match Controller::bootstrap_records(&self.cluster_id) {
                Ok(records) => {
                    if let Err(e) = self.commit(&records).await {
                        // Not active until the cluster id is committed: the next wake-up
                        // (at most CONTROLLER_TICK_MAX_MS away) tries again.
                        tracing::warn!(error = ?e, "bootstrap records not committed");
                        self.controller = None;
                        return;
                    }
                }
                Err(e) => tracing::error!(error = %e, "cluster id refused"),
            }
        }
        self.tick().await;
    }

    /// When to wake next: the controller's next session deadline, at most
    /// `CONTROLLER_TICK_MAX_MS` away (a follower wakes that often too, to retry becoming
    /// the active controller if an attempt failed).
    fn next_tick(&self) -> Instant {
        let max = Instant::now() + Duration::from_millis(CONTROLLER_TICK_MAX_MS);
        let Some((controller, _)) = &self.controller else {
            return max;
        };
        let Some(deadline_ms) = controller.next_deadline_ms(&self.image()) else {
            return max;
        };
        let wait_ms = u64::try_from(deadline_ms.saturating_sub(now_ms()).saturating_add(1))
            .unwrap_or(0)
            .min(CONTROLLER_TICK_MAX_MS);
        Instant::now() + Duration::from_millis(wait_ms)
    }

    /// Ticks the controller until it has nothing to commit (bounded per wake-up).
    async fn tick(&mut self) {
        for _ in 0..TICK_ROUNDS_PER_WAKE_MAX {
            let image = self.image();
            let Some((controller, _)) = self.controller.as_mut() else {
                return;
            };
            let records = controller.tick(&image, now_ms());
            if records.is_empty() || self.commit(&records).await.is_err() {
                return;
            }
        }
    }

    /// Runs one operation and answers it.
    async fn handle(&mut self, command: Command) {
        let answer = self.decide_and_commit(command.op).await;
        // The submitter may have given up (its deadline): nothing to do then.
        let _ = command.answer.send(answer);
    }

    async fn decide_and_commit(&mut self, op: ControllerOp) -> ForwardAnswer {
        let image = self.image();
        if self.controller.is_none() {
            return Err(self.not_leader());
        }
        if let ControllerOp::AddLearner {
            node_id,
            controller_addr,
        } = op
        {
            return self.add_learner(node_id, controller_addr, &image).await;
        }
        let Some((controller, _)) = self.controller.as_mut() else {
            return Err(self.not_leader());
        };
        let unregistered = match &op {
            ControllerOp::UnregisterBroker { node_id } => u64::try_from(*node_id).ok(),
            _ => None,
        };
        let decided =
            ops::run(controller, &image, now_ms(), op).map_err(ForwardRefusal::Refused)?;
        if decided.records.is_empty() {
            return Ok((decided.reply, image.last_applied_index()));
        }
        let index = self.commit(&decided.records).await?;
        if let Some(node) = unregistered {
            self.remove_learner(node).await;
        }
        let reply = if decided.epoch_of_commit {
            ControllerReply::BrokerEpoch(i64::try_from(index).unwrap_or(i64::MAX))
        } else {
            decided.reply
        };
        Ok((reply, index))
    }

    /// A broker-only node joins the quorum as a learner (openraft's membership change,
    /// committed before the answer); a voter's id, or a learner already at that address, is
    /// answered at once.
    async fn add_learner(
        &mut self,
        node_id: i32,
        controller_addr: String,
        image: &MetadataImage,
    ) -> ForwardAnswer {
        let refused = |message: String| {
            ForwardRefusal::Refused(super::ops::OpError {
                code: sluice_kafka::ErrorCode::InvalidRequest.code(),
                message,
            })
        };
        let Ok(id) = u64::try_from(node_id) else {
            return Err(refused(format!("node id {node_id} is negative")));
        };
        let membership = self
            .raft
            .metrics()
            .borrow_watched()
            .membership_config
            .clone();
        if membership.membership().voter_ids().any(|v| v == id) {
            return Err(refused(format!(
                "node {node_id} is a voter of controller.quorum.voters, not a learner"
            )));
        }
        let known = membership
            .membership()
            .get_node(&id)
            .is_some_and(|n| n.controller_addr == controller_addr);
        if known {
            return Ok((ControllerReply::Done, image.last_applied_index()));
        }
        if membership.membership().learner_ids().count() >= super::limits::LEARNERS_MAX {
            return Err(refused(format!(
                "{} learners follow the metadata log (LEARNERS_MAX)",
                super::limits::LEARNERS_MAX
            )));
        }
        let node = super::types::ControllerNode { controller_addr };
        let limit = Duration::from_millis(SUBMIT_DEADLINE_MS);
        match timeout(limit, self.raft.add_learner(id, node, false)).await {
            Ok(Ok(written)) => {
                tracing::info!(
                    node = node_id,
                    "a broker-only node follows the metadata log as a learner"
                );
                Ok((ControllerReply::Done, written.log_id.index))
            }
            Ok(Err(e)) if e.forward_to_leader().is_some() => {
                self.controller = None;
                Err(self.not_leader())
            }
            Ok(Err(e)) => Err(ForwardRefusal::Failed(e.to_string())),
            Err(_) => Err(ForwardRefusal::Failed(format!(
                "the learner was not added within SUBMIT_DEADLINE_MS ({SUBMIT_DEADLINE_MS} ms): outcome unknown"
            ))),
        }
    }

    /// An unregistered broker-only node leaves the quorum's learners (the controller stops
    /// sending it the log); logged if it cannot (it stays a learner, harmlessly).
    async fn remove_learner(&self, node: u64) {
        let membership = self
            .raft
            .metrics()
            .borrow_watched()
            .membership_config
            .clone();
        if !membership.membership().learner_ids().any(|l| l == node) {
            return;
        }
        let change = openraft::ChangeMembers::RemoveNodes(std::collections::BTreeSet::from([node]));
        let limit = Duration::from_millis(SUBMIT_DEADLINE_MS);
        match timeout(limit, self.raft.change_membership(change, false)).await {
            Ok(Ok(_)) => tracing::info!(
                node,
                "an unregistered broker-only node left the quorum's learners"
            ),
            Ok(Err(e)) => {
                tracing::warn!(node, error = %e, "an unregistered learner stays in the membership")
            }
            Err(_) => tracing::warn!(
                node,
                "removing an unregistered learner did not finish within SUBMIT_DEADLINE_MS"
            ),
        }
    }

    fn not_leader(&self) -> ForwardRefusal {
        let leader = self.raft.metrics().borrow_watched().current_leader;
        ForwardRefusal::NotLeader {
            leader_id: leader.filter(|&id| id != self.node_id),
        }
    }

    /// Commits `records` (one entry per `encode_batches` batch); the index of the last.
    /// Returns once they are applied here.
    async fn commit(&mut self, records: &[MetadataRecord]) -> Result<u64, ForwardRefusal> {
        let mut last = 0;
        for batch in encode_batches(records) {
            let payload =
                MetadataPayload::new(batch).map_err(|e| ForwardRefusal::Failed(e.to_string()))?;
            let limit = Duration::from_millis(SUBMIT_DEADLINE_MS);
            let written = match timeout(limit, self.raft.client_write(payload)).await {
                Ok(written) => written,
                Err(_) => {
                    return Err(ForwardRefusal::Failed(format!(
                        "not committed within SUBMIT_DEADLINE_MS ({SUBMIT_DEADLINE_MS} ms): outcome unknown"
                    )));
                }
            };
            match written {
                Ok(written) => last = written.log_id.index,
                Err(e) if e.forward_to_leader().is_some() => {
                    self.controller = None;
                    return Err(self.not_leader());
                }
                Err(e) => return Err(ForwardRefusal::Failed(e.to_string())),
            }
        }
        Ok(last)
    }
}
