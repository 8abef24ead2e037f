//! Logging a connection in over SASL (SaslHandshake v1, then SaslAuthenticate v1), as a
//! Kafka client does: PLAIN in one message, SCRAM-SHA-256/512 in two with the server's
//! signature checked (`sluice_security::scram::ScramClient`). Over SASL_SSL it runs on the
//! TLS stream like any other request.

use anyhow::bail;
use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use sluice_security::rng::secure_random_string;
use sluice_security::scram::ScramClient;
use sluice_server::random::OsRng;

use super::settings::{Credentials, Mechanism};
use super::{Client, error_name};

/// Logs `client`'s fresh connection in with `login`.
pub fn log_in(client: &mut Client, login: &Credentials) -> anyhow::Result<()> {
    let mechanism = login.mechanism.name();
    let mut handshake = SaslHandshakeRequest::default();
    handshake.mechanism = StrBytes::from_static_str(mechanism);
    let answer = client.send(&handshake, 1)?;
    if answer.error_code != 0 {
        let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
        bail!(
            "the broker refused SASL mechanism {mechanism} ({}); it offers: {}",
            error_name(answer.error_code),
            offered.join(", ")
        );
    }
    let scram = match login.mechanism {
        Mechanism::Plain => {
            let message = format!("\0{}\0{}", login.user, login.password);
            authenticate(client, message.into_bytes())?;
            return Ok(());
        }
        Mechanism::Scram(scram) => scram,
    };
    let nonce = secure_random_string(&mut OsRng);
    let mut exchange = ScramClient::new(scram, &login.user, &login.password, &nonce);
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
