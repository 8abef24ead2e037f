//! The quorum service: [`ClusterService::start`] opens the metadata log and state machine
//! under [`QuorumConfig::data_dir`], starts this node's Raft, its controller listener, the
//! controller task and (for a broker) its lifecycle task; [`ClusterHandle`] is what the
//! broker calls.
//!
//! Initialization: on an empty log, the voter with the lowest node id initializes the
//! quorum with every voter (the others wait for it; an initialized quorum is left alone).
//! The first leader commits the cluster id (`bootstrap_records`).
//!
//! [`ClusterHandle::submit`] runs an operation on the active controller: here if this node
//! leads, else forwarded over the controller listener to the leader (retried while no
//! leader is known or it moved, until `SUBMIT_DEADLINE_MS`); it answers once this node has
//! applied the entry the operation committed at (read-your-writes).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::Instant as _;
use openraft::async_runtime::watch::WatchReceiver;
use sluice_cluster::records::Listener;
use sluice_cluster::{ControllerConfig, MetadataImage};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::controller_task::{Command, ControllerTask};
use super::image::{ImageApplier, ImageWatch};
use super::limits::{
    CONTROLLER_COMMANDS_MAX, LEADER_TRANSFER_TIMEOUT_MS, PEER_RPC_TIMEOUT_MS, SUBMIT_DEADLINE_MS,
    SUBMIT_RETRY_MS,
};
use super::network::{CallError, Identity, NetworkFactory, PeerClient};
use super::ops::{ControllerOp, ControllerReply, OpError};
use super::server::{self, Dispatch};
use super::wire::{BrokerAnswer, BrokerMessage, ForwardAnswer, ForwardRefusal, Kind};
use super::{
    ControllerNode, MetaLogStore, MetaRaft, MetadataStateMachine, lifecycle, raft_config_with,
};

/// The metadata quorum's settings for this node, from the broker's config
/// (`node.id`, `controller.quorum.voters`, the CONTROLLER listener, `data.dir`).
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// `node.id`: this node's Kafka id and its Raft node id (0..=i32::MAX).
    pub node_id: u64,
    /// The cluster id every node of the quorum shares (hellos and the first entry).
    pub cluster_id: String,
    /// `controller.quorum.voters`: each voter's node id and controller listener address
    /// (`host:port`, a name resolved at each connection, as Kafka's). A controller is one of
    /// them; a broker-only node is not, and follows the log as a Raft learner. Every node
    /// must have the same list: a peer whose list differs is refused at its hello.
    pub voters: BTreeMap<u64, String>,
    /// Where this node's controller listener binds.
    pub listen: SocketAddr,
    /// Where the other nodes reach this node's controller listener (`host:port`): a
    /// learner is added to the quorum's membership with it.
    pub controller_addr: String,
    /// TLS on the controller listener and to the peers' (an SSL controller listener).
    pub tls: Option<super::network::PeerTls>,
    /// The quorum's directory (`<data.dir>/__cluster_metadata`): `raft/` holds the log and
    /// `quorum-state`, `state-machine/` the snapshot.
    pub data_dir: PathBuf,
    /// The controller's settings (`broker.session.timeout.ms`).
    pub controller: ControllerConfig,
    /// The broker role: register, heartbeat, controlled shutdown. `None`: controller only.
    pub broker: Option<BrokerConfig>,
    /// A snapshot of the image every this many entries (`sluice.metadata.snapshot.entries`;
    /// `limits::SNAPSHOT_AFTER_ENTRIES` by default).
    pub snapshot_after_entries: u64,
}

/// The broker role's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfig {
    /// The advertised listeners it registers.
    pub listeners: Vec<Listener>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `broker.heartbeat.interval.ms` (Kafka's default 2000).
    pub heartbeat_interval_ms: u64,
}

/// Why the service or an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("invalid quorum config: {0}")]
    Config(String),
    #[error("metadata quorum storage: {0}")]
    Storage(#[from] std::io::Error),
    #[error("openraft: {0}")]
    Raft(String),
    /// The controller refused the operation (Kafka's code and message).
    #[error("the controller refused: {0}")]
    Refused(OpError),
    /// No leader answered, or the change did not apply here, within the deadline.
    #[error("{what}: not done within SUBMIT_DEADLINE_MS ({SUBMIT_DEADLINE_MS} ms)")]
    Timeout { what: &'static str },
    /// The operation may or may not have been committed (the leader failed mid-request);
    /// retry it only if it is idempotent (a create with its topic id, a registration).
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    #[error("the cluster service is shut down")]
    Shutdown,
}

/// One voter as DescribeQuorum shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterStatus {
    pub node_id: u64,
    /// The last index the leader knows it holds (the leader's own: its last log index).
    pub match_index: Option<u64>,
    /// Milliseconds since the leader last heard from it (leader only).
    pub last_ack_ms_ago: Option<u64>,
}

/// The quorum as this node sees it (DescribeQuorum).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: u64,
    pub leader_id: Option<u64>,
    /// The current Raft term (the quorum's epoch).
    pub term: u64,
    pub committed_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub voters: Vec<VoterStatus>,
    /// The learners (broker-only nodes), as the voters are described.
    pub learners: Vec<VoterStatus>,
}

/// Starts a node of the metadata quorum.
#[derive(Debug)]
pub struct ClusterService;

impl ClusterService {
    /// Binds `config.listen` and starts (see [`ClusterService::start_on`]).
    ///
    /// # Errors
    /// An invalid config, the listener's bind, the storage's open, openraft's start.
    pub async fn start(config: QuorumConfig) -> Result<ClusterHandle, ClusterError> {
        let listener = TcpListener::bind(config.listen).await?;
        ClusterService::start_on(config, listener).await
    }

    /// Starts on an already bound controller listener.
    ///
    /// # Errors
    /// As [`ClusterService::start`].
    pub async fn start_on(
        config: QuorumConfig,
        listener: TcpListener,
    ) -> Result<ClusterHandle, ClusterError> {
        validate(&config)?;
        let store = MetaLogStore::open(&config.data_dir.join("raft"))?;
        let (applier, image) = ImageApplier::new();
        let sm = MetadataStateMachine::open(&config.data_dir.join("state-machine"), applier)?;
        let identity = Identity {
            cluster_id: config.cluster_id.clone(),
            node_id: config.node_id,
            voters: config.voters.clone(),
            tls: config.tls.clone(),
        };
        let raft_config = raft_config_with(&config.cluster_id, config.snapshot_after_entries)
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let network = NetworkFactory::new(identity.clone());
        let raft = MetaRaft::new(config.node_id, raft_config, network, store, sm)
            .await
            .map_err(|e| ClusterError::Raft(e.to_string()))?;
        let (shutdown_tx, shutdown) = watch::channel(false);
        let (commands_tx, commands) = mpsc::channel(CONTROLLER_COMMANDS_MAX);
        let broker_messages = Arc::new(std::sync::OnceLock::new());
        let dispatch = Arc::new(Dispatch {
            identity: identity.clone(),
            raft: raft.clone(),
            commands: commands_tx.clone(),
            broker_messages: Arc::clone(&broker_messages),
        });
        let mut tasks = vec![tokio::spawn(server::serve(
            listener,
            dispatch,
            shutdown.clone(),
        ))];
        let task = ControllerTask::new(
            config.node_id,
            config.cluster_id.clone(),
            config.controller,
            raft.clone(),
            image.clone(),
            commands,
            shutdown.clone(),
        );
        tasks.push(tokio::spawn(task.run()));
        let shared = Arc::new(Shared {
            node_id: config.node_id,
            controller_addr: config.controller_addr.clone(),
            identity: Arc::new(identity),
            voters: config.voters.clone(),
            raft,
            image,
            commands: commands_tx,
            peers: Mutex::new(BTreeMap::new()),
            broker_messages,
            incarnation: std::sync::OnceLock::new(),
        });
        let mut handle = ClusterHandle {
            shared,
            shutdown_tx,
            tasks,
            lifecycle: None,
        };
        if let Err(e) = initialize(&handle.shared).await {
            handle.shutdown().await;
            return Err(e);
        }
        handle.lifecycle = config.broker.clone().map(|broker| {
            let (stop_tx, stop) = watch::channel(false);
            let node_id = i32::try_from(config.node_id).expect("validated");
            let shared = Arc::clone(&handle.shared);
            let task = tokio::spawn(lifecycle::run(shared, broker, node_id, stop));
            (stop_tx, task)
        });
        Ok(handle)
    }
}

fn validate(config: &QuorumConfig) -> Result<(), ClusterError> {
    let bad = |m: String| Err(ClusterError::Config(m));
    if i32::try_from(config.node_id).is_err() {
        return bad(format!(
            "node.id {} is not within 0..={}",
            config.node_id,
            i32::MAX
        ));
    }
    if !config.voters.contains_key(&config.node_id) && config.broker.is_none() {
        return bad(format!(
            "node.id {} is not one of controller.quorum.voters {:?}, and a node that is not a voter \
             must be a broker (it follows the metadata log as a learner)",
            config.node_id,
            config.voters.keys().collect::<Vec<_>>()
        ));
    }
    if config.cluster_id.is_empty() {
        return bad("the cluster id is empty".to_owned());
    }
    if let Some(broker) = &config.broker
        && broker.heartbeat_interval_ms == 0
    {
        return bad("broker.heartbeat.interval.ms is 0".to_owned());
    }
    config.controller.validate().map_err(ClusterError::Config)
}

/// The lowest voter initializes an empty quorum with every voter.
async fn initialize(shared: &Shared) -> Result<(), ClusterError> {
    let lowest = shared.voters.keys().next().copied();
    let initialized = shared
        .raft
        .is_initialized()
        .await
        .map_err(|e| ClusterError::Raft(e.to_string()))?;
    if initialized || lowest != Some(shared.node_id) {
        return Ok(());
    }
    let members: BTreeMap<u64, ControllerNode> = shared
        .voters
        .iter()
        .map(|(&id, addr)| {
            let node = ControllerNode {
                controller_addr: addr.clone(),
            };
            (id, node)
        })
        .collect();
    if let Err(e) = shared.raft.initialize(members).await {
        tracing::info!(error = %e, "metadata quorum not initialized by this node");
    }
    Ok(())
}

/// What the handle, the lifecycle task and forwards share.
#[derive(Debug)]
pub(crate) struct Shared {
    node_id: u64,
    /// Where the other nodes reach this node's controller listener.
    pub(crate) controller_addr: String,
    identity: Arc<Identity>,
    voters: BTreeMap<u64, String>,
    pub(crate) raft: MetaRaft<ImageApplier>,
    pub(crate) image: ImageWatch,
    commands: mpsc::Sender<Command>,
    /// One idle connection per peer for forwards (taken out while in use).
    peers: Mutex<BTreeMap<u64, PeerClient>>,
    /// This broker's handler of other brokers' messages (set once its services run).
    broker_messages: Arc<std::sync::OnceLock<server::BrokerMessages>>,
    /// This process's incarnation id, drawn once by the lifecycle task (a broker).
    pub(crate) incarnation: std::sync::OnceLock<[u8; 16]>,
}

/// A refusal of one attempt: retry it, or give up with the error.
enum Attempt {
    Retry,
    Fail(ClusterError),
}

impl Shared {
    /// [`ClusterHandle::submit`].
    pub(crate) async fn submit(&self, op: ControllerOp) -> Result<ControllerReply, ClusterError> {
        let deadline = Instant::now() + Duration::from_millis(SUBMIT_DEADLINE_MS);
        let mut attempt = 0usize;
        loop {
            let leader = self.raft.metrics().borrow_watched().current_leader;
            let outcome = match leader {
                Some(id) if id == self.node_id => self.run_here(op.clone()).await,
                Some(id) => self.forward(id, op.clone()).await,
                // A learner not yet added knows no leader: it asks the voters in turn (the
                // leader among them takes it, the others answer NOT_LEADER).
                None if !self.is_voter() => {
                    let voter = self.voters.keys().nth(attempt % self.voters.len().max(1));
                    match voter {
                        Some(&id) => self.forward(id, op.clone()).await,
                        None => Err(Attempt::Retry),
                    }
                }
                None => Err(Attempt::Retry),
            };
            attempt += 1;
            match outcome {
                Ok((reply, index)) => {
                    self.wait_applied(index, deadline).await?;
                    return Ok(reply);
                }
                Err(Attempt::Fail(e)) => return Err(e),
                Err(Attempt::Retry) if Instant::now() >= deadline => {
                    return Err(ClusterError::Timeout {
                        what: "no active controller answered",
                    });
                }
                Err(Attempt::Retry) => {
                    tokio::time::sleep(Duration::from_millis(SUBMIT_RETRY_MS)).await;
                }
            }
        }
    }

    /// Whether this node is one of `controller.quorum.voters` (else a learner).
    pub(crate) fn is_voter(&self) -> bool {
        self.voters.contains_key(&self.node_id)
    }

    /// Where node `node` is reached: its voter address, or a learner's from the membership.
    pub(crate) fn address_of(&self, node: u64) -> Option<String> {
        if let Some(addr) = self.voters.get(&node) {
            return Some(addr.clone());
        }
        let metrics = self.raft.metrics().borrow_watched().clone();
        metrics
            .membership_config
            .membership()
            .get_node(&node)
            .map(|n| n.controller_addr.clone())
    }

    async fn run_here(&self, op: ControllerOp) -> Result<(ControllerReply, u64), Attempt> {
        let (tx, rx) = oneshot::channel();
        let command = Command { op, answer: tx };
        if self.commands.send(command).await.is_err() {
            return Err(Attempt::Fail(ClusterError::Shutdown));
        }
        let answer = rx
            .await
            .map_err(|_| Attempt::Fail(ClusterError::Shutdown))?;
        settle(answer)
    }

    async fn forward(
        &self,
        leader: u64,
        op: ControllerOp,
    ) -> Result<(ControllerReply, u64), Attempt> {
        let Some(addr) = self.voters.get(&leader) else {
            return Err(Attempt::Retry);
        };
        let taken = self.peers.lock().expect("peers lock").remove(&leader);
        let mut client = taken
            .unwrap_or_else(|| PeerClient::new(Arc::clone(&self.identity), leader, addr.clone()));
        // One attempt waits PEER_RPC_TIMEOUT_MS, not the whole deadline: a leader that is
        // paused (or cut off) keeps the connection open and never answers, and the quorum
        // elects another meanwhile.
        let limit = Duration::from_millis(PEER_RPC_TIMEOUT_MS);
        let idempotent = op.is_idempotent();
        let result = client
            .call::<_, ForwardAnswer>(Kind::Forward, &op, limit)
            .await;
        self.peers
            .lock()
            .expect("peers lock")
            .insert(leader, client);
        match result {
            Ok(Ok(answer)) => settle(answer),
            Ok(Err(refusal)) => Err(Attempt::Fail(ClusterError::OutcomeUnknown(refusal))),
            Err(CallError::Unreachable { .. }) => Err(Attempt::Retry),
            // Whether it was applied is unknown: an operation that does the same applied
            // twice is sent again (to whichever node leads by then), any other fails so.
            Err(CallError::Broken { .. }) if idempotent => Err(Attempt::Retry),
            Err(e @ CallError::Broken { .. }) => {
                Err(Attempt::Fail(ClusterError::OutcomeUnknown(e.to_string())))
            }
        }
    }

    /// Waits until this node applied `index` (or the deadline).
    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), ClusterError> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(left.max(Duration::from_millis(SUBMIT_RETRY_MS))))
            .applied_index_at_least(Some(index), "read-your-writes")
            .await
            .map(|_| ())
            .map_err(|_| ClusterError::Timeout {
                what: "the change did not apply on this node",
            })
    }
}

/// A controller's answer as one attempt's outcome.
fn settle(answer: ForwardAnswer) -> Result<(ControllerReply, u64), Attempt> {
    match answer {
        Ok(done) => Ok(done),
        Err(ForwardRefusal::NotLeader { .. }) => Err(Attempt::Retry),
        Err(ForwardRefusal::Refused(e)) => Err(Attempt::Fail(ClusterError::Refused(e))),
        Err(ForwardRefusal::Failed(e)) => Err(Attempt::Fail(ClusterError::OutcomeUnknown(e))),
    }
}

/// The broker's handle on the metadata quorum. Call [`ClusterHandle::shutdown`] to stop
/// it: dropping it leaves the node's tasks running until the runtime stops.
#[derive(Debug)]
pub struct ClusterHandle {
    shared: Arc<Shared>,
    shutdown_tx: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// The lifecycle task and its stop signal, for a broker.
    lifecycle: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

impl ClusterHandle {
    /// Runs `op` on the active controller (module docs); answers once this node applied it.
    ///
    /// # Errors
    /// [`ClusterError::Refused`] by the controller, [`ClusterError::Timeout`],
    /// [`ClusterError::OutcomeUnknown`], [`ClusterError::Shutdown`].
    pub async fn submit(&self, op: ControllerOp) -> Result<ControllerReply, ClusterError> {
        self.shared.submit(op).await
    }

    /// From now on, other brokers' messages ([`BrokerMessage`]) go to `handler`.
    pub fn serve_broker_messages(&self, handler: server::BrokerMessages) {
        if self.shared.broker_messages.set(handler).is_err() {
            tracing::error!("the broker message handler was set twice; keeping the first");
        }
    }

    /// Sends `message` to node `node`'s services and waits for the answer (bounded by
    /// `SUBMIT_DEADLINE_MS`).
    ///
    /// # Errors
    /// The node is unknown, unreachable, or did not answer in time.
    pub async fn message(
        &self,
        node: u64,
        message: &BrokerMessage,
    ) -> Result<BrokerAnswer, CallError> {
        let shared = &self.shared;
        let Some(addr) = shared.address_of(node) else {
            return Err(CallError::Unreachable {
                target: node,
                addr: String::new(),
                reason: "neither a voter nor a learner of this cluster".to_owned(),
            });
        };
        let taken = shared.peers.lock().expect("peers lock").remove(&node);
        let mut client =
            taken.unwrap_or_else(|| PeerClient::new(Arc::clone(&shared.identity), node, addr));
        let limit = Duration::from_millis(SUBMIT_DEADLINE_MS);
        let result = client
            .call::<_, super::wire::BrokerReply>(Kind::Broker, message, limit)
            .await;
        shared
            .peers
            .lock()
            .expect("peers lock")
            .insert(node, client);
        result
    }

    /// The latest applied image, and every later one.
    #[must_use]
    pub fn image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.shared.image.clone()
    }

    /// This process's incarnation id once its lifecycle drew it (a broker), else `None`.
    pub fn incarnation(&self) -> Option<[u8; 16]> {
        self.shared.incarnation.get().copied()
    }

    /// Stops the node as a crash would: no controlled shutdown, no leadership hand-over
    /// (tests: failover by election).
    #[cfg(test)]
    pub(crate) async fn crash(self) {
        if let Some((_, task)) = &self.lifecycle {
            task.abort();
        }
        let _ = self.shutdown_tx.send(true);
        let _ = self.shared.raft.shutdown().await;
        for task in self.tasks {
            let _ = task.await;
        }
    }

    /// This node's Raft instance (tests: snapshots and purges on demand).
    #[cfg(test)]
    pub(crate) fn raft(&self) -> &MetaRaft<ImageApplier> {
        &self.shared.raft
    }

    /// The node id.
    #[must_use]
    pub fn node_id(&self) -> u64 {
        self.shared.node_id
    }

    /// The quorum as this node sees it.
    #[must_use]
    pub fn status(&self) -> QuorumStatus {
        let m = self.shared.raft.metrics().borrow_watched().clone();
        let membership = m.membership_config.membership();
        let replication = m.replication.clone().unwrap_or_default();
        let heartbeat = m.heartbeat.clone().unwrap_or_default();
        let status_of = |node_id: u64| VoterStatus {
            node_id,
            match_index: if node_id == m.id {
                m.last_log_index
            } else {
                replication
                    .get(&node_id)
                    .cloned()
                    .flatten()
                    .map(|l| l.index)
            },
            last_ack_ms_ago: heartbeat
                .get(&node_id)
                .cloned()
                .flatten()
                .map(|at| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX)),
        };
        let voters = membership.voter_ids().map(status_of).collect();
        QuorumStatus {
            node_id: m.id,
            leader_id: m.current_leader,
            term: m.current_term,
            committed_index: m.cluster_committed.map(|l| l.index),
            applied_index: m.last_applied.map(|l| l.index),
            voters,
            learners: membership.learner_ids().map(status_of).collect(),
        }
    }

    /// A controlled shutdown for a broker (bounded by `CONTROLLED_SHUTDOWN_TIMEOUT_MS`);
    /// a leader hands leadership to the most caught-up voter (bounded by
    /// `LEADER_TRANSFER_TIMEOUT_MS`); then the listener, the controller task and Raft stop.
    pub async fn shutdown(self) {
        if let Some((stop, task)) = self.lifecycle {
            let _ = stop.send(true);
            let _ = task.await;
        }
        hand_over_leadership(&self.shared).await;
        let _ = self.shutdown_tx.send(true);
        if let Err(e) = self.shared.raft.shutdown().await {
            tracing::warn!(error = %e, "metadata Raft did not shut down cleanly");
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// If this node leads, asks the voter that holds the most of the log to take over, and waits
/// (bounded) until another node leads: the quorum goes on without an election timeout.
async fn hand_over_leadership(shared: &Shared) {
    let m = shared.raft.metrics().borrow_watched().clone();
    if m.current_leader != Some(shared.node_id) {
        return;
    }
    let replication = m.replication.clone().unwrap_or_default();
    let Some(to) = replication
        .iter()
        .filter(|(id, _)| **id != shared.node_id && shared.voters.contains_key(id))
        .max_by_key(|(_, matched)| matched.as_ref().map(|l| l.index))
        .map(|(id, _)| *id)
    else {
        return;
    };
    if shared.raft.trigger().transfer_leader(to).await.is_err() {
        return;
    }
    let limit = Duration::from_millis(LEADER_TRANSFER_TIMEOUT_MS);
    let me = shared.node_id;
    let moved = shared
        .raft
        .wait(Some(limit))
        .metrics(
            |m| m.current_leader.is_some_and(|l| l != me),
            "leadership handed over",
        )
        .await;
    match moved {
        Ok(_) => tracing::info!(node = me, to, "leadership handed over"),
        Err(e) => tracing::info!(node = me, to, error = %e, "leadership not handed over"),
    }
}
