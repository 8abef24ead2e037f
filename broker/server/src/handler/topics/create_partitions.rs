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
    if let Some(kraft) = ctx.kraft {
        let mut response = CreatePartitionsResponse::default();
        response.results = grow_in_cluster(kraft, ctx.topics, request, &denied).await;
        return response;
    }
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

/// In a cluster: each topic is checked here, then grown by the controller (new partitions
/// placed over the live brokers); answered once this broker has them.
async fn grow_in_cluster(
    kraft: &crate::kraft::Kraft,
    topics: &Arc<TopicRegistry>,
    request: CreatePartitionsRequest,
    denied: &BTreeSet<String>,
) -> Vec<CreatePartitionsTopicResult> {
    use crate::cluster::ControllerOp;
    let duplicates = named_twice(request.topics.iter().map(|t| t.name.0.as_str()));
    let mut results = Vec::with_capacity(request.topics.len());
    for (i, topic) in request.topics.into_iter().enumerate() {
        let name = topic.name.0.to_string();
        let result = match refusal(i, &name, denied, &duplicates) {
            Some(e) => Err(e),
            None if topic.assignments.is_some() => Err(KafkaError::new(
                ResponseError::InvalidReplicaAssignment,
                "manual replica assignments are not taken by a cluster yet: give the count",
            )),
            None => {
                // The checks of one broker (the topic exists, the count grows, the budget).
                let registry = Arc::clone(topics);
                let (checked, count) = (name.clone(), topic.count);
                let valid = tokio::task::spawn_blocking(move || {
                    registry
                        .create_partitions(&checked, count, true)
                        .map(|_| ())
                })
                .await
                .unwrap_or_else(|e| {
                    Err(KafkaError::new(
                        ResponseError::UnknownServerError,
                        e.to_string(),
                    ))
                });
                match valid {
                    Err(e) => Err(e),
                    Ok(()) if request.validate_only => Ok(()),
                    Ok(()) => kraft
                        .submit(ControllerOp::CreatePartitions {
                            name: name.clone(),
                            count: topic.count,
                        })
                        .await
                        .map(|_| ())
                        .map_err(|e| crate::kraft::kafka_error(&e)),
                }
            }
        };
        let mut out = CreatePartitionsTopicResult::default();
        out.name = topic.name;
        if let Err(e) = result {
            out.error_code = e.code.code();
            out.error_message = Some(StrBytes::from_string(e.message));
        }
        results.push(out);
    }
    results
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
