//! The durable form of security state: one [`SecurityRecord`] per change, versioned and
//! bounded, for a log that replays them in order ([`crate::state::SecurityState`]).
//!
//! # Byte layout, version 0 (integers big-endian)
//!
//! ```text
//! u8 version = 0
//! u8 kind
//! kind 0 ScramCredentialUpsert: str user, i8 mechanism (Kafka type: 1 SHA-256, 2 SHA-512),
//!        i32 iterations, bytes salt, bytes stored_key, bytes server_key
//! kind 1 ScramCredentialDelete: str user, i8 mechanism
//! kind 2 AclCreate, kind 3 AclDelete (one binding): i8 resource_type, str name,
//!        i8 pattern_type, str principal ("Type:name"), str host, i8 operation, i8 permission_type
//!        (Kafka's ACL codes, crate::acl)
//! kind 4 ClientQuotaSet: entity, u8 key (0 producer_byte_rate, 1 consumer_byte_rate), f64 value
//! kind 5 ClientQuotaRemove: entity, u8 key
//! str, bytes = u16 length, then that many bytes (UTF-8 for str)
//! entity     = half user, half client_id; half = u8 0 absent | 1 <default> | 2 named, then str
//! ```
//!
//! Decoding is strict: the whole record is at most [`limits::SECURITY_RECORD_BYTES_MAX`];
//! every length is checked against its field's limit and the bytes left before anything
//! is copied; unknown versions, kinds and codes, bad UTF-8, trailing bytes, and values
//! the live checks would refuse (a credential out of Kafka's bounds, an invalid binding or
//! quota) are errors. A decoded record is one that could have been written.

use sluice_kafka::bytes::{Limit, ReadError, Reader, Writer};

use crate::acl::{
    AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
    ResourceType,
};
use crate::limits;
use crate::principal::KafkaPrincipal;
use crate::quota::{EntityName, QuotaEntity, QuotaKind, validate_value};
use crate::scram::{ScramCredential, ScramMechanism};

const VERSION: u8 = 0;

/// One change to the security state.
#[derive(Debug, Clone, PartialEq)]
pub enum SecurityRecord {
    /// A user's credential for one mechanism is set (AlterUserScramCredentials upsertion).
    ScramCredentialUpsert {
        /// The user name.
        user: String,
        /// The credential (its mechanism included).
        credential: ScramCredential,
    },
    /// A user's credential for one mechanism is deleted.
    ScramCredentialDelete {
        /// The user name.
        user: String,
        /// The mechanism.
        mechanism: ScramMechanism,
    },
    /// One ACL binding is created.
    AclCreate(AclBinding),
    /// One ACL binding is deleted.
    AclDelete(AclBinding),
    /// A client quota is set.
    ClientQuotaSet {
        /// The entity.
        entity: QuotaEntity,
        /// The key.
        kind: QuotaKind,
        /// The value, bytes per second.
        value: f64,
    },
    /// A client quota is removed.
    ClientQuotaRemove {
        /// The entity.
        entity: QuotaEntity,
        /// The key.
        kind: QuotaKind,
    },
}

/// A record that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The record is over [`limits::SECURITY_RECORD_BYTES_MAX`].
    #[error("security record of {0} bytes is over the limit of {max} bytes (SECURITY_RECORD_BYTES_MAX)", max = limits::SECURITY_RECORD_BYTES_MAX)]
    TooLong(usize),
    /// A field is cut short, over its limit (named) or not UTF-8, or bytes remain after
    /// the last field.
    #[error("security record: {0}")]
    Read(#[from] ReadError),
    /// A version this build does not read.
    #[error("security record version {0} is not supported (this build reads version 0)")]
    UnknownVersion(u8),
    /// A kind, code or tag this build does not know.
    #[error("security record has unknown {what} {value}")]
    Unknown {
        /// Which field.
        what: &'static str,
        /// Its value.
        value: i16,
    },
    /// The value is one the live checks refuse.
    #[error("security record holds an invalid value: {0}")]
    Invalid(String),
}

mod kind {
    pub const SCRAM_UPSERT: u8 = 0;
    pub const SCRAM_DELETE: u8 = 1;
    pub const ACL_CREATE: u8 = 2;
    pub const ACL_DELETE: u8 = 3;
    pub const QUOTA_SET: u8 = 4;
    pub const QUOTA_REMOVE: u8 = 5;
}

impl SecurityRecord {
    /// The live checks a record must pass before it is written: a non-empty user within
    /// [`limits::USER_NAME_BYTES_MAX`], a credential within Kafka's bounds, a valid
    /// binding, a valid quota entity and value. [`SecurityRecord::decode`] refuses
    /// exactly what this refuses.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let invalid = |e: &dyn std::fmt::Display| DecodeError::Invalid(e.to_string());
        let user_ok = |user: &str| -> Result<(), DecodeError> {
            if user.is_empty() {
                return Err(DecodeError::Invalid("empty user name".into()));
            }
            let len = user.len();
            if len > USER.max {
                return Err(ReadError::TooLong {
                    what: "user",
                    len,
                    limit: USER,
                }
                .into());
            }
            Ok(())
        };
        match self {
            Self::ScramCredentialUpsert { user, credential } => {
                user_ok(user)?;
                credential.validate().map_err(|e| invalid(&e))
            }
            Self::ScramCredentialDelete { user, .. } => user_ok(user),
            Self::AclCreate(b) | Self::AclDelete(b) => b.validate().map_err(|e| invalid(&e)),
            Self::ClientQuotaSet {
                entity,
                kind,
                value,
            } => {
                entity.validate().map_err(|e| invalid(&e))?;
                validate_value(*kind, *value).map_err(|e| invalid(&e))
            }
            Self::ClientQuotaRemove { entity, .. } => entity.validate().map_err(|e| invalid(&e)),
        }
    }

    /// The record's bytes (layout in the module docs). The record must pass
    /// [`SecurityRecord::validate`] (asserted: writing an unchecked record is our bug).
    pub fn encode(&self) -> Vec<u8> {
        if let Err(e) = self.validate() {
            panic!("encoding an invalid security record: {e}");
        }
        let mut w = Writer::with_capacity(64);
        w.u8(VERSION);
        match self {
            Self::ScramCredentialUpsert {
                user,
                credential: c,
            } => {
                w.u8(kind::SCRAM_UPSERT).str_u16(user);
                w.i8(c.mechanism.type_code()).i32(c.iterations as i32);
                w.bytes_u16(&c.salt).bytes_u16(&c.stored_key);
                w.bytes_u16(&c.server_key);
            }
            Self::ScramCredentialDelete { user, mechanism } => {
                w.u8(kind::SCRAM_DELETE).str_u16(user);
                w.i8(mechanism.type_code());
            }
            Self::AclCreate(b) | Self::AclDelete(b) => {
                w.u8(if matches!(self, Self::AclCreate(_)) {
                    kind::ACL_CREATE
                } else {
                    kind::ACL_DELETE
                });
                put_binding(&mut w, b);
            }
            Self::ClientQuotaSet {
                entity,
                kind: k,
                value,
            } => {
                w.u8(kind::QUOTA_SET);
                put_entity(&mut w, entity);
                w.u8(quota_code(*k)).u64(value.to_bits());
            }
            Self::ClientQuotaRemove { entity, kind: k } => {
                w.u8(kind::QUOTA_REMOVE);
                put_entity(&mut w, entity);
                w.u8(quota_code(*k));
            }
        }
        let w = w.into_bytes();
        assert!(
            w.len() <= limits::SECURITY_RECORD_BYTES_MAX,
            "an encoded record over SECURITY_RECORD_BYTES_MAX"
        );
        w
    }

    /// Decodes one record, strictly (module docs).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > limits::SECURITY_RECORD_BYTES_MAX {
            return Err(DecodeError::TooLong(bytes.len()));
        }
        let mut r = Reader::new(bytes);
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let record = match r.u8("record kind")? {
            kind::SCRAM_UPSERT => decode_upsert(&mut r)?,
            kind::SCRAM_DELETE => {
                let user = user(&mut r)?;
                Self::ScramCredentialDelete {
                    user,
                    mechanism: mechanism(&mut r)?,
                }
            }
            kind::ACL_CREATE => Self::AclCreate(binding(&mut r)?),
            kind::ACL_DELETE => Self::AclDelete(binding(&mut r)?),
            kind::QUOTA_SET => {
                let entity = entity(&mut r)?;
                let k = quota_kind(&mut r)?;
                let value = f64::from_bits(r.u64("quota value")?);
                validate_value(k, value).map_err(|e| DecodeError::Invalid(e.to_string()))?;
                Self::ClientQuotaSet {
                    entity,
                    kind: k,
                    value,
                }
            }
            kind::QUOTA_REMOVE => {
                let entity = entity(&mut r)?;
                Self::ClientQuotaRemove {
                    entity,
                    kind: quota_kind(&mut r)?,
                }
            }
            other => {
                return Err(DecodeError::Unknown {
                    what: "record kind",
                    value: other.into(),
                });
            }
        };
        r.finish()?;
        Ok(record)
    }
}

/// The limits the fields are read under, named as in [`limits`].
const USER: Limit = Limit::new("USER_NAME_BYTES_MAX", limits::USER_NAME_BYTES_MAX);
const SALT: Limit = Limit::new("SCRAM_SALT_BYTES_MAX", limits::SCRAM_SALT_BYTES_MAX);
const RESOURCE_NAME: Limit = Limit::new(
    "ACL_RESOURCE_NAME_BYTES_MAX",
    limits::ACL_RESOURCE_NAME_BYTES_MAX,
);
const PRINCIPAL: Limit = Limit::new(
    "PRINCIPAL_TYPE_BYTES_MAX + USER_NAME_BYTES_MAX",
    limits::PRINCIPAL_TYPE_BYTES_MAX + 1 + limits::USER_NAME_BYTES_MAX,
);
const HOST: Limit = Limit::new("ACL_HOST_BYTES_MAX", limits::ACL_HOST_BYTES_MAX);
const CLIENT_ID: Limit = Limit::new(
    "QUOTA_CLIENT_ID_BYTES_MAX",
    limits::QUOTA_CLIENT_ID_BYTES_MAX,
);

fn decode_upsert(r: &mut Reader<'_>) -> Result<SecurityRecord, DecodeError> {
    let user = user(r)?;
    let mechanism = mechanism(r)?;
    let iterations = r.i32("iterations")?;
    let key = Limit::new("the mechanism's hash length", mechanism.hash_len());
    let salt = r.bytes_u16("salt", SALT)?.to_vec();
    let stored_key = r.bytes_u16("stored key", key)?.to_vec();
    let server_key = r.bytes_u16("server key", key)?.to_vec();
    let iterations = u32::try_from(iterations)
        .map_err(|_| DecodeError::Invalid(format!("iterations {iterations}")))?;
    let credential = ScramCredential {
        mechanism,
        salt,
        stored_key,
        server_key,
        iterations,
    };
    credential
        .validate()
        .map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(SecurityRecord::ScramCredentialUpsert { user, credential })
}

fn quota_code(kind: QuotaKind) -> u8 {
    match kind {
        QuotaKind::ProducerByteRate => 0,
        QuotaKind::ConsumerByteRate => 1,
    }
}

fn put_binding(w: &mut Writer, b: &AclBinding) {
    w.i8(b.pattern.resource_type.code())
        .str_u16(&b.pattern.name);
    w.i8(b.pattern.pattern_type.code());
    w.str_u16(&b.entry.principal.to_string())
        .str_u16(&b.entry.host);
    w.i8(b.entry.operation.code())
        .i8(b.entry.permission_type.code());
}

fn put_entity(w: &mut Writer, e: &QuotaEntity) {
    for half in [&e.user, &e.client_id] {
        match half {
            None => w.u8(0),
            Some(EntityName::Default) => w.u8(1),
            Some(EntityName::Named(name)) => w.u8(2).str_u16(name),
        };
    }
}

fn user(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    let user = r.str_u16("user", USER)?;
    if user.is_empty() {
        return Err(DecodeError::Invalid("empty user name".into()));
    }
    Ok(user)
}

fn mechanism(r: &mut Reader<'_>) -> Result<ScramMechanism, DecodeError> {
    let code = r.i8("mechanism")?;
    ScramMechanism::from_type_code(code).ok_or(DecodeError::Unknown {
        what: "mechanism",
        value: code.into(),
    })
}

fn quota_kind(r: &mut Reader<'_>) -> Result<QuotaKind, DecodeError> {
    match r.u8("quota key")? {
        0 => Ok(QuotaKind::ProducerByteRate),
        1 => Ok(QuotaKind::ConsumerByteRate),
        other => Err(DecodeError::Unknown {
            what: "quota key",
            value: other.into(),
        }),
    }
}

fn binding(r: &mut Reader<'_>) -> Result<AclBinding, DecodeError> {
    let resource_type = ResourceType::from_code(r.i8("resource type")?);
    let name = r.str_u16("resource name", RESOURCE_NAME)?;
    let pattern_type = PatternType::from_code(r.i8("pattern type")?);
    let principal = r.str_u16("principal", PRINCIPAL)?;
    let host = r.str_u16("host", HOST)?;
    let operation = AclOperation::from_code(r.i8("operation")?);
    let permission_type = AclPermissionType::from_code(r.i8("permission type")?);
    let principal =
        KafkaPrincipal::parse(&principal).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    let binding = AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name,
            pattern_type,
        },
        entry: AccessControlEntry {
            principal,
            host,
            operation,
            permission_type,
        },
    };
    binding
        .validate()
        .map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(binding)
}

fn entity(r: &mut Reader<'_>) -> Result<QuotaEntity, DecodeError> {
    let mut half = |what: &'static str, limit: Limit| match r.u8("quota entity tag")? {
        0 => Ok(None),
        1 => Ok(Some(EntityName::Default)),
        2 => Ok(Some(EntityName::Named(r.str_u16(what, limit)?))),
        other => Err(DecodeError::Unknown {
            what: "quota entity tag",
            value: other.into(),
        }),
    };
    let user = half("user", USER)?;
    let client_id = half("client id", CLIENT_ID)?;
    let entity = QuotaEntity { user, client_id };
    entity
        .validate()
        .map_err(|e| DecodeError::Invalid(e.to_string()))?;
    Ok(entity)
}
