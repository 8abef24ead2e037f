//! The SCRAM server against the RFC 7677 SCRAM-SHA-256 example (user `user`, password
//! `pencil`, the RFC's nonces injected), against a SCRAM-SHA-512 exchange captured from
//! kafka-python 2.2.15's `ScramClient` (golden bytes), and against a small SCRAM client
//! written here for round trips with both mechanisms, wrong passwords and malformed steps.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sluice_security::principal::KafkaPrincipal;
use sluice_security::rng::SplitMix64;
use sluice_security::sasl::SaslError;
use sluice_security::scram::{
    CredentialLookup, ScramCredential, ScramMechanism, ScramServer, TokenLogin,
};
use sluice_security::tokens::{self, CreateToken, DelegationToken, TokenConfig};

const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> ScramCredential {
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    ScramCredential::derive(ScramMechanism::Sha256, "pencil", &salt, 4096).unwrap()
}

fn rfc_lookup(user: &str, m: ScramMechanism) -> Option<ScramCredential> {
    (user == "user" && m == ScramMechanism::Sha256).then(rfc_credential)
}

#[test]
fn rfc7677_example_exchange() {
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let first = server
        .receive_client_first(RFC_CLIENT_FIRST.as_bytes(), RFC_SERVER_NONCE, &rfc_lookup)
        .unwrap();
    assert_eq!(String::from_utf8(first).unwrap(), RFC_SERVER_FIRST);
    let last = server
        .receive_client_final(RFC_CLIENT_FINAL.as_bytes())
        .unwrap();
    assert_eq!(String::from_utf8(last).unwrap(), RFC_SERVER_FINAL);
    assert!(server.is_complete());
    assert_eq!(server.authorization_id(), Some("user"));
    let again = server
        .receive_client_final(RFC_CLIENT_FINAL.as_bytes())
        .unwrap_err();
    assert_eq!(again, SaslError::IllegalState { state: "COMPLETE" });
    assert_eq!(again.error_code(), 34);
}

#[test]
fn rfc7677_with_a_changed_proof_fails() {
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    server
        .receive_client_first(RFC_CLIENT_FIRST.as_bytes(), RFC_SERVER_NONCE, &rfc_lookup)
        .unwrap();
    let bad = RFC_CLIENT_FINAL.replace("p=dH", "p=dI");
    let err = server.receive_client_final(bad.as_bytes()).unwrap_err();
    assert!(
        matches!(&err, SaslError::Failed { reason, .. } if reason == "Invalid client credentials"),
        "{err}"
    );
    assert_eq!(err.error_code(), 58);
    assert!(!server.is_complete());
    assert_eq!(
        server.receive_client_final(RFC_CLIENT_FINAL.as_bytes()),
        Err(SaslError::IllegalState { state: "FAILED" })
    );
}

/// kafka-python 2.2.15's `kafka.sasl.scram.ScramClient('alice', 'golden-pw',
/// 'SCRAM-SHA-512')` with its nonce set to `kafkapythonclientnonce0123456789`, given the
/// server-first message below: its two messages and the server-final it accepts.
const KP_CLIENT_FIRST: &str = "n,,n=alice,r=kafkapythonclientnonce0123456789";
const KP_SERVER_FIRST: &str =
    "r=kafkapythonclientnonce0123456789servernonce,s=c2x1aWNlLWdvbGRlbi1zYWx0,i=4096";
const KP_CLIENT_FINAL: &str = "c=biws,r=kafkapythonclientnonce0123456789servernonce,p=M3G91+0d4Wpk27cZzRAOK1i/2NS8z+WGLJXirlxkVqyi9nIPNtO0d17Rkw8TIKEqRi1LYwG9Flxetgv5wUHhmg==";
const KP_SERVER_FINAL: &str =
    "v=DgsrMkoBpRr7jC9/H0OLi5zCHXdEe/aBbY/Vpj/a8ZJPntc8h8+V97IrU7dOIUcYewoeyMtkcc+dEdKBcY28zg==";

#[test]
fn kafka_python_sha512_exchange() {
    let m = ScramMechanism::Sha512;
    let stored = ScramCredential::derive(m, "golden-pw", b"sluice-golden-salt", 4096).unwrap();
    let lookup =
        |u: &str, mech: ScramMechanism| (u == "alice" && mech == m).then(|| stored.clone());
    let mut server = ScramServer::new(m);
    let first = server
        .receive_client_first(KP_CLIENT_FIRST.as_bytes(), "servernonce", &lookup)
        .unwrap();
    assert_eq!(String::from_utf8(first).unwrap(), KP_SERVER_FIRST);
    let last = server
        .receive_client_final(KP_CLIENT_FINAL.as_bytes())
        .unwrap();
    assert_eq!(String::from_utf8(last).unwrap(), KP_SERVER_FINAL);
    assert_eq!(server.authorization_id(), Some("alice"));
    let mut wrong_pw = ScramServer::new(m);
    let other = ScramCredential::derive(m, "golden-pw!", b"sluice-golden-salt", 4096).unwrap();
    let lookup = |_: &str, _: ScramMechanism| Some(other.clone());
    wrong_pw
        .receive_client_first(KP_CLIENT_FIRST.as_bytes(), "servernonce", &lookup)
        .unwrap();
    assert!(
        wrong_pw
            .receive_client_final(KP_CLIENT_FINAL.as_bytes())
            .is_err()
    );
}

/// A SCRAM client, as a Kafka client computes it (RFC 5802 section 3).
struct Client {
    mechanism: ScramMechanism,
    password: String,
    first_bare: String,
    nonce: String,
}

impl Client {
    fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> (Self, String) {
        let first_bare = format!("n={},r={nonce}", sluice_security::scram::sasl_name(user));
        let client = Self {
            mechanism,
            password: password.into(),
            first_bare: first_bare.clone(),
            nonce: nonce.into(),
        };
        (client, format!("n,,{first_bare}"))
    }

    /// The client-final-message, and the server signature it expects.
    fn respond(&self, server_first: &str) -> (String, String) {
        self.respond_echoing(server_first, |nonce| nonce.to_owned())
    }

    /// `respond`, echoing `echo(server nonce)` as the final message's nonce.
    fn respond_echoing(
        &self,
        server_first: &str,
        echo: impl Fn(&str) -> String,
    ) -> (String, String) {
        let mut fields = server_first.split(',');
        let nonce = fields.next().unwrap().strip_prefix("r=").unwrap();
        assert!(
            nonce.starts_with(&self.nonce),
            "server nonce must extend ours"
        );
        let salt = STANDARD
            .decode(fields.next().unwrap().strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = fields
            .next()
            .unwrap()
            .strip_prefix("i=")
            .unwrap()
            .parse()
            .unwrap();
        let m = self.mechanism;
        let salted = m.hi(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={}", echo(nonce));
        let auth = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = m.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_signature = m.hmac(&m.hmac(&salted, b"Server Key"), auth.as_bytes());
        (
            format!("{without_proof},p={}", STANDARD.encode(proof)),
            format!("v={}", STANDARD.encode(server_signature)),
        )
    }
}

fn exchange(
    mechanism: ScramMechanism,
    user: &str,
    password: &str,
    stored: &ScramCredential,
) -> Result<String, SaslError> {
    let lookup =
        |u: &str, m: ScramMechanism| (u == user && m == stored.mechanism).then(|| stored.clone());
    let mut rng = SplitMix64::new(42);
    let mut server = ScramServer::new(mechanism);
    let (client, first) = Client::new(mechanism, user, password, "fyko+d2lbbFgONRv9qkxdawL");
    let server_first = server.evaluate(first.as_bytes(), &mut rng, &lookup)?;
    let (last, want_signature) = client.respond(std::str::from_utf8(&server_first).unwrap());
    let server_final = server.evaluate(last.as_bytes(), &mut rng, &lookup)?;
    assert_eq!(
        String::from_utf8(server_final).unwrap(),
        want_signature,
        "the client verifies the server"
    );
    Ok(server.authorization_id().unwrap().to_owned())
}

#[test]
fn sha512_and_sha256_round_trips() {
    for m in ScramMechanism::ALL {
        let stored = ScramCredential::generate(m, "s3cr3t", 4096, &mut SplitMix64::new(9)).unwrap();
        assert_eq!(
            exchange(m, "alice", "s3cr3t", &stored),
            Ok("alice".into()),
            "{m}"
        );
        let wrong = exchange(m, "alice", "s3cr3T", &stored).unwrap_err();
        assert_eq!(
            wrong.client_message(false),
            format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {m}"
            )
        );
    }
}

#[test]
fn escaped_user_names_round_trip() {
    let stored =
        ScramCredential::generate(ScramMechanism::Sha512, "pw", 4096, &mut SplitMix64::new(1))
            .unwrap();
    assert_eq!(
        exchange(ScramMechanism::Sha512, "a,b=c", "pw", &stored),
        Ok("a,b=c".into())
    );
}

#[test]
fn a_credential_of_the_other_mechanism_is_not_used() {
    let stored =
        ScramCredential::generate(ScramMechanism::Sha256, "pw", 4096, &mut SplitMix64::new(1))
            .unwrap();
    let err = exchange(ScramMechanism::Sha512, "alice", "pw", &stored).unwrap_err();
    assert!(matches!(err, SaslError::Failed { .. }), "{err}");
}

#[test]
fn server_nonce_is_kafkas_shape_and_comes_from_the_rng() {
    let run = |seed| {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        let reply = server
            .evaluate(
                RFC_CLIENT_FIRST.as_bytes(),
                &mut SplitMix64::new(seed),
                &rfc_lookup,
            )
            .unwrap();
        String::from_utf8(reply).unwrap()
    };
    let reply = run(5);
    assert_eq!(reply, run(5));
    assert_ne!(reply, run(6));
    let nonce = reply
        .split(',')
        .next()
        .unwrap()
        .strip_prefix("r=rOprNGfwEbeRWgbNEkqO")
        .unwrap();
    assert!(!nonce.is_empty() && nonce.len() <= 26);
    assert!(
        nonce
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()),
        "{nonce}"
    );
}

fn first_step_error(message: &str) -> SaslError {
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    server
        .receive_client_first(message.as_bytes(), "srv", &rfc_lookup)
        .unwrap_err()
}

#[test]
fn client_first_failures_are_kafkas() {
    let refused = first_step_error("n,a=admin,n=user,r=abc");
    assert_eq!(
        refused.client_message(false),
        "Authentication failed: Client requested an authorization id that is different from username"
    );
    for msg in [
        "n,,n=nobody,r=abc",
        "n,,n=user,r=abc,tokenauth=true", // no tokens: an invalid token id
        "y,,n=user,r=abc",
        "garbage",
    ] {
        let err = first_step_error(msg);
        assert!(matches!(err, SaslError::Failed { .. }), "{msg}: {err}");
        assert!(!err.client_message(false).contains("nobody"));
    }
    assert!(
        ScramServer::new(ScramMechanism::Sha256)
            .receive_client_first(b"n,a=user,n=user,r=abc", "srv", &rfc_lookup)
            .is_ok()
    );
}

#[test]
fn client_final_must_echo_nonce_and_gs2_header() {
    for bad in [
        RFC_CLIENT_FINAL.replace("r=rOpr", "r=xOpr"),
        RFC_CLIENT_FINAL.replace("c=biws", "c=eSws"),
        RFC_CLIENT_FINAL.replace(",p=", ",x=1,p="),
        "c=biws".to_owned(),
    ] {
        let mut server = ScramServer::new(ScramMechanism::Sha256);
        server
            .receive_client_first(RFC_CLIENT_FIRST.as_bytes(), RFC_SERVER_NONCE, &rfc_lookup)
            .unwrap();
        let err = server.receive_client_final(bad.as_bytes()).unwrap_err();
        assert!(matches!(err, SaslError::Failed { .. }), "{bad}: {err}");
    }
}

#[test]
fn a_stored_credential_below_the_minimum_iterations_fails() {
    let mut weak = rfc_credential();
    weak.iterations = 1024;
    let lookup = move |_: &str, _: ScramMechanism| Some(weak.clone());
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    let err = server
        .receive_client_first(RFC_CLIENT_FIRST.as_bytes(), "srv", &lookup)
        .unwrap_err();
    assert!(
        err.to_string().contains("less than the minimum 4096"),
        "{err}"
    );
}

/// librdkafka before 2.6.1 echoes `<client nonce><client nonce><server nonce>`
/// (librdkafka#4895): accepted, as Kafka 3.8.1+ does; a nonce without the server's part, or
/// with anything else before it, is not.
#[test]
fn librdkafkas_doubled_client_nonce_is_accepted_and_nothing_looser() {
    let m = ScramMechanism::Sha256;
    let stored = ScramCredential::generate(m, "pw", 4096, &mut SplitMix64::new(5)).unwrap();
    let lookup = |_: &str, _: ScramMechanism| Some(stored.clone());
    let cnonce = "6P|p1sPALzLoLo-4ZueV^^cG8fkJ<`f_";
    let attempt = |echo: &dyn Fn(&str) -> String| {
        let mut server = ScramServer::new(m);
        let (client, first) = Client::new(m, "alice", "pw", cnonce);
        let server_first = server
            .evaluate(first.as_bytes(), &mut SplitMix64::new(1), &lookup)
            .unwrap();
        let (last, _) = client.respond_echoing(std::str::from_utf8(&server_first).unwrap(), echo);
        server.evaluate(last.as_bytes(), &mut SplitMix64::new(1), &lookup)
    };
    assert!(attempt(&|n: &str| n.to_owned()).is_ok());
    assert!(
        attempt(&|n: &str| format!("{cnonce}{n}")).is_ok(),
        "librdkafka < 2.6.1"
    );
    assert!(
        attempt(&|_: &str| cnonce.to_owned()).is_err(),
        "the server nonce is required"
    );
    assert!(
        attempt(&|n: &str| format!("{}{n}", "x".repeat(cnonce.len()))).is_err(),
        "only the client's own nonce may come first"
    );
}

/// The crate's own client (what `sluice` logs in with) against the server, both mechanisms;
/// a wrong password fails at the server, and a server that does not know the password is
/// caught by the client.
#[test]
fn the_scram_client_round_trips_and_checks_the_server() {
    use sluice_security::scram::ScramClient;
    for m in ScramMechanism::ALL {
        let stored = ScramCredential::generate(m, "pw", 4096, &mut SplitMix64::new(3)).unwrap();
        let lookup = |_: &str, _: ScramMechanism| Some(stored.clone());
        let mut rng = SplitMix64::new(8);
        let mut server = ScramServer::new(m);
        let mut client = ScramClient::new(m, "alice", "pw", "clientnonce123");
        let server_first = server
            .evaluate(&client.first_message(), &mut rng, &lookup)
            .unwrap();
        let last = client.final_message(&server_first).unwrap();
        let server_final = server.evaluate(&last, &mut rng, &lookup).unwrap();
        assert_eq!(client.verify_server_final(&server_final), Ok(()), "{m}");
        assert_eq!(server.authorization_id(), Some("alice"));

        let mut server = ScramServer::new(m);
        let mut wrong = ScramClient::new(m, "alice", "not-pw", "clientnonce123");
        let server_first = server
            .evaluate(&wrong.first_message(), &mut rng, &lookup)
            .unwrap();
        let last = wrong.final_message(&server_first).unwrap();
        assert!(server.evaluate(&last, &mut rng, &lookup).is_err());
        // A server signature made with another password is refused by the client.
        assert!(wrong.verify_server_final(&server_final).is_err());
    }
}

/// A lookup that knows users and delegation tokens, as the broker's does.
struct WithTokens {
    config: TokenConfig,
    token: DelegationToken,
    now_ms: i64,
}

impl CredentialLookup for WithTokens {
    fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        rfc_lookup(user, m)
    }

    fn token_credential(&self, token_id: &str, m: ScramMechanism) -> Option<TokenLogin> {
        (token_id == self.token.token_id && !self.token.expired(self.now_ms)).then(|| TokenLogin {
            credential: self.config.scram_credential(token_id, m),
            owner: self.token.owner.name.clone(),
            expiry_ms: self.token.expiry_ms,
        })
    }
}

/// A `tokenauth=true` exchange with `password`; the authorization id on success.
fn token_exchange(lookup: &WithTokens, password: &str) -> Result<(String, Option<i64>), SaslError> {
    let m = ScramMechanism::Sha512;
    let (mut client, _) = Client::new(m, &lookup.token.token_id, password, "tokennonce");
    client.first_bare.push_str(",tokenauth=true");
    let first = format!("n,,{}", client.first_bare);
    let mut server = ScramServer::new(m);
    let mut rng = SplitMix64::new(3);
    let server_first = server.evaluate(first.as_bytes(), &mut rng, lookup)?;
    let (last, want) = client.respond(std::str::from_utf8(&server_first).unwrap());
    let server_final = server.evaluate(last.as_bytes(), &mut rng, lookup)?;
    assert_eq!(String::from_utf8(server_final).unwrap(), want);
    Ok((
        server.authorization_id().unwrap().to_owned(),
        server.token_expiry_ms(),
    ))
}

#[test]
fn a_delegation_token_logs_in_as_its_owner_until_it_expires() {
    let config = TokenConfig::new("secret", 7 * 86_400_000, 86_400_000);
    let request = CreateToken {
        owner: KafkaPrincipal::user("alice"),
        requester: KafkaPrincipal::user("alice"),
        renewers: Vec::new(),
        max_lifetime_ms: 0,
    };
    let token = tokens::create(&config, request, 0, 1_000, &mut SplitMix64::new(5)).unwrap();
    let password = STANDARD.encode(config.hmac(&token.token_id));
    let mut lookup = WithTokens {
        config,
        token,
        now_ms: 2_000,
    };
    let expiry = lookup.token.expiry_ms;
    assert_eq!(
        token_exchange(&lookup, &password),
        Ok(("alice".into(), Some(expiry)))
    );
    assert!(token_exchange(&lookup, "not-the-hmac").is_err());
    // The same id without tokenauth is a user name nobody has.
    let (user_client, first) = Client::new(
        ScramMechanism::Sha512,
        &lookup.token.token_id,
        &password,
        "n",
    );
    drop(user_client);
    let mut server = ScramServer::new(ScramMechanism::Sha512);
    assert!(
        server
            .evaluate(first.as_bytes(), &mut SplitMix64::new(1), &lookup)
            .is_err()
    );
    // An expired token no longer authenticates.
    lookup.now_ms = expiry + 1;
    let err = token_exchange(&lookup, &password).unwrap_err();
    assert!(err.to_string().contains("Invalid tokenId"), "{err}");
}
