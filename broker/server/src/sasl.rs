//! SASL on one connection (KIP-43 SaslHandshake, KIP-152 SaslAuthenticate, KIP-368
//! re-authentication): which requests a connection may send before it has authenticated,
//! the exchange itself (PLAIN and SCRAM-SHA-256/512 from `sluice_security`, checked against
//! the security state's credentials), and the session's lifetime.
//!
//! On a SASL_PLAINTEXT or SASL_SSL listener a connection may send ApiVersions and
//! SaslHandshake (v1: every later SASL message is a SaslAuthenticate request), then
//! SaslAuthenticate until the mechanism completes; any other request before that closes
//! the connection, as Kafka's `SaslServerAuthenticator` does. A failed exchange is answered
//! after `connection.failed.authentication.delay.ms` and the connection is closed; the
//! failure is counted against its (source address, user name) (`security::LoginLimiter`),
//! logged with the user name and address and never the password.
//!
//! With `connections.max.reauth.ms` set, the SaslAuthenticate response carries the
//! session's lifetime and the client re-authenticates on the same connection before it ends
//! (SaslHandshake again, same mechanism, same principal). A connection whose session ended
//! without that is closed at its next request.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use sluice_kafka::ErrorCode;
use sluice_security::principal::KafkaPrincipal;
use sluice_security::sasl::SaslError;
use sluice_security::scram::{
    CredentialLookup, ScramCredential, ScramMechanism, ScramServer, TokenLogin,
};

use crate::clock::SharedClock;
use crate::config::{BrokerConfig, SaslMechanism};
use crate::limits::LOGIN_FAILURES_PER_USER_MAX;
use crate::metrics::Metrics;
use crate::random::OsRng;
use crate::security::Security;

/// What a SASL exchange reads and counts: the enabled mechanisms and the re-authentication
/// lifetime (config), the users' credentials and the failed-login limiter (security), the
/// authentication counters (metrics), and the clock.
#[derive(Debug, Clone, Copy)]
pub struct Services<'a> {
    pub config: &'a BrokerConfig,
    pub security: &'a Security,
    pub metrics: &'a Metrics,
    pub clock: &'a SharedClock,
}

/// What the connection does with a request, before decoding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// Handle it as usual.
    Request,
    /// A SASL request: `handler::handle_sasl` with this session.
    Sasl,
    /// Close the connection; the reason is for the log.
    Refuse(String),
}

/// An authenticated SASL session.
#[derive(Debug, Clone)]
struct Authenticated {
    user: String,
    mechanism: SaslMechanism,
    /// When the session ends (KIP-368), if `connections.max.reauth.ms` is set.
    expires_at_ms: Option<i64>,
}

#[derive(Debug)]
enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
}

#[derive(Debug)]
enum State {
    /// No exchange under way (before the first, or between re-authentications).
    Idle,
    /// SaslHandshake chose the mechanism: SaslAuthenticate requests next.
    Exchanging(SaslMechanism, Exchange),
    /// An exchange failed: the connection is closing.
    Failed,
}

/// One connection's SASL state.
#[derive(Debug)]
pub struct Session {
    /// The listener is SASL_PLAINTEXT or SASL_SSL.
    required: bool,
    state: State,
    authenticated: Option<Authenticated>,
}

/// A SaslHandshake's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandshakeOutcome {
    /// 0, UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE.
    pub error_code: i16,
    /// The enabled mechanisms (Kafka lists them in every answer).
    pub mechanisms: Vec<&'static str>,
    /// Close the connection after the answer.
    pub close: bool,
}

/// A SaslAuthenticate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticateOutcome {
    /// 0, SASL_AUTHENTICATION_FAILED or ILLEGAL_SASL_STATE.
    pub error_code: i16,
    /// Kafka's text for the client on an error.
    pub error_message: Option<String>,
    /// The server's SASL message (SCRAM's server-first or server-final; empty for PLAIN).
    pub auth_bytes: Bytes,
    /// KIP-368: the session's remaining lifetime once complete; 0 = no limit.
    pub session_lifetime_ms: i64,
    /// The principal, once the exchange completed.
    pub principal: Option<KafkaPrincipal>,
    /// The exchange proved a delegation token (KIP-48): the principal is the token's owner,
    /// and it may not create, renew or expire tokens.
    pub token_authenticated: bool,
    /// A failure: answer after `connection.failed.authentication.delay.ms`, then close.
    pub failed: bool,
}

impl AuthenticateOutcome {
    fn step(auth_bytes: Vec<u8>) -> Self {
        Self {
            error_code: 0,
            error_message: None,
            auth_bytes: Bytes::from(auth_bytes),
            session_lifetime_ms: 0,
            principal: None,
            token_authenticated: false,
            failed: false,
        }
    }

    fn failure(error_code: i16, message: String) -> Self {
        Self {
            error_code,
            error_message: Some(message),
            auth_bytes: Bytes::new(),
            session_lifetime_ms: 0,
            principal: None,
            token_authenticated: false,
            failed: true,
        }
    }
}

impl Session {
    /// A session on a listener that requires SASL (`required`) or not.
    pub fn new(required: bool) -> Self {
        Self {
            required,
            state: State::Idle,
            authenticated: None,
        }
    }

    fn reauthenticating(&self) -> bool {
        self.authenticated.is_some()
    }

    /// Whether the connection may send a request of `api_key` now.
    pub fn admit(&self, api_key: i16, now_ms: i64) -> Admit {
        let key = ApiKey::try_from(api_key).ok();
        match key {
            Some(ApiKey::ApiVersions) => return Admit::Request,
            Some(ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) => return Admit::Sasl,
            _ => {}
        }
        if !self.required {
            return Admit::Request;
        }
        let api = key.map_or_else(|| format!("API key {api_key}"), |k| format!("{k:?}"));
        match (&self.state, &self.authenticated) {
            (State::Failed, _) => {
                Admit::Refuse(format!("{api} after a failed SASL authentication"))
            }
            (State::Exchanging(..), _) => {
                Admit::Refuse(format!("{api} during SASL authentication"))
            }
            (State::Idle, None) => Admit::Refuse(format!(
                "{api} before SASL authentication (this listener requires SaslHandshake and SaslAuthenticate first)"
            )),
            (State::Idle, Some(session)) => match session.expires_at_ms {
                Some(at) if now_ms >= at => Admit::Refuse(format!(
                    "{api} after the SASL session of {} ended without re-authentication (connections.max.reauth.ms)",
                    session.user
                )),
                _ => Admit::Request,
            },
        }
    }

    /// SaslHandshake v1 asking for `mechanism`.
    pub fn handshake(&mut self, mechanism: &str, sasl: Services<'_>) -> HandshakeOutcome {
        let enabled = &sasl.config.sasl_enabled_mechanisms;
        let mechanisms: Vec<&'static str> = enabled.iter().map(|m| m.name()).collect();
        let refuse = |error_code| HandshakeOutcome {
            error_code,
            mechanisms: mechanisms.clone(),
            close: true,
        };
        if !self.required {
            // Kafka answers a SaslHandshake on a listener without SASL with ILLEGAL_SASL_STATE
            // and leaves the connection as it is.
            return HandshakeOutcome {
                error_code: ErrorCode::IllegalSaslState.code(),
                mechanisms: mechanisms.clone(),
                close: false,
            };
        }
        if !matches!(self.state, State::Idle) {
            tracing::debug!(
                mechanism,
                required = self.required,
                "SaslHandshake refused: no SASL exchange may start now"
            );
            self.state = State::Failed;
            return refuse(ErrorCode::IllegalSaslState.code());
        }
        let chosen = SaslMechanism::from_name(mechanism).filter(|m| enabled.contains(m));
        let Some(chosen) = chosen else {
            tracing::info!(mechanism, enabled = ?mechanisms, "SaslHandshake asked for a mechanism that is not enabled (sasl.enabled.mechanisms)");
            sasl.metrics.sasl_authentication(false);
            self.state = State::Failed;
            return refuse(ErrorCode::UnsupportedSaslMechanism.code());
        };
        if let Some(session) = &self.authenticated
            && session.mechanism != chosen
        {
            tracing::info!(
                user = session.user,
                from = session.mechanism.name(),
                to = chosen.name(),
                "re-authentication refused: the mechanism changed"
            );
            sasl.metrics.sasl_authentication(false);
            self.state = State::Failed;
            return refuse(ErrorCode::UnsupportedSaslMechanism.code());
        }
        let exchange = match chosen {
            SaslMechanism::Plain => Exchange::Plain,
            SaslMechanism::Scram(m) => Exchange::Scram(Box::new(ScramServer::new(m))),
        };
        self.state = State::Exchanging(chosen, exchange);
        HandshakeOutcome {
            error_code: 0,
            mechanisms,
            close: false,
        }
    }

    /// One SaslAuthenticate message from the client at `host`.
    pub async fn authenticate(
        &mut self,
        auth_bytes: Bytes,
        sasl: Services<'_>,
        host: &str,
    ) -> AuthenticateOutcome {
        let reauth = self.reauthenticating();
        let State::Exchanging(mechanism, exchange) = &mut self.state else {
            let e = SaslError::IllegalState {
                state: "HANDSHAKE_REQUEST",
            };
            let mut outcome = AuthenticateOutcome::failure(e.error_code(), e.to_string());
            if !self.required || self.authenticated.is_some() {
                // Kafka's KafkaApis: ILLEGAL_SASL_STATE on a connection that needs no (more)
                // authentication; the connection stays.
                outcome.failed = false;
            } else {
                // Before any SaslHandshake on a SASL listener: closed, as Kafka does.
                self.state = State::Failed;
            }
            return outcome;
        };
        let mechanism = *mechanism;
        let now = sasl.clock.now_ms();
        let user = attempted_user(exchange, &auth_bytes);
        if let Err(retry_ms) = sasl.security.login_failures.check(host, &user, now) {
            tracing::debug!(
                host,
                user,
                "SASL authentication refused: the user is over its failure limit from this address"
            );
            sasl.metrics.sasl_authentication(false);
            sasl.metrics.login_refusals.fetch_add(1, Relaxed);
            self.state = State::Failed;
            return AuthenticateOutcome::failure(
                ErrorCode::SaslAuthenticationFailed.code(),
                format!(
                    "Too many failed authentication attempts for user {user} from {host}: retry in {} s (LOGIN_FAILURES_PER_USER_MAX is {LOGIN_FAILURES_PER_USER_MAX})",
                    (retry_ms + 999) / 1000
                ),
            );
        }
        let result = match exchange {
            Exchange::Plain => plain(sasl, auth_bytes).await.map(|user| {
                let login = Login {
                    user,
                    token_expiry_ms: None,
                };
                (Vec::new(), Some(login))
            }),
            Exchange::Scram(server) => scram_step(server, sasl, &auth_bytes, now),
        };
        match result {
            Ok((reply, None)) => AuthenticateOutcome::step(reply),
            Ok((reply, Some(login))) => self.complete(sasl, mechanism, login, reply, now),
            Err(e) => self.fail(sasl, (host, &user), mechanism, &e, reauth, now),
        }
    }

    fn complete(
        &mut self,
        sasl: Services<'_>,
        mechanism: SaslMechanism,
        login: Login,
        reply: Vec<u8>,
        now: i64,
    ) -> AuthenticateOutcome {
        let Login {
            user,
            token_expiry_ms,
        } = login;
        if let Some(previous) = &self.authenticated
            && previous.user != user
        {
            let message = format!(
                "Cannot change principals during re-authentication from User:{}: User:{user}",
                previous.user
            );
            tracing::info!(message, "re-authentication refused");
            sasl.metrics.sasl_authentication(false);
            self.state = State::Failed;
            return AuthenticateOutcome::failure(
                ErrorCode::SaslAuthenticationFailed.code(),
                message,
            );
        }
        let lifetime = sasl.config.connections_max_reauth_ms;
        let lifetime_ms = i64::try_from(lifetime).unwrap_or(i64::MAX);
        let reauth_at_ms = (lifetime > 0).then(|| now.saturating_add(lifetime_ms));
        // A token's session ends with the token (Kafka's credential expiration).
        let expires_at_ms = match (reauth_at_ms, token_expiry_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tracing::debug!(
            user,
            mechanism = mechanism.name(),
            reauth = self.authenticated.is_some(),
            "SASL authentication succeeded"
        );
        sasl.metrics.sasl_authentication(true);
        self.state = State::Idle;
        self.authenticated = Some(Authenticated {
            user: user.clone(),
            mechanism,
            expires_at_ms,
        });
        AuthenticateOutcome {
            session_lifetime_ms: expires_at_ms.map_or(0, |at| at.saturating_sub(now).max(1)),
            principal: Some(KafkaPrincipal::user(user)),
            token_authenticated: token_expiry_ms.is_some(),
            ..AuthenticateOutcome::step(reply)
        }
    }

    fn fail(
        &mut self,
        sasl: Services<'_>,
        (host, user): (&str, &str),
        mechanism: SaslMechanism,
        error: &SaslError,
        reauth: bool,
        now: i64,
    ) -> AuthenticateOutcome {
        let failures = sasl.security.login_failures.record_failure(host, user, now);
        sasl.metrics.sasl_authentication(false);
        // Logged until the user reaches its limit; after that it is refused unchecked.
        if failures <= LOGIN_FAILURES_PER_USER_MAX {
            tracing::warn!(host, user, mechanism = mechanism.name(), reason = %error, failures, "SASL authentication failed");
        }
        self.state = State::Failed;
        AuthenticateOutcome::failure(error.error_code(), error.client_message(reauth))
    }
}

/// The user name a SaslAuthenticate message logs in as, for the failure limiter: PLAIN's
/// authcid, SCRAM's client-first user (or the one its exchange started with); empty when
/// the message does not parse, so malformed attempts share one window of their own.
fn attempted_user(exchange: &Exchange, message: &[u8]) -> String {
    let user = match exchange {
        Exchange::Plain => sluice_security::plain::PlainMessage::parse(message)
            .ok()
            .map(|m| m.username),
        Exchange::Scram(server) => server.username_of(message),
    };
    user.unwrap_or_default()
}

/// Who a completed exchange authenticated: the user (a token's owner), and for a token
/// login the token's expiry.
struct Login {
    user: String,
    token_expiry_ms: Option<i64>,
}

/// The SCRAM step: `(server message, once complete: the user and a token's expiry)`.
fn scram_step(
    server: &mut ScramServer,
    sasl: Services<'_>,
    message: &[u8],
    now_ms: i64,
) -> Result<(Vec<u8>, Option<Login>), SaslError> {
    let mut rng = OsRng;
    let lookup = Credentials {
        security: sasl.security,
        now_ms,
    };
    let reply = server.evaluate(message, &mut rng, &lookup)?;
    let login = server.authorization_id().map(|user| Login {
        user: user.to_owned(),
        token_expiry_ms: server.token_expiry_ms(),
    });
    Ok((reply, login))
}

/// The users' SCRAM credentials and, with `delegation.token.secret.key` set, the live
/// delegation tokens' (derived from their HMACs).
struct Credentials<'a> {
    security: &'a Security,
    now_ms: i64,
}

impl CredentialLookup for Credentials<'_> {
    fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        self.security.store.read(|s| s.credential(user, m).cloned())
    }

    fn token_credential(&self, token_id: &str, m: ScramMechanism) -> Option<TokenLogin> {
        let config = self.security.tokens.as_ref()?;
        let token = self.security.store.read(|s| s.token(token_id).cloned())?;
        if token.expired(self.now_ms) {
            return None;
        }
        Some(TokenLogin {
            credential: config.scram_credential(token_id, m),
            owner: token.owner.name,
            expiry_ms: token.expiry_ms,
        })
    }
}

/// PLAIN: the password is checked against the stored SCRAM keys, which costs the
/// credential's iterations of HMAC: off the async workers.
async fn plain(sasl: Services<'_>, message: Bytes) -> Result<String, SaslError> {
    let credentials: Vec<_> = {
        let user = sluice_security::plain::PlainMessage::parse(&message)?.username;
        sasl.security.store.read(|s| {
            ScramMechanism::ALL
                .into_iter()
                .filter_map(|m| s.credential(&user, m).cloned())
                .collect()
        })
    };
    tokio::task::spawn_blocking(move || {
        let lookup =
            |_: &str, m: ScramMechanism| credentials.iter().find(|c| c.mechanism == m).cloned();
        sluice_security::plain::authenticate(&message, &lookup)
    })
    .await
    .unwrap_or_else(|e| {
        Err(SaslError::Failed {
            mechanism: sluice_security::plain::PLAIN_MECHANISM,
            reason: format!("the check did not finish: {e}"),
        })
    })
}
