//! DeleteTopics v1-v3: by name; each topic succeeds or fails on its own. Deleting needs
//! DELETE on the topic (TOPIC_AUTHORIZATION_FAILED otherwise).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use sluice_security::acl::AclOperation;

use crate::authz;
use crate::error::KafkaError;
use crate::limits;
use crate::wire::ConnectionContext;

/// Answers DeleteTopics.
pub async fn handle(ctx: &ConnectionContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let broker = ctx.broker.clone();
    let names = request.topic_names;
    let denied: Vec<bool> = names
        .iter()
        .map(|n| !authz::topic(ctx, AclOperation::Delete, n.0.as_str()))
        .collect();
    let responses = tokio::task::spawn_blocking(move || {
        names
            .into_iter()
            .enumerate()
            .map(|(i, name)| {
                let result = if i >= limits::TOPICS_PER_REQUEST_MAX {
                    Err(KafkaError::new(
                        ResponseError::PolicyViolation,
                        "too many topics in one request",
                    ))
                } else if denied[i] {
                    Err(KafkaError::new(
                        ResponseError::TopicAuthorizationFailed,
                        "Authorization failed.",
                    ))
                } else {
                    broker.delete_topic(name.0.as_str())
                };
                let mut out = DeletableTopicResult::default();
                out.name = Some(name);
                if let Err(e) = result {
                    out.error_code = e.code.code();
                }
                out
            })
            .collect()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "delete topics task failed");
        Vec::new()
    });
    // Committed offsets of a deleted topic go too (Kafka's offset cleanup on deletion).
    for deleted in responses.iter().filter(|r| r.error_code == 0) {
        if let Some(name) = &deleted.name {
            ctx.groups.delete_topic(name.0.to_string()).await;
        }
    }
    let mut response = DeleteTopicsResponse::default();
    response.responses = responses;
    response
}
