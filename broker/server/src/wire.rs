//! The wire types between the connection and the handlers: what the dispatch is given (the
//! connection's context: its client and the services the domains hand their handlers) and
//! what a handler gives back (a response as chunks, now or later), and
//! the errors that close a connection (the framing ones are the protocol crate's). Imports
//! nothing from `handler` or `connection`: both import it, so requests flow one way,
//! socket -> frame -> dispatch -> handler -> broker state -> storage.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use sluice_protocol::fetch_response::{Piece, RecordSet};
use sluice_security::principal::KafkaPrincipal;
use tokio::sync::{Semaphore, watch};

use crate::broker::Broker;

/// A response ready to write: a frame's pieces, in order, without the length prefix.
#[derive(Debug, Default)]
pub struct Response {
    /// The pieces of the frame body (header + message).
    pub chunks: Vec<Chunk>,
}

/// What a handler gives the connection for one request, in request order.
#[derive(Debug)]
pub enum Reply {
    /// The response (`None`: the request expects none, acks=0).
    Now(Option<Response>),
    /// A response still being finished by a task (an acks=all produce waiting for its group
    /// commit); the writer awaits it in order while later requests are processed.
    Later(tokio::task::JoinHandle<Result<Option<Response>, FrameError>>),
}

/// A piece of a response frame.
#[derive(Debug)]
pub enum Chunk {
    /// Encoded bytes.
    Bytes(Bytes),
    /// A range of a segment file, written with sendfile when the storage gives a file descriptor.
    File(sluice_storage::ReadSlice),
}

impl Chunk {
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Bytes(b) => b.len(),
            Self::File(slice) => slice.len as usize,
        }
    }
}

/// A fetch response's record set is a chunk: a file range, or the bytes a view produced.
impl RecordSet for Chunk {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

impl From<Piece<Chunk>> for Chunk {
    fn from(piece: Piece<Chunk>) -> Self {
        match piece {
            Piece::Bytes(bytes) => Self::Bytes(bytes),
            Piece::Records(chunk) => chunk,
        }
    }
}

/// Why a connection was closed by us.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// A frame the protocol refuses (`sluice_protocol::frame`): a length prefix outside
    /// its bounds, or a request we cannot parse or answer.
    #[error(transparent)]
    Protocol(#[from] sluice_protocol::FrameError),
    /// SASL: a request before authentication, after the session ended, or a failed
    /// exchange (already answered and logged).
    #[error("SASL: {0}")]
    Authentication(String),
    /// A produce with acks=0 failed: closing the connection is the only way to tell the client.
    #[error("acks=0 produce failed, closing so the client notices: {0}")]
    AcksZeroFailed(String),
}

impl FrameError {
    /// A request we cannot parse or answer.
    pub fn malformed(message: String) -> Self {
        Self::Protocol(sluice_protocol::FrameError::Malformed(message))
    }
}

/// Who sends a connection's requests, and over what: the identity every handler is given
/// (with the services its domain uses, which the domain's `dispatch` picks out).
#[derive(Debug, Clone)]
pub struct Client {
    /// The client's address (for logs).
    pub peer: SocketAddr,
    /// The name of the listener the connection came in on (Metadata advertises its address).
    pub listener_name: Arc<str>,
    /// That listener's security protocol.
    pub security_protocol: crate::config::SecurityProtocol,
    /// Who the client is: the SASL user once authenticated (SASL listeners), `User:` + the
    /// client certificate's subject DN (RFC 2253) over mutual TLS, else `User:ANONYMOUS`.
    pub principal: KafkaPrincipal,
    /// The client's address as ACLs match it (`host` of an ACL entry).
    pub host: Arc<str>,
    /// The principal proved a delegation token (KIP-48), not its own credential: it may not
    /// create, renew or expire tokens (Kafka's `tokenAuthenticated`).
    pub token_authenticated: bool,
    /// A client quota's throttle (ms): the connection reads no request for this long once
    /// the current response is queued (KIP-219's muted channel). Set by handlers, taken by
    /// the connection.
    pub mute_ms: Arc<std::sync::atomic::AtomicU64>,
    /// Becomes true when the broker shuts down (long polls and coordinator round trips
    /// return early).
    pub shutdown: watch::Receiver<bool>,
}

impl Client {
    /// The connection's principal and host, for audit lines (`crate::audit`).
    pub fn actor(&self) -> crate::audit::Actor<'_> {
        crate::audit::Actor {
            principal: &self.principal,
            host: &self.host,
        }
    }
}

/// What a connection holds: its client, the broker-wide request budget, and the services
/// the request dispatch hands out by domain (`handler/<domain>/mod.rs`: each handler gets
/// only the ones it uses).
#[derive(Debug, Clone)]
pub struct ConnectionContext {
    /// Who sends the requests.
    pub client: Client,
    /// The broker's config, topics, security, plugins and metrics.
    pub broker: Arc<Broker>,
    /// The consumer-group coordinator.
    pub groups: crate::group::GroupHandle,
    /// The transaction coordinator.
    pub txns: crate::txn::TxnHandle,
    /// The broker-wide request budget (`queued.max.request.bytes`, see `admission`).
    pub request_bytes: Arc<Semaphore>,
    /// The client software this connection is counted as (KIP-511: `unknown` until an
    /// ApiVersions v3+ names it); replaced by each valid ApiVersions, dropped with the
    /// connection.
    pub client_software: Arc<std::sync::Mutex<crate::metrics::SoftwareSeen>>,
}
