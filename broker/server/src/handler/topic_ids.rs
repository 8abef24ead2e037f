//! Topic names and ids both ways: the consumer group protocol (KIP-848) and Fetch v13+ name
//! partitions by topic id on the wire, while the broker works with names.

use crate::topics::TopicRegistry;
use crate::topics::topic_id::derived_topic_id;

/// Topic and view names and ids both ways.
pub struct TopicIds {
    by_id: std::collections::HashMap<uuid::Uuid, String>,
    by_name: std::collections::HashMap<String, uuid::Uuid>,
}

impl TopicIds {
    /// Every topic and view the broker has now (a view's id is derived from its name).
    pub fn of(registry: &TopicRegistry) -> Self {
        let topics = registry.topics();
        let views = registry.views();
        let pairs: Vec<(uuid::Uuid, String)> = topics
            .iter()
            .map(|t| (t.id, t.name.clone()))
            .chain(views.iter().map(|v| {
                let name = v.name().to_owned();
                (derived_topic_id(&name), name)
            }))
            .collect();
        Self {
            by_name: pairs.iter().map(|(id, name)| (name.clone(), *id)).collect(),
            by_id: pairs.into_iter().collect(),
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
