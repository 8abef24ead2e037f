//! SaslHandshake (v1) and SaslAuthenticate (v0-v2, v2 flexible): the wire side of `crate::sasl`. The
//! connection sends these here with its session; a completed exchange sets the
//! connection's principal.

use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::sasl::{Services, Session};
use crate::wire::Client;

/// SaslHandshake; `true`: close the connection after the answer.
pub(super) fn handshake(
    sasl: Services<'_>,
    session: &mut Session,
    request: &SaslHandshakeRequest,
    version: i16,
) -> (SaslHandshakeResponse, bool) {
    let mut response = SaslHandshakeResponse::default();
    if version == 0 {
        // The raw-token exchange a v0 handshake starts is not built; nothing changes.
        response.error_code = kafka_protocol::ResponseError::UnsupportedVersion.code();
        response.mechanisms = sasl
            .config
            .sasl_enabled_mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        return (response, false);
    }
    let outcome = session.handshake(&request.mechanism, sasl);
    response.error_code = outcome.error_code;
    response.mechanisms = outcome
        .mechanisms
        .into_iter()
        .map(StrBytes::from_static_str)
        .collect();
    (response, outcome.close)
}

/// SaslAuthenticate; `true`: the exchange failed, so the answer waits
/// `connection.failed.authentication.delay.ms` and the connection closes after it.
pub(super) async fn authenticate(
    (client, sasl): (&mut Client, Services<'_>),
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> (SaslAuthenticateResponse, bool) {
    let host = std::sync::Arc::clone(&client.host);
    let outcome = session.authenticate(request.auth_bytes, sasl, &host).await;
    if let Some(principal) = outcome.principal {
        tracing::debug!(peer = %client.peer, %principal, token = outcome.token_authenticated, "authenticated");
        client.principal = principal;
        client.token_authenticated = outcome.token_authenticated;
    }
    if outcome.failed {
        let delay = sasl.config.connection_failed_authentication_delay_ms;
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let mut response = SaslAuthenticateResponse::default();
    response.error_code = outcome.error_code;
    response.error_message = outcome.error_message.map(StrBytes::from_string);
    response.auth_bytes = outcome.auth_bytes;
    response.session_lifetime_ms = outcome.session_lifetime_ms;
    (response, outcome.failed)
}
