//! Who is calling, and may they: authentication in one middleware, authorization with the
//! Kafka listener's ACL engine in the handlers.
//!
//! - `admin.token`: `Authorization: Bearer <token>` makes the caller the principal
//!   `User:admin-token`, a super user of the admin API (it passes every check below).
//! - `admin.auth = basic`: HTTP Basic, checked against the broker's SCRAM credentials
//!   (SCRAM-SHA-512, then SCRAM-SHA-256, as SASL/PLAIN checks them) on the blocking pool, as
//!   each check costs the credential's iterations of HMAC. The caller is `User:<name>`.
//!   Failed logins count in the Kafka listeners' per-(address, user) limiter
//!   (`broker.security.login_failures`) and are logged at WARN without the password.
//! - Neither: the caller is `User:ANONYMOUS`, and `allow.everyone.if.no.acl.found` decides.
//!
//! Every route but `/health` passes here; with `admin.auth = basic`, `/ready` needs no
//! credentials either (a probe has none). The host of every ACL check is the client's IP.

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sluice_security::acl::{AclOperation, ResourceType};
use sluice_security::principal::KafkaPrincipal;
use sluice_security::scram::ScramMechanism;

use super::serve::Conn;
use super::{AdminState, ApiError};
use crate::authz;
use crate::broker::Broker;
use crate::config::{AdminAuth, BrokerConfig};
use crate::limits::LOGIN_FAILURES_PER_USER_MAX;

/// The principal name an `admin.token` bearer acts as.
pub const TOKEN_USER: &str = authz::ADMIN_TOKEN_USER;

/// The authenticated caller of one request (a request extension).
#[derive(Debug, Clone)]
pub struct Caller {
    /// `User:<name>`, `User:admin-token` or `User:ANONYMOUS`.
    pub principal: KafkaPrincipal,
    /// The client's IP, the host ACLs are matched against.
    pub host: String,
    /// The `admin.token` bearer: every check passes.
    pub token: bool,
}

/// What the `Authorization` header carries (`Debug` leaves the password out).
#[derive(PartialEq, Eq)]
enum Credentials {
    Bearer(String),
    Basic {
        user: String,
        password: String,
    },
    /// Absent, or a scheme or encoding we do not read.
    None,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bearer(_) => f.write_str("Bearer(..)"),
            Self::Basic { user, .. } => write!(f, "Basic({user}, ..)"),
            Self::None => f.write_str("None"),
        }
    }
}

impl Credentials {
    fn of(headers: &HeaderMap) -> Self {
        let Some(value) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        else {
            return Self::None;
        };
        if let Some(token) = value.strip_prefix("Bearer ") {
            return Self::Bearer(token.trim().to_owned());
        }
        parse_basic(value).map_or(Self::None, |(user, password)| Self::Basic {
            user,
            password,
        })
    }
}

/// `Basic <base64(user:password)>` (scheme case-insensitive, RFC 7617), within the SCRAM
/// users' name and password limits; `None` for anything else.
pub(super) fn parse_basic(value: &str) -> Option<(String, String)> {
    use sluice_security::limits::{PASSWORD_BYTES_MAX, USER_NAME_BYTES_MAX};
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let encoded = encoded.trim();
    // base64 of user:password is 4/3 of its bytes; refuse before decoding anything larger.
    if encoded.len() > (USER_NAME_BYTES_MAX + PASSWORD_BYTES_MAX + 1).div_ceil(3) * 4 {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    if user.is_empty() || user.len() > USER_NAME_BYTES_MAX || password.len() > PASSWORD_BYTES_MAX {
        return None;
    }
    Some((user.to_owned(), password.to_owned()))
}

/// Authenticates the request and hands its [`Caller`] to the handlers, or answers 401.
pub(super) async fn authenticate(
    State(state): State<AdminState>,
    ConnectInfo(conn): ConnectInfo<Conn>,
    mut request: Request,
    next: Next,
) -> Response {
    let open_probe = request.uri().path() == "/ready";
    match caller(
        &state.broker,
        &conn,
        Credentials::of(request.headers()),
        open_probe,
    )
    .await
    {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(refusal) => refusal.into_response(&state.broker),
    }
}

/// Why a request was not authenticated.
enum Refusal {
    /// 401: credentials missing (`offered: false`) or wrong.
    Unauthorized { offered: bool },
    /// 429: the address is over the failed-login limit; retry after this many seconds.
    TooManyFailures { retry_s: u64 },
}

impl Refusal {
    fn into_response(self, broker: &Broker) -> Response {
        match self {
            Self::Unauthorized { offered } => unauthorized(broker, offered),
            Self::TooManyFailures { retry_s } => too_many_failures(retry_s),
        }
    }
}

/// What a request's credentials call for, by `admin.auth` and `admin.token` (pure, so the
/// table in docs/admin-api.md is tested below). `Debug` leaves secrets out.
#[derive(PartialEq, Eq)]
enum Step {
    /// No credentials are asked: `User:ANONYMOUS`.
    Anonymous,
    /// Compare the bearer with `admin.token`.
    Token(String),
    /// Check the password against the user's SCRAM credentials.
    Basic { user: String, password: String },
    /// 401: credentials missing (`offered: false`) or of a kind not asked for.
    Refuse { offered: bool },
}

impl std::fmt::Debug for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Anonymous => f.write_str("Anonymous"),
            Self::Token(_) => f.write_str("Token(..)"),
            Self::Basic { user, .. } => write!(f, "Basic({user}, ..)"),
            Self::Refuse { offered } => write!(f, "Refuse {{ offered: {offered} }}"),
        }
    }
}

fn step(config: &BrokerConfig, credentials: Credentials, open_probe: bool) -> Step {
    let basic = config.admin_auth == AdminAuth::Basic;
    if !config.admin_authenticates() || (open_probe && basic) {
        return Step::Anonymous;
    }
    match credentials {
        Credentials::Bearer(given) if config.admin_token.is_some() => Step::Token(given),
        Credentials::Basic { user, password } if basic => Step::Basic { user, password },
        Credentials::None => Step::Refuse { offered: false },
        _ => Step::Refuse { offered: true },
    }
}

async fn caller(
    broker: &Broker,
    conn: &Conn,
    credentials: Credentials,
    open_probe: bool,
) -> Result<Caller, Refusal> {
    let host = conn.peer.ip().to_string();
    let user = match step(&broker.config, credentials, open_probe) {
        Step::Anonymous => {
            return Ok(Caller {
                principal: KafkaPrincipal::anonymous(),
                host,
                token: false,
            });
        }
        Step::Refuse { offered } => return Err(Refusal::Unauthorized { offered }),
        Step::Token(given) => {
            check_limit(broker, &host, TOKEN_USER)?;
            let expected = broker.config.admin_token.as_deref().unwrap_or_default();
            if super::constant_time_eq(given.as_bytes(), expected.as_bytes()) {
                return Ok(Caller {
                    principal: KafkaPrincipal::user(TOKEN_USER),
                    host,
                    token: true,
                });
            }
            TOKEN_USER.to_owned()
        }
        Step::Basic { user, password } => {
            check_limit(broker, &host, &user)?;
            if verify_password(broker, &user, password).await {
                return Ok(Caller {
                    principal: KafkaPrincipal::user(user),
                    host,
                    token: false,
                });
            }
            user
        }
    };
    let failures = broker
        .security
        .login_failures
        .record_failure(&host, &user, broker.now_ms());
    if failures <= LOGIN_FAILURES_PER_USER_MAX {
        tracing::warn!(%host, %user, failures, "admin API authentication failed");
    }
    Err(Refusal::Unauthorized { offered: true })
}

/// Refuses a user over the failed-login limit from `host` (the limiter the Kafka
/// listeners share; a bearer token counts as the user it acts as, `TOKEN_USER`).
fn check_limit(broker: &Broker, host: &str, user: &str) -> Result<(), Refusal> {
    broker
        .security
        .login_failures
        .check(host, user, broker.now_ms())
        .map_err(|retry_ms| {
            broker.metrics.login_refusals.fetch_add(1, Relaxed);
            Refusal::TooManyFailures {
                retry_s: (retry_ms.max(0) as u64).div_ceil(1000).max(1),
            }
        })
}

/// 429 with `Retry-After`.
fn too_many_failures(retry_s: u64) -> Response {
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "TOO_MANY_FAILED_LOGINS",
        format!(
            "over {LOGIN_FAILURES_PER_USER_MAX} failed logins of this user from this address (LOGIN_FAILURES_PER_USER_MAX): retry in {retry_s} s"
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_s));
    response
}

/// Checks `password` against the user's stored SCRAM credentials (SCRAM-SHA-512 first),
/// off the async workers.
async fn verify_password(broker: &Broker, user: &str, password: String) -> bool {
    let credentials: Vec<_> = broker.security.store.read(|s| {
        [ScramMechanism::Sha512, ScramMechanism::Sha256]
            .into_iter()
            .filter_map(|m| s.credential(user, m).cloned())
            .collect()
    });
    tokio::task::spawn_blocking(move || {
        if credentials.is_empty() {
            // As costly as a user with the fewest iterations: the answer's time does not
            // tell an unknown user from a wrong password.
            let _ = ScramMechanism::Sha512.hi(
                password.as_bytes(),
                b"sluice-unknown-user",
                sluice_security::limits::SCRAM_ITERATIONS_MIN,
            );
            return false;
        }
        credentials.iter().any(|c| c.verify_password(&password))
    })
    .await
    .unwrap_or(false)
}

/// 401 with the challenge of the scheme this API asks for.
fn unauthorized(broker: &Broker, offered: bool) -> Response {
    let what = if offered { "wrong" } else { "missing" };
    let (challenge, message) = if broker.config.admin_auth == AdminAuth::Basic {
        (
            "Basic realm=\"sluice\"",
            format!(
                "{what} credentials: send HTTP Basic with a user of the broker (sluice --admin-user USER, \
                 password in SLUICE_ADMIN_PASSWORD), or Authorization: Bearer <admin.token>"
            ),
        )
    } else {
        (
            "Bearer realm=\"sluice\"",
            "missing or wrong bearer token: send Authorization: Bearer <admin.token> (sluice commands send SLUICE_ADMIN_TOKEN)"
                .to_owned(),
        )
    };
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

/// One ACL an admin route needs: an operation on a resource.
pub type Need<'a> = (AclOperation, ResourceType, &'a str);

impl Caller {
    /// Whether the caller may do `operation` on `(resource_type, name)`.
    pub fn may(&self, broker: &Broker, (operation, resource_type, name): Need<'_>) -> bool {
        self.token
            || authz::allowed_for(
                &broker.security,
                &self.principal,
                &self.host,
                operation,
                resource_type,
                name,
            )
    }

    /// The owner a view or transform this caller makes acts for: its principal and host
    /// (`authz::Owner`). A user named as the token's principal who is not its bearer may not
    /// make one while `admin.token` is set: it would act with the token's rights.
    pub fn owner(&self, broker: &Broker) -> Result<(String, String), ApiError> {
        let token_name = self.principal == KafkaPrincipal::user(TOKEN_USER);
        if token_name && !self.token && broker.config.admin_token.is_some() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                format!(
                    "{} is the admin token's principal: a user of that name may not own views or transforms",
                    self.principal
                ),
            ));
        }
        Ok((self.principal.to_string(), self.host.clone()))
    }

    /// The caller's principal and host, for audit lines (`crate::audit`).
    pub fn actor(&self) -> crate::audit::Actor<'_> {
        crate::audit::Actor {
            principal: &self.principal,
            host: &self.host,
        }
    }

    /// `Ok` if the caller holds any of `needs`, else 403 naming them.
    pub fn require(&self, broker: &Broker, needs: &[Need<'_>]) -> Result<(), ApiError> {
        if needs.iter().any(|need| self.may(broker, *need)) {
            return Ok(());
        }
        Err(self.refusal(needs))
    }

    /// The 403 of a caller that holds none of `needs`.
    pub fn refusal(&self, needs: &[Need<'_>]) -> ApiError {
        let named: Vec<String> = needs
            .iter()
            .map(|(op, rt, name)| format!("{} on {} {name:?}", op.name(), rt.name()))
            .collect();
        ApiError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            format!(
                "{} is not allowed {}: grant it with an ACL (docs/admin-api.md lists what each route needs)",
                self.principal,
                named.join(" or ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(text: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }

    #[test]
    fn basic_headers_parse() {
        assert_eq!(
            parse_basic(&basic("alice:pw:with:colons")),
            Some(("alice".into(), "pw:with:colons".into()))
        );
        let lower = basic("bob:").replacen("Basic", "basic", 1);
        assert_eq!(parse_basic(&lower), Some(("bob".into(), String::new())));
        assert_eq!(
            parse_basic("Basic YWxpY2U6cHc="),
            Some(("alice".into(), "pw".into()))
        );
    }

    fn config(auth: AdminAuth, token: Option<&str>) -> BrokerConfig {
        BrokerConfig {
            admin_auth: auth,
            admin_token: token.map(str::to_owned),
            ..BrokerConfig::default()
        }
    }

    fn alice() -> Credentials {
        Credentials::Basic {
            user: "alice".into(),
            password: "pw".into(),
        }
    }

    #[test]
    fn open_by_default_and_for_probes_under_basic() {
        let none = config(AdminAuth::None, None);
        assert_eq!(step(&none, Credentials::None, false), Step::Anonymous);
        assert_eq!(step(&none, alice(), false), Step::Anonymous);
        let basic = config(AdminAuth::Basic, None);
        assert_eq!(step(&basic, Credentials::None, true), Step::Anonymous);
        let token = config(AdminAuth::None, Some("t"));
        assert_eq!(
            step(&token, Credentials::None, true),
            Step::Refuse { offered: false }
        );
    }

    #[test]
    fn each_setting_asks_its_credentials() {
        let basic = config(AdminAuth::Basic, None);
        assert_eq!(
            step(&basic, Credentials::None, false),
            Step::Refuse { offered: false }
        );
        assert!(matches!(step(&basic, alice(), false), Step::Basic { .. }));
        let bearer = || Credentials::Bearer("t".into());
        assert_eq!(
            step(&basic, bearer(), false),
            Step::Refuse { offered: true }
        );
        let token = config(AdminAuth::None, Some("t"));
        assert_eq!(step(&token, bearer(), false), Step::Token("t".into()));
        assert_eq!(step(&token, alice(), false), Step::Refuse { offered: true });
        let both = config(AdminAuth::Basic, Some("t"));
        assert_eq!(step(&both, bearer(), false), Step::Token("t".into()));
        assert!(matches!(step(&both, alice(), false), Step::Basic { .. }));
    }

    #[test]
    fn bad_basic_headers_are_none() {
        for value in [
            "Bearer abc".to_owned(),
            "Basic".to_owned(),
            "Basic !!!".to_owned(),
            basic("no-colon"),
            basic(":empty-user"),
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode([0xff, b':', b'x'])
            ),
            basic(&format!("u:{}", "x".repeat(5000))),
        ] {
            assert_eq!(parse_basic(&value), None, "{value:.40}");
        }
    }
}
