//! IncrementalAlterConfigs v0: SET and DELETE of topic config overrides, applied to the live
//! partitions and persisted (`Broker::alter_topic_config`). Broker configs are static (file,
//! env, flags): altering them is INVALID_REQUEST, as are APPEND and SUBTRACT (no list-typed
//! topic keys here).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::{AclOperation, ResourceType};

use crate::authz;
use crate::broker::ConfigChange;
use crate::error::KafkaError;
use crate::topic_config::PARTITIONER_KEY;
use crate::wire::ConnectionContext;

/// Kafka's resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's config operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// Answers IncrementalAlterConfigs.
pub async fn handle(
    ctx: &ConnectionContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let denied: Vec<bool> = request
        .resources
        .iter()
        .map(|r| !may_alter(ctx, r))
        .collect();
    let broker = ctx.broker.clone();
    let validate_only = request.validate_only;
    let responses = tokio::task::spawn_blocking(move || {
        request
            .resources
            .into_iter()
            .zip(denied)
            .map(|(resource, denied)| {
                let result = if denied {
                    Err(KafkaError::new(
                        ResponseError::TopicAuthorizationFailed,
                        "Topic authorization failed.",
                    ))
                } else {
                    Ok(())
                };
                let result = result
                    .and_then(|()| changes(&resource))
                    .and_then(|changes| {
                        broker
                            .alter_topic_config(
                                resource.resource_name.as_str(),
                                &changes,
                                validate_only,
                            )
                            .map(|_| ())
                    });
                let mut out = AlterConfigsResourceResponse::default();
                out.resource_type = resource.resource_type;
                out.resource_name = resource.resource_name;
                if let Err(e) = result {
                    out.error_code = e.code.code();
                    out.error_message = Some(StrBytes::from_string(e.message));
                }
                out
            })
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "alter configs task failed");
        Vec::new()
    });
    let mut response = IncrementalAlterConfigsResponse::default();
    response.responses = responses;
    response
}

/// ALTER_CONFIGS on the topic, and READ on a partitioner plugin a change binds it to.
fn may_alter(
    ctx: &ConnectionContext,
    resource: &kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource,
) -> bool {
    if resource.resource_type != RESOURCE_TOPIC {
        return true; // refused by `changes`
    }
    let name = resource.resource_name.as_str();
    authz::topic(ctx, AclOperation::AlterConfigs, name)
        && resource
            .configs
            .iter()
            .filter(|c| c.name.as_str() == PARTITIONER_KEY && c.config_operation == OP_SET)
            .filter_map(|c| c.value.as_ref())
            .all(|p| authz::allowed(ctx, AclOperation::Read, ResourceType::Plugin, p.as_str()))
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
                (OP_SET, None) => Err(KafkaError::new(
                    ResponseError::InvalidRequest,
                    format!("SET {key} without a value"),
                )),
                (op, _) => Err(KafkaError::new(
                    ResponseError::InvalidRequest,
                    format!(
                        "config operation {op} on {key}: only SET (0) and DELETE (1) are supported"
                    ),
                )),
            }
        })
        .collect()
}
