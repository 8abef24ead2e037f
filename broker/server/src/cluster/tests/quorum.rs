//! The metadata quorum over real TCP (`ClusterService`): three or five nodes on 127.0.0.1
//! ephemeral ports, each with its own temp dir. Covers election and broker registration; a
//! create through a non-leader answered only once that node applied it (read-your-writes); a
//! leader's controlled shutdown handing leadership over, with an idempotent retry of the
//! create, and a restart catching up from its dir; five voters losing two (the leader among
//! them) to crashes; a peer of another cluster or with another voter list refused at its
//! hello (and a frame before any hello); a node down past a snapshot and a purge catching up
//! from the snapshot shipped over TCP. No timing assertions: every wait polls with a generous
//! deadline and then asserts the outcome. After each scenario every node's image is compared
//! byte for byte (snapshot bytes) once all applied the same index.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::records::{Listener, SecurityProtocol};
use sluice_cluster::{ControllerConfig, MetadataImage};
use tokio::net::TcpListener;

use crate::cluster::network::{CallError, Identity, PeerClient};
use crate::cluster::wire::{ForwardAnswer, Kind};
use crate::cluster::{
    BrokerConfig, ClusterHandle, ClusterService, ControllerOp, ControllerReply, QuorumConfig,
    TopicSpec,
};

/// How long a wait may take before the test fails: far above an election
/// (`ELECTION_TIMEOUT_MAX_MS`, 2 s) and a few heartbeats, so only a real failure hits it.
const WAIT: Duration = Duration::from_secs(30);
const CLUSTER: &str = "sluice-test-cluster";

/// One node: its dir (kept across restarts), config and running handle.
struct Node {
    /// Kept for the node's life and across its restarts.
    _dir: tempfile::TempDir,
    config: QuorumConfig,
    handle: Option<ClusterHandle>,
}

impl Node {
    fn handle(&self) -> &ClusterHandle {
        self.handle.as_ref().expect("the node is running")
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.handle().image().borrow().clone()
    }

    async fn start(&mut self) {
        let listener = TcpListener::bind(self.config.listen).await.expect("bind");
        let handle = ClusterService::start_on(self.config.clone(), listener)
            .await
            .expect("the node starts");
        self.handle = Some(handle);
    }

    /// A clean stop: controlled shutdown, leadership handed over.
    async fn stop(&mut self) {
        self.handle.take().expect("running").shutdown().await;
    }

    /// A crash: no goodbye; the others notice by timeouts.
    async fn crash(&mut self) {
        self.handle.take().expect("running").crash().await;
    }
}

/// `n` nodes of one cluster, brokers too when `brokers`, started.
async fn start_cluster(n: u64, brokers: bool) -> Vec<Node> {
    let mut listeners = Vec::new();
    for _ in 0..n {
        listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let addrs: BTreeMap<u64, SocketAddr> = (1..=n)
        .zip(&listeners)
        .map(|(id, l)| (id, l.local_addr().unwrap()))
        .collect();
    let voters: BTreeMap<u64, String> = addrs.iter().map(|(&id, a)| (id, a.to_string())).collect();
    let mut nodes = Vec::new();
    for (id, listener) in (1..=n).zip(listeners) {
        let dir = tempfile::tempdir().unwrap();
        let config = QuorumConfig {
            node_id: id,
            cluster_id: CLUSTER.to_owned(),
            voters: voters.clone(),
            listen: addrs[&id],
            controller_addr: addrs[&id].to_string(),
            tls: None,
            data_dir: dir.path().join("__cluster_metadata"),
            controller: ControllerConfig::default(),
            broker: brokers.then(|| BrokerConfig {
                listeners: vec![Listener {
                    name: "PLAINTEXT".to_owned(),
                    host: "127.0.0.1".to_owned(),
                    port: 9092 + id as u16,
                    security_protocol: SecurityProtocol::Plaintext,
                }],
                rack: None,
                heartbeat_interval_ms: 100,
            }),
            snapshot_after_entries: crate::cluster::limits::SNAPSHOT_AFTER_ENTRIES,
        };
        let handle = ClusterService::start_on(config.clone(), listener)
            .await
            .expect("the node starts");
        nodes.push(Node {
            _dir: dir,
            config,
            handle: Some(handle),
        });
    }
    nodes
}

/// Polls `check` every 20 ms until it holds, or panics naming `what` after `WAIT`.
async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn running(nodes: &[Node]) -> impl Iterator<Item = &Node> {
    nodes.iter().filter(|n| n.handle.is_some())
}

/// The leader every running node agrees on, once they do.
async fn agreed_leader(nodes: &[Node]) -> u64 {
    let mut leader = None;
    wait_for("one leader every running node knows", || {
        let seen: Vec<Option<u64>> = running(nodes)
            .map(|n| n.handle().status().leader_id)
            .collect();
        leader = seen[0];
        leader.is_some()
            && seen.iter().all(|l| *l == leader)
            && running(nodes).any(|n| Some(n.handle().node_id()) == leader)
    })
    .await;
    leader.expect("a leader")
}

fn unfenced_brokers(image: &MetadataImage) -> usize {
    image.brokers().values().filter(|b| !b.fenced).count()
}

/// Every running node's image equal, byte for byte, once all applied the same index.
async fn assert_images_converge(nodes: &[Node]) {
    wait_for("every node at the same applied index", || {
        let indexes: Vec<u64> = running(nodes)
            .map(|n| n.image().last_applied_index())
            .collect();
        indexes.windows(2).all(|w| w[0] == w[1])
    })
    .await;
    let snapshots: Vec<Vec<u8>> = running(nodes)
        .map(|n| n.image().snapshot_bytes().expect("a snapshot"))
        .collect();
    for (i, s) in snapshots.iter().enumerate() {
        assert_eq!(s, &snapshots[0], "node #{i}'s image differs from node #0's");
    }
}

fn create(name: &str, topic_id: [u8; 16]) -> ControllerOp {
    ControllerOp::CreateTopics(vec![TopicSpec {
        name: name.to_owned(),
        num_partitions: 3,
        replication_factor: 1,
        configs: vec![],
        topic_id: Some(topic_id),
        assignments: None,
    }])
}

fn assert_created(reply: &ControllerReply, topic_id: [u8; 16]) {
    let ControllerReply::Topics(results) = reply else {
        panic!("not a CreateTopics answer: {reply:?}");
    };
    let [(_, Ok((id, assignment)))] = results.as_slice() else {
        panic!("the topic was not created: {results:?}");
    };
    assert_eq!(*id, topic_id);
    assert_eq!(assignment.len(), 3);
}

async fn shutdown_all(nodes: &mut [Node]) {
    for node in nodes.iter_mut().filter(|n| n.handle.is_some()) {
        node.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_register_and_a_create_through_a_follower_reads_its_write() {
    let mut nodes = start_cluster(3, true).await;
    let leader = agreed_leader(&nodes).await;
    wait_for("3 unfenced brokers in every image", || {
        nodes.iter().all(|n| unfenced_brokers(&n.image()) == 3)
    })
    .await;
    for node in &nodes {
        assert_eq!(node.image().cluster_id(), Some(CLUSTER));
    }

    let follower = nodes
        .iter()
        .find(|n| n.handle().node_id() != leader)
        .expect("a follower");
    let reply = follower
        .handle()
        .submit(create("orders", [1; 16]))
        .await
        .unwrap();
    assert_created(&reply, [1; 16]);
    assert!(
        follower.image().topic_by_name("orders").is_some(),
        "the follower's image has the topic as soon as submit returns"
    );
    wait_for("every image has the topic", || {
        nodes
            .iter()
            .all(|n| n.image().topic_by_name("orders").is_some())
    })
    .await;
    let status = follower.handle().status();
    assert_eq!(status.leader_id, Some(leader));
    assert_eq!(status.voters.len(), 3);
    assert_images_converge(&nodes).await;
    shutdown_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_fails_over_a_retried_create_applies_once_and_a_restart_catches_up() {
    let mut nodes = start_cluster(3, true).await;
    agreed_leader(&nodes).await;
    wait_for("3 unfenced brokers", || {
        nodes.iter().all(|n| unfenced_brokers(&n.image()) == 3)
    })
    .await;
    let reply = nodes[0]
        .handle()
        .submit(create("orders", [2; 16]))
        .await
        .unwrap();
    assert_created(&reply, [2; 16]);

    let leader = agreed_leader(&nodes).await;
    let old = usize::try_from(leader - 1).unwrap();
    nodes[old].stop().await;
    let new_leader = agreed_leader(&nodes).await;
    assert_ne!(new_leader, leader, "a new leader among the other two");

    let survivor = running(&nodes).next().expect("a survivor");
    assert!(survivor.image().topic_by_name("orders").is_some());
    // The client's retry of its create after the failover: same topic id, same answer.
    let retried = survivor
        .handle()
        .submit(create("orders", [2; 16]))
        .await
        .unwrap();
    assert_created(&retried, [2; 16]);
    let reply = survivor
        .handle()
        .submit(create("payments", [3; 16]))
        .await
        .unwrap();
    assert_created(&reply, [3; 16]);
    let orders = survivor
        .image()
        .topics()
        .values()
        .filter(|t| t.name == "orders")
        .count();
    assert_eq!(orders, 1, "the retried create applied once");

    nodes[old].start().await;
    wait_for("the restarted node catches up and registers again", || {
        let image = nodes[old].image();
        image.topic_by_name("payments").is_some() && unfenced_brokers(&image) == 3
    })
    .await;
    assert_eq!(nodes[old].image().topics().len(), 2);
    assert_images_converge(&nodes).await;
    shutdown_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_voters_lose_two_and_still_commit() {
    let mut nodes = start_cluster(5, false).await;
    let leader = agreed_leader(&nodes).await;
    let put = |name: &str| ControllerOp::PutView {
        name: name.to_owned(),
        spec: b"{}".to_vec(),
    };
    nodes[0].handle().submit(put("before")).await.unwrap();
    // The leader and one other crash: the other three elect a leader by timeout.
    let old = usize::try_from(leader - 1).unwrap();
    let other = (old + 1) % 5;
    nodes[old].crash().await;
    nodes[other].crash().await;
    agreed_leader(&nodes).await;
    let survivor = running(&nodes).next().expect("a survivor");
    survivor.handle().submit(put("after")).await.unwrap();
    wait_for("the three survivors applied it", || {
        running(&nodes).all(|n| n.image().views().contains_key("after"))
    })
    .await;
    assert_images_converge(&nodes).await;
    shutdown_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_cluster_or_voter_list_is_refused_at_its_hello() {
    let mut nodes = start_cluster(1, false).await;
    agreed_leader(&nodes).await;
    let addr = nodes[0].config.listen;
    let op = ControllerOp::RemoveView {
        name: "x".to_owned(),
    };
    let refusal = |identity: Identity| async {
        let mut client = PeerClient::new(Arc::new(identity), 1, addr.to_string());
        let refused = client
            .call::<_, ForwardAnswer>(Kind::Forward, &op, WAIT)
            .await
            .expect_err("refused");
        match refused {
            CallError::Unreachable { reason, .. } => reason,
            other => panic!("not refused at the hello: {other:?}"),
        }
    };
    let voters = nodes[0].config.voters.clone();
    let reason = refusal(Identity {
        cluster_id: "another-cluster".to_owned(),
        node_id: 7,
        tls: None,
        voters: voters.clone(),
    })
    .await;
    assert!(
        reason.contains("another-cluster") && reason.contains(CLUSTER),
        "the refusal names both cluster ids: {reason}"
    );
    let mut other_voters = voters.clone();
    other_voters.insert(7, addr.to_string());
    let reason = refusal(Identity {
        cluster_id: CLUSTER.to_owned(),
        node_id: 7,
        tls: None,
        voters: other_voters,
    })
    .await;
    assert!(
        reason.contains("controller.quorum.voters") && reason.contains("7@"),
        "the refusal names both voter lists: {reason}"
    );
    // A frame other than a hello first closes the connection unanswered.
    let mut raw = tokio::net::TcpStream::connect(nodes[0].config.listen)
        .await
        .unwrap();
    let mut vote = vec![Kind::Vote as u8];
    vote.extend_from_slice(&1u32.to_be_bytes());
    vote.push(0);
    tokio::io::AsyncWriteExt::write_all(&mut raw, &vote)
        .await
        .unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        WAIT,
        tokio::io::AsyncReadExt::read_to_end(&mut raw, &mut answer),
    )
    .await
    .expect("the listener closes the connection");
    assert!(
        read.is_err() || answer.is_empty(),
        "answered before a hello: {answer:?}"
    );
    // The cluster itself is unaffected.
    let put = ControllerOp::PutView {
        name: "v".to_owned(),
        spec: b"{}".to_vec(),
    };
    nodes[0].handle().submit(put).await.unwrap();
    shutdown_all(&mut nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_down_past_a_purge_catches_up_from_a_snapshot_over_tcp() {
    let mut nodes = start_cluster(3, false).await;
    let leader = agreed_leader(&nodes).await;
    let put = |name: String| ControllerOp::PutView {
        name,
        spec: b"{}".to_vec(),
    };
    nodes[0]
        .handle()
        .submit(put("v0".to_owned()))
        .await
        .unwrap();
    let behind = usize::try_from(leader % 3).unwrap(); // a follower: ids are 1..=3
    nodes[behind].stop().await;
    let leading = &nodes[usize::try_from(leader - 1).unwrap()];
    for i in 1..=5 {
        leading.handle().submit(put(format!("v{i}"))).await.unwrap();
    }
    let raft = leading.handle().raft();
    let last = leading.handle().status().applied_index.expect("applied");
    raft.trigger().snapshot().await.unwrap();
    raft.wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= last),
            "a snapshot",
        )
        .await
        .expect("the snapshot within the deadline");
    raft.trigger().purge_log(last).await.unwrap();
    raft.wait(Some(WAIT))
        .metrics(|m| m.purged.is_some_and(|p| p.index >= last), "the purge")
        .await
        .expect("the purge within the deadline");

    nodes[behind].start().await;
    wait_for("the node catches up from the snapshot", || {
        nodes[behind].image().views().len() == 6
    })
    .await;
    // openraft's metrics follow the install (the image is published first): wait for them.
    let installed = nodes[behind]
        .handle()
        .raft()
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= last),
            "the installed snapshot",
        )
        .await;
    assert!(
        installed.is_ok(),
        "caught up from the shipped snapshot (the log below it is purged): {installed:?}"
    );
    assert_images_converge(&nodes).await;
    shutdown_all(&mut nodes).await;
}

#[tokio::test]
async fn a_config_without_this_node_among_the_voters_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = QuorumConfig {
        node_id: 4,
        cluster_id: CLUSTER.to_owned(),
        voters: BTreeMap::from([(1, addr.to_string())]),
        listen: addr,
        controller_addr: addr.to_string(),
        tls: None,
        data_dir: dir.path().to_path_buf(),
        controller: ControllerConfig::default(),
        broker: None,
        snapshot_after_entries: crate::cluster::limits::SNAPSHOT_AFTER_ENTRIES,
    };
    let refused = ClusterService::start_on(config, listener)
        .await
        .expect_err("refused");
    assert!(
        matches!(&refused, crate::cluster::ClusterError::Config(m) if m.contains("node.id 4")),
        "{refused}"
    );
}
