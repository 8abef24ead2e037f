//! Delegation tokens (KIP-48): CreateDelegationToken v1-v3, RenewDelegationToken v1-v2,
//! ExpireDelegationToken v1-v2, DescribeDelegationToken v1-v3, as Kafka's `KafkaApis` and
//! `DelegationTokenManager` answer them. The decisions are `sluice_security::tokens`'; the
//! tokens are security-log records (fsynced before the answer), so they survive restarts.
//!
//! Who may ask:
//! - without `delegation.token.secret.key`: nobody (DELEGATION_TOKEN_AUTH_DISABLED);
//! - a connection authenticated with a token, or not authenticated by SASL (PLAINTEXT, and
//!   SSL without a client certificate), may not (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
//! - creating a token for another owner (v3) needs CREATE_TOKENS on the USER resource
//!   `User:<owner>` (DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be `User`s
//!   (INVALID_PRINCIPAL_TYPE);
//! - renewing and expiring need the token's owner, requester or a renewer
//!   (DELEGATION_TOKEN_OWNER_MISMATCH);
//! - describing lists the tokens the caller owns, requested or may renew, those it has
//!   DESCRIBE on (DELEGATION_TOKEN resource, by token id), and those whose owner it has
//!   DESCRIBE_TOKENS on (USER resource), filtered by the request's owners.
//!
//! The HMAC, the token's secret, is never logged: audit lines name the token id.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::{AclOperation, ResourceType};
use sluice_security::principal::{KafkaPrincipal, USER_TYPE};
use sluice_security::records::SecurityRecord;
use sluice_security::tokens::{self, CreateToken, DelegationToken, Expiry, TokenConfig};

use super::Ctx;
use crate::audit;
use crate::config::SecurityProtocol;

/// The first CreateDelegationToken and DescribeDelegationToken version whose answer names the
/// requester (and whose create request may name another owner).
const REQUESTER_SINCE: i16 = 3;

/// Kafka's `DelegationTokenManager.ErrorTimestamp`: the expiry answered with an error.
const ERROR_TIMESTAMP: i64 = -1;

/// The token settings, or the error every token API answers first (Kafka's
/// `allowTokenRequests`, then the token manager's `enabled`).
fn enabled<'a>(ctx: &Ctx<'a>) -> Result<&'a TokenConfig, ResponseError> {
    let client = ctx.client;
    let anonymous_ssl = client.security_protocol == SecurityProtocol::Ssl
        && client.principal == KafkaPrincipal::anonymous();
    if client.token_authenticated
        || client.security_protocol == SecurityProtocol::Plaintext
        || anonymous_ssl
    {
        return Err(ResponseError::DelegationTokenRequestNotAllowed);
    }
    ctx.security
        .tokens
        .as_ref()
        .ok_or(ResponseError::DelegationTokenAuthDisabled)
}

fn principal(principal_type: &StrBytes, name: &StrBytes) -> KafkaPrincipal {
    KafkaPrincipal {
        principal_type: principal_type.to_string(),
        name: name.to_string(),
    }
}

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Answers CreateDelegationToken.
pub fn create(
    ctx: &Ctx<'_>,
    request: CreateDelegationTokenRequest,
    version: i16,
) -> CreateDelegationTokenResponse {
    let requester = ctx.client.principal.clone();
    let owner = match request.owner_principal_name.as_ref() {
        Some(name) if !name.is_empty() => principal(
            request
                .owner_principal_type
                .as_ref()
                .unwrap_or(&StrBytes::from_static_str(USER_TYPE)),
            name,
        ),
        _ => requester.clone(),
    };
    let mut response = CreateDelegationTokenResponse::default();
    response.principal_type = str(&owner.principal_type);
    response.principal_name = str(&owner.name);
    if version >= REQUESTER_SINCE {
        response.token_requester_principal_type = str(&requester.principal_type);
        response.token_requester_principal_name = str(&requester.name);
    }
    response.issue_timestamp_ms = ERROR_TIMESTAMP;
    response.expiry_timestamp_ms = ERROR_TIMESTAMP;
    response.max_timestamp_ms = ERROR_TIMESTAMP;
    let renewers: Vec<KafkaPrincipal> = request
        .renewers
        .iter()
        .map(|r| principal(&r.principal_type, &r.principal_name))
        .collect();
    let config = match enabled(ctx) {
        Ok(config) => config,
        Err(code) => {
            response.error_code = code.code();
            return response;
        }
    };
    if owner != requester
        && !ctx.auth.allowed(
            AclOperation::CreateTokens,
            ResourceType::User,
            &owner.to_string(),
        )
    {
        response.error_code = ResponseError::DelegationTokenAuthorizationFailed.code();
        return response;
    }
    if renewers.iter().any(|r| r.principal_type != USER_TYPE) {
        response.error_code = ResponseError::InvalidPrincipalType.code();
        return response;
    }
    let ask = CreateToken {
        owner,
        requester,
        renewers,
        max_lifetime_ms: request.max_lifetime_ms,
    };
    match store_new_token(ctx, config, ask) {
        Ok(token) => {
            response.issue_timestamp_ms = token.issue_ms;
            response.expiry_timestamp_ms = token.expiry_ms;
            response.max_timestamp_ms = token.max_ms;
            response.hmac = Bytes::from(config.hmac(&token.token_id));
            response.token_id = str(&token.token_id);
        }
        Err(code) => response.error_code = code.code(),
    }
    response
}

/// Decides a new token and stores it (fsynced) before it is answered.
fn store_new_token(
    ctx: &Ctx<'_>,
    config: &TokenConfig,
    ask: CreateToken,
) -> Result<DelegationToken, ResponseError> {
    let now = ctx.clock.now_ms();
    let decided = ctx.security.store.decide(|state| {
        let mut rng = crate::random::OsRng;
        match tokens::create(config, ask, state.token_count(), now, &mut rng) {
            Ok(token) => (
                vec![SecurityRecord::DelegationToken(token.clone())],
                Ok(token),
            ),
            Err(e) => (Vec::new(), Err(e)),
        }
    });
    match decided {
        Ok(Ok(token)) => {
            audit::done(
                ctx.client.actor(),
                "token.create",
                &format!("delegation token {}", token.token_id),
                &format!("owner {}", token.owner),
            );
            Ok(token)
        }
        Ok(Err(e)) => Err(response_error(e)),
        Err(e) => {
            tracing::warn!(error = %e, "CreateDelegationToken: the security log refused the append");
            Err(ResponseError::UnknownServerError)
        }
    }
}

fn response_error(e: tokens::TokenError) -> ResponseError {
    ResponseError::try_from_code(e.code().code()).unwrap_or(ResponseError::UnknownServerError)
}

/// What renewing or expiring does to the token with an HMAC, decided and stored together:
/// the expiry answered, or the error.
fn change(
    ctx: &Ctx<'_>,
    hmac: &[u8],
    action: &str,
    step: impl FnOnce(&TokenConfig, &DelegationToken, i64) -> Result<(Expiry, i64), tokens::TokenError>,
) -> Result<i64, ResponseError> {
    let config = enabled(ctx)?;
    let now = ctx.clock.now_ms();
    let decided = ctx.security.store.decide(|state| {
        let Some(token) = tokens::find_by_hmac(config, state.tokens(), hmac) else {
            return (Vec::new(), Err(tokens::TokenError::NotFound));
        };
        match step(config, token, now) {
            Ok((Expiry::Moved(moved), at)) => (
                vec![SecurityRecord::DelegationToken(moved)],
                Ok((token.token_id.clone(), at)),
            ),
            Ok((Expiry::Removed, at)) => (
                vec![SecurityRecord::DelegationTokenRemove {
                    token_id: token.token_id.clone(),
                }],
                Ok((token.token_id.clone(), at)),
            ),
            Err(e) => (Vec::new(), Err(e)),
        }
    });
    match decided {
        Ok(Ok((token_id, at))) => {
            audit::done(
                ctx.client.actor(),
                action,
                &format!("delegation token {token_id}"),
                &format!("expiry {at}"),
            );
            Ok(at)
        }
        Ok(Err(e)) => Err(response_error(e)),
        Err(e) => {
            tracing::warn!(error = %e, action, "the security log refused the append");
            Err(ResponseError::UnknownServerError)
        }
    }
}

/// A renewal's or an expiry's answer: (error code, expiry), Kafka's error timestamp on an
/// error.
fn answer(outcome: Result<i64, ResponseError>) -> (i16, i64) {
    match outcome {
        Ok(at) => (0, at),
        Err(code) => (code.code(), ERROR_TIMESTAMP),
    }
}

/// Answers RenewDelegationToken.
pub fn renew(ctx: &Ctx<'_>, request: RenewDelegationTokenRequest) -> RenewDelegationTokenResponse {
    let caller = ctx.client.principal.clone();
    let outcome = change(ctx, &request.hmac, "token.renew", |config, token, now| {
        let renewed = tokens::renew(config, token, &caller, request.renew_period_ms, now)?;
        let at = renewed.expiry_ms;
        Ok((Expiry::Moved(renewed), at))
    });
    let mut response = RenewDelegationTokenResponse::default();
    (response.error_code, response.expiry_timestamp_ms) = answer(outcome);
    response
}

/// Answers ExpireDelegationToken.
pub fn expire(
    ctx: &Ctx<'_>,
    request: ExpireDelegationTokenRequest,
) -> ExpireDelegationTokenResponse {
    let caller = ctx.client.principal.clone();
    let period = request.expiry_time_period_ms;
    let outcome = change(ctx, &request.hmac, "token.expire", |_, token, now| {
        tokens::expire(token, &caller, period, now)
    });
    let mut response = ExpireDelegationTokenResponse::default();
    (response.error_code, response.expiry_timestamp_ms) = answer(outcome);
    response
}

/// Answers DescribeDelegationToken.
pub fn describe(
    ctx: &Ctx<'_>,
    request: DescribeDelegationTokenRequest,
    version: i16,
) -> DescribeDelegationTokenResponse {
    let mut response = DescribeDelegationTokenResponse::default();
    let config = match enabled(ctx) {
        Ok(config) => config,
        Err(code) => {
            response.error_code = code.code();
            return response;
        }
    };
    let owners: Option<Vec<KafkaPrincipal>> = request.owners.as_ref().map(|owners| {
        owners
            .iter()
            .map(|o| principal(&o.principal_type, &o.principal_name))
            .collect()
    });
    if owners.as_ref().is_some_and(Vec::is_empty) {
        return response;
    }
    let caller = &ctx.client.principal;
    let eligible = |token: &DelegationToken| {
        if let Some(owners) = &owners
            && !owners.iter().any(|o| token.owner_or_renewer(o))
        {
            return false;
        }
        token.owner_or_renewer(caller)
            || ctx.auth.allowed(
                AclOperation::Describe,
                ResourceType::DelegationToken,
                &token.token_id,
            )
            || ctx.auth.allowed(
                AclOperation::DescribeTokens,
                ResourceType::User,
                &token.owner.to_string(),
            )
    };
    let tokens: Vec<DelegationToken> = ctx
        .security
        .store
        .read(|state| state.tokens().filter(|t| eligible(t)).cloned().collect());
    response.tokens = tokens
        .iter()
        .map(|t| described(config, t, version))
        .collect();
    response
}

fn described(
    config: &TokenConfig,
    token: &DelegationToken,
    version: i16,
) -> DescribedDelegationToken {
    let mut out = DescribedDelegationToken::default();
    out.principal_type = str(&token.owner.principal_type);
    out.principal_name = str(&token.owner.name);
    if version >= REQUESTER_SINCE {
        out.token_requester_principal_type = str(&token.requester.principal_type);
        out.token_requester_principal_name = str(&token.requester.name);
    }
    out.issue_timestamp = token.issue_ms;
    out.expiry_timestamp = token.expiry_ms;
    out.max_timestamp = token.max_ms;
    out.token_id = str(&token.token_id);
    out.hmac = Bytes::from(config.hmac(&token.token_id));
    out.renewers = token
        .renewers
        .iter()
        .map(|r| {
            let mut renewer = DescribedDelegationTokenRenewer::default();
            renewer.principal_type = str(&r.principal_type);
            renewer.principal_name = str(&r.name);
            renewer
        })
        .collect();
    out
}
