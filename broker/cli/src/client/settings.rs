//! How each connection of a [`super::Client`] is made, resolved once per command: the
//! security protocol (TLS or not, SASL or not), the rustls config, the SASL credentials and
//! the client id. The client properties (`-X`, `--command-config`) decide first; where they
//! say nothing, `--user`, `SLUICE_PASSWORD` and `--sasl-mechanism` do, as before them.
//!
//! `security.protocol` defaults to PLAINTEXT, or SASL_PLAINTEXT with `--user` (what the
//! flag always meant). Properties the protocol would not use are an error, not silently
//! dropped: `ssl.*` without SSL or SASL_SSL, `sasl.*` (or `--user`) without SASL.

use std::sync::Arc;

use anyhow::{Context, bail};
use kafka_protocol::protocol::StrBytes;
use rustls::ClientConfig;
use sluice_security::scram::ScramMechanism;

use super::{Login, PASSWORD_ENV};
use crate::properties::{ClientProperties, SaslProperties, SecurityProtocol};

/// The client id requests carry unless `client.id` says otherwise.
const DEFAULT_CLIENT_ID: &str = "sluice-cli";

/// How every connection of a client is made.
#[derive(Debug)]
pub struct Settings {
    /// The TLS config, for SSL and SASL_SSL.
    pub tls: Option<Arc<ClientConfig>>,
    /// The SASL login, for SASL_PLAINTEXT and SASL_SSL.
    pub login: Option<Credentials>,
    /// `client.id`, in every request header.
    pub client_id: StrBytes,
}

/// A SASL mechanism the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    fn parse(name: &str) -> Option<Self> {
        let name = name.trim().to_ascii_uppercase();
        if name == "PLAIN" {
            return Some(Self::Plain);
        }
        ScramMechanism::from_name(&name).map(Self::Scram)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(scram) => scram.name(),
        }
    }
}

/// Who logs in, and how.
#[derive(Clone)]
pub struct Credentials {
    pub mechanism: Mechanism,
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The settings of `props`, falling back to `login` (the flags and their variables).
    pub fn resolve(props: &ClientProperties, login: &Login) -> anyhow::Result<Self> {
        let flag_user = login.user.clone().filter(|u| !u.is_empty());
        let (protocol, said) = match props.security_protocol() {
            Some((protocol, entry)) => {
                (protocol, format!("{} ({})", protocol.name(), entry.origin))
            }
            None if flag_user.is_some() => (
                SecurityProtocol::SaslPlaintext,
                "SASL_PLAINTEXT (the default with --user)".to_owned(),
            ),
            None => (
                SecurityProtocol::Plaintext,
                "PLAINTEXT (the default)".to_owned(),
            ),
        };
        check_consistent(props, protocol, &said, flag_user.as_deref())?;
        let tls = if protocol.tls() {
            Some(crate::tls::client_config(&props.tls()?, None)?)
        } else {
            None
        };
        let login = if protocol.sasl() {
            Some(credentials(props.sasl()?, login, flag_user, &said)?)
        } else {
            None
        };
        let client_id = props.client_id().unwrap_or(DEFAULT_CLIENT_ID).to_owned();
        Ok(Self {
            tls,
            login,
            client_id: StrBytes::from_string(client_id),
        })
    }
}

/// Refuses properties (and `--user`) the protocol would not use.
fn check_consistent(
    props: &ClientProperties,
    protocol: SecurityProtocol,
    said: &str,
    flag_user: Option<&str>,
) -> anyhow::Result<()> {
    if let Some(entry) = props.first_with_prefix("ssl.").filter(|_| !protocol.tls()) {
        bail!(
            "{} is set, but security.protocol is {said}: set security.protocol=SSL or SASL_SSL",
            entry.describe()
        );
    }
    if protocol.sasl() {
        return Ok(());
    }
    if let Some(entry) = props.first_with_prefix("sasl.") {
        bail!(
            "{} is set, but security.protocol is {said}: set security.protocol=SASL_SSL or SASL_PLAINTEXT",
            entry.describe()
        );
    }
    if let Some(user) = flag_user {
        bail!(
            "--user {user} (or SLUICE_USER) logs in with SASL, but security.protocol is {said}: set security.protocol=SASL_SSL or SASL_PLAINTEXT, or drop --user"
        );
    }
    Ok(())
}

/// The SASL login: the properties' user, password and mechanism, else the flags'.
fn credentials(
    sasl: SaslProperties,
    login: &Login,
    flag_user: Option<String>,
    said: &str,
) -> anyhow::Result<Credentials> {
    let Some(user) = sasl.username.or(flag_user) else {
        bail!(
            "security.protocol is {said}, which logs in: give the user with sasl.username or sasl.jaas.config (or --user)"
        );
    };
    let password = match sasl.password {
        Some(password) => password,
        None => std::env::var(PASSWORD_ENV).map_err(|_| {
            anyhow::anyhow!(
                "user {user} needs a password: put it in {PASSWORD_ENV}, or give sasl.password or sasl.jaas.config (in --command-config: -X shows in `ps`)"
            )
        })?,
    };
    let mechanism = match &sasl.mechanism {
        Some(name) => Mechanism::parse(name),
        None => Mechanism::parse(&login.sasl_mechanism),
    };
    let mechanism = mechanism.with_context(|| {
        format!(
            "--sasl-mechanism {}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
            login.sasl_mechanism
        )
    })?;
    Ok(Credentials {
        mechanism,
        user,
        password,
    })
}

#[cfg(test)]
mod tests {
    use super::{Login, Mechanism, Settings};
    use crate::properties::ClientProperties;
    use sluice_security::scram::ScramMechanism;

    fn resolve(x: &[&str], user: Option<&str>, mechanism: &str) -> anyhow::Result<Settings> {
        let flags: Vec<String> = x.iter().map(|f| (*f).to_owned()).collect();
        let (props, _) = ClientProperties::parse(&flags, None)?;
        let login = Login {
            user: user.map(str::to_owned),
            sasl_mechanism: mechanism.to_owned(),
        };
        Settings::resolve(&props, &login)
    }

    fn error(x: &[&str], user: Option<&str>) -> String {
        format!("{:#}", resolve(x, user, "SCRAM-SHA-256").unwrap_err())
    }

    #[test]
    fn without_properties_it_is_plaintext_as_before() {
        let plain = resolve(&[], None, "SCRAM-SHA-256").unwrap();
        assert!(plain.tls.is_none() && plain.login.is_none());
        assert_eq!(plain.client_id.as_str(), "sluice-cli");
        // --user alone means SASL_PLAINTEXT; the properties may give the password.
        let user = resolve(&["sasl.password=pw"], Some("alice"), "plain").unwrap();
        let login = user.login.unwrap();
        assert!(user.tls.is_none());
        assert_eq!(
            (login.user.as_str(), login.password.as_str()),
            ("alice", "pw")
        );
        assert_eq!(login.mechanism, Mechanism::Plain);
    }

    #[test]
    fn properties_win_over_the_flags() {
        let x = [
            "security.protocol=SASL_PLAINTEXT",
            "sasl.username=bob",
            "sasl.password=pw",
            "sasl.mechanism=SCRAM-SHA-512",
            "client.id=ops",
        ];
        let settings = resolve(&x, Some("alice"), "PLAIN").unwrap();
        let login = settings.login.unwrap();
        assert_eq!(login.user, "bob");
        assert_eq!(login.mechanism, Mechanism::Scram(ScramMechanism::Sha512));
        assert_eq!(settings.client_id.as_str(), "ops");
        assert!(!format!("{login:?}").contains("pw"));
    }

    #[test]
    fn properties_the_protocol_would_not_use_are_errors() {
        let err = error(&["ssl.ca.location=/ca.pem"], None);
        assert!(
            err.contains("PLAINTEXT (the default)") && err.contains("SSL"),
            "{err}"
        );
        let err = error(&["ssl.ca.location=/ca.pem"], Some("alice"));
        assert!(
            err.contains("SASL_PLAINTEXT (the default with --user)"),
            "{err}"
        );
        let err = error(&["security.protocol=SSL"], Some("alice"));
        assert!(
            err.contains("--user alice") && err.contains("SSL (from -X)"),
            "{err}"
        );
        let err = error(&["sasl.username=bob"], None);
        assert!(
            err.contains("sasl.username=bob (from -X)") && err.contains("SASL_SSL"),
            "{err}"
        );
        let err = error(&["security.protocol=SASL_PLAINTEXT"], None);
        assert!(err.contains("sasl.username"), "{err}");
    }

    #[test]
    fn a_bad_mechanism_flag_is_an_error() {
        let err = format!(
            "{:#}",
            resolve(&["sasl.password=pw"], Some("alice"), "GSSAPI").unwrap_err()
        );
        assert!(err.contains("--sasl-mechanism GSSAPI"), "{err}");
    }
}
