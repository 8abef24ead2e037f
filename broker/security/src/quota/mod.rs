//! Kafka's client quotas: which quota applies to a request, and ([`rate`]) how much a
//! client over it is throttled.
//!
//! Quotas are set on entities (AlterClientQuotas): a user, a client id, or both, each
//! either named or the default (`<default>`, a null name on the wire). For a request from
//! user `u` with client id `c`, the quota is the first that exists, in the order of
//! Kafka's `ClientQuotaManager`:
//!
//! ```text
//! 1. user u,         client-id c          (window shared by: u and c)
//! 2. user u,         client-id <default>  (u and c)
//! 3. user u                               (u, all its client ids)
//! 4. user <default>, client-id c          (u and c)
//! 5. user <default>, client-id <default>  (u and c)
//! 6. user <default>                       (u)
//! 7. client-id c                          (c, all users)
//! 8. client-id <default>                  (c)
//! ```
//!
//! The matched level also says who shares the sampled window the rate is measured over
//! (Kafka's quota metric tags): a user-level quota is one budget for all of that user's
//! clients. Each quota kind (`producer_byte_rate`, `consumer_byte_rate`) resolves on its
//! own. The user is the principal's name (`ANONYMOUS` when unauthenticated).
//!
//! A value is refused unless it is greater than 0 and a whole number (within 1e-6) no
//! larger than i64::MAX (the two keys are Kafka LONG configs; `ClientQuotaControlManager`),
//! and an entity is refused if a name is empty (Kafka: "Empty user not supported"). Kafka
//! lets NaN through those checks; we refuse it.

pub mod rate;

use std::collections::BTreeMap;

use crate::limits;

pub use rate::{QuotaConfig, QuotaTracker};

/// The name of one half of an entity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    /// `<default>`: every user (or client id) without a quota of its own.
    Default,
    /// One user or client id.
    Named(String),
}

/// What a quota is set on: a user, a client id, or both (never neither).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    /// The user half.
    pub user: Option<EntityName>,
    /// The client-id half.
    pub client_id: Option<EntityName>,
}

/// Kafka's byte-rate quota keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: Produce request bytes per second.
    ProducerByteRate,
    /// `consumer_byte_rate`: Fetch response bytes per second.
    ConsumerByteRate,
}

impl QuotaKind {
    /// Both.
    pub const ALL: [QuotaKind; 2] = [QuotaKind::ProducerByteRate, QuotaKind::ConsumerByteRate];

    /// Kafka's key name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::ProducerByteRate => "producer_byte_rate",
            Self::ConsumerByteRate => "consumer_byte_rate",
        }
    }

    /// The kind with Kafka's key name `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Who shares one sampled window: Kafka's quota metric tags (`user`, `client-id`), an
/// empty string for a half that does not take part.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaKey {
    /// The user, or empty.
    pub user: String,
    /// The client id, or empty.
    pub client_id: String,
}

/// A quota that cannot be set. Kafka answers INVALID_REQUEST (42) with the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// An entity or value Kafka refuses; the text is Kafka's message.
    #[error("{0}")]
    Invalid(String),
    /// A name over [`limits::QUOTA_CLIENT_ID_BYTES_MAX`] or [`limits::USER_NAME_BYTES_MAX`].
    #[error("quota entity {what} of {len} bytes is over the limit of {max} bytes ({limit})")]
    TooLong {
        /// `user` or `client-id`.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
    /// [`limits::QUOTA_ENTITIES_MAX`] entities already have quotas.
    #[error("{max} quota entities are set, the limit (QUOTA_ENTITIES_MAX)", max = limits::QUOTA_ENTITIES_MAX)]
    TooMany,
    /// A `quota.window.*` setting outside its bounds.
    #[error("{key} = {value} is outside 1..={max} ({limit})")]
    Config {
        /// The config key.
        key: &'static str,
        /// The value.
        value: u32,
        /// The bound.
        max: u32,
        /// The limit's name.
        limit: &'static str,
    },
}

impl QuotaError {
    /// Kafka's INVALID_REQUEST.
    pub const fn error_code(&self) -> i16 {
        sluice_kafka::ErrorCode::InvalidRequest.code()
    }
}

impl QuotaEntity {
    /// Kafka's entity checks: at least one half, no empty name, within the limits.
    pub fn validate(&self) -> Result<(), QuotaError> {
        if self.user.is_none() && self.client_id.is_none() {
            return Err(QuotaError::Invalid(
                "Invalid empty client quota entity".into(),
            ));
        }
        let halves = [
            (
                "user",
                &self.user,
                limits::USER_NAME_BYTES_MAX,
                "USER_NAME_BYTES_MAX",
            ),
            (
                "client-id",
                &self.client_id,
                limits::QUOTA_CLIENT_ID_BYTES_MAX,
                "QUOTA_CLIENT_ID_BYTES_MAX",
            ),
        ];
        for (what, half, max, limit) in halves {
            let Some(EntityName::Named(name)) = half else {
                continue;
            };
            if name.is_empty() {
                return Err(QuotaError::Invalid(format!("Empty {what} not supported")));
            }
            if name.len() > max {
                return Err(QuotaError::TooLong {
                    what,
                    len: name.len(),
                    max,
                    limit,
                });
            }
        }
        Ok(())
    }
}

/// Kafka's check of a LONG quota value: `> 0`, whole, within i64.
pub fn validate_value(kind: QuotaKind, value: f64) -> Result<(), QuotaError> {
    let key = kind.name();
    if value.is_nan() || value <= 0.0 {
        return Err(QuotaError::Invalid(format!(
            "Quota {key} must be greater than 0"
        )));
    }
    if value > i64::MAX as f64 {
        return Err(QuotaError::Invalid(format!(
            "Proposed value for {key} is too large for a LONG."
        )));
    }
    if value.fract().abs() > 1e-6 {
        return Err(QuotaError::Invalid(format!(
            "{key} cannot be a fractional value."
        )));
    }
    Ok(())
}

/// The quotas that are set, by entity and kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientQuotas {
    entities: BTreeMap<QuotaEntity, BTreeMap<QuotaKind, f64>>,
}

impl ClientQuotas {
    /// Sets (or replaces) one quota.
    pub fn set(
        &mut self,
        entity: QuotaEntity,
        kind: QuotaKind,
        value: f64,
    ) -> Result<(), QuotaError> {
        entity.validate()?;
        validate_value(kind, value)?;
        if !self.entities.contains_key(&entity) && self.entities.len() >= limits::QUOTA_ENTITIES_MAX
        {
            return Err(QuotaError::TooMany);
        }
        self.entities.entry(entity).or_default().insert(kind, value);
        Ok(())
    }

    /// Removes one quota; whether it was set.
    pub fn remove(&mut self, entity: &QuotaEntity, kind: QuotaKind) -> bool {
        let Some(kinds) = self.entities.get_mut(entity) else {
            return false;
        };
        let removed = kinds.remove(&kind).is_some();
        if kinds.is_empty() {
            self.entities.remove(entity);
        }
        removed
    }

    /// The quota of exactly this entity and kind.
    pub fn get(&self, entity: &QuotaEntity, kind: QuotaKind) -> Option<f64> {
        self.entities.get(entity)?.get(&kind).copied()
    }

    /// Every quota, in a stable order (for DescribeClientQuotas and snapshots).
    pub fn iter(&self) -> impl Iterator<Item = (&QuotaEntity, QuotaKind, f64)> {
        self.entities
            .iter()
            .flat_map(|(e, kinds)| kinds.iter().map(move |(k, v)| (e, *k, *v)))
    }

    /// Number of entities with a quota.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// Whether no quota is set.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The quota for a request from `user` with `client_id`, and who shares its window
    /// (the 8 levels of the module docs); `None` when no level has one.
    pub fn resolve(&self, kind: QuotaKind, user: &str, client_id: &str) -> Option<(QuotaKey, f64)> {
        let named = |s: &str| Some(EntityName::Named(s.to_owned()));
        let default = || Some(EntityName::Default);
        let both = (user.to_owned(), client_id.to_owned());
        let user_only = (user.to_owned(), String::new());
        let client_only = (String::new(), client_id.to_owned());
        let levels = [
            (named(user), named(client_id), &both),
            (named(user), default(), &both),
            (named(user), None, &user_only),
            (default(), named(client_id), &both),
            (default(), default(), &both),
            (default(), None, &user_only),
            (None, named(client_id), &client_only),
            (None, default(), &client_only),
        ];
        levels.into_iter().find_map(|(user, client_id, (u, c))| {
            let value = self.get(&QuotaEntity { user, client_id }, kind)?;
            Some((
                QuotaKey {
                    user: u.clone(),
                    client_id: c.clone(),
                },
                value,
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client_id: Option<&str>) -> QuotaEntity {
        let half = |s: Option<&str>| {
            s.map(|s| {
                if s == "<default>" {
                    EntityName::Default
                } else {
                    EntityName::Named(s.into())
                }
            })
        };
        QuotaEntity {
            user: half(user),
            client_id: half(client_id),
        }
    }

    #[test]
    fn the_eight_levels_in_kafkas_order() {
        let d = Some("<default>");
        let levels = [
            (entity(Some("u"), Some("c")), ("u", "c")),
            (entity(Some("u"), d), ("u", "c")),
            (entity(Some("u"), None), ("u", "")),
            (entity(d, Some("c")), ("u", "c")),
            (entity(d, d), ("u", "c")),
            (entity(d, None), ("u", "")),
            (entity(None, Some("c")), ("", "c")),
            (entity(None, d), ("", "c")),
        ];
        let kind = QuotaKind::ProducerByteRate;
        let mut quotas = ClientQuotas::default();
        for (i, (e, _)) in levels.iter().enumerate() {
            quotas.set(e.clone(), kind, (i + 1) as f64).unwrap();
        }
        // Remove levels from the most specific: each time the next level wins.
        for (i, (e, (u, c))) in levels.iter().enumerate() {
            let (key, value) = quotas.resolve(kind, "u", "c").unwrap();
            assert_eq!(value, (i + 1) as f64, "level {}", i + 1);
            assert_eq!(
                (key.user.as_str(), key.client_id.as_str()),
                (*u, *c),
                "level {}",
                i + 1
            );
            assert!(quotas.remove(e, kind));
        }
        assert_eq!(quotas.resolve(kind, "u", "c"), None);
    }

    #[test]
    fn kinds_resolve_separately_and_other_users_fall_through() {
        let mut q = ClientQuotas::default();
        q.set(
            entity(Some("alice"), None),
            QuotaKind::ProducerByteRate,
            1024.0,
        )
        .unwrap();
        q.set(
            entity(None, Some("<default>")),
            QuotaKind::ConsumerByteRate,
            2048.0,
        )
        .unwrap();
        assert_eq!(
            q.resolve(QuotaKind::ProducerByteRate, "alice", "x")
                .unwrap()
                .1,
            1024.0
        );
        assert_eq!(q.resolve(QuotaKind::ProducerByteRate, "bob", "x"), None);
        let (key, v) = q
            .resolve(QuotaKind::ConsumerByteRate, "alice", "x")
            .unwrap();
        assert_eq!(
            (key.user.as_str(), key.client_id.as_str(), v),
            ("", "x", 2048.0)
        );
    }

    #[test]
    fn values_and_entities_are_checked_as_kafka_does() {
        let mut q = ClientQuotas::default();
        let e = entity(Some("u"), None);
        let kind = QuotaKind::ProducerByteRate;
        for (value, msg) in [
            (0.0, "Quota producer_byte_rate must be greater than 0"),
            (-5.0, "Quota producer_byte_rate must be greater than 0"),
            (f64::NAN, "Quota producer_byte_rate must be greater than 0"),
            (1.5, "producer_byte_rate cannot be a fractional value."),
            (
                1e19,
                "Proposed value for producer_byte_rate is too large for a LONG.",
            ),
        ] {
            assert_eq!(q.set(e.clone(), kind, value).unwrap_err().to_string(), msg);
        }
        assert_eq!(
            q.set(entity(None, None), kind, 1.0)
                .unwrap_err()
                .to_string(),
            "Invalid empty client quota entity"
        );
        assert_eq!(
            q.set(entity(Some(""), None), kind, 1.0)
                .unwrap_err()
                .to_string(),
            "Empty user not supported"
        );
        let long = "c".repeat(limits::QUOTA_CLIENT_ID_BYTES_MAX + 1);
        let err = q.set(entity(None, Some(&long)), kind, 1.0).unwrap_err();
        assert!(
            err.to_string().contains("QUOTA_CLIENT_ID_BYTES_MAX"),
            "{err}"
        );
        assert!(q.is_empty());
        assert_eq!(
            QuotaKind::from_name("consumer_byte_rate"),
            Some(QuotaKind::ConsumerByteRate)
        );
        assert_eq!(QuotaKind::from_name("request_percentage"), None);
    }
}
