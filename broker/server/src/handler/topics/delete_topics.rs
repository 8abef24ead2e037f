//! DeleteTopics v1-v6: each topic succeeds or fails on its own. Deleting needs DELETE on the
//! topic (TOPIC_AUTHORIZATION_FAILED otherwise), and nothing else: the views reading it are
//! removed with it and the transforms using it are removed or fail
//! (`TopicRegistry::delete_topic`), each an audit line by the deleting principal. v4 is
//! flexible; v5 answers error messages; v6 names topics by name or by id (KIP-516) and
//! answers each topic's id, refusing as Kafka's controller does: an entry with neither or
//! both (INVALID_REQUEST), a name or id listed twice (INVALID_REQUEST), an unknown id
//! (UNKNOWN_TOPIC_ID); an id the principal may not delete is TOPIC_AUTHORIZATION_FAILED,
//! named only if it may DESCRIBE the topic.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use sluice_security::acl::AclOperation;

use super::Ctx;
use crate::audit;
use crate::error::KafkaError;
use crate::handler::topic_ids::TopicIds;
use crate::limits;
use crate::topics::TopicDeleted;
use crate::topics::topic_id::Uuid;

/// One entry of the request, resolved: the topic's name and id, or why it is refused
/// before anything is deleted (with the name and id to answer it with).
struct Target {
    name: Option<TopicName>,
    id: Uuid,
    refused: Option<KafkaError>,
}

/// Answers DeleteTopics.
pub async fn handle(
    ctx: &Ctx<'_>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let registry = Arc::clone(ctx.topics);
    let targets = resolve(ctx, request, version);
    // In a cluster the registry commits each deletion through the controller.
    let results = delete_here(registry, targets).await;
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

/// The request's entries (v6: by name or id; before: names), resolved and checked.
fn resolve(ctx: &Ctx<'_>, request: DeleteTopicsRequest, version: i16) -> Vec<Target> {
    let entries: Vec<(Option<TopicName>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    // Duplicates among the entries naming one topic one way (an entry with both is refused
    // on its own, as Kafka's controller counts them).
    let names = super::create_topics::named_twice(
        entries
            .iter()
            .filter(|(_, id)| id.is_nil())
            .filter_map(|(n, _)| n.as_ref().map(|n| n.0.as_str())),
    );
    let ids: BTreeSet<Uuid> = {
        let mut seen = BTreeSet::new();
        entries
            .iter()
            .filter(|(n, id)| n.is_none() && !id.is_nil() && !seen.insert(*id))
            .map(|(_, id)| *id)
            .collect()
    };
    let known = TopicIds::of(ctx.topics);
    entries
        .into_iter()
        .enumerate()
        .map(|(i, (name, id))| {
            let refuse = |name, id, code, message: &str| Target {
                name,
                id,
                refused: Some(KafkaError::new(code, message.to_owned())),
            };
            let invalid = ResponseError::InvalidRequest;
            match (name, id) {
                _ if i >= limits::TOPICS_PER_REQUEST_MAX => refuse(
                    None,
                    id,
                    ResponseError::PolicyViolation,
                    "more than TOPICS_PER_REQUEST_MAX topics in one request",
                ),
                (None, id) if id.is_nil() => refuse(
                    None,
                    id,
                    invalid,
                    "Neither topic name nor id were specified.",
                ),
                (Some(name), id) if !id.is_nil() => refuse(
                    Some(name),
                    id,
                    invalid,
                    "You may not specify both topic name and topic id.",
                ),
                (Some(name), _) if names.contains(name.0.as_str()) => {
                    refuse(Some(name), Uuid::nil(), invalid, "Duplicate topic name.")
                }
                (None, id) if ids.contains(&id) => refuse(None, id, invalid, "Duplicate topic id."),
                (Some(name), _) => by_name(ctx, &known, name),
                (None, id) => by_id(ctx, &known, id),
            }
        })
        .collect()
}

/// A topic named: DELETE on it, its id answered.
fn by_name(ctx: &Ctx<'_>, known: &TopicIds, name: TopicName) -> Target {
    let refused = (!ctx.auth.topic(AclOperation::Delete, name.0.as_str())).then(|| {
        KafkaError::new(
            ResponseError::TopicAuthorizationFailed,
            "Authorization failed.",
        )
    });
    let id = if refused.is_some() {
        Uuid::nil()
    } else {
        known.id(name.0.as_str())
    };
    Target {
        name: Some(name),
        id,
        refused,
    }
}

/// A topic by id (v6): UNKNOWN_TOPIC_ID, or DELETE on the topic it names (the name answered
/// only to a principal that may DESCRIBE it, as Kafka).
fn by_id(ctx: &Ctx<'_>, known: &TopicIds, id: Uuid) -> Target {
    let Some(name) = known.name(&id) else {
        return Target {
            name: None,
            id,
            refused: Some(KafkaError::new(
                ResponseError::UnknownTopicId,
                "This server does not host this topic ID.",
            )),
        };
    };
    let name = TopicName(StrBytes::from_string(name.to_owned()));
    if ctx.auth.topic(AclOperation::Delete, name.0.as_str()) {
        return Target {
            name: Some(name),
            id,
            refused: None,
        };
    }
    let describable = ctx.auth.topic(AclOperation::Describe, name.0.as_str());
    Target {
        name: describable.then_some(name),
        id,
        refused: Some(KafkaError::new(
            ResponseError::TopicAuthorizationFailed,
            "Authorization failed.",
        )),
    }
}

/// Deletes the targets on this broker (a single node).
async fn delete_here(
    registry: Arc<crate::topics::TopicRegistry>,
    targets: Vec<Target>,
) -> Vec<(DeletableTopicResult, Option<TopicDeleted>)> {
    tokio::task::spawn_blocking(move || {
        targets
            .into_iter()
            .map(|target| {
                let result = match (target.refused, &target.name) {
                    (Some(e), _) => Err(e),
                    (None, Some(name)) => registry.delete_topic(name.0.as_str()),
                    (None, None) => unreachable!("a target to delete has a name"),
                };
                let mut out = DeletableTopicResult::default();
                out.name = target.name;
                out.topic_id = target.id;
                match result {
                    Ok(deleted) => (out, Some(deleted)),
                    Err(e) => {
                        out.error_code = e.code.code();
                        out.error_message = Some(StrBytes::from_string(e.message));
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
    })
}
