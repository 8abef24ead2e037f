//! [`SecurityState`]: the users' SCRAM credentials, the authorizer's bindings, the client
//! quotas and the delegation tokens, rebuilt by applying [`SecurityRecord`]s in log order.
//!
//! Applying is deterministic: the same records in the same order give the same state on
//! every replica, including the records a limit refuses (they are refused everywhere and
//! change nothing). [`SecurityState::snapshot`] returns records that rebuild the current
//! state from empty, one per live credential, binding and quota: what a compacted log
//! keeps. `super.users` and `allow.everyone.if.no.acl.found` are broker config, not
//! state: they are given to [`SecurityState::new`] and never written as records.

use std::collections::BTreeMap;

use crate::acl::{AclError, Authorizer};
use crate::limits;
use crate::principal::SuperUsers;
use crate::quota::{ClientQuotas, QuotaError};
use crate::records::SecurityRecord;
use crate::scram::{CredentialLookup, ScramCredential, ScramMechanism};
use crate::tokens::DelegationToken;

/// A record that is well formed but that the state refuses (the same on every replica).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// [`limits::SCRAM_CREDENTIALS_MAX`] credentials are stored.
    #[error("{max} SCRAM credentials are stored, the limit (SCRAM_CREDENTIALS_MAX)", max = limits::SCRAM_CREDENTIALS_MAX)]
    TooManyCredentials,
    /// The authorizer refused the binding.
    #[error(transparent)]
    Acl(#[from] AclError),
    /// The quota was refused.
    #[error(transparent)]
    Quota(#[from] QuotaError),
    /// [`limits::DELEGATION_TOKENS_MAX`] tokens are stored.
    #[error("{max} delegation tokens are stored, the limit (DELEGATION_TOKENS_MAX)", max = limits::DELEGATION_TOKENS_MAX)]
    TooManyTokens,
}

/// Everything the security records describe.
#[derive(Debug, Clone, PartialEq)]
pub struct SecurityState {
    credentials: BTreeMap<(String, ScramMechanism), ScramCredential>,
    authorizer: Authorizer,
    quotas: ClientQuotas,
    tokens: BTreeMap<String, DelegationToken>,
}

impl SecurityState {
    /// An empty state with the authorizer's config.
    pub fn new(super_users: SuperUsers, allow_everyone_if_no_acl_found: bool) -> Self {
        Self {
            credentials: BTreeMap::new(),
            authorizer: Authorizer::new(super_users, allow_everyone_if_no_acl_found),
            quotas: ClientQuotas::default(),
            tokens: BTreeMap::new(),
        }
    }

    /// Applies records in order; returns the refused ones with why (by position).
    pub fn load(
        &mut self,
        records: impl IntoIterator<Item = SecurityRecord>,
    ) -> Vec<(usize, ApplyError)> {
        let mut refused = Vec::new();
        for (i, record) in records.into_iter().enumerate() {
            if let Err(e) = self.apply(record) {
                refused.push((i, e));
            }
        }
        refused
    }

    /// Applies one record. A refused record changes nothing.
    pub fn apply(&mut self, record: SecurityRecord) -> Result<(), ApplyError> {
        match record {
            SecurityRecord::ScramCredentialUpsert { user, credential } => {
                let key = (user, credential.mechanism);
                if !self.credentials.contains_key(&key)
                    && self.credentials.len() >= limits::SCRAM_CREDENTIALS_MAX
                {
                    return Err(ApplyError::TooManyCredentials);
                }
                self.credentials.insert(key, credential);
            }
            SecurityRecord::ScramCredentialDelete { user, mechanism } => {
                self.credentials.remove(&(user, mechanism));
            }
            SecurityRecord::AclCreate(binding) => {
                self.authorizer.add(binding)?;
            }
            SecurityRecord::AclDelete(binding) => {
                self.authorizer.remove(&binding);
            }
            SecurityRecord::ClientQuotaSet {
                entity,
                kind,
                value,
            } => self.quotas.set(entity, kind, value)?,
            SecurityRecord::ClientQuotaRemove { entity, kind } => {
                self.quotas.remove(&entity, kind);
            }
            SecurityRecord::DelegationToken(token) => {
                if !self.tokens.contains_key(&token.token_id)
                    && self.tokens.len() >= limits::DELEGATION_TOKENS_MAX
                {
                    return Err(ApplyError::TooManyTokens);
                }
                self.tokens.insert(token.token_id.clone(), token);
            }
            SecurityRecord::DelegationTokenRemove { token_id } => {
                self.tokens.remove(&token_id);
            }
        }
        Ok(())
    }

    /// Records that rebuild this state from empty: credentials, bindings, quotas, tokens.
    pub fn snapshot(&self) -> Vec<SecurityRecord> {
        let credentials = self.credentials.iter().map(|((user, _), credential)| {
            SecurityRecord::ScramCredentialUpsert {
                user: user.clone(),
                credential: credential.clone(),
            }
        });
        let acls = self.authorizer.bindings().map(SecurityRecord::AclCreate);
        let quotas =
            self.quotas
                .iter()
                .map(|(entity, kind, value)| SecurityRecord::ClientQuotaSet {
                    entity: entity.clone(),
                    kind,
                    value,
                });
        let tokens = self
            .tokens
            .values()
            .cloned()
            .map(SecurityRecord::DelegationToken);
        credentials
            .chain(acls)
            .chain(quotas)
            .chain(tokens)
            .collect()
    }

    /// A user's credential for one mechanism.
    pub fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.credentials.get(&(user.to_owned(), mechanism))
    }

    /// Number of stored credentials (user, mechanism).
    pub fn credential_count(&self) -> usize {
        self.credentials.len()
    }

    /// Users with credentials, each with its mechanisms (DescribeUserScramCredentials).
    pub fn users(&self) -> BTreeMap<&str, Vec<(ScramMechanism, u32)>> {
        let mut out: BTreeMap<&str, Vec<(ScramMechanism, u32)>> = BTreeMap::new();
        for ((user, mechanism), c) in &self.credentials {
            out.entry(user.as_str())
                .or_default()
                .push((*mechanism, c.iterations));
        }
        out
    }

    /// The authorizer.
    pub fn authorizer(&self) -> &Authorizer {
        &self.authorizer
    }

    /// The client quotas.
    pub fn quotas(&self) -> &ClientQuotas {
        &self.quotas
    }

    /// The delegation token `token_id`.
    pub fn token(&self, token_id: &str) -> Option<&DelegationToken> {
        self.tokens.get(token_id)
    }

    /// Every delegation token, by id.
    pub fn tokens(&self) -> impl Iterator<Item = &DelegationToken> {
        self.tokens.values()
    }

    /// Number of stored delegation tokens.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }
}

impl CredentialLookup for SecurityState {
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.credential(user, mechanism).cloned()
    }
}
