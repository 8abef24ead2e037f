//! [`Replica`]: one partition replica as a state machine. The server (or the simulator)
//! feeds it `(now_ms, Event)` and carries out the [`Effect`]s it returns; it keeps no clock,
//! opens no socket and touches no file.
//!
//! A replica is a leader, a follower or offline, as the latest metadata it was given says
//! (`leader.rs`, `follower.rs`). Metadata only moves forward: a partition state with an
//! older leader epoch, or the same leader epoch and an older partition epoch, is ignored.
//!
//! # How the server drives it
//!
//! ```text
//! start / restart:   r = Replica::new(config, topic_id, partition, ReplicaLog::recover(..)?)
//! each image:        r.handle(now, Event::Metadata { broker_epoch, partition })
//! produce (leader):  r.handle(now, Event::Produce(request))  -> ProduceAnswer now or later
//! fetch from a peer: r.handle(now, Event::Fetch(request))    -> SendFetchResponse
//! its answer:        r.handle(now, Event::FetchResponse(..)) -> Truncate / Append, Fsync
//! AlterPartition:    SendAlterPartition -> Controller::alter_partition, the answer back as
//!                    Event::AlterPartitionResponse
//! fsync done:        r.handle(now, Event::Fsynced { token })
//! timer:             r.handle(now, Event::Tick) every few ms (fetches, ISR shrink, timeouts)
//! ```
//!
//! Effects are returned in the order they must happen: an `Append` or `Truncate` before the
//! `SendFetch` that reports its result, a `ProduceAnswer` only after what it answers for.

use sluice_cluster::controller::AlterPartition;
use sluice_cluster::image::PartitionState;
use sluice_cluster::records::{NO_LEADER, TopicId};
use sluice_kafka::ErrorCode;

use crate::limits;
use crate::log::{Batch, ReplicaLog};

mod follower;
mod leader;

use follower::FollowerState;
use leader::LeaderState;

/// One replica's settings (Kafka's keys, and Sluice's `sluice.acks.all.fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// `node.id` of this broker.
    pub node_id: i32,
    /// `replica.lag.time.max.ms`: an ISR follower not caught up for longer leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// The topic's `min.insync.replicas`: acks=all is refused (NOT_ENOUGH_REPLICAS) and the
    /// high watermark stands still while the ISR is smaller.
    pub min_insync_replicas: usize,
    /// `sluice.acks.all.fsync`: a follower reports a fetch offset only once fsynced up to
    /// it, and the leader's high watermark never passes its own durable offset.
    pub acks_all_fsync: bool,
    /// `replica.fetch.wait.max.ms`: the wait after a fetch that brought nothing.
    pub fetch_idle_ms: i64,
    /// `replica.fetch.backoff.ms`: the wait after a fetch error.
    pub fetch_backoff_ms: i64,
    /// `replica.socket.timeout.ms`: a fetch unanswered this long is sent again.
    pub fetch_timeout_ms: i64,
    /// How long an AlterPartition may stay unanswered before the leader proposes again.
    pub alter_partition_retry_ms: i64,
}

impl ReplicaConfig {
    /// Kafka's defaults (Sluice's for `sluice.acks.all.fsync`: on) for `node_id`.
    #[must_use]
    pub const fn new(node_id: i32) -> Self {
        Self {
            node_id,
            replica_lag_time_max_ms: limits::DEFAULT_REPLICA_LAG_TIME_MAX_MS,
            min_insync_replicas: 1,
            acks_all_fsync: true,
            fetch_idle_ms: limits::DEFAULT_FETCH_IDLE_MS,
            fetch_backoff_ms: limits::DEFAULT_FETCH_BACKOFF_MS,
            fetch_timeout_ms: limits::DEFAULT_FETCH_TIMEOUT_MS,
            alter_partition_retry_ms: limits::DEFAULT_ALTER_PARTITION_RETRY_MS,
        }
    }

    /// Checks the settings against `limits.rs`.
    ///
    /// # Errors
    /// A message naming the key and the bound.
    pub fn validate(&self) -> Result<(), String> {
        let lag = self.replica_lag_time_max_ms;
        if !(1..=limits::REPLICA_LAG_TIME_MAX_MS_MAX).contains(&lag) {
            return Err(format!(
                "replica.lag.time.max.ms = {lag} is not within 1..={} \
                 (REPLICA_LAG_TIME_MAX_MS_MAX)",
                limits::REPLICA_LAG_TIME_MAX_MS_MAX
            ));
        }
        if !(1..=limits::REPLICAS_MAX).contains(&self.min_insync_replicas) {
            return Err(format!(
                "min.insync.replicas = {} is not within 1..={} (REPLICAS_MAX)",
                self.min_insync_replicas,
                limits::REPLICAS_MAX
            ));
        }
        let waits = [
            self.fetch_idle_ms,
            self.fetch_backoff_ms,
            self.fetch_timeout_ms,
            self.alter_partition_retry_ms,
        ];
        if waits.iter().any(|&ms| ms < 0) || self.fetch_timeout_ms < 1 {
            return Err(format!(
                "a replica fetch or AlterPartition wait is negative (or the fetch timeout \
                 zero): {waits:?}"
            ));
        }
        Ok(())
    }
}

/// A produce's acks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=1: answered after the leader's append.
    Leader,
    /// acks=all (-1): answered once the high watermark passes the batch.
    All,
}

/// One produced batch at a leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceRequest {
    /// The caller's handle for the answer.
    pub request_id: u64,
    /// Its acks.
    pub acks: Acks,
    /// How many records the batch holds (the server takes it from the checked batch).
    pub records: i64,
    /// The idempotent producer's id, or -1.
    pub producer_id: i64,
    /// The batch's first sequence, or -1.
    pub base_sequence: i32,
    /// What the batch carries (opaque).
    pub payload: u64,
    /// When an unanswered acks=all gives up (REQUEST_TIMED_OUT): now + the request's
    /// `timeout_ms`.
    pub deadline_ms: i64,
}

/// A produce the server's storage log appended ([`Event::Appended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The caller's handle for the answer.
    pub request_id: u64,
    /// Its acks.
    pub acks: Acks,
    /// The batch as appended (its offsets, this leader's epoch); for a duplicate, the
    /// original's offsets.
    pub batch: Batch,
    /// The storage log found it a duplicate of an earlier batch: nothing new was appended.
    pub duplicate: bool,
    /// When an unanswered acks=all gives up (REQUEST_TIMED_OUT).
    pub deadline_ms: i64,
}

/// A produce's success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceAck {
    /// The batch's base offset (an idempotent duplicate's: the original's).
    pub base_offset: i64,
    /// The leader epoch of the leader that answered.
    pub leader_epoch: i32,
}

/// A follower's Fetch (Kafka's Fetch v12+ as a replica sends it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchRequest {
    /// The follower's node id (`ReplicaState.ReplicaId`).
    pub replica_id: i32,
    /// Its broker epoch (`ReplicaState.ReplicaEpoch`, KIP-903).
    pub replica_epoch: i64,
    /// The leader epoch it fetches under (`CurrentLeaderEpoch`).
    pub leader_epoch: i32,
    /// Its log end offset: the next offset it wants.
    pub fetch_offset: i64,
    /// The leader epoch of its last batch (`LastFetchedEpoch`), if it has one.
    pub last_fetched_epoch: Option<i32>,
    /// Matches the answer to the request.
    pub correlation_id: u64,
}

/// Where the leader's log leaves the follower's (Fetch's `DivergingEpoch`, KIP-320).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest epoch the leader has at or below the follower's last fetched epoch.
    pub epoch: i32,
    /// Where that epoch ends in the leader's log.
    pub end_offset: i64,
}

/// What a leader answers a fetch with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchData {
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// Set when the follower's log diverges: then no batches.
    pub diverging_epoch: Option<EpochEndOffset>,
    /// Batches from the fetch offset, at most [`limits::FETCH_BATCHES_MAX`].
    pub batches: Vec<Batch>,
}

/// A leader's answer to a [`FetchRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// Who answers.
    pub leader_id: i32,
    /// The request's leader epoch.
    pub leader_epoch: i32,
    /// The request's correlation id.
    pub correlation_id: u64,
    /// The data, or why not.
    pub result: Result<FetchData, ErrorCode>,
}

/// What happens to a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The metadata image's state of the partition, and this broker's epoch.
    Metadata {
        /// This broker's epoch, once the image holds this process's registration; `None`
        /// before: the replica then stays offline, since whatever the image says its node id
        /// leads was the previous incarnation's (the controller moves it away in the entry
        /// that registers the new one) and the log it wrote may be gone.
        broker_epoch: Option<i64>,
        /// The partition as the image has it.
        partition: PartitionState,
    },
    /// A client's produce (at the leader), appended by the state machine's own log (the
    /// simulator).
    Produce(ProduceRequest),
    /// A client's produce that the server's storage log appended (the server: its log
    /// assigns offsets and keeps producer state); checked first with
    /// [`Replica::check_produce`].
    Appended(Appended),
    /// A follower's fetch (at the leader).
    Fetch(FetchRequest),
    /// A leader's answer (at a follower).
    FetchResponse(FetchResponse),
    /// The controller's answer to this leader's AlterPartition: the partition after it.
    AlterPartitionResponse(Result<PartitionState, ErrorCode>),
    /// The fsync of [`Effect::Fsync`] with this token completed.
    Fsynced {
        /// Its token.
        token: u64,
    },
    /// Time passed.
    Tick,
}

/// What the caller must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Append these batches to the log, as they are (offsets and epochs kept).
    Append(Vec<Batch>),
    /// A new leader epoch begins at this offset: the epoch cache gains the entry.
    BeginEpoch {
        /// The epoch.
        epoch: i32,
        /// Its start offset (the log end).
        start_offset: i64,
    },
    /// Remove every batch at or above `offset` (and the epoch cache's tail).
    Truncate {
        /// The new log end (a batch holding it goes whole).
        offset: i64,
    },
    /// Fsync the log up to `up_to`, then feed back [`Event::Fsynced`] with `token`.
    Fsync {
        /// Its token.
        token: u64,
        /// The log end it covers.
        up_to: i64,
    },
    /// Send a fetch to the leader `to`.
    SendFetch {
        /// The leader's node id.
        to: i32,
        /// The request.
        request: FetchRequest,
    },
    /// Answer a follower's fetch.
    SendFetchResponse {
        /// The follower's node id.
        to: i32,
        /// The answer.
        response: FetchResponse,
    },
    /// Send this AlterPartition to the controller.
    SendAlterPartition(AlterPartition),
    /// Answer a produce.
    ProduceAnswer {
        /// The request's id.
        request_id: u64,
        /// The answer.
        result: Result<ProduceAck, ErrorCode>,
    },
}

enum Role {
    Offline,
    Leader(LeaderState),
    Follower(FollowerState),
}

/// One partition replica (module docs).
pub struct Replica {
    config: ReplicaConfig,
    topic_id: TopicId,
    partition: i32,
    log: ReplicaLog,
    high_watermark: i64,
    broker_epoch: i64,
    /// The latest partition state the metadata gave.
    state: Option<PartitionState>,
    role: Role,
    /// The fsync in flight: its token and the offset it covers.
    fsync: Option<(u64, i64)>,
    next_token: u64,
    effects: Vec<Effect>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("node_id", &self.config.node_id)
            .field("role", &self.role_name())
            .field("leader_epoch", &self.leader_epoch())
            .field("log_end_offset", &self.log.log_end_offset())
            .field("durable_offset", &self.log.durable_offset())
            .field("high_watermark", &self.high_watermark)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// A replica of `topic_id`-`partition` over `log` (a new one, or what recovery read
    /// back), offline until its first metadata. Its high watermark starts at 0: the
    /// leader's fetch answers bring it back.
    ///
    /// # Panics
    /// If `config` is invalid (the server validates it first).
    #[must_use]
    pub fn new(config: ReplicaConfig, topic_id: TopicId, partition: i32, log: ReplicaLog) -> Self {
        if let Err(e) = config.validate() {
            panic!("an unchecked replica config: {e}");
        }
        Self {
            config,
            topic_id,
            partition,
            log,
            high_watermark: 0,
            broker_epoch: -1,
            state: None,
            role: Role::Offline,
            fsync: None,
            next_token: 0,
            effects: Vec::new(),
        }
    }

    /// Feeds one event at `now_ms`; returns what to do, in order.
    pub fn handle(&mut self, now_ms: i64, event: Event) -> Vec<Effect> {
        match event {
            Event::Metadata {
                broker_epoch,
                partition,
            } => self.on_metadata(now_ms, broker_epoch, partition),
            Event::Produce(request) => self.on_produce(now_ms, &request),
            Event::Appended(appended) => self.on_appended(now_ms, &appended),
            Event::Fetch(request) => self.on_fetch(now_ms, &request),
            Event::FetchResponse(response) => self.on_fetch_response(now_ms, response),
            Event::AlterPartitionResponse(result) => self.on_alter_partition_response(result),
            Event::Fsynced { token } => self.on_fsynced(now_ms, token),
            Event::Tick => self.on_tick(now_ms),
        }
        self.maybe_fsync();
        assert!(self.effects.len() <= limits::EFFECTS_PER_EVENT_MAX);
        std::mem::take(&mut self.effects)
    }

    /// A leader's storage log grew by appends the state machine was not told of one by one
    /// (transaction markers, forwarded records; the server calls this before each event):
    /// the mirror's end moves to `log_end_offset`, whose last batch has `last_batch_epoch`.
    /// Ignored unless leading over a tail-only log ([`ReplicaLog::tail`]) that ends below it.
    pub fn observe_log_end(&mut self, log_end_offset: i64, last_batch_epoch: Option<i32>) {
        if matches!(self.role, Role::Leader(_)) {
            self.log.observe(log_end_offset, last_batch_epoch);
        }
    }

    /// The topic's `min.insync.replicas` changed (clamped to `1..=REPLICAS_MAX`).
    pub fn set_min_insync_replicas(&mut self, n: usize) {
        self.config.min_insync_replicas = n.clamp(1, limits::REPLICAS_MAX);
    }

    /// The log.
    #[must_use]
    pub const fn log(&self) -> &ReplicaLog {
        &self.log
    }

    /// The high watermark: consumers read below it.
    #[must_use]
    pub const fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// The config.
    #[must_use]
    pub const fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// The leader epoch this replica leads at, if it thinks it leads.
    #[must_use]
    pub const fn leading_epoch(&self) -> Option<i32> {
        match &self.role {
            Role::Leader(l) => Some(l.epoch),
            _ => None,
        }
    }

    /// The latest leader epoch the metadata gave it.
    #[must_use]
    pub fn leader_epoch(&self) -> Option<i32> {
        self.state.as_ref().map(|s| s.leader_epoch)
    }

    /// The ISR as this replica, leading, knows it (committed), or empty.
    #[must_use]
    pub fn isr(&self) -> &[i32] {
        match &self.role {
            Role::Leader(l) => &l.isr,
            _ => &[],
        }
    }

    /// "leader", "follower" or "offline".
    #[must_use]
    pub const fn role_name(&self) -> &'static str {
        match self.role {
            Role::Offline => "offline",
            Role::Leader(_) => "leader",
            Role::Follower(_) => "follower",
        }
    }

    fn on_metadata(&mut self, now_ms: i64, broker_epoch: Option<i64>, p: PartitionState) {
        let Some(broker_epoch) = broker_epoch else {
            self.step_down(ErrorCode::NotLeaderOrFollower);
            self.role = Role::Offline;
            return;
        };
        self.broker_epoch = broker_epoch;
        if let Some(cur) = &self.state {
            let older =
                (p.leader_epoch, p.partition_epoch) <= (cur.leader_epoch, cur.partition_epoch);
            if older {
                return;
            }
        }
        let me = self.config.node_id;
        if !p.replicas.contains(&me) {
            self.state = Some(p);
            self.step_down(ErrorCode::NotLeaderOrFollower);
            self.role = Role::Offline;
            return;
        }
        let same_epoch = self.state.as_ref().map(|s| s.leader_epoch) == Some(p.leader_epoch);
        self.state = Some(p.clone());
        if p.leader == me {
            match &mut self.role {
                Role::Leader(l) if same_epoch => {
                    l.isr.clone_from(&p.isr);
                    l.partition_epoch = p.partition_epoch;
                    l.pending_isr = None;
                    self.maybe_advance_high_watermark();
                }
                _ => self.become_leader(now_ms, &p),
            }
        } else if p.leader == NO_LEADER {
            self.step_down(ErrorCode::NotLeaderOrFollower);
            self.role = Role::Offline;
        } else if !(same_epoch && matches!(self.role, Role::Follower(_))) {
            self.step_down(ErrorCode::NotLeaderOrFollower);
            self.role = Role::Follower(FollowerState::new(p.leader, p.leader_epoch, now_ms));
            self.maybe_fetch(now_ms);
        }
    }

    /// Leaving leadership: every waiting produce is answered with `code` (its outcome is
    /// unknown to the client).
    fn step_down(&mut self, code: ErrorCode) {
        if let Role::Leader(l) = &mut self.role {
            for (request_id, _) in std::mem::take(&mut l.waiting) {
                self.effects.push(Effect::ProduceAnswer {
                    request_id,
                    result: Err(code),
                });
            }
        }
    }

    fn on_fsynced(&mut self, now_ms: i64, token: u64) {
        let Some((pending, up_to)) = self.fsync else {
            return;
        };
        if pending != token {
            return;
        }
        self.fsync = None;
        self.log.mark_durable(up_to);
        match self.role {
            Role::Leader(_) => self.maybe_advance_high_watermark(),
            Role::Follower(_) => self.maybe_fetch(now_ms),
            Role::Offline => {}
        }
    }

    fn on_tick(&mut self, now_ms: i64) {
        match self.role {
            Role::Leader(_) => self.leader_tick(now_ms),
            Role::Follower(_) => self.maybe_fetch(now_ms),
            Role::Offline => {}
        }
    }

    /// One fsync at a time, covering the whole log end (a group commit).
    fn maybe_fsync(&mut self) {
        let leo = self.log.log_end_offset();
        if self.fsync.is_some() || self.log.durable_offset() >= leo {
            return;
        }
        self.next_token += 1;
        self.fsync = Some((self.next_token, leo));
        self.effects.push(Effect::Fsync {
            token: self.next_token,
            up_to: leo,
        });
    }

    /// Truncates the log (a follower told of divergence, never below its high watermark
    /// in a correct run: the simulator checks it); an fsync in flight then covers no more
    /// than the new end.
    fn truncate_to(&mut self, offset: i64) {
        let leo = self.log.truncate_to(offset);
        if let Some((_, up_to)) = &mut self.fsync {
            *up_to = (*up_to).min(leo);
        }
        self.high_watermark = self.high_watermark.min(leo);
        self.effects.push(Effect::Truncate { offset: leo });
    }
}

#[cfg(test)]
mod tests;
