//! `/v1/groups`: list, and describe with members and per-partition committed offset, log end
//! offset and lag; classic groups and consumer-protocol (KIP-848) groups, told apart by
//! `type`. Read-only: offsets are reset over the Kafka protocol (`sluice group
//! reset-offsets`), where the coordinator checks the group is empty. ACLs: DESCRIBE on the
//! cluster lists every group, else the list holds the groups the caller may DESCRIBE;
//! describing needs DESCRIBE on the group, and shows offsets of topics the caller may DESCRIBE.

use axum::Extension;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kafka_protocol::ResponseError;
use serde::Serialize;
use sluice_group::GroupState;
use sluice_security::acl::{AclOperation, CLUSTER_NAME, ResourceType};

use super::auth::Caller;
use super::{AdminState, ApiError};
use crate::error::KafkaError;

pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(list))
        .route("/{id}", get(describe))
}

/// One committed offset and how far behind the log end it is.
#[derive(Debug, Serialize)]
pub struct LagView {
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
    /// -1 when the partition no longer exists.
    pub log_end_offset: i64,
    /// `log_end_offset - committed_offset`, at least 0; -1 when unknown.
    pub lag: i64,
}

#[derive(Debug, Serialize)]
struct MemberView {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
}

async fn list(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let broker = &state.broker;
    let all = caller.may(
        broker,
        (AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME),
    );
    let groups = state
        .groups
        .list_groups()
        .await
        .ok_or_else(|| ApiError::unavailable("the group coordinator is not running"))?;
    let groups: Vec<_> = groups
        .into_iter()
        .filter(|g| {
            all || caller.may(
                broker,
                (AclOperation::Describe, ResourceType::Group, &g.group_id),
            )
        })
        .map(|g| {
            // A consumer-protocol (KIP-848) group shows its own state, as ListGroups does.
            let (state, group_type) = match g.consumer_state {
                Some(consumer) => (consumer.name(), "consumer"),
                None => (g.state.as_str(), "classic"),
            };
            serde_json::json!({
                "group_id": g.group_id,
                "state": state,
                "type": group_type,
                "protocol_type": g.protocol_type,
            })
        })
        .collect();
    Ok(axum::Json(serde_json::json!({ "groups": groups })).into_response())
}

async fn describe(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(
        &state.broker,
        &[(AclOperation::Describe, ResourceType::Group, &id)],
    )?;
    if let Some(Ok(consumer)) = state
        .groups
        .describe_consumer_groups(vec![id.clone()])
        .await
        .and_then(|mut d| d.pop())
    {
        return describe_consumer_group(&state, &caller, &id, &consumer).await;
    }
    let described = state
        .groups
        .describe_groups(vec![id.clone()])
        .await
        .and_then(|mut d| d.pop())
        .ok_or_else(|| ApiError::unavailable("the group coordinator is not running"))?;
    let mut offsets = lag(&state, &id).await?;
    offsets.retain(|o| {
        caller.may(
            &state.broker,
            (AclOperation::Describe, ResourceType::Topic, &o.topic),
        )
    });
    if described.state == GroupState::Dead && offsets.is_empty() {
        return Err(KafkaError::new(
            ResponseError::GroupIdNotFound,
            format!("no group {id:?} (GET /v1/groups lists them)"),
        )
        .into());
    }
    let members: Vec<_> = described
        .members
        .into_iter()
        .map(|m| MemberView {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
        })
        .collect();
    let total_lag: i64 = offsets.iter().map(|o| o.lag.max(0)).sum();
    Ok(axum::Json(serde_json::json!({
        "group_id": described.group_id,
        "state": described.state.as_str(),
        "type": "classic",
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "members": members,
        "offsets": offsets,
        "total_lag": total_lag,
    }))
    .into_response())
}

/// A consumer-protocol (KIP-848) group: its state, epochs, assignor and each member's
/// assignment (topics the caller may DESCRIBE), with the committed offsets and lag.
async fn describe_consumer_group(
    state: &AdminState,
    caller: &Caller,
    id: &str,
    consumer: &sluice_group::ConsumerGroup,
) -> Result<Response, ApiError> {
    let may_describe = |topic: &str| {
        caller.may(
            &state.broker,
            (AclOperation::Describe, ResourceType::Topic, topic),
        )
    };
    let mut offsets = lag(state, id).await?;
    offsets.retain(|o| may_describe(&o.topic));
    let members: Vec<_> = consumer
        .members()
        .values()
        .map(|m| {
            let assignment: Vec<_> = m
                .assigned
                .iter()
                .filter(|(topic, _)| may_describe(topic))
                .flat_map(|(topic, partitions)| {
                    partitions
                        .iter()
                        .map(move |p| serde_json::json!({"topic": topic, "partition": p}))
                })
                .collect();
            serde_json::json!({
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "assignment": assignment,
            })
        })
        .collect();
    let total_lag: i64 = offsets.iter().map(|o| o.lag.max(0)).sum();
    Ok(axum::Json(serde_json::json!({
        "group_id": id,
        "state": consumer.state().name(),
        "type": "consumer",
        "protocol_type": "consumer",
        "protocol": consumer.assignor(),
        "group_epoch": consumer.group_epoch(),
        "assignment_epoch": consumer.assignment_epoch(),
        "members": members,
        "offsets": offsets,
        "total_lag": total_lag,
    }))
    .into_response())
}

/// Every committed offset of `group_id` with its lag against the log end offset.
pub(super) async fn lag(state: &AdminState, group_id: &str) -> Result<Vec<LagView>, ApiError> {
    let fetched = state
        .groups
        .fetch_offsets(group_id.to_owned(), None, None)
        .await
        .ok_or_else(|| ApiError::unavailable("the group coordinator is not running"))?
        .map_err(|code| {
            ApiError::from(KafkaError::from_code(
                code,
                format!("fetching the offsets of group {group_id:?}"),
            ))
        })?;
    let broker = state.broker.clone();
    super::topics::blocking(move || {
        fetched
            .into_iter()
            .filter(|f| f.offset >= 0)
            .map(|f| {
                let end = broker
                    .topics
                    .read_partition(&f.tp.topic, f.tp.partition)
                    .and_then(|(p, _)| p.with_log(|log| log.log_end_offset().value()).ok())
                    .unwrap_or(-1);
                LagView {
                    lag: if end < 0 { -1 } else { (end - f.offset).max(0) },
                    topic: f.tp.topic,
                    partition: f.tp.partition,
                    committed_offset: f.offset,
                    log_end_offset: end,
                }
            })
            .collect()
    })
    .await
}
