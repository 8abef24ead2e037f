//! Authentication and authorization, with Kafka's keys: `sasl.enabled.mechanisms`,
//! `connections.max.reauth.ms` (KIP-368), `connection.failed.authentication.delay.ms`,
//! `super.users` and
//! `allow.everyone.if.no.acl.found` (whose default depends on the listeners: true while every
//! listener is PLAINTEXT, false once any is SSL or SASL, so securing a listener never leaves
//! the broker open by omission): their value types, text forms and the checks across them
//! (the keys themselves are in `keys.rs`).

use sluice_security::plain::PLAIN_MECHANISM;
use sluice_security::principal::SuperUsers;
use sluice_security::scram::ScramMechanism;

use super::{BrokerConfig, SecurityProtocol};
use crate::error::ConfigError;

/// A SASL mechanism this broker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    /// RFC 4616: the password in the clear (over TLS, or on a trusted network).
    Plain,
    /// RFC 5802/7677, with SHA-256 or SHA-512.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// Every mechanism, in the order `sasl.enabled.mechanisms` lists them by default.
    pub const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Scram(ScramMechanism::Sha256),
        SaslMechanism::Scram(ScramMechanism::Sha512),
        SaslMechanism::Plain,
    ];

    /// Kafka's name of the mechanism (what SaslHandshake carries).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Plain => PLAIN_MECHANISM,
            Self::Scram(m) => m.name(),
        }
    }

    /// The mechanism named `name` (case-sensitive, as Kafka compares).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// `sasl.enabled.mechanisms` by default: both SCRAM mechanisms. PLAIN sends the password
/// itself, so it is served only when named.
pub const SASL_ENABLED_MECHANISMS_DEFAULT: &[SaslMechanism] = &[
    SaslMechanism::Scram(ScramMechanism::Sha256),
    SaslMechanism::Scram(ScramMechanism::Sha512),
];

/// The longest `connection.failed.authentication.delay.ms`: the delay holds the connection
/// (and its `max.connections.per.ip` slot) open, so it must stay well under the idle timeout.
pub const FAILED_AUTHENTICATION_DELAY_MS_MAX: u64 = 10_000;

/// `sasl.enabled.mechanisms`: Kafka's names, comma-separated; each once.
pub(super) fn parse_mechanisms(value: &str) -> Result<Vec<SaslMechanism>, String> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let mechanism = SaslMechanism::from_name(name).ok_or_else(|| {
            format!("{name:?} is not a mechanism this broker serves (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
        })?;
        if !out.contains(&mechanism) {
            out.push(mechanism);
        }
    }
    Ok(out)
}

/// One mechanism by Kafka's name.
pub(super) fn parse_mechanism(value: &str) -> Result<SaslMechanism, String> {
    SaslMechanism::from_name(value.trim()).ok_or_else(|| {
        format!("{value:?} is not a mechanism Sluice speaks (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    })
}

/// The `username` and `password` of a JAAS login module line (Kafka's `sasl.jaas.config`:
/// `org.apache.kafka.common.security.scram.ScramLoginModule required username="u"
/// password="p";`).
///
/// # Errors
/// Either option is missing or unquoted.
pub fn jaas_credentials(jaas: &str) -> Result<(String, String), String> {
    let option = |name: &str| -> Result<String, String> {
        let mut rest = jaas;
        while let Some(at) = rest.find(name) {
            let before = rest[..at].chars().next_back();
            let after = rest[at + name.len()..].trim_start();
            rest = &rest[at + name.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let Some(value) = after.strip_prefix('=') else {
                continue;
            };
            let value = value.trim_start();
            let quoted = value
                .strip_prefix('"')
                .and_then(|v| v.find('"').map(|end| v[..end].to_owned()));
            return quoted.ok_or_else(|| format!("sasl.jaas.config: {name} must be quoted"));
        }
        Err(format!("sasl.jaas.config has no {name}=\"...\""))
    };
    Ok((option("username")?, option("password")?))
}

/// The mechanisms in their text form.
pub(super) fn print_mechanisms(mechanisms: &[SaslMechanism]) -> String {
    let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
    names.join(",")
}

/// `connections.max.reauth.ms`: a plain number of milliseconds, 0 (off) or more.
pub(super) fn parse_reauth_ms(value: &str) -> Result<u64, String> {
    let ms = value
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("{value:?} is not a number of milliseconds"))?;
    u64::try_from(ms).map_err(|_| "must be 0 (off) or more".to_owned())
}

/// `connection.failed.authentication.delay.ms`: a plain number of milliseconds, at most
/// `FAILED_AUTHENTICATION_DELAY_MS_MAX`.
pub(super) fn parse_failed_authentication_delay_ms(value: &str) -> Result<u64, String> {
    let ms = value
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("{value:?} is not a number of milliseconds (0 or more)"))?;
    if ms > FAILED_AUTHENTICATION_DELAY_MS_MAX {
        return Err(format!(
            "at most {FAILED_AUTHENTICATION_DELAY_MS_MAX} ms (FAILED_AUTHENTICATION_DELAY_MS_MAX)"
        ));
    }
    Ok(ms)
}

/// `super.users`: `User:admin;User:ops`.
pub(super) fn parse_super_users(value: &str) -> Result<SuperUsers, String> {
    SuperUsers::parse(value).map_err(|e| e.to_string())
}

/// The super users in their text form.
pub(super) fn print_super_users(users: &SuperUsers) -> String {
    let names: Vec<String> = users.iter().map(ToString::to_string).collect();
    names.join(";")
}

impl BrokerConfig {
    /// Whether a resource no ACL names is open to everyone: the key's value, or by default
    /// true only while every listener is PLAINTEXT.
    pub fn allow_everyone_if_no_acl_found(&self) -> bool {
        self.allow_everyone_if_no_acl_found.unwrap_or_else(|| {
            self.listeners.iter().all(|l| {
                self.listener_protocol(&l.name)
                    .is_ok_and(|p| p == SecurityProtocol::Plaintext)
            })
        })
    }

    /// Cross-key checks of these keys: a SASL listener needs a mechanism to offer.
    pub(super) fn validate_security_keys(&self) -> Result<(), ConfigError> {
        if let Some(jaas) = &self.sasl_jaas_config {
            jaas_credentials(jaas).map_err(|reason| ConfigError::BadValue {
                key: "sasl.jaas.config".into(),
                value: "(hidden)".into(),
                reason,
            })?;
        }
        let sasl = self.listeners.iter().find(|l| {
            self.listener_protocol(&l.name).is_ok_and(|p| {
                matches!(
                    p,
                    SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
                )
            })
        });
        if let Some(listener) = sasl
            && self.sasl_enabled_mechanisms.is_empty()
        {
            return Err(ConfigError::Inconsistent(format!(
                "listener {} uses SASL, and sasl.enabled.mechanisms is empty: name PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                listener.name
            )));
        }
        Ok(())
    }

    /// Whether SASL mechanism `mechanism` is enabled.
    pub fn sasl_enabled(&self, mechanism: SaslMechanism) -> bool {
        self.sasl_enabled_mechanisms.contains(&mechanism)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::config_from as config;

    #[test]
    fn allow_everyone_defaults_by_the_listeners() {
        assert!(config(&[]).unwrap().allow_everyone_if_no_acl_found());
        let sasl = config(&[("listeners", "SASL_PLAINTEXT://127.0.0.1:0")]).unwrap();
        assert!(!sasl.allow_everyone_if_no_acl_found());
        let mixed = config(&[
            ("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"),
            ("ssl.keystore.location", "/etc/sluice/broker.pem"),
        ])
        .unwrap();
        assert!(!mixed.allow_everyone_if_no_acl_found());
        let open = config(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
            ("allow.everyone.if.no.acl.found", "true"),
        ])
        .unwrap();
        assert!(open.allow_everyone_if_no_acl_found());
    }

    #[test]
    fn mechanisms_parse_and_render() {
        let c = config(&[]).unwrap();
        assert_eq!(
            c.get("sasl.enabled.mechanisms").unwrap(),
            "SCRAM-SHA-256,SCRAM-SHA-512"
        );
        let c = config(&[("sasl.enabled.mechanisms", "PLAIN, SCRAM-SHA-512")]).unwrap();
        assert!(c.sasl_enabled(SaslMechanism::Plain));
        assert!(!c.sasl_enabled(SaslMechanism::Scram(ScramMechanism::Sha256)));
        let none = config(&[
            ("listeners", "SASL_SSL://127.0.0.1:0"),
            ("ssl.keystore.location", "/etc/sluice/broker.pem"),
            ("sasl.enabled.mechanisms", ""),
        ])
        .unwrap_err();
        assert!(none.contains("sasl.enabled.mechanisms"), "{none}");
        let err = config(&[("sasl.enabled.mechanisms", "GSSAPI")]).unwrap_err();
        assert!(
            err.contains("GSSAPI") && err.contains("sasl.enabled.mechanisms"),
            "{err}"
        );
    }

    #[test]
    fn super_users_and_reauth() {
        let c = config(&[
            ("super.users", "User:admin;User:ops"),
            ("connections.max.reauth.ms", "60000"),
        ])
        .unwrap();
        assert_eq!(c.get("super.users").unwrap(), "User:admin;User:ops");
        assert_eq!(c.connections_max_reauth_ms, 60_000);
        let err = config(&[("connections.max.reauth.ms", "-1")]).unwrap_err();
        assert!(err.contains("connections.max.reauth.ms"), "{err}");
        let err = config(&[("super.users", "admin")]).unwrap_err();
        assert!(err.contains("super.users"), "{err}");
    }
}

#[cfg(test)]
mod jaas_tests {
    use super::jaas_credentials;

    #[test]
    fn jaas_lines_give_their_username_and_password() {
        let line = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cr=t;";"#;
        assert_eq!(
            jaas_credentials(line).unwrap(),
            ("broker".to_owned(), "s3cr=t;".to_owned())
        );
        assert!(
            jaas_credentials(r#"x required username="u";"#)
                .unwrap_err()
                .contains("password")
        );
        assert!(
            jaas_credentials("x required username=u password=\"p\";")
                .unwrap_err()
                .contains("quoted")
        );
        // `my_username` is not `username`.
        assert!(jaas_credentials(r#"x required my_username="a" password="p";"#).is_err());
    }
}
