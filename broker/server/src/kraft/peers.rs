//! Requests to the other brokers of the cluster, in Kafka's protocol on their inter-broker
//! listener (`inter.broker.listener.name`, as each registered it): what a transaction
//! coordinator sends a partition leader (WriteTxnMarkers) and a partition leader its
//! transaction's coordinator (AddPartitionsToTxn v5, KIP-890's verification), as Kafka's
//! brokers do. One idle connection per broker is kept (`PEER_CONNECTIONS_MAX` in all); a
//! request that fails drops its connection, and the caller retries later (markers are
//! written again until they are all written; a verification answers a retriable error).
//!
//! An SSL inter-broker listener is dialled with TLS: the peer's certificate checked against
//! `ssl.truststore.location`, this broker's own (`ssl.keystore.location`) presented, so the
//! peer's authorizer sees the broker's certificate principal (give it CLUSTER_ACTION, or list
//! it in `super.users`, as in Kafka). A SASL inter-broker listener is refused here with a
//! message saying so (the request fails; the transaction waits).

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
/// Idle connections kept, one per broker at most.
pub const PEER_CONNECTIONS_MAX: usize = 64;

/// An idle connection and the next correlation id on it.
type Idle = (Box<dyn PeerStream>, i32);

/// A broker's inter-broker address, its host, and the TLS config to dial it with.
type Dial = (String, String, Option<std::sync::Arc<rustls::ClientConfig>>);

/// The idle connections, by broker address.
#[derive(Debug, Default)]
pub(super) struct Pool {
    idle: std::sync::Mutex<BTreeMap<String, Idle>>,
    /// TLS to SSL inter-broker listeners (with `ssl.keystore.location` and
    /// `ssl.truststore.location`).
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Pool {
    pub(super) fn new(tls: Option<std::sync::Arc<rustls::ClientConfig>>) -> Self {
        Self {
            idle: std::sync::Mutex::default(),
            tls,
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
        let (addr, host, tls) = self.broker_address(node)?;
        let limit = Duration::from_millis(PEER_REQUEST_TIMEOUT_MS);
        let taken = self
            .peers
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&addr);
        let call = async {
            let (mut stream, next) = match taken {
                Some(idle) => idle,
                None => (
                    connect(&addr, &host, tls.as_ref())
                        .await
                        .map_err(|e| format!("connecting to broker {node} at {addr}: {e}"))?,
                    1,
                ),
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
        if idle.len() < PEER_CONNECTIONS_MAX {
            idle.insert(addr, (stream, next));
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
        let tls = match listener.security_protocol {
            SecurityProtocol::Plaintext => None,
            SecurityProtocol::Ssl => Some(self.peers.tls.clone().ok_or_else(|| {
                format!(
                    "broker {node}'s inter-broker listener {} is SSL: set ssl.keystore.location and \
                     ssl.truststore.location here to reach it",
                    listener.name
                )
            })?),
            _ => {
                return Err(format!(
                    "broker {node}'s inter-broker listener {} uses SASL: requests between brokers \
                     over SASL are not built yet (use an SSL or PLAINTEXT inter-broker listener)",
                    listener.name
                ));
            }
        };
        Ok((
            format!("{}:{}", listener.host, listener.port),
            listener.host.clone(),
            tls,
        ))
    }
}

/// A connection to a broker: TCP, with TLS over it for an SSL listener.
async fn connect(
    addr: &str,
    host: &str,
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
) -> Result<Box<dyn PeerStream>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let Some(tls) = tls else {
        return Ok(Box::new(tcp));
    };
    let name = rustls_pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host}: not a TLS server name: {e}"))?;
    let stream = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    Ok(Box::new(stream))
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
