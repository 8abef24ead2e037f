//! The authorizer: Kafka's `StandardAuthorizer` rules over the stored bindings, pure.
//!
//! `authorize(principal, host, operation, resource)` decides, in Kafka's order:
//! 1. a super user (`super.users`) is allowed everything;
//! 2. the bindings that apply to the resource are the LITERAL ones of its exact name, the
//!    LITERAL `*` of its type, and the PREFIXED ones whose name is a prefix of its name;
//! 3. of those, a binding matches when its principal is the caller's or `User:*`, its host
//!    is the caller's address or `*`, and its operation is the one asked, or ALL, or (ALLOW
//!    bindings only) one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE;
//!    ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY of READ does not deny DESCRIBE;
//! 4. any matching DENY denies (deny beats allow, whatever the pattern type); else any
//!    matching ALLOW allows;
//! 5. else, when no binding applies to the resource at all (step 2 found none, whoever
//!    they were for), `allow.everyone.if.no.acl.found` decides; otherwise denied.
//!
//! Bindings are kept by (resource type, name) in two maps, literal and prefixed, so a
//! decision reads the exact name, `*`, and one lookup per prefix of the name: its cost
//! grows with the name's length, not with the number of bindings.

use std::collections::{BTreeMap, BTreeSet};

use crate::acl::binding::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclError, ResourcePattern,
};
use crate::acl::{
    AclOperation, AclPermissionType, PatternType, ResourceType, WILDCARD_HOST, WILDCARD_RESOURCE,
};
use crate::limits;
use crate::principal::{KafkaPrincipal, SuperUsers};

/// Why a decision came out as it did (Kafka's `MatchingRule`, for the audit log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// The principal is a super user.
    SuperUser,
    /// This binding matched.
    Acl(AclBinding),
    /// No binding applies to the resource: `allow.everyone.if.no.acl.found`.
    NoAclFound,
    /// Bindings apply to the resource, but none allows this.
    NoMatchingAllow,
}

/// An authorization decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed or denied.
    pub allowed: bool,
    /// Why.
    pub rule: Rule,
}

type Key = (ResourceType, String);

/// The stored bindings and the authorizer's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Authorizer {
    super_users: SuperUsers,
    allow_everyone_if_no_acl_found: bool,
    literal: BTreeMap<Key, BTreeSet<AccessControlEntry>>,
    prefixed: BTreeMap<Key, BTreeSet<AccessControlEntry>>,
    count: usize,
}

impl Authorizer {
    /// An authorizer with no bindings.
    pub fn new(super_users: SuperUsers, allow_everyone_if_no_acl_found: bool) -> Self {
        Self {
            super_users,
            allow_everyone_if_no_acl_found,
            ..Self::default()
        }
    }

    /// Replaces the configuration (`super.users`, `allow.everyone.if.no.acl.found`).
    pub fn configure(&mut self, super_users: SuperUsers, allow_everyone_if_no_acl_found: bool) {
        self.super_users = super_users;
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found;
    }

    /// Number of stored bindings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn map_mut(
        &mut self,
        pattern_type: PatternType,
    ) -> &mut BTreeMap<Key, BTreeSet<AccessControlEntry>> {
        match pattern_type {
            PatternType::Prefixed => &mut self.prefixed,
            _ => &mut self.literal,
        }
    }

    /// Stores a binding after [`AclBinding::validate`]. `Ok(false)` if it was already
    /// stored (Kafka answers success and keeps one copy).
    pub fn add(&mut self, binding: AclBinding) -> Result<bool, AclError> {
        binding.validate()?;
        if self.contains(&binding) {
            return Ok(false);
        }
        if self.count >= limits::ACLS_MAX {
            return Err(AclError::TooMany);
        }
        let AclBinding { pattern, entry } = binding;
        let key = (pattern.resource_type, pattern.name);
        self.map_mut(pattern.pattern_type)
            .entry(key)
            .or_default()
            .insert(entry);
        self.count += 1;
        Ok(true)
    }

    /// Whether exactly this binding is stored.
    pub fn contains(&self, binding: &AclBinding) -> bool {
        let map = match binding.pattern.pattern_type {
            PatternType::Prefixed => &self.prefixed,
            _ => &self.literal,
        };
        let key = (binding.pattern.resource_type, binding.pattern.name.clone());
        map.get(&key)
            .is_some_and(|set| set.contains(&binding.entry))
    }

    /// Removes one binding; whether it was stored.
    pub fn remove(&mut self, binding: &AclBinding) -> bool {
        let key = (binding.pattern.resource_type, binding.pattern.name.clone());
        let map = self.map_mut(binding.pattern.pattern_type);
        let Some(set) = map.get_mut(&key) else {
            return false;
        };
        let removed = set.remove(&binding.entry);
        if set.is_empty() {
            map.remove(&key);
        }
        if removed {
            self.count -= 1;
        }
        removed
    }

    /// Every stored binding, in a stable order (literal, then prefixed).
    pub fn bindings(&self) -> impl Iterator<Item = AclBinding> + '_ {
        let lit = self
            .literal
            .iter()
            .map(|(k, s)| (k, s, PatternType::Literal));
        let pre = self
            .prefixed
            .iter()
            .map(|(k, s)| (k, s, PatternType::Prefixed));
        lit.chain(pre)
            .flat_map(|((resource_type, name), set, pattern_type)| {
                set.iter().map(move |entry| AclBinding {
                    pattern: ResourcePattern {
                        resource_type: *resource_type,
                        name: name.clone(),
                        pattern_type,
                    },
                    entry: entry.clone(),
                })
            })
    }

    /// DescribeAcls: the stored bindings the filter matches.
    pub fn describe(&self, filter: &AclBindingFilter) -> Result<Vec<AclBinding>, AclError> {
        filter.validate()?;
        Ok(self.bindings().filter(|b| filter.matches(b)).collect())
    }

    /// DeleteAcls: removes and returns the stored bindings the filter matches.
    pub fn delete_matching(
        &mut self,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclBinding>, AclError> {
        let gone = self.describe(filter)?;
        for binding in &gone {
            let removed = self.remove(binding);
            assert!(removed, "a described binding is stored");
        }
        Ok(gone)
    }

    /// The decision for `principal` at `host` doing `operation` on the resource
    /// `(resource_type, name)` (module docs). `operation` is what a request needs: never
    /// UNKNOWN or ANY, and `resource_type` never UNKNOWN or ANY (our bug otherwise).
    pub fn authorize(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision {
        assert!(
            !matches!(operation, AclOperation::Unknown | AclOperation::Any),
            "authorize {operation}"
        );
        assert!(
            !matches!(resource_type, ResourceType::Unknown | ResourceType::Any),
            "authorize on {resource_type}"
        );
        if self.super_users.contains(principal) {
            return Decision {
                allowed: true,
                rule: Rule::SuperUser,
            };
        }
        let mut any_binding = false;
        let mut allow: Option<AclBinding> = None;
        for (pattern, entries) in self.applicable(resource_type, name) {
            any_binding = true;
            for entry in entries {
                match entry_result(entry, principal, host, operation) {
                    Some(AclPermissionType::Deny) => {
                        let binding = AclBinding {
                            pattern,
                            entry: entry.clone(),
                        };
                        return Decision {
                            allowed: false,
                            rule: Rule::Acl(binding),
                        };
                    }
                    Some(_) if allow.is_none() => {
                        allow = Some(AclBinding {
                            pattern: pattern.clone(),
                            entry: entry.clone(),
                        });
                    }
                    _ => {}
                }
            }
        }
        match allow {
            Some(binding) => Decision {
                allowed: true,
                rule: Rule::Acl(binding),
            },
            None if !any_binding => Decision {
                allowed: self.allow_everyone_if_no_acl_found,
                rule: Rule::NoAclFound,
            },
            None => Decision {
                allowed: false,
                rule: Rule::NoMatchingAllow,
            },
        }
    }

    /// Whether `principal` may do `operation` on at least one resource of `resource_type`
    /// (Kafka's default `Authorizer.authorizeByResourceType`, which StandardAuthorizer
    /// keeps; Kafka uses it for IDEMPOTENT_WRITE and transactional producers). Allowed if
    /// a resource named `hardcode` would be (so super users, and
    /// `allow.everyone.if.no.acl.found`); else, over the bindings of the type whose host,
    /// principal (or `User:*`) and operation (or ALL; no implied operations) match: a
    /// LITERAL `*` DENY denies, a LITERAL `*` ALLOW allows, and otherwise an ALLOW allows
    /// unless a DENY dominates it (the same LITERAL name, or a PREFIXED deny that is a
    /// prefix of the allowed name).
    pub fn authorize_by_resource_type(
        &self,
        principal: &KafkaPrincipal,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        if self
            .authorize(principal, host, operation, resource_type, "hardcode")
            .allowed
        {
            return true;
        }
        let relevant = |entry: &AccessControlEntry| {
            (entry.host == WILDCARD_HOST || entry.host == host)
                && (entry.principal == *principal
                    || entry.principal == KafkaPrincipal::wildcard_user())
                && (entry.operation == operation || entry.operation == AclOperation::All)
        };
        let mut deny: [BTreeSet<String>; 2] = Default::default();
        let mut allow: [BTreeSet<String>; 2] = Default::default();
        let mut wildcard_allow = false;
        for (i, map) in [&self.literal, &self.prefixed].into_iter().enumerate() {
            for (name, entries) in of_type(map, resource_type) {
                for entry in entries.iter().filter(|e| relevant(e)) {
                    let literal_star = i == 0 && name == WILDCARD_RESOURCE;
                    if entry.permission_type == AclPermissionType::Deny {
                        if literal_star {
                            return false;
                        }
                        deny[i].insert(name.clone());
                    } else if literal_star {
                        wildcard_allow = true;
                    } else {
                        allow[i].insert(name.clone());
                    }
                }
            }
        }
        if wildcard_allow {
            return true;
        }
        let dominated = |name: &str| {
            name.char_indices()
                .any(|(at, c)| deny[1].contains(&name[..at + c.len_utf8()]))
        };
        let literal_ok = allow[0]
            .iter()
            .any(|n| !deny[0].contains(n) && !dominated(n));
        literal_ok || allow[1].iter().any(|n| !dominated(n))
    }

    /// The stored patterns that apply to the resource, with their entries.
    fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = (ResourcePattern, &'a BTreeSet<AccessControlEntry>)> + 'a {
        let literal_names =
            std::iter::once(name).chain((name != WILDCARD_RESOURCE).then_some(WILDCARD_RESOURCE));
        let literal = literal_names.filter_map(move |n| {
            let set = self.literal.get(&(resource_type, n.to_owned()))?;
            Some((
                ResourcePattern {
                    resource_type,
                    name: n.to_owned(),
                    pattern_type: PatternType::Literal,
                },
                set,
            ))
        });
        let prefixes = name.char_indices().map(|(i, c)| &name[..i + c.len_utf8()]);
        let prefixed = prefixes.filter_map(move |p| {
            let set = self.prefixed.get(&(resource_type, p.to_owned()))?;
            Some((
                ResourcePattern {
                    resource_type,
                    name: p.to_owned(),
                    pattern_type: PatternType::Prefixed,
                },
                set,
            ))
        });
        literal.chain(prefixed)
    }
}

/// The (name, entries) of one resource type in a binding map.
fn of_type(
    map: &BTreeMap<Key, BTreeSet<AccessControlEntry>>,
    resource_type: ResourceType,
) -> impl Iterator<Item = (&String, &BTreeSet<AccessControlEntry>)> {
    map.range((resource_type, String::new())..)
        .take_while(move |((t, _), _)| *t == resource_type)
        .map(|((_, name), set)| (name, set))
}

/// Kafka's `StandardAuthorizerData.findResult` for one entry: `None` if it does not
/// match, else its permission.
fn entry_result(
    entry: &AccessControlEntry,
    principal: &KafkaPrincipal,
    host: &str,
    operation: AclOperation,
) -> Option<AclPermissionType> {
    let wildcard = entry.principal == KafkaPrincipal::wildcard_user();
    if entry.principal != *principal && !wildcard {
        return None;
    }
    if entry.host != WILDCARD_HOST && entry.host != host {
        return None;
    }
    if entry.operation != AclOperation::All {
        let allow = entry.permission_type == AclPermissionType::Allow;
        let matches = match operation {
            AclOperation::Describe if allow => matches!(
                entry.operation,
                AclOperation::Describe
                    | AclOperation::Read
                    | AclOperation::Write
                    | AclOperation::Delete
                    | AclOperation::Alter
            ),
            AclOperation::DescribeConfigs if allow => {
                matches!(
                    entry.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                )
            }
            _ => entry.operation == operation,
        };
        if !matches {
            return None;
        }
    }
    Some(entry.permission_type)
}
