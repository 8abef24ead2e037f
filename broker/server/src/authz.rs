//! Authorization: where a request asks the ACL engine (`sluice_security::acl::Authorizer`,
//! in the broker's security state) whether its connection's principal, from its host, may do
//! an operation on a resource. Handlers call these and turn a refusal into Kafka's error
//! code for the resource (TOPIC_AUTHORIZATION_FAILED and the rest); the admin API calls
//! them with the HTTP caller's principal.
//!
//! A denial is logged at debug with the rule that decided it (Kafka's authorizer logger
//! logs denials at INFO; a refused client retrying would flood a log at INFO).

use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};
use sluice_security::principal::KafkaPrincipal;

use crate::broker::Broker;
use crate::wire::ConnectionContext;

/// Whether `principal` at `host` may do `operation` on `(resource_type, name)`.
pub fn allowed_for(
    broker: &Broker,
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
    let decision = broker.security.read(|state| {
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

/// Whether the connection's principal may do `operation` on `(resource_type, name)`.
pub fn allowed(
    ctx: &ConnectionContext,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    allowed_for(
        &ctx.broker,
        &ctx.principal,
        &ctx.host,
        operation,
        resource_type,
        name,
    )
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

/// READ on a plugin, for the connection's principal (`unreadable_plugin`).
pub fn may_read_plugin(ctx: &ConnectionContext) -> impl Fn(&str) -> bool + '_ {
    |plugin| allowed(ctx, AclOperation::Read, ResourceType::Plugin, plugin)
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

/// Kafka's authorized-operations bit field (KIP-430): bit `code` set for each of
/// `operations` the principal may do on `(resource_type, name)`.
pub fn operations(
    ctx: &ConnectionContext,
    resource_type: ResourceType,
    name: &str,
    operations: &[AclOperation],
) -> i32 {
    operations
        .iter()
        .filter(|op| allowed(ctx, **op, resource_type, name))
        .fold(0, |bits, op| bits | (1 << op.code()))
}

/// `operation` on the topic `name`.
pub fn topic(ctx: &ConnectionContext, operation: AclOperation, name: &str) -> bool {
    allowed(ctx, operation, ResourceType::Topic, name)
}

/// `operation` on `name` as a client names it in Fetch, ListOffsets and
/// OffsetForLeaderEpoch: the VIEW resource when a view has the name, else the TOPIC.
pub fn topic_or_view(ctx: &ConnectionContext, operation: AclOperation, name: &str) -> bool {
    let resource = if ctx.broker.view(name).is_some() {
        ResourceType::View
    } else {
        ResourceType::Topic
    };
    allowed(ctx, operation, resource, name)
}

/// `operation` on the group `name`.
pub fn group(ctx: &ConnectionContext, operation: AclOperation, name: &str) -> bool {
    allowed(ctx, operation, ResourceType::Group, name)
}

/// `operation` on the cluster.
pub fn cluster(ctx: &ConnectionContext, operation: AclOperation) -> bool {
    allowed(ctx, operation, ResourceType::Cluster, CLUSTER_NAME)
}

/// Whether the principal may do `operation` on some resource of `resource_type` (Kafka's
/// `authorizeByResourceType`: an idempotent producer without IDEMPOTENT_WRITE on the
/// cluster may still init a producer id if it may write some topic).
pub fn any_of_type(
    ctx: &ConnectionContext,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool {
    ctx.broker.security.read(|state| {
        state.authorizer().authorize_by_resource_type(
            &ctx.principal,
            &ctx.host,
            operation,
            resource_type,
        )
    })
}
