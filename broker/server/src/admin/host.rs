//! The `Host` check that closes DNS rebinding: a web page can point a name it controls at
//! 127.0.0.1 and make the browser send requests to a loopback admin API, but the browser
//! still sends that name as `Host`. So a request is answered only when its `Host` is a
//! loopback name or address (`localhost`, `127.0.0.1`, `[::1]`, any port), an IP literal of
//! the address the client connected to, or a name in `admin.allowed.hosts`; anything else
//! is 421 Misdirected Request. An HTTP/1.1 request without `Host` is refused too (HTTP/1.0
//! has none; browsers always send one).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, Version, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::serve::Conn;
use super::{AdminState, ApiError};

/// Refuses requests whose `Host` this admin API does not answer to.
pub(super) async fn check(
    State(state): State<AdminState>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"));
    let allowed = &state.broker.config.admin_allowed_hosts;
    let refusal = match host {
        None if request.version() == Version::HTTP_11 => {
            Some("an HTTP/1.1 request without a Host header".to_owned())
        }
        None => None,
        Some(host) if host_allowed(host, conn.local, allowed) => None,
        Some(host) => Some(format!("Host {host:?}")),
    };
    match refusal {
        None => next.run(request).await,
        Some(what) => {
            tracing::debug!(peer = %conn.peer, %what, "admin API request refused by the Host check");
            ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "MISDIRECTED_REQUEST",
                format!(
                    "{what} is not an address of this admin API: use localhost or the address it listens on, \
                     or add the name to admin.allowed.hosts (a defence against DNS rebinding; docs/admin-api.md)"
                ),
            )
            .into_response()
        }
    }
}

/// Whether a `Host` value (`name`, `name:port`, `[v6]:port`) names this API: loopback, an
/// IP literal of `local` (the address the client reached), or an `allowed` entry (lowercase,
/// with or without a port).
pub(super) fn host_allowed(host: &str, local: SocketAddr, allowed: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = host_name(&host);
    if name.is_empty() {
        return false;
    }
    if name == "localhost" || allowed.iter().any(|a| *a == host || *a == name) {
        return true;
    }
    let Ok(ip) = name.parse::<IpAddr>() else {
        return false;
    };
    ip.is_loopback() || (ip == local.ip() && !ip.is_unspecified())
}

/// The name part of a `Host` value, brackets of an IPv6 literal removed. A port must be
/// digits; anything else leaves the whole value, which then matches nothing.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((v6, "")) => v6,
            Some((v6, port)) if is_port(port.strip_prefix(':').unwrap_or("x")) => v6,
            _ => "",
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if is_port(port) && !name.contains(':') => name,
        Some(_) => "",
        None => host,
    }
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> SocketAddr {
        "192.168.1.5:9644".parse().unwrap()
    }

    #[test]
    fn loopback_names_and_addresses_pass_with_any_port() {
        for host in [
            "localhost",
            "LOCALHOST:9644",
            "127.0.0.1",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:9644",
            "127.5.6.7:80",
        ] {
            assert!(host_allowed(host, local(), &[]), "{host}");
        }
    }

    #[test]
    fn the_reached_address_and_listed_names_pass() {
        assert!(host_allowed("192.168.1.5:9644", local(), &[]));
        assert!(!host_allowed("192.168.1.6:9644", local(), &[]));
        let allowed = ["admin.example".to_owned(), "ops.example:8443".to_owned()];
        assert!(host_allowed("Admin.Example:9644", local(), &allowed));
        assert!(host_allowed("ops.example:8443", local(), &allowed));
        let wildcard: SocketAddr = "0.0.0.0:9644".parse().unwrap();
        assert!(!host_allowed("0.0.0.0:9644", wildcard, &[]));
    }

    #[test]
    fn rebinding_names_and_garbage_are_refused() {
        for host in [
            "evil.example",
            "evil.example:9644",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "",
            ":9644",
            "[::1",
            "[::1]x",
            "localhost:port",
            "::1",
        ] {
            assert!(!host_allowed(host, local(), &[]), "{host:?}");
        }
    }
}
