//! The server side of one SCRAM exchange, as Kafka's `ScramSaslServer` runs it:
//!
//! ```text
//! ReceiveClientFirst --client-first--> ReceiveClientFinal --client-final--> Complete
//!        \________________ any error ___________\__________________________> Failed
//! ```
//!
//! 1. client-first: parse; a `tokenauth=true` login looks the user name up as a delegation
//!    token id (none, or expired: "Invalid tokenId") and authenticates as the token's owner;
//!    otherwise look up the user's credential for this mechanism (none: fail); an authzid
//!    other than the user is refused
//!    with Kafka's client-visible message; a credential under the mechanism's minimum
//!    iterations fails; answer `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`.
//! 2. client-final: parse; the `c=` value must be the base64 of the gs2 header (no
//!    channel binding) and the nonce must be the combined nonce (RFC 5802; Kafka checks
//!    only that the nonce ends with it); the proof is checked by recomputing StoredKey and
//!    comparing in constant time; answer `v=<ServerSignature>`.
//!
//! The auth message is `client-first-bare "," server-first "," client-final-without-proof`
//! from the bytes the client sent (RFC 5802). Kafka rebuilds the two client parts from
//! parsed fields, which gives the same bytes for every message a real client sends.
//!
//! Any error moves to Failed, and Failed and Complete refuse further messages
//! (ILLEGAL_SASL_STATE). The server nonce comes from the injected [`SecurityRng`]
//! (Kafka's 130-bit base-36 string) or, for test vectors, is passed in.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use subtle::ConstantTimeEq;

use super::messages::{ClientFinal, ClientFirst};
use super::{ScramCredential, ScramMechanism};
use crate::limits;
use crate::rng::{SecurityRng, secure_random_string};
use crate::sasl::SaslError;

/// Where the exchange finds a user's stored credential (the server's user store).
pub trait CredentialLookup {
    /// The credential of `user` for `mechanism`, if there is one.
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;

    /// The credential and owner of the live (unexpired) delegation token `token_id`, for a
    /// `tokenauth=true` login; `None` where tokens are not enabled.
    fn token_credential(&self, token_id: &str, mechanism: ScramMechanism) -> Option<TokenLogin> {
        let _ = (token_id, mechanism);
        None
    }
}

/// What a token login authenticates with and as.
#[derive(Debug, Clone)]
pub struct TokenLogin {
    /// The token's SCRAM credential (`crate::tokens::TokenConfig::scram_credential`).
    pub credential: ScramCredential,
    /// The token's owner: the login's principal name.
    pub owner: String,
    /// When the token expires: the session's lifetime ends there (KIP-368).
    pub expiry_ms: i64,
}

impl<F: Fn(&str, ScramMechanism) -> Option<ScramCredential>> CredentialLookup for F {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self(user, mechanism)
    }
}

/// Between the two client messages: what the final message is checked against.
#[derive(Debug)]
struct Pending {
    first: ClientFirst,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
    /// Whom the login authenticates as: the user, or a token's owner.
    authorization_id: String,
    /// A token login's token expiry.
    token_expiry_ms: Option<i64>,
}

#[derive(Debug)]
enum State {
    ReceiveClientFirst,
    ReceiveClientFinal(Box<Pending>),
    Complete {
        authorization_id: String,
        extensions: Vec<(String, String)>,
        token_expiry_ms: Option<i64>,
    },
    Failed,
}

/// One SCRAM exchange on one connection (create a new one per authentication).
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

impl ScramServer {
    /// A new exchange for `mechanism`.
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self {
            mechanism,
            state: State::ReceiveClientFirst,
        }
    }

    /// The mechanism.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// The user name `message` (the next client message) logs in as, for rate limiting
    /// before it is checked: the client-first message's, or the one the exchange started
    /// with. `None` when the message does not parse.
    pub fn username_of(&self, message: &[u8]) -> Option<String> {
        match &self.state {
            State::ReceiveClientFirst => ClientFirst::parse(message).ok().map(|f| f.username),
            State::ReceiveClientFinal(pending) => Some(pending.first.username.clone()),
            State::Complete {
                authorization_id, ..
            } => Some(authorization_id.clone()),
            State::Failed => None,
        }
    }

    /// Feeds the next client message (a SaslAuthenticate `auth_bytes`) and returns the
    /// server's answer, drawing the server nonce from `rng`.
    pub fn evaluate(
        &mut self,
        message: &[u8],
        rng: &mut dyn SecurityRng,
        lookup: &dyn CredentialLookup,
    ) -> Result<Vec<u8>, SaslError> {
        if matches!(self.state, State::ReceiveClientFirst) {
            let nonce = secure_random_string(rng);
            self.receive_client_first(message, &nonce, lookup)
        } else {
            self.receive_client_final(message)
        }
    }

    /// Step 1 with a given server nonce (printable ASCII without `,`; test vectors inject
    /// theirs). Returns the server-first-message.
    pub fn receive_client_first(
        &mut self,
        message: &[u8],
        server_nonce: &str,
        lookup: &dyn CredentialLookup,
    ) -> Result<Vec<u8>, SaslError> {
        self.expect(|s| matches!(s, State::ReceiveClientFirst))?;
        assert!(
            !server_nonce.is_empty()
                && server_nonce
                    .bytes()
                    .all(|b| (0x21..=0x7E).contains(&b) && b != b','),
            "server nonce must be printable ASCII without commas"
        );
        let outcome = self.client_first(message, server_nonce, lookup);
        self.settle(outcome, |pending| {
            let reply = pending.server_first.clone().into_bytes();
            (State::ReceiveClientFinal(Box::new(pending)), reply)
        })
    }

    /// Step 2. Returns the server-final-message (`v=<signature>`).
    pub fn receive_client_final(&mut self, message: &[u8]) -> Result<Vec<u8>, SaslError> {
        self.expect(|s| matches!(s, State::ReceiveClientFinal(_)))?;
        let State::ReceiveClientFinal(pending) = std::mem::replace(&mut self.state, State::Failed)
        else {
            unreachable!("checked above");
        };
        let outcome = self.client_final(&pending, message);
        self.settle(outcome, |signature| {
            let reply = format!("v={}", STANDARD.encode(signature)).into_bytes();
            let done = State::Complete {
                authorization_id: pending.authorization_id.clone(),
                extensions: pending.first.extensions.clone(),
                token_expiry_ms: pending.token_expiry_ms,
            };
            (done, reply)
        })
    }

    /// Whether the exchange completed successfully.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete { .. })
    }

    /// The authenticated user (Kafka's `getAuthorizationID`), once complete.
    pub fn authorization_id(&self) -> Option<&str> {
        match &self.state {
            State::Complete {
                authorization_id, ..
            } => Some(authorization_id),
            _ => None,
        }
    }

    /// The expiry of the delegation token the client authenticated with, once complete;
    /// `None` for a user login (a token login is Kafka's `tokenAuthenticated` principal).
    pub fn token_expiry_ms(&self) -> Option<i64> {
        match &self.state {
            State::Complete {
                token_expiry_ms, ..
            } => *token_expiry_ms,
            _ => None,
        }
    }

    /// The client's extensions, once complete (Kafka's negotiated properties).
    pub fn extensions(&self) -> Option<&[(String, String)]> {
        match &self.state {
            State::Complete { extensions, .. } => Some(extensions),
            _ => None,
        }
    }

    fn expect(&mut self, ok: impl Fn(&State) -> bool) -> Result<(), SaslError> {
        if ok(&self.state) {
            return Ok(());
        }
        let state = match self.state {
            State::Complete { .. } => "COMPLETE",
            State::Failed => "FAILED",
            State::ReceiveClientFirst => "RECEIVE_CLIENT_FIRST_MESSAGE",
            State::ReceiveClientFinal(_) => "RECEIVE_CLIENT_FINAL_MESSAGE",
        };
        self.state = State::Failed;
        Err(SaslError::IllegalState { state })
    }

    fn settle<T>(
        &mut self,
        outcome: Result<T, SaslError>,
        next: impl FnOnce(T) -> (State, Vec<u8>),
    ) -> Result<Vec<u8>, SaslError> {
        match outcome {
            Ok(value) => {
                let (state, reply) = next(value);
                self.state = state;
                Ok(reply)
            }
            Err(e) => {
                self.state = State::Failed;
                Err(e)
            }
        }
    }

    fn fail(&self, reason: impl Into<String>) -> SaslError {
        SaslError::Failed {
            mechanism: self.mechanism.name(),
            reason: reason.into(),
        }
    }

    fn client_first(
        &self,
        message: &[u8],
        server_nonce: &str,
        lookup: &dyn CredentialLookup,
    ) -> Result<Pending, SaslError> {
        let first = ClientFirst::parse(message).map_err(|e| self.fail(e.to_string()))?;
        let (credential, authorization_id, token_expiry_ms) = if first.token_authenticated() {
            let login = lookup
                .token_credential(&first.username, self.mechanism)
                .filter(|l| l.credential.mechanism == self.mechanism)
                .ok_or_else(|| {
                    self.fail(format!(
                        "Token Authentication failed: Invalid tokenId : {}",
                        first.username
                    ))
                })?;
            (login.credential, login.owner, Some(login.expiry_ms))
        } else {
            let credential = lookup
                .scram_credential(&first.username, self.mechanism)
                .filter(|c| c.mechanism == self.mechanism)
                .ok_or_else(|| {
                    self.fail(format!(
                        "Authentication failed: Invalid user credentials ({})",
                        first.username
                    ))
                })?;
            (credential, first.username.clone(), None)
        };
        if !first.authorization_id.is_empty() && first.authorization_id != first.username {
            return Err(SaslError::Refused {
                message: "Authentication failed: Client requested an authorization id that is different from username"
                    .into(),
            });
        }
        if credential.iterations < limits::SCRAM_ITERATIONS_MIN {
            let reason = format!(
                "Iterations {} is less than the minimum {} for {}",
                credential.iterations,
                limits::SCRAM_ITERATIONS_MIN,
                self.mechanism
            );
            return Err(self.fail(reason));
        }
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            STANDARD.encode(&credential.salt),
            credential.iterations
        );
        Ok(Pending {
            first,
            server_first,
            nonce,
            credential,
            authorization_id,
            token_expiry_ms,
        })
    }

    fn client_final(&self, pending: &Pending, message: &[u8]) -> Result<Vec<u8>, SaslError> {
        let last = ClientFinal::parse(message).map_err(|e| self.fail(e.to_string()))?;
        if last.channel_binding != pending.first.gs2_header.as_bytes() {
            return Err(self.fail("channel binding does not match the gs2 header"));
        }
        // librdkafka before 2.6.1 sends the client nonce twice (`r=<client><client><server>`,
        // librdkafka#4895; Debian 12's kcat links 2.0.2). Kafka 3.8.1 accepts any nonce that
        // ends with the full one; we accept exactly that form beside the correct one, which
        // still proves the client saw this exchange's server nonce (CVE-2024-56128).
        let doubled = last.nonce.len() == pending.first.nonce.len() + pending.nonce.len()
            && last.nonce.starts_with(&pending.first.nonce)
            && last.nonce.ends_with(&pending.nonce);
        if last.nonce != pending.nonce && !doubled {
            return Err(self.fail("Invalid client nonce in the final client message."));
        }
        let mech = self.mechanism;
        let auth_message = format!(
            "{},{},{}",
            pending.first.bare, pending.server_first, last.without_proof
        );
        let stored_key = &pending.credential.stored_key;
        if last.proof.len() != mech.hash_len() {
            return Err(self.fail("Invalid client credentials"));
        }
        let signature = mech.hmac(stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = signature
            .iter()
            .zip(&last.proof)
            .map(|(s, p)| s ^ p)
            .collect();
        if !bool::from(mech.hash(&client_key).ct_eq(stored_key)) {
            return Err(self.fail("Invalid client credentials"));
        }
        Ok(mech.hmac(&pending.credential.server_key, auth_message.as_bytes()))
    }
}
