//! The controller listener: accepts peers (at most `CONTROLLER_CONNECTIONS_MAX` at once),
//! takes a hello first (another cluster's id or protocol version is refused, logged with
//! both ids, and the connection closed), then serves one request at a time per connection
//! (`REQUESTS_PER_CONNECTION_MAX`): AppendEntries, Vote, full snapshots and leadership
//! transfers go to the local Raft; forwarded operations to the controller task. A frame that does not decode closes
//! the connection; a silent one closes after `CONNECTION_IDLE_TIMEOUT_MS`.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use openraft::storage::Snapshot;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::MetaRaft;
use super::controller_task::Command;
use super::image::ImageApplier;
use super::limits::{
    CONNECTION_IDLE_TIMEOUT_MS, CONTROLLER_CONNECTIONS_MAX, PEER_CONNECT_TIMEOUT_MS,
    REQUESTS_PER_CONNECTION_MAX,
};
use super::network::Identity;
use super::wire::{self, ForwardAnswer, ForwardRefusal, Hello, Kind, WireError};

const _: () = assert!(
    REQUESTS_PER_CONNECTION_MAX == 1,
    "serve() answers before it reads on"
);

/// What the listener's connections dispatch to.
#[derive(Debug)]
pub(crate) struct Dispatch {
    pub identity: Identity,
    pub raft: MetaRaft<ImageApplier>,
    /// The controller task's queue (bounded: `CONTROLLER_COMMANDS_MAX`).
    pub commands: mpsc::Sender<Command>,
    /// The broker's handler of [`wire::BrokerMessage`]s, once its services run.
    pub broker_messages: Arc<std::sync::OnceLock<BrokerMessages>>,
}

/// A boxed answer to a broker message.
pub type BrokerAnswerFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = wire::BrokerAnswer> + Send>>;

/// The function that handles broker messages.
pub type BrokerMessageFn = dyn Fn(wire::BrokerMessage) -> BrokerAnswerFuture + Send + Sync;

/// Handles a message from another broker's services.
#[derive(Clone)]
pub struct BrokerMessages(pub Arc<BrokerMessageFn>);

impl std::fmt::Debug for BrokerMessages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrokerMessages")
    }
}

/// Serves `listener` until `shutdown` turns true; then stops accepting and drops every
/// connection.
pub(crate) async fn serve(
    listener: TcpListener,
    dispatch: Arc<Dispatch>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(CONTROLLER_CONNECTIONS_MAX));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => break,
            Some(_) = connections.join_next() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "controller listener: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(%peer, "controller listener: CONTROLLER_CONNECTIONS_MAX ({CONTROLLER_CONNECTIONS_MAX}) connections open, refused");
            continue;
        };
        let dispatch = Arc::clone(&dispatch);
        connections.spawn(async move {
            let served = match dispatch.identity.tls.clone() {
                None => connection(stream, &dispatch).await,
                Some(tls) => match accept_tls(stream, tls).await {
                    Ok(stream) => connection(stream, &dispatch).await,
                    Err(e) => {
                        tracing::warn!(%peer, error = %e, "controller listener: TLS handshake refused");
                        Ok(())
                    }
                },
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "controller connection closed");
            }
            drop(permit);
        });
    }
    connections.shutdown().await;
}

/// The TLS handshake of a peer's connection (a client certificate the truststore signed is
/// required), bounded by `PEER_CONNECT_TIMEOUT_MS`.
async fn accept_tls(
    stream: TcpStream,
    tls: super::network::PeerTls,
) -> Result<tokio_rustls::server::TlsStream<TcpStream>, String> {
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.server);
    let limit = Duration::from_millis(PEER_CONNECT_TIMEOUT_MS);
    match timeout(limit, acceptor.accept(stream)).await {
        Ok(accepted) => accepted.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "no handshake within PEER_CONNECT_TIMEOUT_MS ({PEER_CONNECT_TIMEOUT_MS} ms)"
        )),
    }
}

/// One peer's connection: the hello, then requests until it closes.
async fn connection<S>(mut stream: S, dispatch: &Dispatch) -> Result<(), WireError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + TcpOf,
{
    stream.tcp_of().set_nodelay(true)?;
    let hello_limit = Duration::from_millis(PEER_CONNECT_TIMEOUT_MS);
    let (_, body) = timeout(hello_limit, wire::read_frame(&mut stream, false))
        .await
        .map_err(|_| WireError::Io(std::io::ErrorKind::TimedOut.into()))??;
    let hello: Hello = wire::decode(&body)?;
    let ours = dispatch.identity.hello();
    let greeting = check_hello(&hello, &ours);
    wire::write_frame(&mut stream, Kind::Hello, &wire::encode(&greeting)?).await?;
    if greeting.is_err() {
        return Ok(());
    }
    let idle = Duration::from_millis(CONNECTION_IDLE_TIMEOUT_MS);
    loop {
        let (kind, body) = match timeout(idle, wire::read_frame(&mut stream, true)).await {
            Ok(Err(WireError::Io(e))) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(());
            }
            Ok(frame) => frame?,
            Err(_) => return Ok(()),
        };
        let reply = answer(dispatch, kind, &body).await?;
        wire::write_frame(&mut stream, kind, &reply).await?;
    }
}

/// Our hello, or why the peer's is refused (logged with both ids).
fn check_hello(theirs: &Hello, ours: &Hello) -> Result<Hello, String> {
    let refusal = if theirs.version != ours.version {
        format!(
            "node {} speaks controller protocol version {}, this node {}",
            theirs.node_id, theirs.version, ours.version
        )
    } else if theirs.cluster_id != ours.cluster_id {
        format!(
            "node {} belongs to cluster {:?}, but this node (node {}) to cluster {:?}: refused",
            theirs.node_id, theirs.cluster_id, ours.node_id, ours.cluster_id
        )
    } else if theirs.voters != ours.voters {
        format!(
            "node {} has controller.quorum.voters {:?}, but this node (node {}) {:?}: refused",
            theirs.node_id, theirs.voters, ours.node_id, ours.voters
        )
    } else if theirs.node_id == ours.node_id {
        format!("a peer claims this node's own id {}: refused", ours.node_id)
    } else {
        return Ok(ours.clone());
    };
    tracing::warn!("controller listener: {refusal}");
    Err(refusal)
}

/// The encoded answer to one request.
async fn answer(dispatch: &Dispatch, kind: Kind, body: &[u8]) -> Result<Vec<u8>, WireError> {
    let raft = &dispatch.raft;
    match kind {
        Kind::AppendEntries => {
            let answer = raft.append_entries(wire::decode(body)?).await;
            wire::encode(&answer.map_err(|e| e.to_string()))
        }
        Kind::Vote => {
            let answer = raft.vote(wire::decode(body)?).await;
            wire::encode(&answer.map_err(|e| e.to_string()))
        }
        Kind::FullSnapshot => {
            let request: wire::SnapshotRequest = wire::decode(body)?;
            let snapshot = Snapshot {
                meta: request.meta,
                snapshot: Cursor::new(request.data),
            };
            let answer = raft.install_full_snapshot(request.vote, snapshot).await;
            wire::encode(&answer.map_err(|e| e.to_string()))
        }
        Kind::TransferLeader => {
            let answer = raft.handle_transfer_leader(wire::decode(body)?).await;
            wire::encode(&answer.map_err(|e| e.to_string()))
        }
        Kind::Forward => {
            let op = wire::decode(body)?;
            let answer: Result<ForwardAnswer, String> = Ok(forward(dispatch, op).await);
            wire::encode(&answer)
        }
        Kind::Broker => {
            let message: wire::BrokerMessage = wire::decode(body)?;
            let answer: wire::BrokerAnswer = match dispatch.broker_messages.get() {
                Some(handle) => (handle.0)(message).await,
                None => Err("this broker's services are not running yet".to_owned()),
            };
            wire::encode(&answer)
        }
        Kind::Hello => Err(WireError::Decode("a second hello".to_owned())),
    }
}

/// Runs a forwarded operation on this node's controller task.
async fn forward(dispatch: &Dispatch, op: wire::ForwardRequest) -> ForwardAnswer {
    let (tx, rx) = oneshot::channel();
    let gone = || ForwardRefusal::Failed("the controller task has stopped".to_owned());
    dispatch
        .commands
        .send(Command { op, answer: tx })
        .await
        .map_err(|_| gone())?;
    rx.await.map_err(|_| gone())?
}

/// The TCP connection under a served stream.
trait TcpOf {
    fn tcp_of(&self) -> &TcpStream;
}

impl TcpOf for TcpStream {
    fn tcp_of(&self) -> &TcpStream {
        self
    }
}

impl TcpOf for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp_of(&self) -> &TcpStream {
        self.get_ref().0
    }
}
