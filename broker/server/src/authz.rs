//! Authorization: where a request asks the ACL engine (`sluice_security::acl::Authorizer`,
//! in the security store) whether its connection's principal, from its host, may do an
//! operation on a resource. Handlers ask their [`Authz`] (the security state with the
//! client's principal and host) and turn a refusal into Kafka's error code for the resource
//! (TOPIC_AUTHORIZATION_FAILED and the rest); the admin API calls [`allowed_for`] with the
//! HTTP caller's principal. Only the checks that name a topic or a view the client may
//! mean ([`Authz::topic_or_view`], [`Authz::read_through`]) are given the topic registry.
//!
//! A denial is logged at debug with the rule that decided it (Kafka's authorizer logger
//! logs denials at INFO; a refused client retrying would flood a log at INFO).
//!
//! Views and materialized transforms act for their [`Owner`], the principal that made them:
//! every read and write they make asks the owner's rights now ([`owner_lacks`]), so deleting
//! an ACL stops them as it stops the owner's own clients (docs/security.md, "Views and
//! transforms").

use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};
use sluice_security::principal::KafkaPrincipal;

use crate::security::Security;
use crate::topics::{TopicRegistry, ViewTopic};

/// The user an `admin.token` bearer acts as (`User:admin-token`): an admin-API super user,
/// not a Kafka user. Here because the views and transforms it makes act for it.
pub const ADMIN_TOKEN_USER: &str = "admin-token";

/// The host an owner recorded without one is checked from (transforms deployed before hosts
/// were recorded): `*` matches only ACLs for every host.
const HOST_UNRECORDED: &str = "*";

/// One right: an operation on a resource.
pub type Need<'a> = (AclOperation, ResourceType, &'a str);

/// Whom a view or a materialized transform reads and writes for: the principal that made it
/// and the address it made it from (the host its ACLs are matched against, as for the
/// owner's own clients from there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub principal: KafkaPrincipal,
    pub host: String,
}

impl Owner {
    /// The owner recorded as `principal` (`User:alice`) and `host` (`None`: checked from
    /// `*`, so only ACLs for every host apply).
    ///
    /// # Errors
    /// The principal does not parse (a damaged spec file).
    pub fn parse(principal: &str, host: Option<&str>) -> Result<Self, String> {
        let principal = KafkaPrincipal::parse(principal)
            .map_err(|e| format!("owner principal {principal:?}: {e}"))?;
        Ok(Self {
            principal,
            host: host.unwrap_or(HOST_UNRECORDED).to_owned(),
        })
    }

    /// Whether the owner is the `admin.token` bearer (while a token is configured).
    fn is_admin_token(&self, security: &Security) -> bool {
        security.admin_token_set() && self.principal == KafkaPrincipal::user(ADMIN_TOKEN_USER)
    }
}

/// The first of `needs` that `owner` does not hold now, named (`READ on TOPIC "orders"`).
/// The `admin.token` bearer holds every right, as in the admin API.
pub fn owner_lacks<'a>(
    security: &Security,
    owner: &Owner,
    needs: impl IntoIterator<Item = Need<'a>>,
) -> Option<String> {
    if owner.is_admin_token(security) {
        return None;
    }
    needs
        .into_iter()
        .find(|&(operation, resource_type, name)| {
            !allowed_for(
                security,
                &owner.principal,
                &owner.host,
                operation,
                resource_type,
                name,
            )
        })
        .map(|(operation, resource_type, name)| {
            format!("{} on {} {name:?}", operation.name(), resource_type.name())
        })
}

/// Why a read through `view` is refused now, if it is. A view with an owner needs the
/// owner's READ on the source topic and on each stage's plugin (what creating it needed);
/// a view persisted before owners were recorded needs the `reader`'s own READ on the source
/// (as a read of the topic itself would).
pub fn view_refusal(
    security: &Security,
    view: &ViewTopic,
    reader: (&KafkaPrincipal, &str),
) -> Option<String> {
    let spec = &view.spec;
    let source = (
        AclOperation::Read,
        ResourceType::Topic,
        spec.source.as_str(),
    );
    let Some(principal) = &spec.owner else {
        let (principal, host) = reader;
        return (!allowed_for(security, principal, host, source.0, source.1, source.2)).then(|| {
            format!(
                "view {:?} has no recorded owner, so its readers need READ on its source topic {:?} themselves, which {principal} lacks",
                spec.name, spec.source
            )
        });
    };
    let owner = match Owner::parse(principal, spec.owner_host.as_deref()) {
        Ok(owner) => owner,
        Err(e) => return Some(format!("view {:?}: {e}", spec.name)),
    };
    let plugins = spec
        .stages
        .iter()
        .map(|s| (AclOperation::Read, ResourceType::Plugin, s.plugin.as_str()));
    let lacks = owner_lacks(security, &owner, std::iter::once(source).chain(plugins))?;
    Some(format!(
        "the owner of view {:?}, {}, may no longer read through it: it lacks {lacks}",
        spec.name, owner.principal
    ))
}

/// Whether `principal` at `host` may do `operation` on `(resource_type, name)`.
pub fn allowed_for(
    security: &Security,
    principal: &KafkaPrincipal,
    host: &str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if reserved_for_transforms(operation, resource_type, name) {
        tracing::debug!(%principal, resource = name, operation = operation.name(), "refused: reserved for materialized transforms");
        return false;
    }
    let decision = security.store.read(|state| {
        state
            .authorizer()
            .authorize(principal, host, operation, resource_type, name)
    });
    if !decision.allowed {
        tracing::debug!(
            %principal,
            host,
            operation = operation.name(),
            resource_type = resource_type.name(),
            resource = name,
            rule = ?decision.rule,
            "authorization denied"
        );
    }
    decision.allowed
}

/// Groups and transactional ids under `__sluice_transform/` belong to materialized
/// transforms (their positions and producers): clients may describe them (OffsetFetch,
/// DescribeGroups, DescribeTransactions: the lag shows there) but never write them, whatever
/// the ACLs say (the runners call the coordinators in-process, past these checks).
fn reserved_for_transforms(
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    matches!(
        resource_type,
        ResourceType::Group | ResourceType::TransactionalId
    ) && sluice_transform::spec::is_reserved(name)
        && !matches!(
            operation,
            AclOperation::Describe | AclOperation::DescribeConfigs
        )
}

/// A request's authorization: the security state, and who asks from where (the
/// connection's principal and host).
#[derive(Debug, Clone, Copy)]
pub struct Authz<'a> {
    /// Where the ACLs are.
    pub security: &'a Security,
    /// Who the client is.
    pub principal: &'a KafkaPrincipal,
    /// The client's address as ACLs match it.
    pub host: &'a str,
}

impl<'a> Authz<'a> {
    /// The authorization of `client`'s requests.
    pub fn new(security: &'a Security, client: &'a crate::wire::Client) -> Self {
        Self {
            security,
            principal: &client.principal,
            host: &client.host,
        }
    }

    /// Whether the principal may do `operation` on `(resource_type, name)`.
    pub fn allowed(self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        allowed_for(
            self.security,
            self.principal,
            self.host,
            operation,
            resource_type,
            name,
        )
    }

    /// READ on a plugin (`unreadable_plugin`).
    pub fn may_read_plugin(self) -> impl Fn(&str) -> bool + 'a {
        move |plugin| self.allowed(AclOperation::Read, ResourceType::Plugin, plugin)
    }

    /// Kafka's authorized-operations bit field (KIP-430): bit `code` set for each of
    /// `operations` the principal may do on `(resource_type, name)`.
    pub fn operations(
        self,
        resource_type: ResourceType,
        name: &str,
        operations: &[AclOperation],
    ) -> i32 {
        operations
            .iter()
            .filter(|op| self.allowed(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }

    /// `operation` on the topic `name`.
    pub fn topic(self, operation: AclOperation, name: &str) -> bool {
        self.allowed(operation, ResourceType::Topic, name)
    }

    /// `operation` on `name` as a client names it in Fetch, ListOffsets and
    /// OffsetForLeaderEpoch: the VIEW resource when a view of `topics` has the name, else
    /// the TOPIC.
    pub fn topic_or_view(
        self,
        topics: &TopicRegistry,
        operation: AclOperation,
        name: &str,
    ) -> bool {
        let resource = if topics.view(name).is_some() {
            ResourceType::View
        } else {
            ResourceType::Topic
        };
        self.allowed(operation, resource, name)
    }

    /// `operation` on `name` as [`Self::topic_or_view`], and for a view its
    /// [`view_refusal`] too: what Fetch, ListOffsets and OffsetForLeaderEpoch ask, as they
    /// read or disclose the source's records through the view. A refusal is logged once
    /// when it starts and once when it ends.
    pub fn read_through(self, topics: &TopicRegistry, operation: AclOperation, name: &str) -> bool {
        let Some(view) = topics.view(name) else {
            return self.topic(operation, name);
        };
        if !self.allowed(operation, ResourceType::View, name) {
            return false;
        }
        let refusal = view_refusal(self.security, &view, (self.principal, self.host));
        view.note_refusal(refusal.as_deref());
        refusal.is_none()
    }

    /// `operation` on the group `name`.
    pub fn group(self, operation: AclOperation, name: &str) -> bool {
        self.allowed(operation, ResourceType::Group, name)
    }

    /// `operation` on the cluster.
    pub fn cluster(self, operation: AclOperation) -> bool {
        self.allowed(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the principal may do `operation` on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`: an idempotent producer without IDEMPOTENT_WRITE on the
    /// cluster may still init a producer id if it may write some topic).
    pub fn any_of_type(self, operation: AclOperation, resource_type: ResourceType) -> bool {
        self.security.store.read(|state| {
            state.authorizer().authorize_by_resource_type(
                self.principal,
                self.host,
                operation,
                resource_type,
            )
        })
    }
}

/// The first plugin that topic `configs` would bind (`sluice.partitioner`,
/// `sluice.validator`: `topic_config::PLUGIN_KEYS`) and `may_read_plugin` refuses, if any.
/// The one check that topic creation and config changes make, over the Kafka protocol
/// (CreateTopics, AlterConfigs, IncrementalAlterConfigs) and the admin API (`POST` and
/// `PATCH /v1/topics`) alike: binding a topic to a plugin needs READ on the plugin.
pub fn unreadable_plugin<'a>(
    configs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    may_read_plugin: impl Fn(&str) -> bool,
) -> Option<&'a str> {
    configs
        .into_iter()
        .filter(|(key, _)| crate::topic_config::PLUGIN_KEYS.contains(key))
        .filter_map(|(_, plugin)| plugin)
        .find(|plugin| !may_read_plugin(plugin))
}

/// The operations Kafka defines on the cluster resource.
pub const CLUSTER_OPERATIONS: [AclOperation; 7] = [
    AclOperation::Create,
    AclOperation::ClusterAction,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
    AclOperation::IdempotentWrite,
    AclOperation::Alter,
    AclOperation::Describe,
];

/// The operations Kafka defines on a topic.
pub const TOPIC_OPERATIONS: [AclOperation; 8] = [
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

/// The operations Kafka defines on a group.
pub const GROUP_OPERATIONS: [AclOperation; 3] = [
    AclOperation::Read,
    AclOperation::Describe,
    AclOperation::Delete,
];

#[cfg(test)]
mod tests {
    use sluice_security::acl::{
        AccessControlEntry, AclBinding, AclPermissionType, PatternType, ResourcePattern,
    };
    use sluice_security::records::SecurityRecord;

    use super::*;
    use crate::broker::Broker;
    use crate::config::BrokerConfig;
    use crate::topic_config::TopicOverrides;
    use crate::views::{StageSpec, ViewSpec};

    fn broker(dir: &std::path::Path, admin_token: Option<&str>) -> Broker {
        Broker::open(BrokerConfig {
            data_dir: dir.to_owned(),
            allow_everyone_if_no_acl_found: Some(false),
            admin_token: admin_token.map(str::to_owned),
            ..BrokerConfig::default()
        })
        .unwrap()
    }

    fn acl(principal: &str, host: &str, operation: AclOperation, on: Need<'_>) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: on.1,
                name: on.2.to_owned(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: KafkaPrincipal::parse(principal).unwrap(),
                host: host.to_owned(),
                operation,
                permission_type: AclPermissionType::Allow,
            },
        }
    }

    fn apply(broker: &Broker, record: SecurityRecord) {
        broker.security.store.append(&[record]).unwrap();
    }

    /// A view of `a-orders` through the plugin `p` (not deployed: the view stays unbound,
    /// which the checks do not need).
    fn view(broker: &Broker, owner: Option<(&str, &str)>) -> ViewTopic {
        let source = broker.topics.topic("a-orders").unwrap_or_else(|| {
            broker
                .topics
                .create_topic("a-orders", 1, TopicOverrides::new())
                .unwrap()
        });
        let spec = ViewSpec {
            name: "b-view".into(),
            source: "a-orders".into(),
            stages: vec![StageSpec {
                plugin: "p".into(),
                params: Default::default(),
                kind: None,
            }],
            on_error: "fail".into(),
            ephemeral: false,
            owner: owner.map(|(p, _)| p.to_owned()),
            owner_host: owner.map(|(_, h)| h.to_owned()),
        };
        ViewTopic::bind_loaded(&broker.plugins.registry, spec, source, 0).unwrap()
    }

    const READ_SOURCE: Need<'static> = (AclOperation::Read, ResourceType::Topic, "a-orders");
    const READ_PLUGIN: Need<'static> = (AclOperation::Read, ResourceType::Plugin, "p");

    #[test]
    fn a_view_reads_with_its_owners_rights_as_they_are_now() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path(), None);
        let view = view(&broker, Some(("User:tenant-b", "10.0.0.2")));
        let reader = (&KafkaPrincipal::user("reader"), "10.9.9.9");
        let grants = [
            acl("User:tenant-b", "*", AclOperation::Read, READ_SOURCE),
            acl("User:tenant-b", "10.0.0.2", AclOperation::Read, READ_PLUGIN),
        ];
        for grant in &grants {
            apply(&broker, SecurityRecord::AclCreate(grant.clone()));
        }
        // The owner's rights decide, whatever the reader's own (it has none on the source).
        assert_eq!(view_refusal(&broker.security, &view, reader), None);
        apply(&broker, SecurityRecord::AclDelete(grants[0].clone()));
        let why = view_refusal(&broker.security, &view, reader).expect("revoked");
        assert!(
            why.contains("User:tenant-b") && why.contains("READ on TOPIC \"a-orders\""),
            "{why}"
        );
        apply(&broker, SecurityRecord::AclCreate(grants[0].clone()));
        assert_eq!(view_refusal(&broker.security, &view, reader), None);
        // Each stage's plugin too, matched from the host the owner created the view from.
        let elsewhere = self::view(&broker, Some(("User:tenant-b", "10.0.0.3")));
        let why = view_refusal(&broker.security, &elsewhere, reader).expect("another host");
        assert!(why.contains("READ on PLUGIN \"p\""), "{why}");
    }

    #[test]
    fn a_view_without_a_recorded_owner_needs_the_readers_own_read_on_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path(), None);
        let view = view(&broker, None);
        let reader = KafkaPrincipal::user("reader");
        let why = view_refusal(&broker.security, &view, (&reader, "10.9.9.9")).expect("no right");
        assert!(
            why.contains("no recorded owner") && why.contains("User:reader"),
            "{why}"
        );
        apply(
            &broker,
            SecurityRecord::AclCreate(acl("User:reader", "*", AclOperation::Read, READ_SOURCE)),
        );
        assert_eq!(
            view_refusal(&broker.security, &view, (&reader, "10.9.9.9")),
            None
        );
    }

    #[test]
    fn the_admin_token_owns_with_every_right_only_while_a_token_is_set() {
        let token_owner = Owner::parse("User:admin-token", Some("127.0.0.1")).unwrap();
        for (token, lacks) in [(Some("secret"), false), (None, true)] {
            let dir = tempfile::tempdir().unwrap();
            let broker = broker(dir.path(), token);
            let found = owner_lacks(&broker.security, &token_owner, [READ_SOURCE]);
            assert_eq!(found.is_some(), lacks, "token {token:?}: {found:?}");
        }
        let damaged = Owner::parse("no colon", None).unwrap_err();
        assert!(damaged.contains("no colon"), "{damaged}");
        assert_eq!(Owner::parse("User:x", None).unwrap().host, HOST_UNRECORDED);
    }

    #[test]
    fn each_view_is_checked_against_its_own_owner() {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker(dir.path(), None);
        apply(
            &broker,
            SecurityRecord::AclCreate(acl("User:a", "*", AclOperation::All, READ_SOURCE)),
        );
        apply(
            &broker,
            SecurityRecord::AclCreate(acl("User:a", "*", AclOperation::Read, READ_PLUGIN)),
        );
        let reader = (&KafkaPrincipal::user("r"), "h");
        assert_eq!(
            view_refusal(
                &broker.security,
                &view(&broker, Some(("User:a", "h"))),
                reader
            ),
            None
        );
        assert!(
            view_refusal(
                &broker.security,
                &view(&broker, Some(("User:b", "h"))),
                reader
            )
            .is_some()
        );
    }
}
