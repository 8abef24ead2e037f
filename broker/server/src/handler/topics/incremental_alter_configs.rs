//! IncrementalAlterConfigs v0-v1 (v1 flexible): SET and DELETE of topic config overrides,
//! and KIP-339's APPEND and SUBTRACT of list-typed keys (`cleanup.policy`: the values not yet
//! present added, the given ones removed, from the effective value; INVALID_CONFIG for a key
//! that is not a list, as Kafka answers), applied to the live partitions and persisted
//! (`TopicRegistry::alter_topic_config`). Broker configs are static (file, env, flags): altering
//! them is INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::authz;
use crate::error::KafkaError;
use crate::topics::ConfigChange;

/// Kafka's resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's config operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Answers IncrementalAlterConfigs.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let asked: Vec<Asked> = request
        .resources
        .into_iter()
        .map(|resource| {
            let changes = match may_alter(ctx, &resource) {
                true => changes(&resource),
                false => Err(denied()),
            };
            (resource.resource_type, resource.resource_name, changes)
        })
        .collect();
    let mut response = IncrementalAlterConfigsResponse::default();
    response.responses = alter_all(ctx, asked, request.validate_only)
        .await
        .into_iter()
        .map(|(resource_type, resource_name, error)| {
            let mut out = AlterConfigsResourceResponse::default();
            out.resource_type = resource_type;
            out.resource_name = resource_name;
            if let Some(e) = error {
                out.error_code = e.code.code();
                out.error_message = Some(StrBytes::from_string(e.message));
            }
            out
        })
        .collect();
    response
}

/// One resource of a config change: its type, its name, and the changes to make (or why
/// there are none).
pub(super) type Asked = (i8, StrBytes, Result<Vec<ConfigChange>, KafkaError>);

/// TOPIC_AUTHORIZATION_FAILED, as both AlterConfigs APIs answer a denied topic.
pub(super) fn denied() -> KafkaError {
    KafkaError::new(
        ResponseError::TopicAuthorizationFailed,
        "Topic authorization failed.",
    )
}

/// Applies each resource's changes (`TopicRegistry::alter_topic_config`) on the blocking pool, in
/// order: the resources back with their error, if any. The one path of AlterConfigs and
/// IncrementalAlterConfigs.
pub(super) async fn alter_all(
    ctx: &Ctx<'_>,
    asked: Vec<Asked>,
    validate_only: bool,
) -> Vec<(i8, StrBytes, Option<KafkaError>)> {
    let registry = Arc::clone(ctx.topics);
    tokio::task::spawn_blocking(move || {
        asked
            .into_iter()
            .map(|(resource_type, name, changes)| {
                let result = changes.and_then(|changes| {
                    registry
                        .alter_topic_config(name.as_str(), &changes, validate_only)
                        .map(|_| ())
                });
                (resource_type, name, result.err())
            })
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "alter configs task failed");
        Vec::new()
    })
}

/// ALTER_CONFIGS on the topic, and READ on each plugin a change binds it to (partitioner,
/// validator).
fn may_alter(
    ctx: &Ctx<'_>,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> bool {
    if resource.resource_type != RESOURCE_TOPIC {
        return true; // refused by `changes`
    }
    let name = resource.resource_name.as_str();
    let configs = resource
        .configs
        .iter()
        .filter(|c| c.config_operation == OP_SET)
        .map(|c| (c.name.as_str(), c.value.as_deref()));
    ctx.auth.topic(AclOperation::AlterConfigs, name)
        && authz::unreadable_plugin(configs, ctx.auth.may_read_plugin()).is_none()
}

fn changes(
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> Result<Vec<ConfigChange>, KafkaError> {
    if resource.resource_type != RESOURCE_TOPIC {
        return Err(KafkaError::new(
            ResponseError::InvalidRequest,
            "only topic configs can be altered; broker configs come from the config file, SLUICE_* and flags at start",
        ));
    }
    resource
        .configs
        .iter()
        .map(|c| {
            let key = c.name.to_string();
            match (c.config_operation, &c.value) {
                (OP_SET, Some(value)) => Ok(ConfigChange::Set {
                    key,
                    value: value.to_string(),
                }),
                (OP_DELETE, _) => Ok(ConfigChange::Delete { key }),
                (OP_APPEND, Some(value)) => Ok(ConfigChange::Append {
                    key,
                    value: value.to_string(),
                }),
                (OP_SUBTRACT, Some(value)) => Ok(ConfigChange::Subtract {
                    key,
                    value: value.to_string(),
                }),
                (OP_SET | OP_APPEND | OP_SUBTRACT, None) => Err(KafkaError::new(
                    ResponseError::InvalidRequest,
                    format!("operation {} on {key} without a value", c.config_operation),
                )),
                (op, _) => Err(KafkaError::new(
                    ResponseError::InvalidRequest,
                    format!(
                        "config operation {op} on {key}: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) exist"
                    ),
                )),
            }
        })
        .collect()
}
