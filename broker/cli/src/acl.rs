//! `sluice acl create | list | delete`: Kafka ACLs over the wire (CreateAcls, DescribeAcls,
//! DeleteAcls v1), with rpk's flag names. Changing ACLs needs ALTER on the cluster (a super
//! user: log in with `--user`), listing them DESCRIBE.
//!
//! ```text
//! SLUICE_PASSWORD=admin-secret sluice acl create --user admin \
//!     --allow-principal User:alice --operation read,describe --topic orders
//! sluice acl list --topic orders --output json
//! sluice acl delete --allow-principal User:alice --topic orders --operation any
//! ```

use anyhow::bail;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};
use sluice_security::acl::{
    AclOperation, AclPermissionType, CLUSTER_NAME, PatternType, ResourceType,
};

use crate::client::error_name;
use crate::common::{Common, emit};

#[derive(Debug, clap::Args)]
pub struct AclArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: AclCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AclCommand {
    /// Create ACLs: every principal x host x operation x resource named.
    Create(Spec),
    /// List the ACLs matching the flags (none: all).
    List(Spec),
    /// Delete the ACLs matching the flags.
    Delete(Spec),
}

/// Which ACLs: rpk's flags.
#[derive(Debug, Clone, clap::Args)]
struct Spec {
    /// Principals to allow (`User:alice`, `User:*`); comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    allow_principal: Vec<String>,
    /// Principals to deny.
    #[arg(long, value_delimiter = ',')]
    deny_principal: Vec<String>,
    /// Hosts the allow principals may connect from [default: *].
    #[arg(long, value_delimiter = ',')]
    allow_host: Vec<String>,
    /// Hosts the deny principals are denied from [default: *].
    #[arg(long, value_delimiter = ',')]
    deny_host: Vec<String>,
    /// Operations: all, read, write, create, delete, alter, describe, cluster_action,
    /// describe_configs, alter_configs, idempotent_write (list/delete: also any).
    #[arg(long, value_delimiter = ',')]
    operation: Vec<String>,
    /// Topics (names, or prefixes with --resource-pattern-type prefixed; `*`: every topic).
    #[arg(long, value_delimiter = ',')]
    topic: Vec<String>,
    /// Consumer groups.
    #[arg(long, value_delimiter = ',')]
    group: Vec<String>,
    /// The cluster (CreateAcls/DeleteAcls/DescribeAcls, IDEMPOTENT_WRITE, ...).
    #[arg(long)]
    cluster: bool,
    /// Transactional ids.
    #[arg(long, value_delimiter = ',')]
    transactional_id: Vec<String>,
    /// Sluice plugins (a topic bound to a partitioner needs READ on its plugin).
    #[arg(long, value_delimiter = ',')]
    plugin: Vec<String>,
    /// Sluice views (fetching a view needs READ on it).
    #[arg(long, value_delimiter = ',')]
    view: Vec<String>,
    /// Sluice materialized transforms (deploying one needs CREATE on it).
    #[arg(long, value_delimiter = ',')]
    transform: Vec<String>,
    /// literal or prefixed (list/delete: also any, match) [default: literal; list/delete: any].
    #[arg(long)]
    resource_pattern_type: Option<String>,
}

/// One binding or filter, in wire codes.
#[derive(Debug, Clone)]
struct Row {
    resource_type: ResourceType,
    name: Option<String>,
    pattern_type: PatternType,
    principal: Option<String>,
    host: Option<String>,
    operation: AclOperation,
    permission: AclPermissionType,
}

fn parse<T: Copy>(what: &str, text: &str, parse: impl Fn(&str) -> Option<T>) -> anyhow::Result<T> {
    parse(text).ok_or_else(|| anyhow::anyhow!("{what} {text:?} is not one Kafka knows"))
}

impl Spec {
    /// Resources named by the flags; `filter`: none named means every resource.
    fn resources(&self, filter: bool) -> Vec<(ResourceType, Option<String>)> {
        let mut out = Vec::new();
        for (rt, names) in [
            (ResourceType::Topic, &self.topic),
            (ResourceType::Group, &self.group),
            (ResourceType::TransactionalId, &self.transactional_id),
            (ResourceType::Plugin, &self.plugin),
            (ResourceType::View, &self.view),
            (ResourceType::Transform, &self.transform),
        ] {
            out.extend(names.iter().map(|n| (rt, Some(n.clone()))));
        }
        if self.cluster {
            out.push((ResourceType::Cluster, Some(CLUSTER_NAME.to_owned())));
        }
        if out.is_empty() && filter {
            out.push((ResourceType::Any, None));
        }
        out
    }

    /// (principal, host, permission) triples; `filter`: none named means any.
    fn entries(&self, filter: bool) -> Vec<(Option<String>, Option<String>, AclPermissionType)> {
        let hosts = |h: &Vec<String>| -> Vec<Option<String>> {
            if h.is_empty() {
                vec![(!filter).then(|| "*".to_owned())]
            } else {
                h.iter().cloned().map(Some).collect()
            }
        };
        let mut out = Vec::new();
        for (principals, host_list, permission) in [
            (
                &self.allow_principal,
                &self.allow_host,
                AclPermissionType::Allow,
            ),
            (
                &self.deny_principal,
                &self.deny_host,
                AclPermissionType::Deny,
            ),
        ] {
            for p in principals {
                for h in hosts(host_list) {
                    out.push((Some(p.clone()), h, permission));
                }
            }
        }
        if out.is_empty() && filter {
            out.push((None, None, AclPermissionType::Any));
        }
        out
    }

    fn rows(&self, filter: bool) -> anyhow::Result<Vec<Row>> {
        let default_pattern = if filter { "any" } else { "literal" };
        let pattern_text = self
            .resource_pattern_type
            .as_deref()
            .unwrap_or(default_pattern);
        let pattern_type = parse("--resource-pattern-type", pattern_text, PatternType::parse)?;
        let operations: Vec<AclOperation> = if self.operation.is_empty() && filter {
            vec![AclOperation::Any]
        } else {
            self.operation
                .iter()
                .map(|o| parse("--operation", o, AclOperation::parse))
                .collect::<anyhow::Result<_>>()?
        };
        if !filter && (operations.is_empty() || self.resources(false).is_empty()) {
            bail!(
                "acl create needs --operation and a resource (--topic, --group, --cluster, --transactional-id, --plugin, --view, --transform)"
            );
        }
        if !filter && self.entries(false).is_empty() {
            bail!("acl create needs --allow-principal or --deny-principal");
        }
        let mut rows = Vec::new();
        for (resource_type, name) in self.resources(filter) {
            for (principal, host, permission) in self.entries(filter) {
                for &operation in &operations {
                    rows.push(Row {
                        resource_type,
                        name: name.clone(),
                        pattern_type,
                        principal: principal.clone(),
                        host: host.clone(),
                        operation,
                        permission,
                    });
                }
            }
        }
        Ok(rows)
    }
}

fn text(s: Option<&String>) -> Option<StrBytes> {
    s.map(|s| StrBytes::from_string(s.clone()))
}

fn acl_json(
    resource_type: i8,
    name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Value {
    json!({
        "resource_type": ResourceType::from_code(resource_type).name(),
        "resource_name": name,
        "pattern_type": PatternType::from_code(pattern_type).name(),
        "principal": principal,
        "host": host,
        "operation": AclOperation::from_code(operation).name(),
        "permission": AclPermissionType::from_code(permission).name(),
    })
}

fn render(doc: &Value) -> String {
    let mut out = String::from("PRINCIPAL\tHOST\tRESOURCE\tNAME\tPATTERN\tOPERATION\tPERMISSION\n");
    for a in doc["acls"].as_array().into_iter().flatten() {
        let field = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            field("principal"),
            field("host"),
            field("resource_type"),
            field("resource_name"),
            field("pattern_type"),
            field("operation"),
            field("permission")
        ));
    }
    out
}

pub fn run(args: AclArgs) -> anyhow::Result<()> {
    let mut client = args.common.connect()?;
    let output = args.common.output;
    let doc = match args.command {
        AclCommand::Create(spec) => create(&mut client, &spec)?,
        AclCommand::List(spec) => list(&mut client, &spec)?,
        AclCommand::Delete(spec) => delete(&mut client, &spec)?,
    };
    emit(output, &doc, render)
}

fn create(client: &mut crate::client::Client, spec: &Spec) -> anyhow::Result<Value> {
    let rows = spec.rows(false)?;
    let mut request = CreateAclsRequest::default();
    request.creations = rows
        .iter()
        .map(|r| {
            let mut c = AclCreation::default();
            c.resource_type = r.resource_type.code();
            c.resource_name = text(r.name.as_ref()).unwrap_or_default();
            c.resource_pattern_type = r.pattern_type.code();
            c.principal = text(r.principal.as_ref()).unwrap_or_default();
            c.host = text(r.host.as_ref()).unwrap_or_default();
            c.operation = r.operation.code();
            c.permission_type = r.permission.code();
            c
        })
        .collect();
    let response = client.send(&request, 1)?;
    let mut created = Vec::new();
    for (c, result) in request.creations.iter().zip(&response.results) {
        if result.error_code != 0 {
            bail!(
                "creating {} {} for {}: {}: {}",
                ResourceType::from_code(c.resource_type).name(),
                c.resource_name.as_str(),
                c.principal.as_str(),
                error_name(result.error_code),
                result.error_message.as_deref().unwrap_or_default()
            );
        }
        created.push(acl_json(
            c.resource_type,
            &c.resource_name,
            c.resource_pattern_type,
            &c.principal,
            &c.host,
            c.operation,
            c.permission_type,
        ));
    }
    Ok(json!({ "acls": created }))
}

fn list(client: &mut crate::client::Client, spec: &Spec) -> anyhow::Result<Value> {
    let mut acls = Vec::new();
    for r in spec.rows(true)? {
        let mut request = DescribeAclsRequest::default();
        request.resource_type_filter = r.resource_type.code();
        request.resource_name_filter = text(r.name.as_ref());
        request.pattern_type_filter = r.pattern_type.code();
        request.principal_filter = text(r.principal.as_ref());
        request.host_filter = text(r.host.as_ref());
        request.operation = r.operation.code();
        request.permission_type = r.permission.code();
        let response = client.send(&request, 1)?;
        if response.error_code != 0 {
            bail!(
                "listing ACLs: {}: {}",
                error_name(response.error_code),
                response.error_message.as_deref().unwrap_or_default()
            );
        }
        for resource in &response.resources {
            for a in &resource.acls {
                let acl = acl_json(
                    resource.resource_type,
                    &resource.resource_name,
                    resource.pattern_type,
                    &a.principal,
                    &a.host,
                    a.operation,
                    a.permission_type,
                );
                if !acls.contains(&acl) {
                    acls.push(acl);
                }
            }
        }
    }
    Ok(json!({ "acls": acls }))
}

fn delete(client: &mut crate::client::Client, spec: &Spec) -> anyhow::Result<Value> {
    let mut request = DeleteAclsRequest::default();
    request.filters = spec
        .rows(true)?
        .iter()
        .map(|r| {
            let mut f = DeleteAclsFilter::default();
            f.resource_type_filter = r.resource_type.code();
            f.resource_name_filter = text(r.name.as_ref());
            f.pattern_type_filter = r.pattern_type.code();
            f.principal_filter = text(r.principal.as_ref());
            f.host_filter = text(r.host.as_ref());
            f.operation = r.operation.code();
            f.permission_type = r.permission.code();
            f
        })
        .collect();
    let response = client.send(&request, 1)?;
    let mut deleted = Vec::new();
    for result in &response.filter_results {
        if result.error_code != 0 {
            bail!(
                "deleting ACLs: {}: {}",
                error_name(result.error_code),
                result.error_message.as_deref().unwrap_or_default()
            );
        }
        for m in &result.matching_acls {
            deleted.push(acl_json(
                m.resource_type,
                &m.resource_name,
                m.pattern_type,
                &m.principal,
                &m.host,
                m.operation,
                m.permission_type,
            ));
        }
    }
    Ok(json!({ "acls": deleted }))
}
