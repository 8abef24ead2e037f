//! What a failed SASL step means on the wire, shared by [`crate::scram`] and
//! [`crate::plain`].
//!
//! Kafka's `SaslServerAuthenticator` answers a failed SaslAuthenticate with
//! SASL_AUTHENTICATION_FAILED (58). A `SaslAuthenticationException` carries a message
//! meant for the client; any other `SaslException` is replaced by a generic message, so
//! the reply never tells a client whether a user exists. [`SaslError::Failed`] is the
//! second kind (its reason is for the server's log only), [`SaslError::Refused`] the
//! first. A message after the exchange ended is Kafka's `IllegalSaslStateException`,
//! ILLEGAL_SASL_STATE (34).

use sluice_kafka::ErrorCode;

/// A failed SASL step. No variant ever holds a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// Kafka's `SaslException`: the client sees only the generic message
    /// ([`SaslError::client_message`]); `reason` is for the server's log.
    #[error("{mechanism} authentication failed: {reason}")]
    Failed {
        /// The mechanism name.
        mechanism: &'static str,
        /// Why, for the log (may name the user; never the password).
        reason: String,
    },
    /// Kafka's `SaslAuthenticationException`: `message` is sent to the client as is.
    #[error("{message}")]
    Refused {
        /// Kafka's message text.
        message: String,
    },
    /// A message arrived in a state that takes none (after completion or failure).
    #[error("Unexpected challenge in Sasl server state {state}")]
    IllegalState {
        /// The state, in Kafka's names (`COMPLETE`, `FAILED`).
        state: &'static str,
    },
}

impl SaslError {
    /// The Kafka error code for the SaslAuthenticate response.
    pub const fn error_code(&self) -> i16 {
        match self {
            Self::Failed { .. } | Self::Refused { .. } => ErrorCode::SaslAuthenticationFailed,
            Self::IllegalState { .. } => ErrorCode::IllegalSaslState,
        }
        .code()
    }

    /// The `error_message` for the client: Kafka's text. `reauthenticating` picks
    /// Kafka's "re-authentication" wording (KIP-368).
    pub fn client_message(&self, reauthenticating: bool) -> String {
        match self {
            Self::Failed { mechanism, .. } => {
                let what = if reauthenticating {
                    "re-authentication"
                } else {
                    "authentication"
                };
                format!(
                    "Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"
                )
            }
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_hides_the_reason_from_the_client() {
        let e = SaslError::Failed {
            mechanism: "SCRAM-SHA-256",
            reason: "no such user alice".into(),
        };
        assert_eq!(e.error_code(), 58);
        let msg = e.client_message(false);
        assert_eq!(
            msg,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        );
        assert!(!msg.contains("alice"));
        assert!(e.client_message(true).contains("during re-authentication"));
        let r = SaslError::Refused {
            message: "Authentication failed: password not specified".into(),
        };
        assert_eq!(
            r.client_message(false),
            "Authentication failed: password not specified"
        );
        assert_eq!(
            SaslError::IllegalState { state: "COMPLETE" }.error_code(),
            34
        );
    }
}
