//! The client side of one SCRAM exchange (RFC 5802 section 3), for Sluice's own tools
//! (`sluice` logging in to a SASL listener) and for tests: the client-first message, the
//! client-final message with its proof, and the check of the server's signature.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use subtle::ConstantTimeEq;

use super::{ScramMechanism, sasl_name};
use crate::limits;

/// Why an exchange could not go on (the server's message was not what RFC 5802 allows, or
/// its signature is wrong: the server does not know the password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SCRAM: {0}")]
pub struct ClientError(pub String);

fn error(message: impl Into<String>) -> ClientError {
    ClientError(message.into())
}

/// One SCRAM exchange as the client. `Debug` leaves the password out.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    nonce: String,
    first_bare: String,
    /// The server signature the final message must carry, once the final message is made.
    expected_signature: Option<Vec<u8>>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("first_bare", &self.first_bare)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// A new exchange for `user` with the client nonce `nonce` (printable ASCII, no `,`).
    pub fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> Self {
        Self {
            mechanism,
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            first_bare: format!("n={},r={nonce}", sasl_name(user)),
            expected_signature: None,
        }
    }

    /// The client-first message (gs2 header `n,,`: no channel binding, no authzid).
    pub fn first_message(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// The client-final message answering `server_first` (`r=..,s=..,i=..`).
    pub fn final_message(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ClientError> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| error("server-first is not UTF-8"))?;
        let mut fields = text.split(',');
        let mut field = |name: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .ok_or_else(|| error(format!("server-first has no {name} field: {text:?}")))
        };
        let nonce = field("r=")?;
        let salt = STANDARD
            .decode(field("s=")?)
            .map_err(|_| error("server-first salt is not base64"))?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| error("server-first iteration count is not a number"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(error("the server nonce does not extend the client's"));
        }
        if !(limits::SCRAM_ITERATIONS_MIN..=limits::SCRAM_ITERATIONS_MAX).contains(&iterations) {
            return Err(error(format!(
                "iteration count {iterations} is outside {}..={}",
                limits::SCRAM_ITERATIONS_MIN,
                limits::SCRAM_ITERATIONS_MAX
            )));
        }
        let m = self.mechanism;
        let salted = m.hi(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{},{text},{without_proof}", self.first_bare);
        let signature = m.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.expected_signature = Some(m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes()));
        Ok(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    /// Checks the server-final message (`v=<signature>`): the server proved it holds this
    /// user's ServerKey.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ClientError> {
        let expected = self
            .expected_signature
            .as_ref()
            .ok_or_else(|| error("server-final before the client-final message"))?;
        let text =
            std::str::from_utf8(server_final).map_err(|_| error("server-final is not UTF-8"))?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(error(format!("the server refused: {e}")));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| STANDARD.decode(v).ok())
            .ok_or_else(|| error("server-final has no v= signature"))?;
        if signature.ct_eq(expected).into() {
            Ok(())
        } else {
            Err(error(
                "the server's signature is wrong: it does not know the password",
            ))
        }
    }
}
