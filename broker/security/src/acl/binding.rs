//! ACL bindings, the checks a binding passes before it is stored, and the filters of
//! DescribeAcls and DeleteAcls, with Kafka's semantics.
//!
//! A binding is stored only if (Kafka's `AclControlManager.validateNewAcl`, `AclApis` and
//! `ResourcePattern`): its resource type is a real one (not UNKNOWN or ANY); its pattern
//! type is LITERAL or PREFIXED (never ANY or MATCH); its operation is not UNKNOWN or ANY;
//! its permission is ALLOW or DENY; its name is not empty; a CLUSTER binding is named
//! `kafka-cluster`; its principal is `Type:name`. `*` is a wildcard only as a LITERAL
//! name, as the host, and in the principal `User:*`; a PREFIXED `*` is an ordinary prefix.
//!
//! A filter matches a binding (Kafka's `ResourcePatternFilter.matches` and
//! `AccessControlEntryFilter.matches`): resource type ANY or equal; pattern type ANY
//! (any type, the name compared exactly), MATCH (the bindings that would apply to the
//! named resource: a LITERAL binding of that name or `*`, or a PREFIXED binding whose
//! name is a prefix of it), or equal (name compared exactly); a missing name matches
//! every name; principal, host missing or equal; operation and permission ANY or equal.

use sluice_kafka::ErrorCode;

use crate::acl::{
    AclOperation, AclPermissionType, CLUSTER_NAME, PatternType, ResourceType, WILDCARD_RESOURCE,
};
use crate::limits;
use crate::principal::KafkaPrincipal;

/// A binding or filter that cannot be used. Kafka answers all of these with
/// INVALID_REQUEST (42) and the message, per binding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    /// A rule of the module docs is broken; the text is Kafka's message.
    #[error("{0}")]
    Invalid(String),
    /// A field over its limit.
    #[error("ACL {what} of {len} bytes is over the limit of {max} bytes ({limit})")]
    TooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
    /// The authorizer already holds [`limits::ACLS_MAX`] bindings.
    #[error("the authorizer holds {max} ACLs, the limit (ACLS_MAX)", max = limits::ACLS_MAX)]
    TooMany,
}

impl AclError {
    /// The Kafka error code for this binding's result.
    pub const fn error_code(&self) -> i16 {
        ErrorCode::InvalidRequest.code()
    }
}

/// Which resources a binding applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourcePattern {
    /// The resource type.
    pub resource_type: ResourceType,
    /// The name: a resource name, `*`, or a prefix.
    pub name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
}

/// Who may (or may not) do what from where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccessControlEntry {
    /// The principal, or `User:*` for everyone.
    pub principal: KafkaPrincipal,
    /// The client address, or `*` for any.
    pub host: String,
    /// The operation, or ALL.
    pub operation: AclOperation,
    /// ALLOW or DENY.
    pub permission_type: AclPermissionType,
}

/// One ACL: a pattern and an entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    /// The resources.
    pub pattern: ResourcePattern,
    /// The entry.
    pub entry: AccessControlEntry,
}

fn invalid(message: impl Into<String>) -> AclError {
    AclError::Invalid(message.into())
}

fn check_len(
    what: &'static str,
    len: usize,
    max: usize,
    limit: &'static str,
) -> Result<(), AclError> {
    if len > max {
        return Err(AclError::TooLong {
            what,
            len,
            max,
            limit,
        });
    }
    Ok(())
}

impl AclBinding {
    /// A binding from CreateAcls fields (the principal still a string), validated.
    pub fn from_wire(
        resource_type: i8,
        name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission_type: i8,
    ) -> Result<Self, AclError> {
        let principal = KafkaPrincipal::parse(principal).map_err(|e| invalid(e.to_string()))?;
        let binding = Self {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(resource_type),
                name: name.to_owned(),
                pattern_type: PatternType::from_code(pattern_type),
            },
            entry: AccessControlEntry {
                principal,
                host: host.to_owned(),
                operation: AclOperation::from_code(operation),
                permission_type: AclPermissionType::from_code(permission_type),
            },
        };
        binding.validate()?;
        Ok(binding)
    }

    /// Kafka's checks before a binding is stored (module docs), and our limits.
    pub fn validate(&self) -> Result<(), AclError> {
        let (p, e) = (&self.pattern, &self.entry);
        if matches!(p.resource_type, ResourceType::Unknown | ResourceType::Any) {
            return Err(invalid(format!("Invalid resourceType {}", p.resource_type)));
        }
        if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Err(invalid(format!("Invalid patternType {}", p.pattern_type)));
        }
        if matches!(e.operation, AclOperation::Unknown | AclOperation::Any) {
            return Err(invalid(format!("Invalid operation {}", e.operation)));
        }
        if !matches!(
            e.permission_type,
            AclPermissionType::Allow | AclPermissionType::Deny
        ) {
            return Err(invalid(format!(
                "Invalid permissionType {}",
                e.permission_type
            )));
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Err(invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        if p.name.is_empty() {
            return Err(invalid("Invalid empty resource name"));
        }
        check_len(
            "resource name",
            p.name.len(),
            limits::ACL_RESOURCE_NAME_BYTES_MAX,
            "ACL_RESOURCE_NAME_BYTES_MAX",
        )?;
        check_len(
            "host",
            e.host.len(),
            limits::ACL_HOST_BYTES_MAX,
            "ACL_HOST_BYTES_MAX",
        )?;
        let principal = e.principal.to_string();
        KafkaPrincipal::parse(&principal).map_err(|err| invalid(err.to_string()))?;
        Ok(())
    }
}

/// Which patterns a filter selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePatternFilter {
    /// A type, or ANY.
    pub resource_type: ResourceType,
    /// A name, or `None` for any name.
    pub name: Option<String>,
    /// LITERAL, PREFIXED, ANY or MATCH.
    pub pattern_type: PatternType,
}

/// Which entries a filter selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessControlEntryFilter {
    /// A principal string (`User:alice`), or `None` for any.
    pub principal: Option<String>,
    /// A host, or `None` for any.
    pub host: Option<String>,
    /// An operation, or ANY.
    pub operation: AclOperation,
    /// A permission, or ANY.
    pub permission_type: AclPermissionType,
}

/// A DescribeAcls or DeleteAcls filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// The pattern half.
    pub pattern: ResourcePatternFilter,
    /// The entry half.
    pub entry: AccessControlEntryFilter,
}

impl ResourcePatternFilter {
    /// Kafka's `ResourcePatternFilter.matches`.
    pub fn matches(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        let any_or_match = matches!(self.pattern_type, PatternType::Any | PatternType::Match);
        if !any_or_match && self.pattern_type != pattern.pattern_type {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD_RESOURCE,
            PatternType::Prefixed => name.starts_with(&pattern.name),
            _ => false,
        }
    }
}

impl AccessControlEntryFilter {
    /// Kafka's `AccessControlEntryFilter.matches`.
    pub fn matches(&self, entry: &AccessControlEntry) -> bool {
        if self
            .principal
            .as_ref()
            .is_some_and(|p| *p != entry.principal.to_string())
        {
            return false;
        }
        if self.host.as_ref().is_some_and(|h| *h != entry.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != entry.operation {
            return false;
        }
        self.permission_type == AclPermissionType::Any
            || self.permission_type == entry.permission_type
    }
}

impl AclBindingFilter {
    /// Kafka's `AclBindingFilter.ANY`: every binding.
    pub fn any() -> Self {
        Self {
            pattern: ResourcePatternFilter {
                resource_type: ResourceType::Any,
                name: None,
                pattern_type: PatternType::Any,
            },
            entry: AccessControlEntryFilter {
                principal: None,
                host: None,
                operation: AclOperation::Any,
                permission_type: AclPermissionType::Any,
            },
        }
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.pattern.matches(&binding.pattern) && self.entry.matches(&binding.entry)
    }

    /// Kafka's `AclControlManager.validateFilter`: no UNKNOWN field.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.pattern.resource_type == ResourceType::Unknown
            || self.pattern.pattern_type == PatternType::Unknown
        {
            return Err(invalid("Unknown patternFilter."));
        }
        if self.entry.operation == AclOperation::Unknown
            || self.entry.permission_type == AclPermissionType::Unknown
        {
            return Err(invalid("Unknown entryFilter."));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn binding(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        op: AclOperation,
        perm: AclPermissionType,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: KafkaPrincipal::user("alice"),
                host: "*".into(),
                operation: op,
                permission_type: perm,
            },
        }
    }

    #[test]
    fn validation_table() {
        use AclOperation as O;
        use AclPermissionType as P;
        use PatternType as T;
        use ResourceType as R;
        let cases = [
            (binding(R::Topic, "t", T::Literal, O::Read, P::Allow), None),
            (binding(R::Topic, "*", T::Literal, O::All, P::Deny), None),
            (binding(R::Topic, "*", T::Prefixed, O::Read, P::Allow), None),
            (
                binding(R::Cluster, "kafka-cluster", T::Literal, O::Alter, P::Allow),
                None,
            ),
            (
                binding(R::Plugin, "p", T::Prefixed, O::Write, P::Allow),
                None,
            ),
            (
                binding(R::Any, "t", T::Literal, O::Read, P::Allow),
                Some("Invalid resourceType ANY"),
            ),
            (
                binding(R::Unknown, "t", T::Literal, O::Read, P::Allow),
                Some("Invalid resourceType UNKNOWN"),
            ),
            (
                binding(R::Topic, "t", T::Match, O::Read, P::Allow),
                Some("Invalid patternType MATCH"),
            ),
            (
                binding(R::Topic, "t", T::Any, O::Read, P::Allow),
                Some("Invalid patternType ANY"),
            ),
            (
                binding(R::Topic, "t", T::Literal, O::Any, P::Allow),
                Some("Invalid operation ANY"),
            ),
            (
                binding(R::Topic, "t", T::Literal, O::Unknown, P::Allow),
                Some("Invalid operation UNKNOWN"),
            ),
            (
                binding(R::Topic, "t", T::Literal, O::Read, P::Any),
                Some("Invalid permissionType ANY"),
            ),
            (
                binding(R::Topic, "", T::Literal, O::Read, P::Allow),
                Some("Invalid empty resource name"),
            ),
            (
                binding(R::Cluster, "c", T::Literal, O::Alter, P::Allow),
                Some("The only valid name for the CLUSTER resource is kafka-cluster"),
            ),
        ];
        for (b, want) in cases {
            assert_eq!(
                b.validate().err().map(|e| e.to_string()),
                want.map(str::to_owned),
                "{b:?}"
            );
        }
    }

    #[test]
    fn validation_names_the_limit() {
        use AclOperation as O;
        use AclPermissionType as P;
        use PatternType as T;
        use ResourceType as R;
        let long = binding(
            R::Topic,
            &"x".repeat(limits::ACL_RESOURCE_NAME_BYTES_MAX + 1),
            T::Literal,
            O::Read,
            P::Allow,
        );
        assert!(
            long.validate()
                .unwrap_err()
                .to_string()
                .contains("ACL_RESOURCE_NAME_BYTES_MAX")
        );
    }

    #[test]
    fn from_wire_parses_the_principal() {
        let b = AclBinding::from_wire(2, "t", 3, "User:bob", "10.0.0.1", 3, 3).unwrap();
        assert_eq!(b.entry.principal, KafkaPrincipal::user("bob"));
        let err = AclBinding::from_wire(2, "t", 3, "bob", "*", 3, 3).unwrap_err();
        assert!(
            err.to_string().contains("principalType:principalName"),
            "{err}"
        );
        assert_eq!(err.error_code(), 42);
        assert!(
            AclBinding::from_wire(9, "t", 3, "User:bob", "*", 3, 3).is_err(),
            "unknown type code"
        );
    }

    #[test]
    fn pattern_filter_table() {
        use PatternType::{Any, Literal as Lit, Match, Prefixed as Pre};
        use ResourceType::{Group, Topic};
        // (filter type, filter name, filter pattern type, binding pattern type, binding name, matches?)
        let cases = [
            (ResourceType::Any, None, Any, Lit, "a", true),
            (Group, None, Any, Lit, "a", false),
            (Topic, Some("a"), Any, Pre, "a", true),
            (Topic, Some("ab"), Any, Pre, "a", false),
            (Topic, Some("a"), Lit, Lit, "a", true),
            (Topic, Some("a"), Lit, Pre, "a", false),
            (Topic, Some("a"), Lit, Lit, "*", false),
            (Topic, Some("*"), Lit, Lit, "*", true),
            (Topic, Some("orders-1"), Match, Lit, "orders-1", true),
            (Topic, Some("orders-1"), Match, Lit, "*", true),
            (Topic, Some("orders-1"), Match, Pre, "orders-", true),
            (Topic, Some("orders-1"), Match, Pre, "orders-1", true),
            (Topic, Some("orders-1"), Match, Pre, "orders-12", false),
            (Topic, Some("orders-1"), Match, Lit, "orders", false),
            (Topic, Some("orders-1"), Match, Pre, "*", false),
            (Topic, None, Match, Pre, "x", true),
            (Topic, None, Pre, Lit, "x", false),
        ];
        for (rt, name, pt, binding_pt, binding_name, want) in cases {
            let filter = ResourcePatternFilter {
                resource_type: rt,
                name: name.map(str::to_owned),
                pattern_type: pt,
            };
            let pattern = ResourcePattern {
                resource_type: Topic,
                name: binding_name.into(),
                pattern_type: binding_pt,
            };
            assert_eq!(filter.matches(&pattern), want, "{filter:?} on {pattern:?}");
        }
    }

    #[test]
    fn entry_filter_and_validation() {
        let b = binding(
            ResourceType::Topic,
            "t",
            PatternType::Literal,
            AclOperation::Read,
            AclPermissionType::Allow,
        );
        let mut f = AclBindingFilter::any();
        assert!(f.matches(&b));
        f.entry.principal = Some("User:alice".into());
        f.entry.operation = AclOperation::Read;
        assert!(f.matches(&b));
        f.entry.host = Some("10.0.0.1".into());
        assert!(
            !f.matches(&b),
            "a filter host must equal the entry host ('*' is not a wildcard here)"
        );
        f.entry.host = None;
        f.entry.permission_type = AclPermissionType::Deny;
        assert!(!f.matches(&b));
        assert!(f.validate().is_ok());
        f.entry.operation = AclOperation::Unknown;
        assert_eq!(
            f.validate().unwrap_err().to_string(),
            "Unknown entryFilter."
        );
        let mut g = AclBindingFilter::any();
        g.pattern.pattern_type = PatternType::Unknown;
        assert_eq!(
            g.validate().unwrap_err().to_string(),
            "Unknown patternFilter."
        );
    }
}
