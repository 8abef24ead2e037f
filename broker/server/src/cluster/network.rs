//! openraft's network over TCP to each peer's controller listener: [`NetworkFactory`]
//! makes a [`PeerClient`] per target (openraft asks for one per replication stream and for
//! votes), each one connection opened lazily, greeted with a hello (wire.rs), and reopened
//! after a failure no sooner than its backoff allows (`PEER_RECONNECT_BACKOFF_*_MS`,
//! doubling). Every failure is an openraft `Unreachable` (nothing was sent, or the peer is
//! down or another cluster's) or `NetworkError` (the connection broke mid-request): never a
//! panic. Each request is bounded by openraft's TTL and `PEER_RPC_TIMEOUT_MS` (a full
//! snapshot by `PEER_SNAPSHOT_TIMEOUT_MS`). Forwarded operations use the same client.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use openraft::RaftNetworkV2;
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::limits::{
    PEER_CONNECT_TIMEOUT_MS, PEER_RECONNECT_BACKOFF_MAX_MS, PEER_RECONNECT_BACKOFF_MIN_MS,
    PEER_RPC_TIMEOUT_MS, PEER_SNAPSHOT_TIMEOUT_MS,
};
use super::state_machine::MetaSnapshot;
use super::types::{ControllerNode, MetaTypes, Vote};
use super::wire::{self, Hello, Kind, PROTOCOL_VERSION, SnapshotRequest};

/// Who this node is, as its hellos say, and how it speaks to its peers.
#[derive(Debug, Clone)]
pub struct Identity {
    pub cluster_id: String,
    pub node_id: u64,
    /// The voters (`controller.quorum.voters`), by node id.
    pub voters: BTreeMap<u64, String>,
    /// TLS on the controller listener (an SSL controller listener): the server side, which
    /// requires a client certificate, and the client side peers are dialled with.
    pub tls: Option<PeerTls>,
}

/// The rustls configs of TLS between the nodes (`crate::tls::PeerTls` builds them).
#[derive(Clone)]
pub struct PeerTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

/// A connection to a peer: plain TCP, or TLS over it.
pub(crate) trait PeerStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + Sync
{
    /// The TCP connection under it.
    fn tcp(&self) -> &TcpStream;
    /// Whether unsolicited bytes may arrive (TLS: session tickets, alerts).
    fn is_tls(&self) -> bool;
}

impl std::fmt::Debug for dyn PeerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_tls() {
            "PeerStream(TLS)"
        } else {
            "PeerStream(TCP)"
        })
    }
}

impl PeerStream for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
    fn is_tls(&self) -> bool {
        false
    }
}

impl PeerStream for tokio_rustls::client::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
    fn is_tls(&self) -> bool {
        true
    }
}

impl Identity {
    /// The hello this node sends and answers with.
    pub(crate) fn hello(&self) -> Hello {
        let voters: Vec<String> = self
            .voters
            .iter()
            .map(|(id, addr)| format!("{id}@{addr}"))
            .collect();
        Hello {
            version: PROTOCOL_VERSION,
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            voters: voters.join(","),
        }
    }
}

/// openraft's network factory: one [`PeerClient`] per `new_client`.
#[derive(Debug, Clone)]
pub struct NetworkFactory {
    identity: Arc<Identity>,
}

impl NetworkFactory {
    #[must_use]
    pub fn new(identity: Identity) -> Self {
        NetworkFactory {
            identity: Arc::new(identity),
        }
    }
}

impl RaftNetworkFactory<MetaTypes> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &ControllerNode) -> PeerClient {
        // openraft never asks for a client to this node itself (docs/design/cluster-brief.md §2.7), and the
        // service never forwards to itself.
        debug_assert_ne!(target, self.identity.node_id, "a client to this node");
        PeerClient::new(
            Arc::clone(&self.identity),
            target,
            node.controller_addr.clone(),
        )
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Nothing was sent: the peer is down, backing off, or refused the hello.
    #[error("node {target} at {addr} is unreachable: {reason}")]
    Unreachable {
        target: u64,
        addr: String,
        reason: String,
    },
    /// The request was (maybe) sent and the answer did not come: its outcome is unknown.
    #[error("node {target} at {addr}: the connection failed mid-request: {reason}")]
    Broken {
        target: u64,
        addr: String,
        reason: String,
    },
}

/// One connection to one peer's controller listener.
#[derive(Debug)]
pub struct PeerClient {
    identity: Arc<Identity>,
    target: u64,
    addr: String,
    stream: Option<Box<dyn PeerStream>>,
    /// The next reconnect waits this long after a failure (doubling, bounded).
    backoff_ms: u64,
    /// No connection attempt before this instant.
    retry_at: Option<Instant>,
}

impl PeerClient {
    pub(crate) fn new(identity: Arc<Identity>, target: u64, addr: String) -> Self {
        PeerClient {
            identity,
            target,
            addr,
            stream: None,
            backoff_ms: PEER_RECONNECT_BACKOFF_MIN_MS,
            retry_at: None,
        }
    }

    fn unreachable(&self, reason: impl Into<String>) -> CallError {
        CallError::Unreachable {
            target: self.target,
            addr: self.addr.clone(),
            reason: reason.into(),
        }
    }

    /// The open connection, or a new one greeted with a hello.
    async fn connected(&mut self) -> Result<&mut Box<dyn PeerStream>, CallError> {
        // A connection the peer closed meanwhile (its idle timeout, a restart) is replaced
        // before anything is sent on it: a request on it would fail with an unknown outcome.
        if self.stream.as_deref().is_some_and(|s| !is_open(s)) {
            self.stream = None;
        }
        if self.stream.is_none() {
            if let Some(at) = self.retry_at
                && Instant::now() < at
            {
                return Err(self.unreachable("backing off after a failed connection"));
            }
            let limit = Duration::from_millis(PEER_CONNECT_TIMEOUT_MS);
            match timeout(limit, self.open()).await {
                Ok(Ok(stream)) => {
                    self.backoff_ms = PEER_RECONNECT_BACKOFF_MIN_MS;
                    self.retry_at = None;
                    self.stream = Some(stream);
                }
                failed => {
                    self.retry_at = Some(Instant::now() + Duration::from_millis(self.backoff_ms));
                    self.backoff_ms = (self.backoff_ms * 2).min(PEER_RECONNECT_BACKOFF_MAX_MS);
                    let reason = match failed {
                        Ok(Err(reason)) => reason,
                        _ => format!(
                            "no hello within PEER_CONNECT_TIMEOUT_MS ({PEER_CONNECT_TIMEOUT_MS} ms)"
                        ),
                    };
                    return Err(self.unreachable(reason));
                }
            }
        }
        Ok(self.stream.as_mut().expect("connected above"))
    }

    /// Connects (and shakes hands with TLS) and exchanges hellos.
    async fn open(&self) -> Result<Box<dyn PeerStream>, String> {
        let tcp = TcpStream::connect(&self.addr)
            .await
            .map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let mut stream: Box<dyn PeerStream> = match &self.identity.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let host = self
                    .addr
                    .rsplit_once(':')
                    .map_or(self.addr.as_str(), |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned();
                let name = rustls_pki_types::ServerName::try_from(host)
                    .map_err(|e| format!("{}: not a TLS server name: {e}", self.addr))?;
                let connector = tokio_rustls::TlsConnector::from(Arc::clone(&tls.client));
                Box::new(
                    connector
                        .connect(name, tcp)
                        .await
                        .map_err(|e| format!("TLS handshake with {}: {e}", self.addr))?,
                )
            }
        };
        let hello = self.identity.hello();
        let body = wire::encode(&hello).map_err(|e| e.to_string())?;
        wire::write_frame(&mut stream, Kind::Hello, &body)
            .await
            .map_err(|e| e.to_string())?;
        let answer: Result<Hello, String> = wire::read_answer(&mut stream, Kind::Hello)
            .await
            .map_err(|e| e.to_string())?;
        let theirs = answer.inspect_err(|refusal| {
            tracing::warn!(peer = self.target, addr = %self.addr, %refusal, "peer refused our hello");
        })?;
        if theirs.cluster_id != hello.cluster_id
            || theirs.node_id != self.target
            || theirs.voters != hello.voters
        {
            let reason = format!(
                "the peer at {} is node {} of cluster {:?} with voters {:?}; expected node {} \
                 of cluster {:?} with voters {:?}",
                self.addr,
                theirs.node_id,
                theirs.cluster_id,
                theirs.voters,
                self.target,
                hello.cluster_id,
                hello.voters
            );
            tracing::warn!("{reason}");
            return Err(reason);
        }
        Ok(stream)
    }

    /// Sends one request and reads its answer within `limit`; the peer's own refusal is
    /// the inner `Err`. A failed call drops the connection (the next one reconnects).
    pub(crate) async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        kind: Kind,
        request: &Req,
        limit: Duration,
    ) -> Result<Result<Resp, String>, CallError> {
        let body = wire::encode(request).map_err(|e| self.unreachable(e.to_string()))?;
        let stream = self.connected().await?;
        let exchange = async {
            wire::write_frame(stream, kind, &body).await?;
            wire::read_answer(stream, kind).await
        };
        let result = timeout(limit, exchange).await;
        match result {
            Ok(Ok(answer)) => Ok(answer),
            failed => {
                self.stream = None;
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => format!("no answer within {} ms", limit.as_millis()),
                };
                Err(CallError::Broken {
                    target: self.target,
                    addr: self.addr.clone(),
                    reason,
                })
            }
        }
    }

    /// A Raft RPC: openraft's error kinds.
    async fn raft_call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        kind: Kind,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<MetaTypes>> {
        let limit = option
            .soft_ttl()
            .min(Duration::from_millis(PEER_RPC_TIMEOUT_MS));
        match self.call(kind, request, limit).await {
            Ok(Ok(answer)) => Ok(answer),
            // The peer's Raft is shutting down or failed: unreachable until it is back.
            Ok(Err(refusal)) => Err(RPCError::Unreachable(Unreachable::from_string(refusal))),
            Err(e @ CallError::Unreachable { .. }) => {
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ CallError::Broken { .. }) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }
}

/// Whether an idle connection is still open: the peer has sent nothing (between requests
/// it never does) and not closed it.
fn is_open(stream: &dyn PeerStream) -> bool {
    // A peek: over TLS the bytes under the stream belong to rustls (a session ticket may be
    // waiting there), so nothing is consumed.
    let tcp = stream.tcp();
    let mut byte = [0u8; 1];
    let peeked = tcp.try_io(tokio::io::Interest::READABLE, || {
        use std::os::fd::AsRawFd;
        // SAFETY: recv(2) with MSG_PEEK | MSG_DONTWAIT into a valid one-byte buffer on this
        // socket's descriptor, which outlives the call.
        let n = unsafe {
            libc::recv(
                tcp.as_raw_fd(),
                byte.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n)
        }
    });
    match peeked {
        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
        Ok(0) => false,
        // Unsolicited bytes: TLS records are rustls's to read; in plain TCP nothing is sent
        // unasked, so the connection is out of step.
        Ok(_) => stream.is_tls(),
    }
}

impl RaftNetworkV2<MetaTypes> for PeerClient {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetaTypes>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<MetaTypes>, RPCError<MetaTypes>> {
        self.raft_call(Kind::AppendEntries, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<MetaTypes>,
        option: RPCOption,
    ) -> Result<VoteResponse<MetaTypes>, RPCError<MetaTypes>> {
        self.raft_call(Kind::Vote, &rpc, &option).await
    }

    async fn transfer_leader(
        &mut self,
        req: TransferLeaderRequest<MetaTypes>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<MetaTypes>, RPCError<MetaTypes>> {
        self.raft_call(Kind::TransferLeader, &req, &option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: MetaSnapshot,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<MetaTypes>, StreamingError<MetaTypes>> {
        let request = SnapshotRequest {
            vote,
            meta: snapshot.meta,
            data: snapshot.snapshot.into_inner(),
        };
        let limit = Duration::from_millis(PEER_SNAPSHOT_TIMEOUT_MS);
        let sent = tokio::select! {
            sent = self.call(Kind::FullSnapshot, &request, limit) => sent,
            closed = cancel => {
                self.stream = None;
                return Err(StreamingError::Closed(closed));
            }
        };
        match sent {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(refusal)) => Err(StreamingError::Unreachable(Unreachable::from_string(
                refusal,
            ))),
            Err(e @ CallError::Unreachable { .. }) => {
                Err(StreamingError::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ CallError::Broken { .. }) => {
                Err(StreamingError::Network(NetworkError::new(&e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::raft::VoteRequest;

    use super::super::wire::ForwardAnswer;
    use super::*;

    /// An address nothing listens on: a port bound and released.
    async fn closed_port() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().to_string()
    }

    /// A fake listener that greets and answers one forward per connection, then closes it.
    async fn one_answer_per_connection(listener: tokio::net::TcpListener, identity: Identity) {
        let answer: Result<ForwardAnswer, String> =
            Ok(Ok((crate::cluster::ControllerReply::Done, 7)));
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let (_, _) = wire::read_frame(&mut stream, false).await.unwrap();
            let hello: Result<Hello, String> = Ok(identity.hello());
            let body = wire::encode(&hello).unwrap();
            wire::write_frame(&mut stream, Kind::Hello, &body)
                .await
                .unwrap();
            let (kind, _) = wire::read_frame(&mut stream, true).await.unwrap();
            let body = wire::encode(&answer).unwrap();
            wire::write_frame(&mut stream, kind, &body).await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_is_replaced_before_a_request() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let identity = |node_id| Identity {
            cluster_id: "c".to_owned(),
            node_id,
            voters: BTreeMap::new(),
            tls: None,
        };
        tokio::spawn(one_answer_per_connection(listener, identity(2)));
        let mut client = PeerClient::new(Arc::new(identity(1)), 2, addr);
        let op = crate::cluster::ControllerOp::RemoveView { name: "v".into() };
        for _ in 0..3 {
            let answer = client
                .call::<_, ForwardAnswer>(Kind::Forward, &op, Duration::from_secs(30))
                .await;
            assert_eq!(
                answer,
                Ok(Ok(Ok((crate::cluster::ControllerReply::Done, 7))))
            );
            // The fake peer closes its side once it has answered.
            let closed = async {
                while client.stream.as_deref().is_some_and(is_open) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            timeout(Duration::from_secs(30), closed)
                .await
                .expect("the peer closes");
        }
    }

    #[tokio::test]
    async fn an_unreachable_peer_is_openraft_unreachable_then_backed_off() {
        let identity = Identity {
            cluster_id: "c".to_owned(),
            node_id: 1,
            voters: BTreeMap::new(),
            tls: None,
        };
        let mut client = PeerClient::new(Arc::new(identity), 2, closed_port().await);
        let option = RPCOption::new(Duration::from_secs(1));
        let vote = VoteRequest::new(Vote::new(1, 1), None);
        let refused = client.vote(vote.clone(), option.clone()).await;
        assert!(
            matches!(refused, Err(RPCError::Unreachable(_))),
            "{refused:?}"
        );
        let retry_at = client.retry_at.expect("a backoff after the failure");
        let again = client.vote(vote, option).await;
        let Err(RPCError::Unreachable(e)) = again else {
            panic!("not unreachable: {again:?}");
        };
        // Within the backoff nothing is attempted (a slow machine may have passed it).
        assert!(
            e.to_string().contains("backing off") || Instant::now() >= retry_at,
            "{e}"
        );
        assert!(client.backoff_ms >= 2 * PEER_RECONNECT_BACKOFF_MIN_MS);
    }
}
