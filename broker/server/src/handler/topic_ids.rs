//! Topic names and ids both ways: the consumer group protocol (KIP-848), Fetch v13+ and
//! DeleteTopics v6 name topics by id on the wire, while the broker works with names. A view's
//! id is derived from its name. Each look-up asks the registry's id index: nothing is copied
//! per request, whatever the number of topics.

use uuid::Uuid;

use crate::topics::TopicRegistry;

/// Topic and view names and ids both ways, as the registry has them now.
pub struct TopicIds<'a> {
    registry: &'a TopicRegistry,
}

impl<'a> TopicIds<'a> {
    /// The registry's topics and views.
    pub fn of(registry: &'a TopicRegistry) -> Self {
        Self { registry }
    }

    /// The name of topic (or view) `id`, if it exists.
    pub fn name(&self, id: &Uuid) -> Option<String> {
        self.registry.name_of_id(id)
    }

    /// The id of topic (or view) `name` (the nil id, Kafka's "none", for one deleted
    /// meanwhile).
    pub fn id(&self, name: &str) -> Uuid {
        self.registry.id_of_name(name).unwrap_or_default()
    }
}
