//! Three Raft instances of the metadata quorum in one process, on real files in temp dirs,
//! wired by an in-memory network (each RPC is a direct call on the target's `Raft`): one is
//! initialized with all three as voters, a leader is elected, a `client_write` of a payload
//! is answered with the image's reply, and all three apply it; after a snapshot and a purge
//! of the whole log, a fourth node added as a learner catches up from the snapshot (shipped
//! by `full_snapshot`, checked and installed). No timing assertions: waits
//! poll openraft's metrics with a generous deadline and then assert the outcome.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::RaftNetworkV2;
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};

use super::TestImage;
use crate::cluster::{
    ControllerNode, MetaLogStore, MetaRaft, MetaSnapshot, MetaTypes, MetadataPayload,
    MetadataStateMachine, Vote, raft_config,
};

/// How long the test waits for an election or for an entry to apply everywhere: far above
/// the election timeout (`ELECTION_TIMEOUT_MAX_MS`, 2 s), so only a real failure hits it.
const WAIT: Duration = Duration::from_secs(30);

/// Every node's `Raft`, by node id: the in-memory "network".
#[derive(Clone, Default)]
struct Router {
    nodes: Arc<Mutex<BTreeMap<u64, MetaRaft<TestImage>>>>,
}

/// A connection to one node through the router.
struct Connection {
    router: Router,
    target: u64,
}

impl Connection {
    fn raft(&self) -> Result<MetaRaft<TestImage>, Unreachable<MetaTypes>> {
        let nodes = self.router.nodes.lock().expect("router lock");
        nodes
            .get(&self.target)
            .cloned()
            .ok_or_else(|| Unreachable::from_string(format!("node {} is not up", self.target)))
    }
}

impl RaftNetworkFactory<MetaTypes> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: u64, _node: &ControllerNode) -> Connection {
        Connection {
            router: self.clone(),
            target,
        }
    }
}

impl RaftNetworkV2<MetaTypes> for Connection {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetaTypes>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<MetaTypes>, RPCError<MetaTypes>> {
        let raft = self.raft()?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<MetaTypes>,
        _option: RPCOption,
    ) -> Result<VoteResponse<MetaTypes>, RPCError<MetaTypes>> {
        let raft = self.raft()?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: MetaSnapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<MetaTypes>, StreamingError<MetaTypes>> {
        let raft = self.raft()?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Network(NetworkError::new(&e)))
    }
}

/// `client_write` on a freshly elected leader, retried while it refuses with
/// ForwardToLeader (a new leader's lease is not established until a quorum acknowledged it:
/// docs/design/cluster-brief.md §2.7; the refused write was not accepted, so retrying cannot apply it twice),
/// until `WAIT` has passed.
async fn write_when_leading(
    raft: &MetaRaft<TestImage>,
    payload: &MetadataPayload,
) -> openraft::raft::ClientWriteResponse<MetaTypes> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match raft.client_write(payload.clone()).await {
            Ok(written) => return written,
            Err(e) if e.forward_to_leader().is_some() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("client_write: {e}"),
        }
    }
}

/// Starts node `id` with its log store and state machine under `dir`, registered in the
/// router; returns the Raft handle and the state machine (to read its image).
async fn start(
    id: u64,
    dir: &std::path::Path,
    router: &Router,
    config: Arc<openraft::Config>,
) -> (MetaRaft<TestImage>, MetadataStateMachine<TestImage>) {
    let store = MetaLogStore::open(&dir.join("raft")).unwrap();
    let sm = MetadataStateMachine::open(&dir.join("sm"), TestImage::default()).unwrap();
    let raft = MetaRaft::new(id, config, router.clone(), store, sm.clone())
        .await
        .expect("the Raft instance starts");
    router
        .nodes
        .lock()
        .expect("router lock")
        .insert(id, raft.clone());
    (raft, sm)
}

fn node(id: u64) -> ControllerNode {
    ControllerNode {
        controller_addr: format!("127.0.0.{id}:9093"),
    }
}

/// Starts nodes 1-3 in `dirs`, initializes them as the voters and waits for a leader;
/// returns the nodes and the leader's position among them.
async fn start_three(
    dirs: &[tempfile::TempDir],
    router: &Router,
    config: &Arc<openraft::Config>,
) -> (
    Vec<(MetaRaft<TestImage>, MetadataStateMachine<TestImage>)>,
    usize,
) {
    let mut nodes = Vec::new();
    for (id, dir) in (1..=3).zip(dirs) {
        nodes.push(start(id, dir.path(), router, Arc::clone(config)).await);
    }
    let members: BTreeMap<u64, ControllerNode> = (1..=3).map(|id| (id, node(id))).collect();
    nodes[0].0.initialize(members).await.expect("initialize");
    let elected = nodes[0]
        .0
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await
        .expect("a leader within the deadline");
    let leader = elected.current_leader.expect("a leader");
    (nodes, usize::try_from(leader - 1).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_and_apply_a_write_everywhere() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let router = Router::default();
    let config = raft_config("sluice-metadata-test").expect("a valid config");
    let (nodes, leader) = start_three(&dirs, &router, &config).await;
    let (leader_raft, _) = &nodes[leader];

    let payload = MetadataPayload::new(b"topic orders, 3 partitions".to_vec()).unwrap();
    let written = write_when_leading(leader_raft, &payload).await;
    assert_eq!(written.data.index, written.log_id.index);
    assert_eq!(
        written.data.reply,
        1u32.to_be_bytes(),
        "the image's reply comes back"
    );

    for (id, (raft, sm)) in (1..=3).zip(&nodes) {
        raft.wait(Some(WAIT))
            .applied_index_at_least(Some(written.log_id.index), "the write applies")
            .await
            .unwrap_or_else(|e| panic!("node {id} did not apply the write: {e}"));
        let image = sm.read_image(Clone::clone).unwrap();
        assert_eq!(
            image.applied,
            vec![(written.log_id.index, payload.as_bytes().to_vec())],
            "node {id} applied exactly the write"
        );
    }
    for (raft, _) in &nodes {
        raft.shutdown().await.expect("a clean shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_added_after_a_purge_catches_up_from_the_snapshot() {
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let router = Router::default();
    let mut config = (*raft_config("sluice-metadata-test").unwrap()).clone();
    config.max_in_snapshot_log_to_keep = 0; // purge everything the snapshot covers
    let config = Arc::new(config.validate().unwrap());
    let (nodes, leader) = start_three(&dirs[..3], &router, &config).await;
    let (leader_raft, leader_sm) = &nodes[leader];
    let mut last = 0;
    for i in 0..5u8 {
        let payload = MetadataPayload::new(vec![i; 10]).unwrap();
        last = write_when_leading(leader_raft, &payload).await.log_id.index;
    }
    leader_raft.trigger().snapshot().await.unwrap();
    leader_raft
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= last),
            "a snapshot",
        )
        .await
        .expect("the snapshot within the deadline");
    leader_raft.trigger().purge_log(last).await.unwrap();
    leader_raft
        .wait(Some(WAIT))
        .metrics(
            |m| m.purged.is_some_and(|p| p.index >= last),
            "the log purged",
        )
        .await
        .expect("the purge within the deadline");

    let (learner, learner_sm) = start(4, dirs[3].path(), &router, Arc::clone(&config)).await;
    leader_raft
        .add_learner(4, node(4), true)
        .await
        .expect("add_learner");
    learner
        .wait(Some(WAIT))
        .applied_index_at_least(Some(last), "the learner catches up")
        .await
        .expect("the learner within the deadline");
    let expected = leader_sm.read_image(Clone::clone).unwrap();
    assert_eq!(expected.applied.len(), 5);
    assert_eq!(learner_sm.read_image(Clone::clone).unwrap(), expected);
    let mut learner_sm = learner_sm;
    let installed = openraft::storage::RaftStateMachine::get_current_snapshot(&mut learner_sm)
        .await
        .unwrap();
    assert!(
        installed.is_some_and(|s| s.meta.last_log_id.is_some_and(|l| l.index >= last)),
        "the learner caught up from the snapshot (the log below it is purged)"
    );
    for (raft, _) in nodes.iter().chain([&(learner, learner_sm)]) {
        raft.shutdown().await.expect("a clean shutdown");
    }
}
