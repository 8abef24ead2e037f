//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` runs it, checked against the same
//! stored SCRAM credentials the SCRAM mechanisms use.
//!
//! The message is `[authzid] NUL authcid NUL passwd`. Kafka splits it at NULs into at
//! most four tokens and requires exactly three; an empty user name or password, a bad
//! password, and an authzid other than the user are all refused with Kafka's
//! client-visible messages (every PLAIN error is a `SaslAuthenticationException`).
//!
//! Kafka's default PLAIN callback checks a password from the JAAS file. Sluice keeps no
//! passwords: [`authenticate`] recomputes the StoredKey of the offered password with the
//! stored salt and iterations of the user's SCRAM credential and compares it in constant
//! time ([`crate::scram::ScramCredential::verify_password`]). A user with credentials for
//! both mechanisms is checked against SCRAM-SHA-512 first, then SCRAM-SHA-256; either
//! matching is enough.

use crate::limits;
use crate::sasl::SaslError;
use crate::scram::{CredentialLookup, ScramMechanism};

/// The SASL mechanism name.
pub const PLAIN_MECHANISM: &str = "PLAIN";

/// A parsed PLAIN message. `Debug` leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainMessage {
    /// The authorization id; empty when absent.
    pub authorization_id: String,
    /// The user name (authcid).
    pub username: String,
    /// The password.
    pub password: String,
}

impl std::fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainMessage")
            .field("authorization_id", &self.authorization_id)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

fn refused(message: impl Into<String>) -> SaslError {
    SaslError::Refused {
        message: message.into(),
    }
}

impl PlainMessage {
    /// Parses `authzid NUL authcid NUL passwd` within the limits.
    pub fn parse(bytes: &[u8]) -> Result<Self, SaslError> {
        if bytes.len() > limits::SASL_MESSAGE_BYTES_MAX {
            return Err(refused(format!(
                "Invalid SASL/PLAIN response: {} bytes is over the limit of {} bytes (SASL_MESSAGE_BYTES_MAX)",
                bytes.len(),
                limits::SASL_MESSAGE_BYTES_MAX
            )));
        }
        // Java's `new String(bytes, UTF_8)` replaces bad sequences; a password with them
        // could never match, so refusing is the same outcome, said plainly.
        let text = std::str::from_utf8(bytes)
            .map_err(|_| refused("Invalid SASL/PLAIN response: not UTF-8"))?;
        let tokens: Vec<&str> = text.splitn(4, '\0').collect();
        if tokens.len() != 3 {
            return Err(refused(format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                tokens.len()
            )));
        }
        let (authorization_id, username, password) = (tokens[0], tokens[1], tokens[2]);
        if username.is_empty() {
            return Err(refused("Authentication failed: username not specified"));
        }
        if password.is_empty() {
            return Err(refused("Authentication failed: password not specified"));
        }
        for (what, len, max, limit) in [
            (
                "authorization id",
                authorization_id.len(),
                limits::USER_NAME_BYTES_MAX,
                "USER_NAME_BYTES_MAX",
            ),
            (
                "username",
                username.len(),
                limits::USER_NAME_BYTES_MAX,
                "USER_NAME_BYTES_MAX",
            ),
            (
                "password",
                password.len(),
                limits::PASSWORD_BYTES_MAX,
                "PASSWORD_BYTES_MAX",
            ),
        ] {
            if len > max {
                return Err(refused(format!(
                    "Invalid SASL/PLAIN response: {what} of {len} bytes is over the limit of {max} bytes ({limit})"
                )));
            }
        }
        Ok(Self {
            authorization_id: authorization_id.to_owned(),
            username: username.to_owned(),
            password: password.to_owned(),
        })
    }
}

/// Runs one PLAIN exchange: parses `message` and checks the password against the user's
/// stored SCRAM credentials. Returns the authenticated user name (Kafka's authorization
/// id); the server's reply is empty.
pub fn authenticate(message: &[u8], lookup: &dyn CredentialLookup) -> Result<String, SaslError> {
    let msg = PlainMessage::parse(message)?;
    let matched = [ScramMechanism::Sha512, ScramMechanism::Sha256]
        .into_iter()
        .filter_map(|m| {
            lookup
                .scram_credential(&msg.username, m)
                .filter(|c| c.mechanism == m)
        })
        .any(|c| c.verify_password(&msg.password));
    if !matched {
        return Err(refused(
            "Authentication failed: Invalid username or password",
        ));
    }
    if !msg.authorization_id.is_empty() && msg.authorization_id != msg.username {
        return Err(refused(
            "Authentication failed: Client requested an authorization id that is different from username",
        ));
    }
    Ok(msg.username)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scram::ScramCredential;

    fn store(user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        match (user, m) {
            ("alice", ScramMechanism::Sha256) => {
                ScramCredential::derive(m, "secret", b"salt-a", 4096).ok()
            }
            ("bob", ScramMechanism::Sha512) => {
                ScramCredential::derive(m, "hunter2", b"salt-b", 4096).ok()
            }
            _ => None,
        }
    }

    #[test]
    fn plain_table() {
        let cases: &[(&[u8], Result<&str, &str>)] = &[
            (b"\0alice\0secret", Ok("alice")),
            (b"alice\0alice\0secret", Ok("alice")),
            (b"\0bob\0hunter2", Ok("bob")),
            (
                b"\0alice\0wrong",
                Err("Authentication failed: Invalid username or password"),
            ),
            (
                b"\0carol\0secret",
                Err("Authentication failed: Invalid username or password"),
            ),
            (
                b"bob\0alice\0secret",
                Err(
                    "Authentication failed: Client requested an authorization id that is different from username",
                ),
            ),
            (
                b"\0\0secret",
                Err("Authentication failed: username not specified"),
            ),
            (
                b"\0alice\0",
                Err("Authentication failed: password not specified"),
            ),
            (
                b"alice\0secret",
                Err("Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
            ),
            (
                b"a\0b\0c\0d",
                Err("Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
            ),
        ];
        for (msg, want) in cases {
            let got = authenticate(msg, &store);
            let got = got.as_deref().map_err(|e| e.client_message(false));
            assert_eq!(
                got,
                want.map_err(str::to_owned),
                "{:?}",
                String::from_utf8_lossy(msg)
            );
        }
    }

    #[test]
    fn bounds_and_debug() {
        let long = vec![b'a'; limits::SASL_MESSAGE_BYTES_MAX + 1];
        let err = PlainMessage::parse(&long).unwrap_err();
        assert!(err.to_string().contains("SASL_MESSAGE_BYTES_MAX"), "{err}");
        let msg = PlainMessage::parse(b"\0alice\0topsecret").unwrap();
        assert!(!format!("{msg:?}").contains("topsecret"));
        assert_eq!(err.error_code(), 58);
    }
}
