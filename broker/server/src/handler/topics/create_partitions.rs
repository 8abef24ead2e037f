//! CreatePartitions v0-v3 (v2-v3 flexible): grows topics to a new partition count
//! (`kafka-topics --alter --partitions`, AdminClient `create_partitions`, `sluice topic
//! add-partitions`). Each topic succeeds or fails on its own, as in Kafka: ALTER on the topic
//! (TOPIC_AUTHORIZATION_FAILED), a topic named twice (INVALID_REQUEST), a count not above the
//! current one (INVALID_PARTITIONS), explicit assignments that are not one `[0]` per new
//! partition on this single broker (INVALID_REPLICA_ASSIGNMENT), `validate_only`.

use std::sync::Arc;

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::StrBytes;
use sluice_security::acl::AclOperation;

use super::Ctx;
use super::create_topics::{named_twice, refusal};
use crate::error::KafkaError;
use crate::topics::TopicRegistry;

/// Answers CreatePartitions.
pub async fn handle(ctx: &Ctx<'_>, request: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let denied: BTreeSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|name| !ctx.auth.topic(AclOperation::Alter, name))
        .collect();
    let registry = Arc::clone(ctx.topics);
    let results = tokio::task::spawn_blocking(move || grow_all(&registry, request, &denied))
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "create partitions task failed");
            Vec::new()
        });
    let mut response = CreatePartitionsResponse::default();
    response.results = results;
    response
}

fn grow_all(
    topics: &TopicRegistry,
    request: CreatePartitionsRequest,
    denied: &BTreeSet<String>,
) -> Vec<CreatePartitionsTopicResult> {
    let duplicates = named_twice(request.topics.iter().map(|t| t.name.0.as_str()));
    request
        .topics
        .into_iter()
        .enumerate()
        .map(|(i, topic)| {
            let result = match refusal(i, topic.name.0.as_str(), denied, &duplicates) {
                Some(e) => Err(e),
                None => grow_one(topics, &topic, request.validate_only),
            };
            let mut out = CreatePartitionsTopicResult::default();
            out.name = topic.name;
            if let Err(e) = result {
                out.error_code = e.code.code();
                out.error_message = Some(StrBytes::from_string(e.message));
            }
            out
        })
        .collect()
}

fn grow_one(
    topics: &TopicRegistry,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), KafkaError> {
    let name = topic.name.0.as_str();
    let node_id = topics.config().node_id;
    if topic.assignments.is_some() && topics.in_cluster() {
        return Err(KafkaError::new(
            ResponseError::InvalidReplicaAssignment,
            "manual replica assignments are not taken by a cluster yet: give the count",
        ));
    }
    if let Some(assignments) = &topic.assignments {
        let current = topics.topic(name).map_or(0, |t| t.partitions.len());
        let added = usize::try_from(topic.count)
            .unwrap_or(0)
            .saturating_sub(current);
        let on_this_broker = assignments
            .iter()
            .all(|a| a.broker_ids.len() == 1 && a.broker_ids[0].0 == node_id);
        if assignments.len() != added || !on_this_broker {
            return Err(KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "{} assignments for {added} new partitions; each must be [{node_id}] on this single broker",
                    assignments.len()
                ),
            ));
        }
    }
    topics
        .create_partitions(name, topic.count, validate_only)
        .map(|_| ())
}
