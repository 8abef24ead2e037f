//! Listeners and their security, with Kafka's keys: `listeners` (`NAME://host:port,...`),
//! `listener.security.protocol.map` (`NAME:PROTOCOL,...`; without it a listener's name is its
//! protocol), `advertised.listeners` (per listener name), and TLS's `ssl.keystore.location`,
//! `ssl.keystore.type` (PEM only), `ssl.truststore.location` and `ssl.client.auth`: their
//! value types, text forms and the checks across them (the keys themselves are in
//! `keys.rs`). The SASL keys' types are in `security_keys`.

use std::net::SocketAddr;

use super::{BrokerConfig, HostPort};
use crate::error::ConfigError;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// Plain TCP.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Parses Kafka's spelling (case-insensitive, as Kafka's clients accept it).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(format!(
                "{text:?} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )),
        }
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the connection is TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether the connection must authenticate with SASL before its other requests.
    pub fn is_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// `ssl.client.auth`: whether a TLS listener asks for a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is still served (as `User:ANONYMOUS`).
    Requested,
    /// A client without a certificate signed by the truststore's CA is refused.
    Required,
}

impl ClientAuth {
    /// Parses Kafka's spelling.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "none" => Ok(Self::None),
            "requested" => Ok(Self::Requested),
            "required" => Ok(Self::Required),
            _ => Err(format!("{text:?} is not none, requested or required")),
        }
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Requested => "requested",
            Self::Required => "required",
        }
    }
}

/// `ssl.keystore.type`: the keystore's format; only PEM is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeystoreType {
    /// One PEM file with the private key and the certificate chain.
    Pem,
}

impl KeystoreType {
    /// Kafka's spelling of the one type.
    pub const PEM: &'static str = "PEM";

    /// Parses Kafka's spelling; anything but PEM is refused, saying what is supported.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            Self::PEM => Ok(Self::Pem),
            other => Err(format!(
                "{other:?} is not supported: only PEM (one file with the private key and \
                 the certificate chain) is"
            )),
        }
    }
}

/// One `NAME://host:port` entry of `listeners` or `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAddr {
    /// The listener name, uppercased (Kafka's names are case-insensitive).
    pub name: String,
    /// Where it binds (`listeners`) or what clients dial (`advertised.listeners`).
    pub addr: HostPort,
}

impl ListenerAddr {
    /// The address to bind: an IP literal (or `localhost`) and a port, else an error naming
    /// `listeners`.
    pub fn bind_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.addr
            .socket_addr()
            .map_err(|reason| ConfigError::BadValue {
                key: "listeners".into(),
                value: self.to_string(),
                reason,
            })
    }
}

impl std::fmt::Display for ListenerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.name, self.addr)
    }
}

/// A listener with everything resolved: what `Server::bind` binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// The listener name.
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The address to bind (port 0 picks one).
    pub bind: SocketAddr,
}

/// Parses a comma-separated `NAME://host:port` list; a bare `host:port` is PLAINTEXT. An
/// empty text is an empty list.
pub fn parse_listener_list(text: &str) -> Result<Vec<ListenerAddr>, String> {
    let mut out: Vec<ListenerAddr> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, rest) = match entry.split_once("://") {
            Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
            None => ("PLAINTEXT".to_owned(), entry),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "{entry:?}: listener name {name:?} is not [A-Z0-9_]+"
            ));
        }
        if out.iter().any(|l| l.name == name) {
            return Err(format!("listener name {name} appears twice"));
        }
        let addr = HostPort::parse(rest)?;
        out.push(ListenerAddr { name, addr });
    }
    Ok(out)
}

/// `listeners` by default: PLAINTEXT on loopback, Kafka's port.
pub(super) fn listeners_default() -> Vec<ListenerAddr> {
    vec![ListenerAddr {
        name: "PLAINTEXT".into(),
        addr: HostPort {
            host: "127.0.0.1".into(),
            port: 9092,
        },
    }]
}

/// `listeners`: a listener list with at least one entry.
pub(super) fn parse_listeners(text: &str) -> Result<Vec<ListenerAddr>, String> {
    let list = parse_listener_list(text)?;
    if list.is_empty() {
        return Err("at least one listener is needed".into());
    }
    Ok(list)
}

/// A listener list in its text form.
pub(super) fn print_listeners(list: &[ListenerAddr]) -> String {
    let entries: Vec<String> = list.iter().map(ToString::to_string).collect();
    entries.join(",")
}

/// Parses `NAME:PROTOCOL,...`.
pub(super) fn parse_protocol_map(text: &str) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?} is not NAME:PROTOCOL"))?;
        let name = name.trim().to_ascii_uppercase();
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("listener name {name} appears twice"));
        }
        out.push((name, SecurityProtocol::parse(protocol)?));
    }
    Ok(out)
}

/// The protocol map in its text form.
pub(super) fn print_protocol_map(map: &[(String, SecurityProtocol)]) -> String {
    let entries: Vec<String> = map
        .iter()
        .map(|(name, p)| format!("{name}:{}", p.as_str()))
        .collect();
    entries.join(",")
}

impl BrokerConfig {
    /// The security protocol of listener `name`: the protocol map's entry, or, with no map
    /// entry, the name itself when it is a protocol's name (Kafka's default map).
    pub fn listener_protocol(&self, name: &str) -> Result<SecurityProtocol, ConfigError> {
        if let Some((_, protocol)) = self
            .listener_security_protocol_map
            .iter()
            .find(|(n, _)| n == name)
        {
            return Ok(*protocol);
        }
        if self.is_controller_listener(name) && SecurityProtocol::parse(name).is_err() {
            // Kafka's default for a controller listener the map does not name.
            return Ok(SecurityProtocol::Plaintext);
        }
        SecurityProtocol::parse(name).map_err(|_| ConfigError::BadValue {
            key: "listener.security.protocol.map".into(),
            value: print_protocol_map(&self.listener_security_protocol_map),
            reason: format!(
                "listener {name} is not a security protocol's name and the map does not name it"
            ),
        })
    }

    /// Every client listener (not a controller listener), resolved and checked: what the
    /// server binds for Kafka clients.
    pub fn listener_specs(&self) -> Result<Vec<ListenerSpec>, ConfigError> {
        let mut specs = Vec::with_capacity(self.listeners.len());
        for listener in &self.listeners {
            if self.is_controller_listener(&listener.name) {
                continue;
            }
            let protocol = self.listener_protocol(&listener.name)?;
            let bind = listener.bind_addr()?;
            if bind.port() != 0 && specs.iter().any(|s: &ListenerSpec| s.bind == bind) {
                return Err(ConfigError::Inconsistent(format!(
                    "listeners: two listeners bind {bind}"
                )));
            }
            specs.push(ListenerSpec {
                name: listener.name.clone(),
                protocol,
                bind,
            });
        }
        Ok(specs)
    }

    /// Cross-key checks of these keys.
    pub(super) fn validate_listener_keys(&self) -> Result<(), ConfigError> {
        let specs = self.listener_specs()?;
        for advertised in &self.advertised_listeners {
            if !self.listeners.iter().any(|l| l.name == advertised.name) {
                return Err(ConfigError::Inconsistent(format!(
                    "advertised.listeners names listener {}, which listeners does not have",
                    advertised.name
                )));
            }
        }
        let tls = specs.iter().any(|s| s.protocol.is_tls());
        if tls && self.ssl_keystore_location.is_none() {
            return Err(ConfigError::Inconsistent(
                "an SSL listener needs ssl.keystore.location (a PEM file with the private key \
                 and the certificate chain)"
                    .into(),
            ));
        }
        if tls && self.ssl_client_auth != ClientAuth::None && self.ssl_truststore_location.is_none()
        {
            return Err(ConfigError::Inconsistent(format!(
                "ssl.client.auth={} needs ssl.truststore.location (the PEM CA bundle that signs \
                 client certificates)",
                self.ssl_client_auth.as_str()
            )));
        }
        Ok(())
    }

    /// What Metadata advertises for listener `name` when `advertised.listeners` names it.
    pub fn advertised_for(&self, name: &str) -> Option<&HostPort> {
        self.advertised_listeners
            .iter()
            .find(|a| a.name == name)
            .map(|a| &a.addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(sets: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let mut c = BrokerConfig::default();
        for (key, value) in sets {
            c.set(key, value)?;
        }
        Ok(c)
    }

    #[test]
    fn several_listeners_resolve_through_the_protocol_map() {
        let c = config(&[
            (
                "listeners",
                "INTERNAL://127.0.0.1:9092, external://127.0.0.1:0,SSL://[::1]:9094",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:SSL,EXTERNAL:PLAINTEXT",
            ),
            ("ssl.keystore.location", "/etc/sluice/broker.pem"),
        ])
        .unwrap();
        c.validate().unwrap();
        let specs = c.listener_specs().unwrap();
        let got: Vec<(&str, SecurityProtocol, u16)> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.protocol, s.bind.port()))
            .collect();
        assert_eq!(
            got,
            [
                ("INTERNAL", SecurityProtocol::Ssl, 9092),
                ("EXTERNAL", SecurityProtocol::Plaintext, 0),
                ("SSL", SecurityProtocol::Ssl, 9094),
            ]
        );
        assert_eq!(
            c.get("listener.security.protocol.map").unwrap(),
            "INTERNAL:SSL,EXTERNAL:PLAINTEXT"
        );
    }

    #[test]
    fn advertised_listeners_are_per_name_and_must_name_a_listener() {
        let mut c = config(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
            ),
            ("advertised.listeners", "SSL://kafka.example:19093"),
            ("ssl.keystore.location", "/k.pem"),
        ])
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.advertised_for("SSL").unwrap().port, 19093);
        assert!(c.advertised_for("PLAINTEXT").is_none());
        c.set("advertised.listeners", "OTHER://kafka.example:1")
            .unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("advertised.listeners") && err.contains("OTHER"),
            "{err}"
        );
    }

    #[test]
    fn bad_listener_settings_are_errors_naming_the_key() {
        let unmapped = config(&[("listeners", "INTERNAL://127.0.0.1:1")]).unwrap();
        let err = unmapped.validate().unwrap_err().to_string();
        assert!(err.contains("listener.security.protocol.map"), "{err}");
        let err = config(&[("ssl.keystore.type", "JKS")])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ssl.keystore.type") && err.contains("PEM"),
            "{err}"
        );
        let err = config(&[("ssl.client.auth", "maybe")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("ssl.client.auth"), "{err}");
        let err = config(&[("listener.security.protocol.map", "A:TLS")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("listener.security.protocol.map"), "{err}");
        let no_keystore = config(&[("listeners", "SSL://127.0.0.1:1")]).unwrap();
        let err = no_keystore.validate().unwrap_err().to_string();
        assert!(err.contains("ssl.keystore.location"), "{err}");
        let no_truststore = config(&[
            ("listeners", "SSL://127.0.0.1:1"),
            ("ssl.keystore.location", "/k.pem"),
            ("ssl.client.auth", "required"),
        ])
        .unwrap();
        let err = no_truststore.validate().unwrap_err().to_string();
        assert!(err.contains("ssl.truststore.location"), "{err}");
        let twice = config(&[("listeners", "PLAINTEXT://127.0.0.1:5,SSL://127.0.0.1:5")]).unwrap();
        assert!(twice.validate().is_err());
        assert!(config(&[("listeners", "")]).is_err());
    }

    #[test]
    fn a_bare_host_port_is_one_plaintext_listener_as_before() {
        let c = config(&[("listeners", "127.0.0.1:0")]).unwrap();
        let specs = c.listener_specs().unwrap();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "PLAINTEXT");
        assert_eq!(specs[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(c.get("listeners").unwrap(), "PLAINTEXT://127.0.0.1:0");
    }
}
