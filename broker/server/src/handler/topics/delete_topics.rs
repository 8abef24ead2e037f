//! DeleteTopics v1-v3: by name; each topic succeeds or fails on its own. Deleting needs
//! DELETE on the topic (TOPIC_AUTHORIZATION_FAILED otherwise), and nothing else: the views
//! reading it are removed with it and the transforms using it are removed or fail
//! (`TopicRegistry::delete_topic`), each an audit line by the deleting principal.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};

use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::audit;
use crate::error::KafkaError;
use crate::limits;

/// Answers DeleteTopics.
pub async fn handle(ctx: &Ctx<'_>, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let registry = Arc::clone(ctx.topics);
    let names = request.topic_names;
    let denied: Vec<bool> = names
        .iter()
        .map(|n| !ctx.auth.topic(AclOperation::Delete, n.0.as_str()))
        .collect();
    let results = tokio::task::spawn_blocking(move || {
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
                    registry.delete_topic(name.0.as_str())
                };
                let mut out = DeletableTopicResult::default();
                out.name = Some(name);
                match result {
                    Ok(deleted) => (out, Some(deleted)),
                    Err(e) => {
                        out.error_code = e.code.code();
                        (out, None)
                    }
                }
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "delete topics task failed");
        Vec::new()
    });
    // Committed offsets of a deleted topic go too (Kafka's offset cleanup on deletion), and
    // those of the views removed with it.
    for (out, deleted) in &results {
        let (Some(name), Some(deleted)) = (&out.name, deleted) else {
            continue;
        };
        let topic = name.0.as_str();
        audit::topic_deleted(
            ctx.client.actor(),
            topic,
            &deleted.views,
            &deleted.reading,
            &deleted.writing,
        );
        for gone in std::iter::once(topic).chain(deleted.views.iter().map(String::as_str)) {
            ctx.groups.delete_topic(gone.to_owned()).await;
        }
    }
    let mut response = DeleteTopicsResponse::default();
    response.responses = results.into_iter().map(|(out, _)| out).collect();
    response
}
