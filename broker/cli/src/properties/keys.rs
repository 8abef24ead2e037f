//! The table of client property keys: each key Sluice knows (Kafka's and librdkafka's names)
//! with what it is to Sluice (used, with its value check; ignored with a warning that says
//! why; refused with the reason and what to do instead), and the check of one property
//! against it. Value checks never quote a secret.

use anyhow::{anyhow, bail};

use super::{Entry, SecurityProtocol, jaas};

/// What a key is to Sluice.
#[derive(Clone, Copy)]
pub(super) enum Use {
    /// Read; the function checks a value (its error never quotes a secret).
    Used(fn(&str) -> Result<(), String>),
    /// Read, and the value is a secret: never printed.
    Secret(fn(&str) -> Result<(), String>),
    /// Accepted with a warning that says why it changes nothing.
    Ignored(&'static str),
    /// Refused, saying why and what to do instead.
    Refused(&'static str),
}

/// One row of the key table.
pub(super) struct Key {
    pub(super) name: &'static str,
    pub(super) used: Use,
}

const fn key(name: &'static str, used: Use) -> Key {
    Key { name, used }
}

const TUNING: &str = "client tuning: sluice sends one request at a time, each with a 30 s timeout";
const TLS_DEFAULTS: &str = "sluice negotiates TLS 1.3 or 1.2 with rustls's safe default protocol versions and cipher suites";
const JVM_ONLY: &str = "a JVM setting with no meaning here";
const INLINE_PEM: &str =
    "PEM in a property value is not supported: write it to a file and give the file's location";

/// Every key Sluice knows, Kafka's and librdkafka's names.
pub(super) const KEYS: &[Key] = &[
    key("security.protocol", Use::Used(check_protocol)),
    key("ssl.ca.location", Use::Used(check_path)),
    key("ssl.truststore.location", Use::Used(check_path)),
    key("ssl.truststore.type", Use::Used(check_truststore_type)),
    key(
        "ssl.truststore.password",
        Use::Secret(check_no_truststore_password),
    ),
    key("ssl.certificate.location", Use::Used(check_path)),
    key("ssl.key.location", Use::Used(check_path)),
    key("ssl.key.password", Use::Secret(check_any)),
    key("ssl.keystore.location", Use::Used(check_path)),
    key("ssl.keystore.type", Use::Used(check_keystore_type)),
    key(
        "ssl.keystore.password",
        Use::Secret(check_no_keystore_password),
    ),
    key(
        "ssl.endpoint.identification.algorithm",
        Use::Used(check_endpoint_identification),
    ),
    key("sasl.mechanism", Use::Used(check_mechanism)),
    key("sasl.mechanisms", Use::Used(check_mechanism)),
    key("sasl.username", Use::Used(check_not_empty)),
    key("sasl.password", Use::Secret(check_any)),
    key("sasl.jaas.config", Use::Secret(check_jaas)),
    key("client.id", Use::Used(check_any)),
    key("api.version.request", Use::Ignored(TUNING)),
    key("client.dns.lookup", Use::Ignored(TUNING)),
    key("connections.max.idle.ms", Use::Ignored(TUNING)),
    key("default.api.timeout.ms", Use::Ignored(TUNING)),
    key("metadata.max.age.ms", Use::Ignored(TUNING)),
    key("reconnect.backoff.max.ms", Use::Ignored(TUNING)),
    key("reconnect.backoff.ms", Use::Ignored(TUNING)),
    key("request.timeout.ms", Use::Ignored(TUNING)),
    key("retries", Use::Ignored(TUNING)),
    key("retry.backoff.max.ms", Use::Ignored(TUNING)),
    key("retry.backoff.ms", Use::Ignored(TUNING)),
    key(
        "socket.connection.setup.timeout.max.ms",
        Use::Ignored(TUNING),
    ),
    key("socket.connection.setup.timeout.ms", Use::Ignored(TUNING)),
    key("socket.keepalive.enable", Use::Ignored(TUNING)),
    key("socket.timeout.ms", Use::Ignored(TUNING)),
    key("ssl.protocol", Use::Ignored(TLS_DEFAULTS)),
    key("ssl.enabled.protocols", Use::Ignored(TLS_DEFAULTS)),
    key("ssl.cipher.suites", Use::Ignored(TLS_DEFAULTS)),
    key("ssl.keymanager.algorithm", Use::Ignored(JVM_ONLY)),
    key("ssl.trustmanager.algorithm", Use::Ignored(JVM_ONLY)),
    key("ssl.secure.random.implementation", Use::Ignored(JVM_ONLY)),
    key(
        "bootstrap.servers",
        Use::Refused("give the brokers with --brokers (or SLUICE_BROKERS)"),
    ),
    key(
        "metadata.broker.list",
        Use::Refused("give the brokers with --brokers (or SLUICE_BROKERS)"),
    ),
    key(
        "enable.ssl.certificate.verification",
        Use::Refused(
            "sluice always checks the broker's certificate chain; ssl.endpoint.identification.algorithm= (empty) skips only the host name check",
        ),
    ),
    key("ssl.truststore.certificates", Use::Refused(INLINE_PEM)),
    key("ssl.keystore.certificate.chain", Use::Refused(INLINE_PEM)),
    key("ssl.keystore.key", Use::Refused(INLINE_PEM)),
    key("ssl.ca.pem", Use::Refused(INLINE_PEM)),
    key("ssl.certificate.pem", Use::Refused(INLINE_PEM)),
    key("ssl.key.pem", Use::Refused(INLINE_PEM)),
];

fn find_key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

pub(super) fn is_secret(name: &str) -> bool {
    find_key(name).is_none_or(|k| matches!(k.used, Use::Secret(_)))
}

fn check_any(_: &str) -> Result<(), String> {
    Ok(())
}

fn check_not_empty(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("is empty".into());
    }
    Ok(())
}

fn check_path(value: &str) -> Result<(), String> {
    check_not_empty(value).map_err(|_| "is empty: expected the path of a PEM file".into())
}

fn check_protocol(value: &str) -> Result<(), String> {
    SecurityProtocol::parse(value).map(drop)
}

fn check_truststore_type(value: &str) -> Result<(), String> {
    check_pem_type(
        value,
        "export the CA certificates as PEM (`keytool -exportcert -rfc -keystore FILE -alias CA`, or `openssl pkcs12 -in FILE -nokeys`) and set ssl.truststore.type=PEM",
    )
}

fn check_keystore_type(value: &str) -> Result<(), String> {
    check_pem_type(
        value,
        "convert it to one PEM file with the private key and the certificate chain (`openssl pkcs12 -in FILE -nodes`) and set ssl.keystore.type=PEM",
    )
}

fn check_pem_type(value: &str, how: &str) -> Result<(), String> {
    if value.eq_ignore_ascii_case("PEM") {
        return Ok(());
    }
    Err(format!("sluice reads PEM files only: {how}"))
}

fn check_no_truststore_password(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    Err(
        "a PEM truststore has no password (Kafka's clients refuse one for PEM too): remove it"
            .into(),
    )
}

fn check_no_keystore_password(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    Err("a PEM keystore has no store password (Kafka's clients refuse one for PEM too); an encrypted key's password is ssl.key.password".into())
}

fn check_endpoint_identification(value: &str) -> Result<(), String> {
    endpoint_identification(value).map(drop)
}

/// `ssl.endpoint.identification.algorithm`: true to check the host name (`https`), false not
/// to (empty, or librdkafka's `none`).
pub(super) fn endpoint_identification(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "https" => Ok(true),
        "" | "none" => Ok(false),
        _ => Err("expected https (check the host name) or empty (don't)".into()),
    }
}

fn check_mechanism(value: &str) -> Result<(), String> {
    match value.to_ascii_uppercase().as_str() {
        "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => Ok(()),
        _ => Err("sluice logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512".into()),
    }
}

fn check_jaas(value: &str) -> Result<(), String> {
    jaas::parse(value).map(drop)
}

/// Checks one property: `Ok(Some(warning))` for an ignored key, an error for a refused or
/// unknown key or a bad value.
pub(super) fn check(entry: &Entry) -> anyhow::Result<Option<String>> {
    let Some(known) = find_key(&entry.key) else {
        bail!(
            "unknown client property {} ({}): sluice takes security.protocol, the ssl.* and sasl.* keys of docs/security.md and client.id",
            entry.key,
            entry.origin
        );
    };
    match known.used {
        Use::Used(check) | Use::Secret(check) => check(&entry.value)
            .map(|()| None)
            .map_err(|why| anyhow!("{}: {why}", entry.describe())),
        Use::Ignored(why) => Ok(Some(format!("{} is ignored: {why}", entry.describe()))),
        Use::Refused(why) => bail!("{}: not supported: {why}", entry.describe()),
    }
}
