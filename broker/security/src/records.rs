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
    /// The record ended inside a field.
    #[error("security record truncated: needed {needed} bytes at byte {at}, have {len}")]
    Truncated {
        /// Where the field starts.
        at: usize,
        /// Bytes it needs.
        needed: usize,
        /// Record length.
        len: usize,
    },
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
    /// A string field is not UTF-8.
    #[error("security record has a {0} that is not UTF-8")]
    InvalidUtf8(&'static str),
    /// A length field over the field's limit.
    #[error("security record {what} of {len} bytes is over the limit of {max} bytes ({limit})")]
    FieldTooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
    /// Bytes after the last field.
    #[error("security record has {0} trailing bytes")]
    TrailingBytes(usize),
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
            let (len, max) = (user.len(), limits::USER_NAME_BYTES_MAX);
            if len > max {
                return Err(DecodeError::FieldTooLong {
                    what: "user",
                    len,
                    max,
                    limit: "USER_NAME_BYTES_MAX",
                });
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
        let mut w = Vec::with_capacity(64);
        w.push(VERSION);
        match self {
            Self::ScramCredentialUpsert {
                user,
                credential: c,
            } => {
                w.push(kind::SCRAM_UPSERT);
                put16(&mut w, user.as_bytes());
                w.push(c.mechanism.type_code() as u8);
                w.extend_from_slice(&(c.iterations as i32).to_be_bytes());
                put16(&mut w, &c.salt);
                put16(&mut w, &c.stored_key);
                put16(&mut w, &c.server_key);
            }
            Self::ScramCredentialDelete { user, mechanism } => {
                w.push(kind::SCRAM_DELETE);
                put16(&mut w, user.as_bytes());
                w.push(mechanism.type_code() as u8);
            }
            Self::AclCreate(b) | Self::AclDelete(b) => {
                w.push(if matches!(self, Self::AclCreate(_)) {
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
                w.push(kind::QUOTA_SET);
                put_entity(&mut w, entity);
                w.push(quota_code(*k));
                w.extend_from_slice(&value.to_bits().to_be_bytes());
            }
            Self::ClientQuotaRemove { entity, kind: k } => {
                w.push(kind::QUOTA_REMOVE);
                put_entity(&mut w, entity);
                w.push(quota_code(*k));
            }
        }
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
        let mut r = Reader { bytes, at: 0 };
        let version = r.u8()?;
        if version != VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        let record = match r.u8()? {
            kind::SCRAM_UPSERT => decode_upsert(&mut r)?,
            kind::SCRAM_DELETE => {
                let user = r.user()?;
                Self::ScramCredentialDelete {
                    user,
                    mechanism: r.mechanism()?,
                }
            }
            kind::ACL_CREATE => Self::AclCreate(r.binding()?),
            kind::ACL_DELETE => Self::AclDelete(r.binding()?),
            kind::QUOTA_SET => {
                let entity = r.entity()?;
                let k = r.quota_kind()?;
                let value = f64::from_bits(u64::from_be_bytes(r.array()?));
                validate_value(k, value).map_err(|e| DecodeError::Invalid(e.to_string()))?;
                Self::ClientQuotaSet {
                    entity,
                    kind: k,
                    value,
                }
            }
            kind::QUOTA_REMOVE => {
                let entity = r.entity()?;
                Self::ClientQuotaRemove {
                    entity,
                    kind: r.quota_kind()?,
                }
            }
            other => {
                return Err(DecodeError::Unknown {
                    what: "record kind",
                    value: other.into(),
                });
            }
        };
        match bytes.len() - r.at {
            0 => Ok(record),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

fn decode_upsert(r: &mut Reader<'_>) -> Result<SecurityRecord, DecodeError> {
    let user = r.user()?;
    let mechanism = r.mechanism()?;
    let iterations = i32::from_be_bytes(r.array()?);
    let salt = r
        .bytes16("salt", limits::SCRAM_SALT_BYTES_MAX, "SCRAM_SALT_BYTES_MAX")?
        .to_vec();
    let stored_key = r
        .bytes16(
            "stored key",
            mechanism.hash_len(),
            "the mechanism's hash length",
        )?
        .to_vec();
    let server_key = r
        .bytes16(
            "server key",
            mechanism.hash_len(),
            "the mechanism's hash length",
        )?
        .to_vec();
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

fn put16(w: &mut Vec<u8>, bytes: &[u8]) {
    let len = u16::try_from(bytes.len()).expect("a record field over u16 length");
    w.extend_from_slice(&len.to_be_bytes());
    w.extend_from_slice(bytes);
}

fn put_binding(w: &mut Vec<u8>, b: &AclBinding) {
    w.push(b.pattern.resource_type.code() as u8);
    put16(w, b.pattern.name.as_bytes());
    w.push(b.pattern.pattern_type.code() as u8);
    put16(w, b.entry.principal.to_string().as_bytes());
    put16(w, b.entry.host.as_bytes());
    w.push(b.entry.operation.code() as u8);
    w.push(b.entry.permission_type.code() as u8);
}

fn put_entity(w: &mut Vec<u8>, e: &QuotaEntity) {
    for half in [&e.user, &e.client_id] {
        match half {
            None => w.push(0),
            Some(EntityName::Default) => w.push(1),
            Some(EntityName::Named(name)) => {
                w.push(2);
                put16(w, name.as_bytes());
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let truncated = DecodeError::Truncated {
            at: self.at,
            needed: n,
            len: self.bytes.len(),
        };
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(truncated)?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.u8()? as i8)
    }

    /// A u16-length field, its length checked against `max` before it is read.
    fn bytes16(
        &mut self,
        what: &'static str,
        max: usize,
        limit: &'static str,
    ) -> Result<&'a [u8], DecodeError> {
        let len = usize::from(u16::from_be_bytes(self.array()?));
        if len > max {
            return Err(DecodeError::FieldTooLong {
                what,
                len,
                max,
                limit,
            });
        }
        self.take(len)
    }

    fn str16(
        &mut self,
        what: &'static str,
        max: usize,
        limit: &'static str,
    ) -> Result<String, DecodeError> {
        let raw = self.bytes16(what, max, limit)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| DecodeError::InvalidUtf8(what))
    }

    fn user(&mut self) -> Result<String, DecodeError> {
        let user = self.str16("user", limits::USER_NAME_BYTES_MAX, "USER_NAME_BYTES_MAX")?;
        if user.is_empty() {
            return Err(DecodeError::Invalid("empty user name".into()));
        }
        Ok(user)
    }

    fn mechanism(&mut self) -> Result<ScramMechanism, DecodeError> {
        let code = self.i8()?;
        ScramMechanism::from_type_code(code).ok_or(DecodeError::Unknown {
            what: "mechanism",
            value: code.into(),
        })
    }

    fn quota_kind(&mut self) -> Result<QuotaKind, DecodeError> {
        match self.u8()? {
            0 => Ok(QuotaKind::ProducerByteRate),
            1 => Ok(QuotaKind::ConsumerByteRate),
            other => Err(DecodeError::Unknown {
                what: "quota key",
                value: other.into(),
            }),
        }
    }

    fn binding(&mut self) -> Result<AclBinding, DecodeError> {
        let resource_type = ResourceType::from_code(self.i8()?);
        let name = self.str16(
            "resource name",
            limits::ACL_RESOURCE_NAME_BYTES_MAX,
            "ACL_RESOURCE_NAME_BYTES_MAX",
        )?;
        let pattern_type = PatternType::from_code(self.i8()?);
        let max = limits::PRINCIPAL_TYPE_BYTES_MAX + 1 + limits::USER_NAME_BYTES_MAX;
        let principal = self.str16(
            "principal",
            max,
            "PRINCIPAL_TYPE_BYTES_MAX + USER_NAME_BYTES_MAX",
        )?;
        let host = self.str16("host", limits::ACL_HOST_BYTES_MAX, "ACL_HOST_BYTES_MAX")?;
        let operation = AclOperation::from_code(self.i8()?);
        let permission_type = AclPermissionType::from_code(self.i8()?);
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

    fn entity(&mut self) -> Result<QuotaEntity, DecodeError> {
        let mut half = |what: &'static str, max: usize, limit: &'static str| match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(EntityName::Default)),
            2 => Ok(Some(EntityName::Named(self.str16(what, max, limit)?))),
            other => Err(DecodeError::Unknown {
                what: "quota entity tag",
                value: other.into(),
            }),
        };
        let user = half("user", limits::USER_NAME_BYTES_MAX, "USER_NAME_BYTES_MAX")?;
        let client_id = half(
            "client id",
            limits::QUOTA_CLIENT_ID_BYTES_MAX,
            "QUOTA_CLIENT_ID_BYTES_MAX",
        )?;
        let entity = QuotaEntity { user, client_id };
        entity
            .validate()
            .map_err(|e| DecodeError::Invalid(e.to_string()))?;
        Ok(entity)
    }
}
