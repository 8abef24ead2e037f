//! A small blocking Kafka client for the operator commands: one connection to one broker,
//! one request at a time, encoded and decoded with the `kafka-protocol` types (no C library).
//! With `--user`, each connection logs in over SASL first (`client/sasl.rs`: PLAIN,
//! SCRAM-SHA-256/512).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

mod sasl;

/// Largest response frame accepted, in bytes (a describe of a large group fits easily).
const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// How long one request may take before the command gives up.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One connection to a broker.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    next_correlation_id: i32,
    /// The broker this connection goes to, for [`Client::reconnecting`].
    addr: String,
    /// Resend a request once on a new connection when the broker closed this one.
    reconnect: bool,
    /// How every connection of this client logs in (SASL), if it does.
    login: Option<Login>,
}

/// A broker was reached and refused the login (not [`crate::common::Unreachable`]).
#[derive(Debug)]
pub struct LoginFailed(pub String);

impl std::fmt::Display for LoginFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where the password of `--user` comes from (never a flag: flags show in `ps`).
pub const PASSWORD_ENV: &str = "SLUICE_PASSWORD";

/// `--user` and `--sasl-mechanism`: log in to a SASL_PLAINTEXT listener.
#[derive(Debug, Clone, clap::Args)]
pub struct Login {
    /// Log in as this user (SASL; the password is read from SLUICE_PASSWORD).
    #[arg(long, global = true, env = "SLUICE_USER")]
    pub user: Option<String>,
    /// The SASL mechanism for --user: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN.
    #[arg(
        long,
        global = true,
        env = "SLUICE_SASL_MECHANISM",
        default_value = "SCRAM-SHA-256"
    )]
    pub sasl_mechanism: String,
}

impl Login {
    /// `Some` when `--user` is given.
    pub fn given(&self) -> Option<Self> {
        self.user.is_some().then(|| self.clone())
    }
}

impl Client {
    /// Connects to the first reachable broker of a comma-separated `host:port` list (a
    /// single node coordinates every group, so any broker answers).
    /// Logs every connection in with `login` (SASL) when given.
    pub fn connect_as(brokers: &str, login: Option<Login>) -> anyhow::Result<Self> {
        let mut last_error = None;
        for addr in brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match Self::connect_one(addr, login.clone()) {
                Ok(client) => return Ok(client),
                // The broker answered and refused: another broker would refuse the same.
                Err(e) if e.downcast_ref::<LoginFailed>().is_some() => return Err(e),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("--brokers is empty")))
    }

    fn connect_one(addr: &str, login: Option<Login>) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
        stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
        stream.set_nodelay(true).ok();
        let mut client = Self {
            stream,
            next_correlation_id: 1,
            addr: addr.to_owned(),
            reconnect: false,
            login,
        };
        if let Some(login) = client.login.clone() {
            sasl::log_in(&mut client, &login).map_err(|e| {
                let user = login.user.as_deref().unwrap_or_default();
                e.context(LoginFailed(format!("logging in to {addr} as {user}")))
            })?;
        }
        Ok(client)
    }

    /// Another connection to the same broker, logged in the same way.
    pub fn another(&self) -> anyhow::Result<Self> {
        Self::connect_one(&self.addr, self.login.clone())
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
        match self.send_once(request, version) {
            Err(e) if self.reconnect && is_disconnect(&e) => {
                let timeout = self.stream.read_timeout()?;
                let fresh = Self::connect_one(&self.addr, self.login.clone())?;
                self.stream = fresh.stream;
                self.stream.set_read_timeout(timeout)?;
                self.send_once(request, version)
            }
            result => result,
        }
    }

    fn send_once<R: Request>(&mut self, request: &R, version: i16) -> anyhow::Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|()| anyhow::anyhow!("API key {}", R::KEY))?;
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("sluice-cli"));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version))?;
        request
            .encode(&mut body, version)
            .with_context(|| format!("encoding {key:?} v{version}"))?;
        let length = i32::try_from(body.len()).context("request too large")?;
        self.stream.write_all(&length.to_be_bytes())?;
        self.stream.write_all(&body)?;
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
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        header.client_id = Some(StrBytes::from_static_str("sluice-cli"));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version))?;
        request.encode(&mut body, version)?;
        let length = i32::try_from(body.len()).context("request too large")?;
        self.stream.write_all(&length.to_be_bytes())?;
        self.stream.write_all(&body)?;
        Ok(())
    }

    fn read_frame(&mut self) -> anyhow::Result<bytes::Bytes> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
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
