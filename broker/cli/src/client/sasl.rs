//! Logging a connection in over SASL (SaslHandshake v1, then SaslAuthenticate v1), as a
//! Kafka client does: PLAIN in one message, SCRAM-SHA-256/512 in two with the server's
//! signature checked (`sluice_security::scram::ScramClient`).

use anyhow::{Context, bail};
use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use sluice_security::rng::secure_random_string;
use sluice_security::scram::{ScramClient, ScramMechanism};
use sluice_server::security::OsRng;

use super::{Client, Login, PASSWORD_ENV, error_name};

/// Logs `client`'s fresh connection in as `login` says.
pub fn log_in(client: &mut Client, login: &Login) -> anyhow::Result<()> {
    let user = login.user.as_deref().unwrap_or_default();
    let password = std::env::var(PASSWORD_ENV)
        .with_context(|| format!("--user {user} needs its password in {PASSWORD_ENV}"))?;
    let mechanism = login.sasl_mechanism.trim().to_ascii_uppercase();
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_string(mechanism.clone());
    let answer = client.send(&handshake, 1)?;
    if answer.error_code != 0 {
        let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
        bail!(
            "the broker refused SASL mechanism {mechanism} ({}); it offers: {}",
            error_name(answer.error_code),
            offered.join(", ")
        );
    }
    if mechanism == "PLAIN" {
        let message = format!("\0{user}\0{password}");
        authenticate(client, message.into_bytes())?;
        return Ok(());
    }
    let scram = ScramMechanism::from_name(&mechanism).with_context(|| {
        format!("--sasl-mechanism {mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    })?;
    let nonce = secure_random_string(&mut OsRng::open()?);
    let mut exchange = ScramClient::new(scram, user, &password, &nonce);
    let server_first = authenticate(client, exchange.first_message())?;
    let last = exchange.final_message(&server_first)?;
    let server_final = authenticate(client, last)?;
    exchange.verify_server_final(&server_final)?;
    Ok(())
}

/// One SaslAuthenticate round trip: the server's message, or its error.
fn authenticate(client: &mut Client, message: Vec<u8>) -> anyhow::Result<Bytes> {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = Bytes::from(message);
    let answer = client.send(&request, 1)?;
    if answer.error_code != 0 {
        bail!(
            "{}: {}",
            error_name(answer.error_code),
            answer
                .error_message
                .as_deref()
                .unwrap_or("authentication failed")
        );
    }
    Ok(answer.auth_bytes)
}
