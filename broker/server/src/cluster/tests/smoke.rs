//! Three Raft instances of the metadata quorum in one process, on real files in temp dirs,
//! wired by an in-memory network (each RPC is a direct call on the target's `Raft`): one is
//! initialized with all three as voters, a leader is elected, a `client_write` of a payload
//! is answered with the image's reply, and all three apply it. No timing assertions: waits
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
/// CLUSTER.md §2.7; the refused write was not accepted, so retrying cannot apply it twice),
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
) -> (MetaRaft<TestImage>, MetadataStateMachine<TestImage>) {
    let config = raft_config("sluice-metadata-test").expect("a valid config");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_and_apply_a_write_everywhere() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let router = Router::default();
    let mut nodes = Vec::new();
    for (id, dir) in (1..=3).zip(&dirs) {
        nodes.push(start(id, dir.path(), &router).await);
    }
    let members: BTreeMap<u64, ControllerNode> = (1..=3)
        .map(|id| {
            let addr = format!("127.0.0.{id}:9093");
            (
                id,
                ControllerNode {
                    controller_addr: addr,
                },
            )
        })
        .collect();
    nodes[0].0.initialize(members).await.expect("initialize");

    let elected = nodes[0]
        .0
        .wait(Some(WAIT))
        .metrics(|m| m.current_leader.is_some(), "a leader is elected")
        .await
        .expect("a leader within the deadline");
    let leader = elected.current_leader.expect("a leader");
    let (leader_raft, _) = &nodes[usize::try_from(leader - 1).unwrap()];

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
