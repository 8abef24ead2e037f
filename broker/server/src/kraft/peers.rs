//! Requests to the other brokers of the cluster, in Kafka's protocol on their inter-broker
//! listener (`inter.broker.listener.name`, as each registered it): what a transaction
//! coordinator sends a partition leader (WriteTxnMarkers) and a partition leader its
//! transaction's coordinator (AddPartitionsToTxn v5, KIP-890's verification), as Kafka's
//! brokers do. Up to `PEER_IDLE_PER_BROKER_MAX` idle connections per broker are kept
//! (`PEER_CONNECTIONS_MAX` in all: a follower's fetcher has several fetches in flight); a
//! request that fails drops its connection, and the caller retries later (markers are
//! written again until they are all written; a verification answers a retriable error).
//!
//! An SSL inter-broker listener is dialled with TLS: the peer's certificate checked against
//! `ssl.truststore.location`, this broker's own (`ssl.keystore.location`) presented, so the
//! peer's authorizer sees the broker's certificate principal (give it CLUSTER_ACTION, or list
//! it in `super.users`, as in Kafka). On a SASL one the connection first logs in
//! (SaslHandshake v1, SaslAuthenticate v2: PLAIN or SCRAM, `sasl.mechanism.inter.broker.protocol`
//! and `sasl.jaas.config`); without those keys the request fails, saying which to set.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use sluice_cluster::records::SecurityProtocol;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Kraft;
use crate::cluster::PeerStream;

/// Largest response frame read from another broker, in bytes.
pub const PEER_RESPONSE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// How long one request to another broker may take, connection included.
pub const PEER_REQUEST_TIMEOUT_MS: u64 = 10_000;
/// Idle connections kept, in all.
pub const PEER_CONNECTIONS_MAX: usize = 64;
/// Idle connections kept per broker (a fetcher's fetches in flight each use one:
/// `replica_fetcher::REPLICA_FETCHES_IN_FLIGHT_MAX`).
pub const PEER_IDLE_PER_BROKER_MAX: usize = 4;

/// An idle connection and the next correlation id on it.
type Idle = (Box<dyn PeerStream>, i32);

/// How to reach a broker's inter-broker listener.
struct Dial {
    addr: String,
    host: String,
    /// TLS (an SSL or SASL_SSL listener).
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// The SASL login (a SASL_PLAINTEXT or SASL_SSL listener).
    sasl: Option<Login>,
}

/// The idle connections, by broker address.
#[derive(Debug, Default)]
pub(super) struct Pool {
    idle: std::sync::Mutex<BTreeMap<String, Vec<Idle>>>,
    /// TLS to SSL inter-broker listeners (with `ssl.keystore.location` and
    /// `ssl.truststore.location`).
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// The login to SASL inter-broker listeners (`sasl.mechanism.inter.broker.protocol`,
    /// `sasl.jaas.config`).
    sasl: Option<Login>,
}

/// A SASL login: the mechanism, the user and the password (`Debug` leaves it out).
#[derive(Clone)]
pub(super) struct Login {
    pub mechanism: crate::config::SaslMechanism,
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Login({} as {})", self.mechanism.name(), self.user)
    }
}

impl Pool {
    pub(super) fn new(
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
        sasl: Option<Login>,
    ) -> Self {
        Self {
            idle: std::sync::Mutex::default(),
            tls,
            sasl,
        }
    }
}

impl Kraft {
    /// Sends `request` at `version` to broker `node` and reads its answer.
    ///
    /// # Errors
    /// The broker is not live, its inter-broker listener is not plaintext, or the request
    /// failed or timed out (a message naming the broker).
    pub async fn call_broker<R: Request>(
        &self,
        node: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, String> {
        let dial = self.broker_address(node)?;
        let addr = dial.addr.clone();
        let limit = Duration::from_millis(PEER_REQUEST_TIMEOUT_MS);
        let taken = self
            .peers
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(&addr)
            .and_then(Vec::pop);
        let call = async {
            let (mut stream, next) = match taken {
                Some(idle) => idle,
                None => connect(&dial, self.node_id)
                    .await
                    .map_err(|e| format!("connecting to broker {node} at {addr}: {e}"))?,
            };
            let response = exchange(&mut stream, next, request, version, self.node_id)
                .await
                .map_err(|e| format!("broker {node} at {addr}: {e}"))?;
            Ok::<_, String>((response, stream, next + 1))
        };
        let (response, stream, next) = tokio::time::timeout(limit, call)
            .await
            .map_err(|_| format!("broker {node} at {addr}: no answer within PEER_REQUEST_TIMEOUT_MS ({PEER_REQUEST_TIMEOUT_MS} ms)"))??;
        let mut idle = self
            .peers
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept: usize = idle.values().map(Vec::len).sum();
        let here = idle.entry(addr).or_default();
        if kept < PEER_CONNECTIONS_MAX && here.len() < PEER_IDLE_PER_BROKER_MAX {
            here.push((stream, next));
        }
        Ok(response)
    }

    /// Broker `node`'s inter-broker listener, as it registered it: its address, its host,
    /// and the TLS config to dial it with (an SSL listener).
    fn broker_address(&self, node: i32) -> Result<Dial, String> {
        let image = self.image();
        let broker = image
            .broker(node)
            .filter(|b| b.is_active())
            .ok_or_else(|| format!("broker {node} is not live"))?;
        let listener = broker
            .registration
            .listeners
            .iter()
            .find(|l| l.name == self.inter_broker_listener)
            .or_else(|| broker.registration.listeners.first())
            .ok_or_else(|| format!("broker {node} registered no listener"))?;
        let (tls, sasl) = match listener.security_protocol {
            SecurityProtocol::Plaintext => (false, false),
            SecurityProtocol::Ssl => (true, false),
            SecurityProtocol::SaslPlaintext => (false, true),
            SecurityProtocol::SaslSsl => (true, true),
        };
        let tls = tls
            .then(|| {
                self.peers.tls.clone().ok_or_else(|| {
                    format!(
                        "broker {node}'s inter-broker listener {} uses TLS: set ssl.keystore.location and \
                         ssl.truststore.location here to reach it",
                        listener.name
                    )
                })
            })
            .transpose()?;
        let sasl = sasl
            .then(|| {
                self.peers.sasl.clone().ok_or_else(|| {
                    format!(
                        "broker {node}'s inter-broker listener {} uses SASL: set \
                         sasl.mechanism.inter.broker.protocol and sasl.jaas.config here to log in to it",
                        listener.name
                    )
                })
            })
            .transpose()?;
        Ok(Dial {
            addr: format!("{}:{}", listener.host, listener.port),
            host: listener.host.clone(),
            tls,
            sasl,
        })
    }
}

/// A connection to a broker (TCP, TLS over it for an SSL listener, then the SASL login for
/// a SASL one), and the next correlation id on it.
async fn connect(dial: &Dial, node_id: i32) -> Result<Idle, String> {
    let tcp = TcpStream::connect(&dial.addr)
        .await
        .map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut stream: Box<dyn PeerStream> = match &dial.tls {
        None => Box::new(tcp),
        Some(tls) => {
            let name = rustls_pki_types::ServerName::try_from(dial.host.clone())
                .map_err(|e| format!("{}: not a TLS server name: {e}", dial.host))?;
            Box::new(
                tokio_rustls::TlsConnector::from(std::sync::Arc::clone(tls))
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS handshake: {e}"))?,
            )
        }
    };
    let mut next = 1;
    if let Some(login) = &dial.sasl {
        next = sasl_login(&mut stream, login, node_id).await?;
    }
    Ok((stream, next))
}

/// SaslHandshake v1 and SaslAuthenticate v2 as Kafka's clients send them (PLAIN: one
/// message; SCRAM: the client-first and client-final messages, the server's signature
/// checked). Returns the next correlation id.
async fn sasl_login(
    stream: &mut Box<dyn PeerStream>,
    login: &Login,
    node_id: i32,
) -> Result<i32, String> {
    use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
    use sluice_security::scram::client::ScramClient;

    let refused = |step: &str, code: i16, message: Option<&StrBytes>| {
        format!(
            "SASL {step} refused ({}): {}",
            kafka_protocol::ResponseError::try_from_code(code)
                .map_or_else(|| code.to_string(), |e| format!("{e:?}")),
            message.map_or("", |m| m.as_str())
        )
    };
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(login.mechanism.name());
    let answer = exchange(stream, 1, &handshake, 1, node_id).await?;
    if answer.error_code != 0 {
        return Err(refused("handshake", answer.error_code, None));
    }
    let authenticate = |bytes: Vec<u8>| {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = bytes.into();
        request
    };
    match login.mechanism {
        crate::config::SaslMechanism::Plain => {
            let token = format!("\0{}\0{}", login.user, login.password).into_bytes();
            let answer = exchange(stream, 2, &authenticate(token), 2, node_id).await?;
            if answer.error_code != 0 {
                return Err(refused(
                    "authentication",
                    answer.error_code,
                    answer.error_message.as_ref(),
                ));
            }
            Ok(3)
        }
        crate::config::SaslMechanism::Scram(mechanism) => {
            let mut nonce = [0u8; 24];
            crate::random::OsRng::fill(&mut nonce).map_err(|e| e.to_string())?;
            let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
            let mut client = ScramClient::new(mechanism, &login.user, &login.password, &nonce);
            let first =
                exchange(stream, 2, &authenticate(client.first_message()), 2, node_id).await?;
            if first.error_code != 0 {
                return Err(refused(
                    "authentication",
                    first.error_code,
                    first.error_message.as_ref(),
                ));
            }
            let last = client
                .final_message(&first.auth_bytes)
                .map_err(|e| e.to_string())?;
            let done = exchange(stream, 3, &authenticate(last), 2, node_id).await?;
            if done.error_code != 0 {
                return Err(refused(
                    "authentication",
                    done.error_code,
                    done.error_message.as_ref(),
                ));
            }
            client
                .verify_server_final(&done.auth_bytes)
                .map_err(|e| e.to_string())?;
            Ok(4)
        }
    }
}

/// One request and its response on `stream`.
async fn exchange<R: Request>(
    stream: &mut Box<dyn PeerStream>,
    correlation_id: i32,
    request: &R,
    version: i16,
    node_id: i32,
) -> Result<R::Response, String> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_string(format!("sluice-broker-{node_id}")));
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[0; 4]);
    header
        .encode(&mut frame, R::header_version(version))
        .map_err(|e| e.to_string())?;
    request
        .encode(&mut frame, version)
        .map_err(|e| format!("encoding API key {} v{version}: {e}", R::KEY))?;
    let length = i32::try_from(frame.len() - 4).map_err(|_| "request too large".to_owned())?;
    frame[..4].copy_from_slice(&length.to_be_bytes());
    stream.write_all(&frame).await.map_err(|e| e.to_string())?;
    let length = stream.read_i32().await.map_err(|e| e.to_string())?;
    let length = usize::try_from(length).map_err(|_| "a negative frame length".to_owned())?;
    if length > PEER_RESPONSE_BYTES_MAX {
        return Err(format!(
            "a response of {length} bytes is above PEER_RESPONSE_BYTES_MAX ({PEER_RESPONSE_BYTES_MAX})"
        ));
    }
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    let mut body = bytes::Bytes::from(body);
    let response_header = ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| e.to_string())?;
    if response_header.correlation_id != correlation_id {
        return Err(format!(
            "correlation id {} answered {correlation_id}",
            response_header.correlation_id
        ));
    }
    R::Response::decode(&mut body, version).map_err(|e| e.to_string())
}
