//! The admin HTTP API's security keys: `admin.auth` (`none` or `basic`: HTTP Basic against
//! the broker's SCRAM users), `admin.ssl.enabled` (HTTPS with the broker's
//! `ssl.keystore.location`), `admin.allowed.hosts` (the `Host` names it answers besides
//! loopback and its own address), `admin.max.connections`, and `admin.allow.insecure`, the
//! explicit opt-in to an unauthenticated admin API on a non-loopback address, besides
//! `admin.listen` and `admin.token`: their value types, text forms and the checks across
//! them (the keys themselves are in `keys.rs`).

use super::{BrokerConfig, HostPort};
use crate::error::ConfigError;
use crate::limits;

/// How the admin API authenticates its callers (`admin.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAuth {
    /// No credentials needed (`admin.token`, if set, still is); the caller is `User:ANONYMOUS`.
    None,
    /// HTTP Basic, checked against the broker's SCRAM credentials.
    Basic,
}

impl AdminAuth {
    /// The key's spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Basic => "basic",
        }
    }

    pub(super) fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "none" => Ok(Self::None),
            "basic" => Ok(Self::Basic),
            other => Err(format!("{other:?} is not none or basic")),
        }
    }
}

/// `admin.listen` by default: loopback, `ADMIN_PORT_DEFAULT`.
pub(super) fn listen_default() -> HostPort {
    HostPort {
        host: "127.0.0.1".into(),
        port: limits::ADMIN_PORT_DEFAULT,
    }
}

/// `admin.allowed.hosts` as a list: trimmed, lowercased, empties dropped.
pub(super) fn parse_hosts(value: &str) -> Result<Vec<String>, String> {
    Ok(value
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect())
}

impl BrokerConfig {
    /// Whether the admin API asks its callers for credentials (Basic or the token).
    pub fn admin_authenticates(&self) -> bool {
        self.admin_auth == AdminAuth::Basic || self.admin_token.is_some()
    }

    /// Cross-key checks: HTTPS needs the keystore, and an admin API on a non-loopback
    /// address needs credentials unless `admin.allow.insecure` says otherwise.
    pub(super) fn validate_admin_keys(&self) -> Result<(), ConfigError> {
        if self.admin_ssl_enabled && self.ssl_keystore_location.is_none() {
            return Err(ConfigError::Inconsistent(
                "admin.ssl.enabled = true needs ssl.keystore.location (the PEM key and certificate chain the admin API serves)".into(),
            ));
        }
        let Some(listen) = &self.admin_listen else {
            return Ok(());
        };
        let loopback = listen.socket_addr().is_ok_and(|a| a.ip().is_loopback());
        if !loopback && !self.admin_authenticates() && !self.admin_allow_insecure {
            return Err(ConfigError::Inconsistent(format!(
                "admin.listen = {listen} is not a loopback address and the admin API would ask no credentials: \
                 set admin.auth = basic (or admin.token), or admin.allow.insecure = true to serve it open anyway"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::config_from as config;

    #[test]
    fn defaults_are_open_on_loopback() {
        let c = config(&[]).unwrap();
        assert_eq!(c.admin_auth, AdminAuth::None);
        assert!(!c.admin_ssl_enabled && !c.admin_allow_insecure);
        assert_eq!(
            c.admin_max_connections as usize,
            limits::ADMIN_MAX_CONNECTIONS_DEFAULT
        );
        assert!(config(&[("admin.listen", "localhost:0")]).is_ok());
        assert!(config(&[("admin.listen", "[::1]:0")]).is_ok());
    }

    #[test]
    fn an_open_non_loopback_bind_is_refused_naming_the_keys() {
        let err = config(&[("admin.listen", "0.0.0.0:9644")]).unwrap_err();
        for key in [
            "admin.listen",
            "admin.auth",
            "admin.token",
            "admin.allow.insecure",
        ] {
            assert!(err.contains(key), "{key}: {err}");
        }
        assert!(config(&[("admin.listen", "10.1.2.3:9644"), ("admin.auth", "basic")]).is_ok());
        assert!(config(&[("admin.listen", "0.0.0.0:0"), ("admin.token", "t")]).is_ok());
        assert!(
            config(&[
                ("admin.listen", "0.0.0.0:0"),
                ("admin.allow.insecure", "true")
            ])
            .is_ok()
        );
        assert!(config(&[("admin.listen", "")]).is_ok());
    }

    #[test]
    fn https_needs_the_keystore() {
        let err = config(&[("admin.ssl.enabled", "true")]).unwrap_err();
        assert!(
            err.contains("admin.ssl.enabled") && err.contains("ssl.keystore.location"),
            "{err}"
        );
        assert!(
            config(&[
                ("admin.ssl.enabled", "true"),
                ("ssl.keystore.location", "/etc/sluice/broker.pem")
            ])
            .is_ok()
        );
    }

    #[test]
    fn values_parse_and_bad_ones_name_the_key() {
        let c = config(&[
            ("admin.auth", "basic"),
            (
                "admin.allowed.hosts",
                " Admin.Example:9644, ,sluice.internal ",
            ),
            ("admin.max.connections", "8"),
        ])
        .unwrap();
        assert_eq!(c.admin_auth, AdminAuth::Basic);
        assert_eq!(
            c.get("admin.allowed.hosts").unwrap(),
            "admin.example:9644,sluice.internal"
        );
        assert_eq!(c.admin_max_connections, 8);
        for (key, value) in [
            ("admin.auth", "digest"),
            ("admin.max.connections", "0"),
            ("admin.ssl.enabled", "yes"),
        ] {
            let err = config(&[(key, value)]).unwrap_err();
            assert!(err.contains(key), "{err}");
        }
    }
}
