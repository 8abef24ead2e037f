//! Kafka's ACL model with Kafka's wire codes: what a binding is, which bindings a filter
//! selects (DescribeAcls, DeleteAcls), which bindings may be stored, and ([`authorizer`])
//! what a principal may do.
//!
//! - this file: the four enums ([`ResourceType`], [`PatternType`], [`AclOperation`],
//!   [`AclPermissionType`]) with Kafka's `i8` codes and names; a code Kafka does not know
//!   reads as `Unknown`, as Kafka's `fromCode` does.
//! - [`binding`]: [`AclBinding`] and its validation, [`AclBindingFilter`] and its matching.
//! - [`authorizer`]: [`Authorizer`], Kafka's `StandardAuthorizer` rules (and `authorizeByResourceType`).
//!
//! Sluice's own resources: [`ResourceType::Plugin`] (code 100), [`ResourceType::View`]
//! (code 101) and [`ResourceType::Transform`] (code 102), far above Kafka's 0-7 so a
//! resource type Kafka adds later cannot collide. Kafka clients decode them as UNKNOWN;
//! `sluice acl` names them `plugin`, `view` and `transform`.

pub mod authorizer;
pub mod binding;

use std::fmt;

pub use authorizer::{Authorizer, Decision, Rule};
pub use binding::{
    AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter, AclError,
    ResourcePattern, ResourcePatternFilter,
};

/// Kafka's `ResourcePattern.WILDCARD_RESOURCE`: a literal name that matches every name.
pub const WILDCARD_RESOURCE: &str = "*";

/// Kafka's wildcard host of an ACL.
pub const WILDCARD_HOST: &str = "*";

/// Kafka's `Resource.CLUSTER_NAME`: the only name of the cluster resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub const fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// The value of a wire code; a code Kafka does not define is `Unknown`.
            pub const fn from_code(code: i8) -> Self {
                match code { $($code => $name::$variant,)* _ => $name::Unknown }
            }

            /// Kafka's name (`toString` of its Java enum).
            pub const fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// The value named `s`, ignoring case and `-`/`_` (Kafka's `fromString` ignores case).
            pub fn parse(s: &str) -> Option<Self> {
                let norm = s.replace('-', "_");
                Self::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(&norm))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// Kafka's `ResourceType`, plus Sluice's plugins and views.
    ResourceType {
        /// A code this build does not know.
        Unknown = 0, "UNKNOWN";
        /// Filters only: any type.
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (`kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user (for CreateTokens / DescribeTokens on behalf of others).
        User = 7, "USER";
        /// Sluice: a wasm plugin, by name.
        Plugin = 100, "PLUGIN";
        /// Sluice: a view, by name.
        View = 101, "VIEW";
        /// Sluice: a materialized transform, by name.
        Transform = 102, "TRANSFORM";
    }
}

kafka_enum! {
    /// Kafka's `PatternType`: how a binding's name matches resource names.
    PatternType {
        /// A code this build does not know.
        Unknown = 0, "UNKNOWN";
        /// Filters only: any pattern type, names compared exactly.
        Any = 1, "ANY";
        /// Filters only: the bindings that would apply to the named resource.
        Match = 2, "MATCH";
        /// The name is the resource name (or `*`, every name).
        Literal = 3, "LITERAL";
        /// The name is a prefix of resource names.
        Prefixed = 4, "PREFIXED";
    }
}

kafka_enum! {
    /// Kafka's `AclOperation`.
    AclOperation {
        /// A code this build does not know.
        Unknown = 0, "UNKNOWN";
        /// Filters only: any operation.
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Fetch, join a group, commit offsets.
        Read = 3, "READ";
        /// Produce.
        Write = 4, "WRITE";
        /// Create topics.
        Create = 5, "CREATE";
        /// Delete topics, groups, records.
        Delete = 6, "DELETE";
        /// Alter (partitions, ACLs).
        Alter = 7, "ALTER";
        /// Describe (metadata, offsets, groups).
        Describe = 8, "DESCRIBE";
        /// Broker-to-broker actions.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// DescribeConfigs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// AlterConfigs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
}

kafka_enum! {
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        /// A code this build does not know.
        Unknown = 0, "UNKNOWN";
        /// Filters only: either.
        Any = 1, "ANY";
        /// The binding denies.
        Deny = 2, "DENY";
        /// The binding allows.
        Allow = 3, "ALLOW";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas() {
        let resource: Vec<(i8, &str)> = ResourceType::ALL
            .iter()
            .map(|r| (r.code(), r.name()))
            .collect();
        assert_eq!(
            resource,
            [
                (0, "UNKNOWN"),
                (1, "ANY"),
                (2, "TOPIC"),
                (3, "GROUP"),
                (4, "CLUSTER"),
                (5, "TRANSACTIONAL_ID"),
                (6, "DELEGATION_TOKEN"),
                (7, "USER"),
                (100, "PLUGIN"),
                (101, "VIEW"),
                (102, "TRANSFORM"),
            ]
        );
        let pattern: Vec<i8> = PatternType::ALL.iter().map(|p| p.code()).collect();
        assert_eq!(pattern, [0, 1, 2, 3, 4]);
        let ops: Vec<i8> = AclOperation::ALL.iter().map(|o| o.code()).collect();
        assert_eq!(ops, (0..=14).collect::<Vec<i8>>());
        assert_eq!(AclOperation::DescribeConfigs.code(), 10);
        assert_eq!(AclOperation::IdempotentWrite.name(), "IDEMPOTENT_WRITE");
        assert_eq!(AclPermissionType::Deny.code(), 2);
        assert_eq!(AclPermissionType::Allow.code(), 3);
    }

    #[test]
    fn unknown_codes_read_as_unknown() {
        assert_eq!(ResourceType::from_code(8), ResourceType::Unknown);
        assert_eq!(ResourceType::from_code(100), ResourceType::Plugin);
        assert_eq!(AclOperation::from_code(15), AclOperation::Unknown);
        assert_eq!(PatternType::from_code(-1), PatternType::Unknown);
        assert_eq!(AclPermissionType::from_code(4), AclPermissionType::Unknown);
        for op in AclOperation::ALL {
            assert_eq!(AclOperation::from_code(op.code()), *op);
        }
    }

    #[test]
    fn names_parse_ignoring_case() {
        assert_eq!(
            AclOperation::parse("describe-configs"),
            Some(AclOperation::DescribeConfigs)
        );
        assert_eq!(
            ResourceType::parse("transactional_id"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(PatternType::parse("Prefixed"), Some(PatternType::Prefixed));
        assert_eq!(AclPermissionType::parse("nope"), None);
    }
}
