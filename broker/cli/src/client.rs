//! A small blocking Kafka client for the operator commands: one connection to one broker,
//! one request at a time, encoded and decoded with the `kafka-protocol` types (no C library).
//! Each connection is made as the command's [`Settings`] say (`client/settings.rs`, from the
//! client properties and `--user`): plain TCP or TLS (`client/stream.rs` over `crate::tls`),
//! then a SASL login for SASL_PLAINTEXT and SASL_SSL (`client/sasl.rs`: PLAIN,
//! SCRAM-SHA-256/512).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request};

mod sasl;
mod settings;
mod stream;

pub use settings::Settings;
use stream::Stream;

/// Largest response frame accepted, in bytes (a describe of a large group fits easily).
const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// How long one request may take before the command gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to a broker.
#[derive(Debug)]
pub struct Client {
    stream: Stream,
    next_correlation_id: i32,
    /// The broker this connection goes to, for [`Client::reconnecting`].
    addr: String,
    /// Resend a request once on a new connection when the broker closed this one.
    reconnect: bool,
    /// How every connection of this client is made (TLS, SASL, client id).
    settings: Arc<Settings>,
    /// The other brokers of a cluster this client reached, by address, opened on demand
    /// ([`Client::at`]): requests for a partition go to its leader, a group's to its
    /// coordinator.
    peers: std::collections::BTreeMap<String, Client>,
    /// Each partition's leader's address, as the latest Metadata said
    /// (`common::learn_leaders`).
    leaders: std::collections::BTreeMap<(String, i32), String>,
}

/// A broker was reached and refused this client: the TLS handshake or the SASL login failed
/// (not [`crate::common::Unreachable`]: another broker would refuse the same).
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// `what` failed with `e`: a [`Refused`] saying so, with what to do about a TLS failure.
fn refused(e: &anyhow::Error, what: &str, fallback_hint: Option<&str>) -> anyhow::Error {
    match crate::tls::hint(e).or(fallback_hint) {
        Some(hint) => anyhow::Error::new(Refused(format!("{what}: {e:#} ({hint})"))),
        None => anyhow::Error::new(Refused(format!("{what}: {e:#}"))),
    }
}

/// Where the password of `--user` comes from (never a flag: flags show in `ps`).
pub const PASSWORD_ENV: &str = "SLUICE_PASSWORD";

/// `--user` and `--sasl-mechanism`: log in with SASL (below the client properties).
#[derive(Debug, Clone, clap::Args)]
pub struct Login {
    /// Log in as this user (SASL; the password is read from SLUICE_PASSWORD). Without
    /// security.protocol, means SASL_PLAINTEXT.
    #[arg(long, global = true, env = "SLUICE_USER")]
    pub user: Option<String>,
    /// The SASL mechanism: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (sasl.mechanism wins).
    #[arg(
        long,
        global = true,
        env = "SLUICE_SASL_MECHANISM",
        default_value = "SCRAM-SHA-256"
    )]
    pub sasl_mechanism: String,
}

/// A hint when a plain connection fails: the broker may speak TLS there.
const TLS_LISTENER_HINT: &str = "if this listener is SSL or SASL_SSL, set -X security.protocol=SSL (or SASL_SSL) and ssl.ca.location";
/// A hint when a TLS connection is closed after the handshake with no client certificate.
const CLIENT_CERT_HINT: &str = "the broker closed the connection after the TLS handshake: if it requires client certificates, set ssl.certificate.location and ssl.key.location, or ssl.keystore.location";

impl Client {
    /// Connects to the first reachable broker of a comma-separated `host:port` list (a
    /// single node coordinates every group, so any broker answers), each connection made as
    /// `settings` say.
    pub fn connect_as(brokers: &str, settings: Arc<Settings>) -> anyhow::Result<Self> {
        let mut last_error = None;
        for addr in brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match Self::connect_one(addr, settings.clone()) {
                Ok(client) => return Ok(client),
                // The broker answered and refused: another broker would refuse the same.
                Err(e) if e.downcast_ref::<Refused>().is_some() => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("--brokers is empty")))
    }

    fn connect_one(addr: &str, settings: Arc<Settings>) -> anyhow::Result<Self> {
        let tcp = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        tcp.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        tcp.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        tcp.set_nodelay(true).ok();
        let stream = match &settings.tls {
            None => Stream::Plain(tcp),
            Some(config) => crate::tls::connect(tcp, host_of(addr), config.clone())
                .map(|tls| Stream::Tls(Box::new(tls)))
                .map_err(|e| refused(&e, &format!("TLS handshake with {addr}"), None))?,
        };
        let mut client = Self {
            stream,
            next_correlation_id: 1,
            addr: addr.to_owned(),
            reconnect: false,
            settings,
            peers: std::collections::BTreeMap::new(),
            leaders: std::collections::BTreeMap::new(),
        };
        client.open()?;
        Ok(client)
    }

    /// What a new connection does first: the SASL login; or, over TLS without SASL, an
    /// ApiVersions round trip, so that a broker refusing the client certificate (its alert
    /// comes after the client's half of a TLS 1.3 handshake) is found here.
    fn open(&mut self) -> anyhow::Result<()> {
        let settings = self.settings.clone();
        if let Some(login) = &settings.login {
            let what = format!("logging in to {} as {}", self.addr, login.user);
            return sasl::log_in(self, login).map_err(|e| {
                let closed = self.stream.is_tls() && is_disconnect(&e);
                refused(&e, &what, closed.then_some(CLIENT_CERT_HINT))
            });
        }
        if self.stream.is_tls() {
            let what = format!("{} refused the TLS connection", self.addr);
            self.send(&ApiVersionsRequest::default(), 0)
                .map_err(|e| refused(&e, &what, is_disconnect(&e).then_some(CLIENT_CERT_HINT)))?;
        }
        Ok(())
    }

    /// The address this client is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Remembers `addr` as the leader of `topic`-`partition`.
    pub fn note_leader(&mut self, topic: &str, partition: i32, addr: String) {
        self.leaders.insert((topic.to_owned(), partition), addr);
    }

    /// The leader of `topic`-`partition` as Metadata said, if it is another broker.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<String> {
        self.leaders
            .get(&(topic.to_owned(), partition))
            .filter(|a| **a != self.addr)
            .cloned()
    }

    /// This connection (`None`, or this broker's address), or one to the broker at `addr`
    /// made the same way (kept for later requests; a request safe to repeat reconnects).
    pub fn at(&mut self, addr: Option<&str>) -> anyhow::Result<&mut Client> {
        let Some(addr) = addr.filter(|a| *a != self.addr) else {
            return Ok(self);
        };
        if !self.peers.contains_key(addr) {
            let mut peer = Self::connect_one(addr, self.settings.clone())?;
            peer.reconnect = self.reconnect;
            self.peers.insert(addr.to_owned(), peer);
        }
        Ok(self.peers.get_mut(addr).expect("inserted above"))
    }

    /// Another connection to the same broker, made the same way.
    pub fn another(&self) -> anyhow::Result<Self> {
        Self::connect_one(&self.addr, self.settings.clone())
    }

    /// From now on, a request that finds the connection closed by the broker (its
    /// `connections.max.idle.ms`, a restart) is sent again, once, on a new connection. Only
    /// for clients whose requests are safe to repeat (a group member's, not Produce).
    pub fn reconnecting(mut self) -> Self {
        self.reconnect = true;
        self
    }

    /// Sends a request the broker may hold for up to `timeout` (JoinGroup waits for the
    /// whole group to rejoin), then restores the usual per-request timeout.
    pub fn send_with_timeout<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> anyhow::Result<R::Response> {
        self.stream.set_read_timeout(Some(timeout))?;
        let response = self.send(request, version);
        self.stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        response
    }

    /// Sends `request` at `version` and reads its response.
    pub fn send<R: Request>(&mut self, request: &R, version: i16) -> anyhow::Result<R::Response> {
        let first = self.next_correlation_id == 1;
        match self.send_once(request, version) {
            Err(e) if self.reconnect && is_disconnect(&e) => {
                let timeout = self.stream.read_timeout()?;
                let fresh = Self::connect_one(&self.addr, self.settings.clone())?;
                self.stream = fresh.stream;
                self.stream.set_read_timeout(timeout)?;
                self.send_once(request, version)
            }
            Err(e) if first && !self.stream.is_tls() && is_disconnect(&e) => Err(e.context(
                format!("{} closed the connection ({TLS_LISTENER_HINT})", self.addr),
            )),
            result => result,
        }
    }

    fn send_once<R: Request>(&mut self, request: &R, version: i16) -> anyhow::Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|()| anyhow::anyhow!("API key {}", R::KEY))?;
        let correlation_id = self.write_request(request, version)?;
        let mut response = self
            .read_frame()
            .with_context(|| format!("reading the {key:?} response"))?;
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version))?;
        if header.correlation_id != correlation_id {
            bail!(
                "response correlation id {} does not match request {correlation_id}",
                header.correlation_id
            );
        }
        R::Response::decode(&mut response, version)
            .with_context(|| format!("decoding the {key:?} v{version} response"))
    }

    /// Sends `request` at `version` without waiting for a response (Produce with acks=0,
    /// which the broker never answers).
    pub fn send_without_response<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> anyhow::Result<()> {
        self.write_request(request, version).map(drop)
    }

    /// Writes one request frame (in one write, so TLS sends it in as few records as it can);
    /// returns its correlation id.
    fn write_request<R: Request>(&mut self, request: &R, version: i16) -> anyhow::Result<i32> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(self.settings.client_id.clone());
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0; 4]);
        header.encode(&mut frame, R::header_version(version))?;
        request
            .encode(&mut frame, version)
            .with_context(|| format!("encoding API key {} v{version}", R::KEY))?;
        let length = i32::try_from(frame.len() - 4).context("request too large")?;
        frame[..4].copy_from_slice(&length.to_be_bytes());
        self.stream.write_all(&frame)?;
        self.stream.flush()?;
        Ok(correlation_id)
    }

    fn read_frame(&mut self) -> anyhow::Result<bytes::Bytes> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        if !self.stream.is_tls() && is_tls_record(prefix) {
            bail!("{} answered with TLS ({TLS_LISTENER_HINT})", self.addr);
        }
        let length = usize::try_from(i32::from_be_bytes(prefix)).unwrap_or(usize::MAX);
        if length > RESPONSE_BYTES_MAX {
            bail!("response frame of {length} bytes is above {RESPONSE_BYTES_MAX}");
        }
        let mut frame = vec![0u8; length];
        self.stream.read_exact(&mut frame)?;
        let frame = bytes::Bytes::from(frame);
        debug_assert!(frame.remaining() == length);
        Ok(frame)
    }
}

/// True when `prefix` starts a TLS record (a content type 20..=23, version 3.x), which no
/// Kafka response length does below [`RESPONSE_BYTES_MAX`].
fn is_tls_record(prefix: [u8; 4]) -> bool {
    const _: () = assert!(RESPONSE_BYTES_MAX < 0x1403_0000);
    (0x14..=0x17).contains(&prefix[0]) && prefix[1] == 0x03
}

/// The host of `host:port` (an IPv6 literal's brackets removed): what TLS checks the
/// broker's certificate against.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// True when `e` says the broker closed the connection.
fn is_disconnect(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof
            )
        })
    })
}

/// Kafka's name of an error code, for messages.
pub fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?}"),
        None => format!("error code {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{host_of, is_tls_record};

    #[test]
    fn the_host_of_an_address_is_what_tls_checks() {
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("broker.test:9093"), "broker.test");
        assert_eq!(host_of("[::1]:9093"), "::1");
    }

    #[test]
    fn a_tls_record_is_not_taken_for_a_frame_length() {
        assert!(is_tls_record([0x15, 0x03, 0x03, 0x00])); // an alert
        assert!(is_tls_record([0x16, 0x03, 0x01, 0x02])); // a handshake
        assert!(!is_tls_record([0x00, 0x00, 0x01, 0x00]));
        assert!(!is_tls_record([0x15, 0x00, 0x00, 0x00]));
    }
}
