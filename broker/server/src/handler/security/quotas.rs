//! DescribeClientQuotas and AlterClientQuotas v0-v1 (KIP-546; v1 is flexible):
//! `producer_byte_rate` and `consumer_byte_rate` on users, client ids or both (named or
//! `<default>`, a null name), as security-log records
//! (`ClientQuotaSet`/`ClientQuotaRemove`, fsynced before the answer). Describing needs
//! DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (Kafka's checks;
//! CLUSTER_AUTHORIZATION_FAILED otherwise). The `ip` entity type (connection-rate quotas)
//! and other keys are INVALID_REQUEST / UNSUPPORTED: only byte rates are enforced here
//! (`crate::quota`).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, alter_client_quotas_response,
};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;
use sluice_security::quota::{EntityName, QuotaEntity, QuotaKind, validate_value};
use sluice_security::records::SecurityRecord;

use super::Ctx;
use crate::audit;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
/// DescribeClientQuotas match types (Kafka's `ClientQuotaFilterComponent`).
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

fn invalid(message: impl Into<String>) -> (i16, String) {
    (ResponseError::InvalidRequest.code(), message.into())
}

fn name(n: Option<&StrBytes>) -> EntityName {
    n.map_or(EntityName::Default, |s| EntityName::Named(s.to_string()))
}

/// An entity from the wire's (type, name) pairs.
fn entity<'a>(
    parts: impl Iterator<Item = (&'a StrBytes, Option<&'a StrBytes>)>,
) -> Result<QuotaEntity, (i16, String)> {
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    for (entity_type, entity_name) in parts {
        let slot = match entity_type.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            other => {
                return Err(invalid(format!(
                    "Unsupported quota entity type {other} (user and client-id are)"
                )));
            }
        };
        if slot.is_some() {
            return Err(invalid(format!("Duplicate entity type {entity_type}")));
        }
        *slot = Some(name(entity_name));
    }
    entity
        .validate()
        .map_err(|e| (e.error_code(), e.to_string()))?;
    Ok(entity)
}

fn wire_entity(entity: &QuotaEntity) -> Vec<EntityData> {
    let part = |entity_type: &'static str, n: &EntityName| {
        let mut d = EntityData::default();
        d.entity_type = StrBytes::from_static_str(entity_type);
        d.entity_name = match n {
            EntityName::Default => None,
            EntityName::Named(s) => Some(StrBytes::from_string(s.clone())),
        };
        d
    };
    let mut out = Vec::new();
    if let Some(u) = &entity.user {
        out.push(part(USER, u));
    }
    if let Some(c) = &entity.client_id {
        out.push(part(CLIENT_ID, c));
    }
    out
}

/// Whether `half` of an entity passes one filter component.
fn component_matches(half: Option<&EntityName>, match_type: i8, wanted: Option<&StrBytes>) -> bool {
    match (match_type, half) {
        (MATCH_EXACT, Some(EntityName::Named(n))) => wanted.is_some_and(|w| w.as_str() == n),
        (MATCH_DEFAULT, Some(EntityName::Default)) => true,
        (MATCH_SPECIFIED, Some(_)) => true,
        _ => false,
    }
}

/// Answers DescribeClientQuotas.
pub fn describe(
    ctx: &Ctx<'_>,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    if !ctx.auth.cluster(AclOperation::DescribeConfigs) {
        response.error_code = ResponseError::ClusterAuthorizationFailed.code();
        response.error_message = Some(StrBytes::from_static_str("Cluster authorization failed."));
        return response;
    }
    for c in &request.components {
        if ![USER, CLIENT_ID].contains(&c.entity_type.as_str())
            || !(MATCH_EXACT..=MATCH_SPECIFIED).contains(&c.match_type)
        {
            let (code, message) = invalid(format!(
                "Unsupported filter component: entity type {} match type {}",
                c.entity_type.as_str(),
                c.match_type
            ));
            response.error_code = code;
            response.error_message = Some(StrBytes::from_string(message));
            return response;
        }
    }
    let selected = |entity: &QuotaEntity| {
        let half = |t: &str| match t {
            USER => entity.user.as_ref(),
            _ => entity.client_id.as_ref(),
        };
        let all = request.components.iter().all(|c| {
            component_matches(
                half(c.entity_type.as_str()),
                c.match_type,
                c._match.as_ref(),
            )
        });
        let types = usize::from(entity.user.is_some()) + usize::from(entity.client_id.is_some());
        all && (!request.strict || types == request.components.len())
    };
    let mut entries: Vec<EntryData> = Vec::new();
    ctx.security.store.read(|state| {
        for (entity, kind, value) in state.quotas().iter() {
            if !selected(entity) {
                continue;
            }
            let mut v = ValueData::default();
            v.key = StrBytes::from_static_str(kind.name());
            v.value = value;
            let wire = wire_entity(entity);
            match entries.last_mut() {
                Some(last) if last.entity == wire => last.values.push(v),
                _ => {
                    let mut e = EntryData::default();
                    e.entity = wire;
                    e.values.push(v);
                    entries.push(e);
                }
            }
        }
    });
    response.entries = Some(entries);
    response
}

/// The records of one AlterClientQuotas entry, or its error.
fn entry_records(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<Vec<SecurityRecord>, (i16, String)> {
    let entity = entity(
        entry
            .entity
            .iter()
            .map(|e| (&e.entity_type, e.entity_name.as_ref())),
    )?;
    let mut records = Vec::new();
    for op in &entry.ops {
        let kind = QuotaKind::from_name(op.key.as_str()).ok_or_else(|| {
            invalid(format!(
                "Unknown or unsupported quota key {} (producer_byte_rate and consumer_byte_rate are)",
                op.key.as_str()
            ))
        })?;
        if op.remove {
            records.push(SecurityRecord::ClientQuotaRemove {
                entity: entity.clone(),
                kind,
            });
        } else {
            validate_value(kind, op.value).map_err(|e| (e.error_code(), e.to_string()))?;
            records.push(SecurityRecord::ClientQuotaSet {
                entity: entity.clone(),
                kind,
                value: op.value,
            });
        }
    }
    Ok(records)
}

/// Answers AlterClientQuotas: each entry is applied or refused on its own.
/// A quota entity as its audit line names it: `quota user=alice,client-id=<default>`.
fn quota_resource(entry: &alter_client_quotas_request::EntryData) -> String {
    let parts: Vec<String> = entry
        .entity
        .iter()
        .map(|e| {
            let name = e.entity_name.as_deref().unwrap_or("<default>");
            format!("{}={name}", e.entity_type.as_str())
        })
        .collect();
    format!("quota {}", parts.join(","))
}

pub fn alter(ctx: &Ctx<'_>, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let mut response = AlterClientQuotasResponse::default();
    let allowed = ctx.auth.cluster(AclOperation::AlterConfigs);
    for entry in &request.entries {
        let outcome = if allowed {
            entry_records(entry)
        } else {
            Err((
                ResponseError::ClusterAuthorizationFailed.code(),
                "Cluster authorization failed.".to_owned(),
            ))
        };
        let outcome = outcome.and_then(|records| {
            if request.validate_only {
                return Ok(());
            }
            ctx.security.store.append(&records).map_err(|e| {
                (
                    ResponseError::UnknownServerError.code(),
                    format!("storing the quota: {e}"),
                )
            })
        });
        let mut out = alter_client_quotas_response::EntryData::default();
        out.entity = entry
            .entity
            .iter()
            .map(|e| {
                let mut d = alter_client_quotas_response::EntityData::default();
                d.entity_type = e.entity_type.clone();
                d.entity_name = e.entity_name.clone();
                d
            })
            .collect();
        match outcome {
            Err((code, message)) => {
                out.error_code = code;
                out.error_message = Some(StrBytes::from_string(message));
            }
            Ok(()) if !request.validate_only => {
                audit::done(
                    ctx.client.actor(),
                    "quota.alter",
                    &quota_resource(entry),
                    "altered",
                );
            }
            Ok(()) => {}
        }
        response.entries.push(out);
    }
    response
}
