//! Helpers shared by the group API handlers: string conversions and the call to the
//! coordinator that gives up at shutdown (a JoinGroup may wait minutes for a rebalance).

use kafka_protocol::protocol::StrBytes;
use sluice_group::{Request, Response};

use super::Ctx;

/// Sends `request` to the coordinator and waits for its answer; `None` when the broker
/// shuts down first or the coordinator is gone (handlers answer COORDINATOR_NOT_AVAILABLE,
/// which clients retry elsewhere or later).
pub async fn call(ctx: &Ctx<'_>, request: Request) -> Option<Response> {
    let mut shutdown = ctx.client.shutdown.clone();
    tokio::select! {
        answer = ctx.groups.call(request) => answer,
        _ = shutdown.wait_for(|stop| *stop) => None,
    }
}

/// A wire string as an owned `String`.
pub fn string(s: &StrBytes) -> String {
    s.to_string()
}

/// A nullable wire string as an owned `Option<String>`.
pub fn opt_string(s: Option<&StrBytes>) -> Option<String> {
    s.map(string)
}

/// Topic names and ids both ways, for the consumer group protocol (KIP-848), which names
/// partitions by topic id on the wire while the coordinator works with names.
pub struct TopicIds {
    by_id: std::collections::HashMap<uuid::Uuid, String>,
    by_name: std::collections::HashMap<String, uuid::Uuid>,
}

impl TopicIds {
    /// Every topic the broker has now.
    pub fn of(ctx: &Ctx<'_>) -> Self {
        let topics = ctx.topics.topics();
        Self {
            by_id: topics.iter().map(|t| (t.id, t.name.clone())).collect(),
            by_name: topics.iter().map(|t| (t.name.clone(), t.id)).collect(),
        }
    }

    /// The name of topic `id`, if it exists.
    pub fn name(&self, id: &uuid::Uuid) -> Option<&str> {
        self.by_id.get(id).map(String::as_str)
    }

    /// The id of topic `name` (the nil id, Kafka's "none", for one deleted meanwhile).
    pub fn id(&self, name: &str) -> uuid::Uuid {
        self.by_name.get(name).copied().unwrap_or_default()
    }
}
