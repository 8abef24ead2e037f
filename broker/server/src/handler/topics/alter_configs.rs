//! AlterConfigs v0-v2 (the legacy, non-incremental form; v2 flexible; `kafka-configs
//! --alter` of older tools, AdminClient `alter_configs`): a topic's overrides become exactly
//! the given set, every other topic key back to the broker's value, through the same path
//! as IncrementalAlterConfigs (`TopicRegistry::alter_topic_config`: validated as a whole, persisted
//! in topic.json, applied to the live partitions). A null value drops the key. Broker
//! configs are static: INVALID_REQUEST. ALTER_CONFIGS on the topic, and READ on a
//! partitioner plugin it binds (TOPIC_AUTHORIZATION_FAILED).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use super::incremental_alter_configs::{Asked, alter_all, denied};
use crate::authz;
use crate::error::KafkaError;
use crate::topic_config;
use crate::topics::ConfigChange;

/// Kafka's resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

/// Answers AlterConfigs.
pub async fn handle(ctx: &Ctx<'_>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let asked: Vec<Asked> = request
        .resources
        .into_iter()
        .map(|resource| {
            let changes = match may_alter(ctx, &resource) {
                true => replacement(&resource),
                false => Err(denied()),
            };
            (resource.resource_type, resource.resource_name, changes)
        })
        .collect();
    let mut response = AlterConfigsResponse::default();
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

/// ALTER_CONFIGS on the topic, and READ on each plugin it would bind (partitioner, validator).
fn may_alter(ctx: &Ctx<'_>, resource: &AlterConfigsResource) -> bool {
    if resource.resource_type != RESOURCE_TOPIC {
        return true; // refused by `replacement`
    }
    let name = resource.resource_name.as_str();
    let configs = resource
        .configs
        .iter()
        .map(|c| (c.name.as_str(), c.value.as_deref()));
    ctx.auth.topic(AclOperation::AlterConfigs, name)
        && authz::unreadable_plugin(configs, ctx.auth.may_read_plugin()).is_none()
}

/// The changes that make the topic's overrides exactly `resource.configs`: every other topic
/// key dropped (whatever the topic has now, so no read of it races the change), then each
/// given key set.
fn replacement(resource: &AlterConfigsResource) -> Result<Vec<ConfigChange>, KafkaError> {
    if resource.resource_type != RESOURCE_TOPIC {
        return Err(KafkaError::new(
            ResponseError::InvalidRequest,
            "only topic configs can be altered; broker configs come from the config file, SLUICE_* and flags at start",
        ));
    }
    let given = |key: &str| {
        resource
            .configs
            .iter()
            .any(|c| c.name.as_str() == key && c.value.is_some())
    };
    let mut changes: Vec<ConfigChange> = topic_config::topic_keys()
        .filter(|(key, _)| !given(key))
        .map(|(key, _)| ConfigChange::Delete {
            key: key.to_owned(),
        })
        .collect();
    for config in &resource.configs {
        if let Some(value) = &config.value {
            changes.push(ConfigChange::Set {
                key: config.name.to_string(),
                value: value.to_string(),
            });
        }
    }
    Ok(changes)
}
