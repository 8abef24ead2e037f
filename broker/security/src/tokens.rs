//! Delegation tokens (KIP-48), as Kafka's `DelegationTokenManager` decides them: create,
//! renew, expire, describe, and the SCRAM credential a client authenticates with.
//!
//! A token is an id (22 random URL-safe base64 characters) and its HMAC-SHA512 under the
//! broker's `delegation.token.secret.key`. The HMAC is the secret the owner hands to a
//! client; the id is public. A client logs in with SCRAM, the id as user name, the base64 of
//! the HMAC as password and the `tokenauth=true` extension, and is then the token's owner
//! (token-authenticated: it may not create, renew or expire tokens itself). Only the token's
//! metadata is durable ([`crate::records::SecurityRecord::DelegationToken`]); the HMAC and
//! the SCRAM credentials are recomputed from the secret, so a broker with another secret
//! knows none of the tokens' passwords (Kafka's behaviour when the key changes).
//!
//! Time is the caller's `now_ms`; randomness is injected. Lifetimes, in milliseconds:
//! - created: `issue = now`, `max = now + min(requested max lifetime, max_lifetime)` (a
//!   requested lifetime of 0 or less takes `max_lifetime`), `expiry = min(now + renew, max)`;
//! - renewed by its owner, requester or a renewer: `expiry = min(now + period, max)` (a
//!   negative period takes `renew`);
//! - expired by the same: a negative period removes it now, else `expiry = min(now + period,
//!   max)`;
//! - a token past its expiry no longer authenticates, cannot be renewed or expired
//!   (DELEGATION_TOKEN_EXPIRED), and is removed by the broker's expiry sweep.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};
use sluice_kafka::ErrorCode;

use crate::limits;
use crate::principal::KafkaPrincipal;
use crate::rng::SecurityRng;
use crate::scram::{ScramCredential, ScramMechanism};

/// The broker's token settings (`delegation.token.*`). Tokens are enabled only with a
/// secret key; without one every token API answers DELEGATION_TOKEN_AUTH_DISABLED.
#[derive(Clone)]
pub struct TokenConfig {
    secret: Vec<u8>,
    /// `delegation.token.max.lifetime.ms`: the longest a token can live, renewals included.
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms`: how long a token lives between renewals.
    pub renew_ms: i64,
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("secret", &"<redacted>")
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("renew_ms", &self.renew_ms)
            .finish()
    }
}

impl TokenConfig {
    /// Settings with `secret` (`delegation.token.secret.key`, non-empty).
    pub fn new(secret: &str, max_lifetime_ms: i64, renew_ms: i64) -> Self {
        assert!(
            !secret.is_empty(),
            "an empty delegation.token.secret.key disables tokens"
        );
        Self {
            secret: secret.as_bytes().to_vec(),
            max_lifetime_ms: max_lifetime_ms.max(1),
            renew_ms: renew_ms.max(1),
        }
    }

    /// The token's HMAC: HMAC-SHA512 of its id under the secret key (Kafka's
    /// `DelegationTokenManager.createHmac`).
    pub fn hmac(&self, token_id: &str) -> Vec<u8> {
        let mut mac = <Hmac<Sha512> as Mac>::new_from_slice(&self.secret)
            .expect("HMAC takes a key of any length");
        mac.update(token_id.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The SCRAM credential a client proves the token with: the password is the base64 of
    /// the HMAC (what Kafka's clients send); the salt is derived from the id, so every broker
    /// with the secret derives the same credential without storing it.
    pub fn scram_credential(&self, token_id: &str, mechanism: ScramMechanism) -> ScramCredential {
        let password = STANDARD.encode(self.hmac(token_id));
        let salt = salt_of(token_id);
        ScramCredential::derive(mechanism, &password, &salt, limits::SCRAM_ITERATIONS_MIN)
            .expect("a token credential is within the SCRAM bounds")
    }
}

/// A token's salt: SHA-256 of a label and its id (the password is 64 random bytes of HMAC,
/// so a salt per token is all the derivation needs).
fn salt_of(token_id: &str) -> Vec<u8> {
    use sha2::Digest;
    let mut h = Sha256::new();
    h.update(b"sluice delegation token salt\0");
    h.update(token_id.as_bytes());
    h.finalize().to_vec()
}

/// One delegation token's metadata (Kafka's `TokenInformation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationToken {
    /// The public id (the SCRAM user name a client logs in with).
    pub token_id: String,
    /// Whom the token authenticates as.
    pub owner: KafkaPrincipal,
    /// Who created it (the owner, unless created for another user: v3, CREATE_TOKENS).
    pub requester: KafkaPrincipal,
    /// Who else may renew or expire it.
    pub renewers: Vec<KafkaPrincipal>,
    /// Creation time, ms since the epoch.
    pub issue_ms: i64,
    /// When it stops authenticating unless renewed.
    pub expiry_ms: i64,
    /// When it stops for good.
    pub max_ms: i64,
}

impl DelegationToken {
    /// Whether `principal` owns, requested or may renew the token (Kafka's
    /// `ownerOrRenewer`): who may renew, expire and describe it.
    pub fn owner_or_renewer(&self, principal: &KafkaPrincipal) -> bool {
        self.owner == *principal
            || self.requester == *principal
            || self.renewers.contains(principal)
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expiry_ms < now_ms
    }

    /// The checks a token passes before it is stored or after it is read back.
    pub fn validate(&self) -> Result<(), String> {
        if self.token_id.is_empty() || self.token_id.len() > limits::TOKEN_ID_BYTES_MAX {
            return Err(format!(
                "token id of {} bytes (1 to TOKEN_ID_BYTES_MAX = {})",
                self.token_id.len(),
                limits::TOKEN_ID_BYTES_MAX
            ));
        }
        if self.renewers.len() > limits::TOKEN_RENEWERS_MAX {
            return Err(format!(
                "{} renewers; the limit is {} (TOKEN_RENEWERS_MAX)",
                self.renewers.len(),
                limits::TOKEN_RENEWERS_MAX
            ));
        }
        if !(self.issue_ms <= self.max_ms && self.expiry_ms <= self.max_ms) {
            return Err(format!(
                "token times out of order: issued {}, expiry {}, max {}",
                self.issue_ms, self.expiry_ms, self.max_ms
            ));
        }
        Ok(())
    }
}

/// Why a token request is refused, with Kafka's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No token has that HMAC.
    #[error("the delegation token is not found")]
    NotFound,
    /// The caller neither owns nor may renew the token.
    #[error("the caller is not the token's owner, requester or a renewer")]
    OwnerMismatch,
    /// The token's expiry has passed.
    #[error("the delegation token has expired")]
    Expired,
    /// [`limits::DELEGATION_TOKENS_MAX`] tokens are stored.
    #[error("{max} delegation tokens are stored, the limit (DELEGATION_TOKENS_MAX)", max = limits::DELEGATION_TOKENS_MAX)]
    TooMany,
    /// More renewers than [`limits::TOKEN_RENEWERS_MAX`].
    #[error("a token may name at most {max} renewers (TOKEN_RENEWERS_MAX)", max = limits::TOKEN_RENEWERS_MAX)]
    TooManyRenewers,
}

impl TokenError {
    /// Kafka's error code for it.
    pub fn code(self) -> ErrorCode {
        match self {
            Self::NotFound => ErrorCode::DelegationTokenNotFound,
            Self::OwnerMismatch => ErrorCode::DelegationTokenOwnerMismatch,
            Self::Expired => ErrorCode::DelegationTokenExpired,
            Self::TooMany => ErrorCode::PolicyViolation,
            Self::TooManyRenewers => ErrorCode::InvalidRequest,
        }
    }
}

/// A new token id: 16 random bytes as 22 URL-safe base64 characters (Kafka's
/// `Uuid.randomUuid` base64 form).
pub fn new_token_id(rng: &mut dyn SecurityRng) -> String {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
    bytes[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
    URL_SAFE_NO_PAD.encode(bytes)
}

/// What CreateDelegationToken asks for.
#[derive(Debug, Clone)]
pub struct CreateToken {
    /// Whom the token is for.
    pub owner: KafkaPrincipal,
    /// Who asks.
    pub requester: KafkaPrincipal,
    /// Who else may renew it.
    pub renewers: Vec<KafkaPrincipal>,
    /// The requested max lifetime; 0 or less for the broker's.
    pub max_lifetime_ms: i64,
}

/// A new token (Kafka's `createToken`); `count` is how many are stored now.
pub fn create(
    config: &TokenConfig,
    request: CreateToken,
    count: usize,
    now_ms: i64,
    rng: &mut dyn SecurityRng,
) -> Result<DelegationToken, TokenError> {
    if count >= limits::DELEGATION_TOKENS_MAX {
        return Err(TokenError::TooMany);
    }
    if request.renewers.len() > limits::TOKEN_RENEWERS_MAX {
        return Err(TokenError::TooManyRenewers);
    }
    let lifetime = match request.max_lifetime_ms {
        l if l <= 0 => config.max_lifetime_ms,
        l => l.min(config.max_lifetime_ms),
    };
    let max_ms = now_ms.saturating_add(lifetime);
    Ok(DelegationToken {
        token_id: new_token_id(rng),
        owner: request.owner,
        requester: request.requester,
        renewers: request.renewers,
        issue_ms: now_ms,
        expiry_ms: now_ms.saturating_add(config.renew_ms).min(max_ms),
        max_ms,
    })
}

/// The token with `hmac`, if one of `tokens` has it (constant-time comparison).
pub fn find_by_hmac<'a>(
    config: &TokenConfig,
    tokens: impl IntoIterator<Item = &'a DelegationToken>,
    hmac: &[u8],
) -> Option<&'a DelegationToken> {
    use subtle::ConstantTimeEq;
    tokens
        .into_iter()
        .find(|t| bool::from(config.hmac(&t.token_id).ct_eq(hmac)))
}

fn check_caller(
    token: &DelegationToken,
    caller: &KafkaPrincipal,
    now_ms: i64,
) -> Result<(), TokenError> {
    if !token.owner_or_renewer(caller) {
        return Err(TokenError::OwnerMismatch);
    }
    if token.expired(now_ms) {
        return Err(TokenError::Expired);
    }
    Ok(())
}

/// RenewDelegationToken: the token with its new expiry.
pub fn renew(
    config: &TokenConfig,
    token: &DelegationToken,
    caller: &KafkaPrincipal,
    period_ms: i64,
    now_ms: i64,
) -> Result<DelegationToken, TokenError> {
    check_caller(token, caller, now_ms)?;
    let period = if period_ms < 0 {
        config.renew_ms
    } else {
        period_ms
    };
    Ok(DelegationToken {
        expiry_ms: now_ms.saturating_add(period).min(token.max_ms),
        ..token.clone()
    })
}

/// What ExpireDelegationToken does to a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// The token stays, with this new expiry.
    Moved(DelegationToken),
    /// The token is removed now (a negative period).
    Removed,
}

/// ExpireDelegationToken: the token's new expiry, or its removal; and the expiry answered.
pub fn expire(
    token: &DelegationToken,
    caller: &KafkaPrincipal,
    period_ms: i64,
    now_ms: i64,
) -> Result<(Expiry, i64), TokenError> {
    check_caller(token, caller, now_ms)?;
    if period_ms < 0 {
        return Ok((Expiry::Removed, now_ms));
    }
    let expiry_ms = now_ms.saturating_add(period_ms).min(token.max_ms);
    let moved = DelegationToken {
        expiry_ms,
        ..token.clone()
    };
    Ok((Expiry::Moved(moved), expiry_ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    const HOUR: i64 = 3_600_000;

    fn config() -> TokenConfig {
        TokenConfig::new("s3cret", 7 * 24 * HOUR, 24 * HOUR)
    }

    fn alice() -> KafkaPrincipal {
        KafkaPrincipal::user("alice")
    }

    fn request(max_lifetime_ms: i64) -> CreateToken {
        CreateToken {
            owner: alice(),
            requester: alice(),
            renewers: vec![KafkaPrincipal::user("renewer")],
            max_lifetime_ms,
        }
    }

    fn token(now: i64, max_lifetime_ms: i64) -> DelegationToken {
        create(
            &config(),
            request(max_lifetime_ms),
            0,
            now,
            &mut SplitMix64::new(7),
        )
        .unwrap()
    }

    #[test]
    fn a_new_token_lives_its_renew_time_within_its_max_lifetime() {
        let t = token(1000, 0);
        assert_eq!(t.token_id.len(), 22);
        assert_eq!((t.issue_ms, t.expiry_ms), (1000, 1000 + 24 * HOUR));
        assert_eq!(t.max_ms, 1000 + 7 * 24 * HOUR);
        let short = token(1000, HOUR);
        assert_eq!((short.expiry_ms, short.max_ms), (1000 + HOUR, 1000 + HOUR));
        let long = token(1000, 30 * 24 * HOUR);
        assert_eq!(
            long.max_ms,
            1000 + 7 * 24 * HOUR,
            "capped by the broker's max"
        );
        assert!(t.validate().is_ok());
        let other = create(&config(), request(0), 0, 1000, &mut SplitMix64::new(8)).unwrap();
        assert_ne!(t.token_id, other.token_id);
    }

    #[test]
    fn renewing_moves_the_expiry_up_to_the_max_and_only_for_owners_and_renewers() {
        let c = config();
        let t = token(0, 2 * 24 * HOUR);
        let renewed = renew(&c, &t, &KafkaPrincipal::user("renewer"), HOUR, 10 * HOUR).unwrap();
        assert_eq!(renewed.expiry_ms, 11 * HOUR);
        let default = renew(&c, &t, &alice(), -1, 10 * HOUR).unwrap();
        assert_eq!(default.expiry_ms, 34 * HOUR);
        let capped = renew(&c, &t, &alice(), 100 * HOUR, 20 * HOUR).unwrap();
        assert_eq!(capped.expiry_ms, 48 * HOUR);
        assert_eq!(
            renew(&c, &t, &KafkaPrincipal::user("mallory"), HOUR, 0),
            Err(TokenError::OwnerMismatch)
        );
        assert_eq!(
            renew(&c, &t, &alice(), HOUR, 24 * HOUR + 1),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn expiring_removes_now_or_moves_the_expiry() {
        let t = token(0, 0);
        assert_eq!(expire(&t, &alice(), -1, 5), Ok((Expiry::Removed, 5)));
        let (moved, at) = expire(&t, &alice(), HOUR, 5).unwrap();
        assert_eq!(at, 5 + HOUR);
        assert!(matches!(moved, Expiry::Moved(m) if m.expiry_ms == 5 + HOUR));
        assert_eq!(
            expire(&t, &KafkaPrincipal::user("mallory"), -1, 5),
            Err(TokenError::OwnerMismatch)
        );
    }

    #[test]
    fn the_hmac_finds_the_token_and_derives_a_credential_its_password_proves() {
        let c = config();
        let t = token(0, 0);
        let hmac = c.hmac(&t.token_id);
        assert_eq!(hmac.len(), 64);
        assert_eq!(find_by_hmac(&c, [&t], &hmac), Some(&t));
        assert_eq!(find_by_hmac(&c, [&t], &[0; 64]), None);
        let other_secret = TokenConfig::new("other", HOUR, HOUR);
        assert_eq!(find_by_hmac(&other_secret, [&t], &hmac), None);
        for mechanism in ScramMechanism::ALL {
            let credential = c.scram_credential(&t.token_id, mechanism);
            assert!(credential.verify_password(&STANDARD.encode(&hmac)));
            assert!(!credential.verify_password("guess"));
            assert_eq!(credential, c.scram_credential(&t.token_id, mechanism));
        }
    }

    #[test]
    fn limits_are_named_errors() {
        let c = config();
        let mut rng = SplitMix64::new(1);
        assert_eq!(
            create(&c, request(0), limits::DELEGATION_TOKENS_MAX, 0, &mut rng),
            Err(TokenError::TooMany)
        );
        let mut many = request(0);
        many.renewers = vec![alice(); limits::TOKEN_RENEWERS_MAX + 1];
        assert_eq!(
            create(&c, many, 0, 0, &mut rng),
            Err(TokenError::TooManyRenewers)
        );
        assert!(format!("{:?}", c).contains("<redacted>"));
    }
}
