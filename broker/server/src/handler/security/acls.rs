//! CreateAcls, DescribeAcls and DeleteAcls v1-v3 (v0 predates pattern types; the codec crate
//! dropped it, and so did Kafka 4; v2 is flexible; v3 adds the USER resource type, 7, which
//! the authorizer stores and matches as Kafka 4.4's does): bindings go into the security log
//! as `SecurityRecord::AclCreate` / `AclDelete`, fsynced before the answer, and the
//! authorizer is rebuilt from that log at start. Creating and deleting need ALTER on the
//! cluster, describing needs DESCRIBE on it (Kafka's `AclApis`); otherwise every result is
//! CLUSTER_AUTHORIZATION_FAILED.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::{
    AccessControlEntryFilter, AclBinding, AclBindingFilter, AclError, AclOperation,
    AclPermissionType, PatternType, ResourcePatternFilter, ResourceType,
};
use sluice_security::records::SecurityRecord;

use super::Ctx;
use crate::audit;

const CLUSTER_DENIED: &str = "Cluster authorization failed.";

fn text(s: &StrBytes) -> String {
    s.to_string()
}

fn some_text(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(text)
}

/// A filter from DescribeAcls/DeleteAcls fields.
fn filter(
    resource_type: i8,
    name: &Option<StrBytes>,
    pattern_type: i8,
    principal: &Option<StrBytes>,
    host: &Option<StrBytes>,
    operation: i8,
    permission_type: i8,
) -> AclBindingFilter {
    AclBindingFilter {
        pattern: ResourcePatternFilter {
            resource_type: ResourceType::from_code(resource_type),
            name: some_text(name),
            pattern_type: PatternType::from_code(pattern_type),
        },
        entry: AccessControlEntryFilter {
            principal: some_text(principal),
            host: some_text(host),
            operation: AclOperation::from_code(operation),
            permission_type: AclPermissionType::from_code(permission_type),
        },
    }
}

/// Answers CreateAcls.
pub fn create(ctx: &Ctx<'_>, request: CreateAclsRequest) -> CreateAclsResponse {
    let mut response = CreateAclsResponse::default();
    let result = |code: i16, message: Option<String>| {
        let mut r = AclCreationResult::default();
        r.error_code = code;
        r.error_message = message.map(StrBytes::from_string);
        r
    };
    if !ctx.auth.cluster(AclOperation::Alter) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        response.results = request
            .creations
            .iter()
            .map(|_| result(code, Some(CLUSTER_DENIED.into())))
            .collect();
        return response;
    }
    let parsed: Vec<Result<AclBinding, AclError>> = request
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_wire(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let records: Vec<SecurityRecord> = parsed
        .iter()
        .filter_map(|b| b.as_ref().ok())
        .filter(|b| !ctx.security.store.read(|s| s.authorizer().contains(b)))
        .map(|b| SecurityRecord::AclCreate(b.clone()))
        .collect();
    let stored = ctx.security.store.append(&records);
    if let Err(e) = &stored {
        tracing::warn!(error = %e, "CreateAcls: the security log refused the append");
    }
    response.results = parsed
        .into_iter()
        .map(|binding| match (binding, &stored) {
            (Err(e), _) => result(e.error_code(), Some(e.to_string())),
            (Ok(_), Err(e)) => result(
                ResponseError::UnknownServerError.code(),
                Some(format!("storing the ACL: {e}")),
            ),
            (Ok(binding), Ok(())) => {
                let (resource, detail) = describe_binding(&binding);
                audit::done(ctx.client.actor(), "acl.create", &resource, &detail);
                result(0, None)
            }
        })
        .collect();
    response
}

/// Answers DescribeAcls.
pub fn describe(ctx: &Ctx<'_>, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    if !ctx.auth.cluster(AclOperation::Describe) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        response.error_message = Some(StrBytes::from_static_str(CLUSTER_DENIED));
        return response;
    }
    let filter = filter(
        request.resource_type_filter,
        &request.resource_name_filter,
        request.pattern_type_filter,
        &request.principal_filter,
        &request.host_filter,
        request.operation,
        request.permission_type,
    );
    let described = ctx
        .security
        .store
        .read(|s| s.authorizer().describe(&filter));
    match described {
        Err(e) => {
            response.error_code = e.error_code();
            response.error_message = Some(StrBytes::from_string(e.to_string()));
        }
        Ok(bindings) => {
            // Grouped by resource pattern, as Kafka answers.
            let mut resources: Vec<DescribeAclsResource> = Vec::new();
            for binding in bindings {
                let p = &binding.pattern;
                let same = resources.last().is_some_and(|r| {
                    r.resource_type == p.resource_type.code()
                        && r.resource_name.as_str() == p.name
                        && r.pattern_type == p.pattern_type.code()
                });
                if !same {
                    let mut r = DescribeAclsResource::default();
                    r.resource_type = p.resource_type.code();
                    r.resource_name = StrBytes::from_string(p.name.clone());
                    r.pattern_type = p.pattern_type.code();
                    resources.push(r);
                }
                let mut acl = AclDescription::default();
                acl.principal = StrBytes::from_string(binding.entry.principal.to_string());
                acl.host = StrBytes::from_string(binding.entry.host.clone());
                acl.operation = binding.entry.operation.code();
                acl.permission_type = binding.entry.permission_type.code();
                if let Some(last) = resources.last_mut() {
                    last.acls.push(acl);
                }
            }
            response.resources = resources;
        }
    }
    response
}

/// Answers DeleteAcls: each filter removes the bindings it matches (a binding matched by
/// two filters is reported by the first).
pub fn delete(ctx: &Ctx<'_>, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let mut response = DeleteAclsResponse::default();
    let failed = |code: i16, message: String| {
        let mut r = DeleteAclsFilterResult::default();
        r.error_code = code;
        r.error_message = Some(StrBytes::from_string(message));
        r
    };
    if !ctx.auth.cluster(AclOperation::Alter) {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        response.filter_results = request
            .filters
            .iter()
            .map(|_| failed(code, CLUSTER_DENIED.into()))
            .collect();
        return response;
    }
    let filters: Vec<AclBindingFilter> = request.filters.iter().map(wire_filter).collect();
    // Which bindings each filter matches now; one append removes them all.
    let mut taken: std::collections::BTreeSet<AclBinding> = std::collections::BTreeSet::new();
    let matched: Vec<Result<Vec<AclBinding>, AclError>> = ctx.security.store.read(|s| {
        filters
            .iter()
            .map(|f| {
                s.authorizer().describe(f).map(|found| {
                    found
                        .into_iter()
                        .filter(|b| taken.insert(b.clone()))
                        .collect()
                })
            })
            .collect()
    });
    let records: Vec<SecurityRecord> = taken.into_iter().map(SecurityRecord::AclDelete).collect();
    let stored = ctx.security.store.append(&records);
    response.filter_results = matched
        .into_iter()
        .map(|m| match (m, &stored) {
            (Err(e), _) => failed(e.error_code(), e.to_string()),
            (Ok(_), Err(e)) => failed(
                ResponseError::UnknownServerError.code(),
                format!("storing the deletion: {e}"),
            ),
            (Ok(bindings), Ok(())) => {
                let mut r = DeleteAclsFilterResult::default();
                r.matching_acls = bindings
                    .into_iter()
                    .map(|b| {
                        let (resource, detail) = describe_binding(&b);
                        audit::done(ctx.client.actor(), "acl.delete", &resource, &detail);
                        let mut m = DeleteAclsMatchingAcl::default();
                        m.resource_type = b.pattern.resource_type.code();
                        m.resource_name = StrBytes::from_string(b.pattern.name);
                        m.pattern_type = b.pattern.pattern_type.code();
                        m.principal = StrBytes::from_string(b.entry.principal.to_string());
                        m.host = StrBytes::from_string(b.entry.host);
                        m.operation = b.entry.operation.code();
                        m.permission_type = b.entry.permission_type.code();
                        m
                    })
                    .collect();
                r
            }
        })
        .collect();
    response
}

/// An ACL as its audit line names it: (`acl TOPIC:PREFIXED:a-`, `ALLOW User:x READ from *`).
fn describe_binding(b: &AclBinding) -> (String, String) {
    let p = &b.pattern;
    let e = &b.entry;
    (
        format!(
            "acl {}:{}:{}",
            p.resource_type.name(),
            p.pattern_type.name(),
            p.name
        ),
        format!(
            "{} {} {} from {}",
            e.permission_type.name(),
            e.principal,
            e.operation.name(),
            e.host
        ),
    )
}

fn wire_filter(f: &DeleteAclsFilter) -> AclBindingFilter {
    filter(
        f.resource_type_filter,
        &f.resource_name_filter,
        f.pattern_type_filter,
        &f.principal_filter,
        &f.host_filter,
        f.operation,
        f.permission_type,
    )
}
