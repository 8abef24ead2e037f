//! What a running transform may still do, asked as it runs (docs/transforms.md, "Who a
//! transform acts for"). Before each read of its source the runner checks [`may_run`]: the
//! source is still the topic it was deployed on, its outputs exist, and its owner (the
//! deploying principal, from the address it deployed from) still holds READ on the source and
//! on its plugins and WRITE on every topic it writes. Before each append it checks
//! [`may_write`] for that topic. The ACL lookups are in memory (`authz::owner_lacks`), so an
//! ACL deleted stops the transform at its next read or append, without a restart, and the
//! checks hold after one.

use sluice_security::acl::{AclOperation, ResourceType};
use sluice_transform::{OnError, TransformSpec};

use crate::authz::{self, Need, Owner};
use crate::broker::Broker;

/// Why a transform may not go on now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Its source was deleted (or deleted and made again under its name): the service
    /// removes the transform.
    SourceGone(String),
    /// An output or the dead-letter topic is gone: the runner fails until it is resumed.
    OutputGone(String),
    /// The owner lacks a right: the runner stops, unauthorized, and resumes by itself once
    /// the right is granted again.
    Unauthorized(String),
}

impl Refusal {
    /// The text the status shows.
    pub fn message(&self) -> &str {
        match self {
            Self::SourceGone(m) | Self::OutputGone(m) | Self::Unauthorized(m) => m,
        }
    }
}

/// The spec's owner; a principal that does not parse (a damaged spec) is never allowed.
pub fn owner(spec: &TransformSpec) -> Result<Owner, Refusal> {
    Owner::parse(&spec.principal, spec.principal_host.as_deref())
        .map_err(|e| Refusal::Unauthorized(format!("transform {:?} cannot run: {e}", spec.name)))
}

/// Whether `spec`'s source topic is gone: no topic has its name, or the one that does is
/// not the topic it was deployed on (its id differs). A quarantined source (its metadata
/// unreadable at start, its id unknown) is not gone: it is offline.
pub fn source_gone(broker: &Broker, spec: &TransformSpec) -> bool {
    match (broker.topics.topic(&spec.source), &spec.source_topic_id) {
        (None, _) => true,
        (Some(topic), Some(id)) => topic.offline.is_none() && topic.id.to_string() != *id,
        (Some(_), None) => false,
    }
}

/// The topics `spec` writes: its outputs, and its dead-letter topic under `dead-letter`.
fn written(spec: &TransformSpec) -> impl Iterator<Item = &str> {
    let dead_letter = spec
        .dead_letter_topic
        .as_deref()
        .filter(|_| spec.on_error == OnError::DeadLetter);
    spec.outputs.iter().map(String::as_str).chain(dead_letter)
}

/// What the transform needs before it reads: its source, every topic it writes, and its
/// owner's rights on them and on its plugins.
pub fn may_run(broker: &Broker, spec: &TransformSpec, owner: &Owner) -> Result<(), Refusal> {
    if source_gone(broker, spec) {
        return Err(Refusal::SourceGone(format!(
            "source topic {:?} was deleted: the transform is removed with it",
            spec.source
        )));
    }
    if let Some(gone) = written(spec).find(|t| broker.topics.topic(t).is_none()) {
        return Err(Refusal::OutputGone(format!(
            "topic {gone:?}, which the transform writes, was deleted: it fails until a topic of that name exists and it is resumed (sluice transform resume {})",
            spec.name
        )));
    }
    let read: [Need<'_>; 2] = [
        (AclOperation::Read, ResourceType::Topic, &spec.source),
        (AclOperation::Read, ResourceType::Plugin, &spec.plugin),
    ];
    let partitioner = spec
        .partitioner
        .as_deref()
        .map(|p| (AclOperation::Read, ResourceType::Plugin, p));
    let writes = written(spec).map(|t| (AclOperation::Write, ResourceType::Topic, t));
    let needs = read.into_iter().chain(partitioner).chain(writes);
    match authz::owner_lacks(&broker.security, owner, needs) {
        None => Ok(()),
        Some(lacks) => Err(unauthorized(spec, owner, &lacks)),
    }
}

/// What the transform needs before it appends to `topic`: its owner's WRITE on it.
pub fn may_write(
    broker: &Broker,
    spec: &TransformSpec,
    owner: &Owner,
    topic: &str,
) -> Result<(), Refusal> {
    let need = (AclOperation::Write, ResourceType::Topic, topic);
    match authz::owner_lacks(&broker.security, owner, [need]) {
        None => Ok(()),
        Some(lacks) => Err(unauthorized(spec, owner, &lacks)),
    }
}

fn unauthorized(spec: &TransformSpec, owner: &Owner, lacks: &str) -> Refusal {
    Refusal::Unauthorized(format!(
        "the owner of transform {:?}, {}, may no longer run it: it lacks {lacks} (stopped; it resumes by itself once that is granted again)",
        spec.name, owner.principal
    ))
}

#[cfg(test)]
mod tests {
    use sluice_security::acl::{
        AccessControlEntry, AclBinding, AclPermissionType, PatternType, ResourcePattern,
    };
    use sluice_security::principal::KafkaPrincipal;
    use sluice_security::records::SecurityRecord;
    use sluice_transform::{FromOffset, Partitioning};

    use super::*;
    use crate::config::BrokerConfig;
    use crate::topic_config::TopicOverrides;

    fn allow(operation: AclOperation, resource_type: ResourceType, name: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type,
                name: name.to_owned(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: KafkaPrincipal::user("b"),
                host: "*".into(),
                operation,
                permission_type: AclPermissionType::Allow,
            },
        }
    }

    fn spec(broker: &Broker) -> TransformSpec {
        TransformSpec {
            name: "b-copy".into(),
            source: "src".into(),
            plugin: "copy".into(),
            params: Vec::new(),
            outputs: vec!["out".into()],
            dead_letter_topic: Some("dlq".into()),
            on_error: OnError::DeadLetter,
            partitioning: Partitioning::Key,
            commit_interval_ms: 100,
            from_offset: FromOffset::Earliest,
            start_offsets: vec![0],
            paused: false,
            generation: 0,
            partitioner: None,
            partitioner_params: Vec::new(),
            principal: "User:b".into(),
            principal_host: Some("127.0.0.1".into()),
            source_topic_id: broker.topics.topic("src").map(|t| t.id.to_string()),
            created_ms: 0,
        }
    }

    #[test]
    fn a_transform_runs_only_while_its_owner_holds_every_right_and_its_topics_exist() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_owned(),
            allow_everyone_if_no_acl_found: Some(false),
            ..BrokerConfig::default()
        })
        .unwrap();
        for topic in ["src", "out", "dlq"] {
            broker
                .topics
                .create_topic(topic, 1, TopicOverrides::new())
                .unwrap();
        }
        let spec = spec(&broker);
        let owner = owner(&spec).unwrap();
        let grants = [
            allow(AclOperation::Read, ResourceType::Topic, "src"),
            allow(AclOperation::Read, ResourceType::Plugin, "copy"),
            allow(AclOperation::Write, ResourceType::Topic, "out"),
            allow(AclOperation::Write, ResourceType::Topic, "dlq"),
        ];
        let records: Vec<_> = grants
            .iter()
            .cloned()
            .map(SecurityRecord::AclCreate)
            .collect();
        broker.security.store.append(&records).unwrap();
        assert_eq!(may_run(&broker, &spec, &owner), Ok(()));
        assert_eq!(may_write(&broker, &spec, &owner, "out"), Ok(()));
        // Each right, taken away, stops it, naming the right; given back, it may run again.
        for grant in &grants {
            let revoke = SecurityRecord::AclDelete(grant.clone());
            broker.security.store.append(&[revoke]).unwrap();
            let Err(Refusal::Unauthorized(why)) = may_run(&broker, &spec, &owner) else {
                panic!("{grant:?} revoked");
            };
            let named = format!(
                "{} on {}",
                grant.entry.operation.name(),
                grant.pattern.resource_type.name()
            );
            assert!(why.contains(&named) && why.contains("User:b"), "{why}");
            let again = SecurityRecord::AclCreate(grant.clone());
            broker.security.store.append(&[again]).unwrap();
            assert_eq!(may_run(&broker, &spec, &owner), Ok(()));
        }
        let revoke = SecurityRecord::AclDelete(grants[2].clone());
        broker.security.store.append(&[revoke]).unwrap();
        assert!(matches!(
            may_write(&broker, &spec, &owner, "out"),
            Err(Refusal::Unauthorized(_))
        ));
        assert_eq!(may_write(&broker, &spec, &owner, "dlq"), Ok(()));

        // A deleted output fails it; a deleted source, even made again, is gone for good.
        broker.topics.delete_topic("out").unwrap();
        assert!(
            matches!(may_run(&broker, &spec, &owner), Err(Refusal::OutputGone(m)) if m.contains("\"out\""))
        );
        assert!(!source_gone(&broker, &spec));
        broker.topics.delete_topic("src").unwrap();
        assert!(source_gone(&broker, &spec));
        broker
            .topics
            .create_topic("src", 1, TopicOverrides::new())
            .unwrap();
        assert!(
            source_gone(&broker, &spec),
            "a new topic under the name is not the source"
        );
        assert!(matches!(
            may_run(&broker, &spec, &owner),
            Err(Refusal::SourceGone(_))
        ));
        // A spec from before ids were recorded is bound to whatever topic has the name.
        let legacy = TransformSpec {
            source_topic_id: None,
            ..spec.clone()
        };
        assert!(!source_gone(&broker, &legacy));
    }

    #[test]
    fn a_damaged_owner_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(BrokerConfig {
            data_dir: dir.path().to_owned(),
            ..BrokerConfig::default()
        })
        .unwrap();
        let spec = TransformSpec {
            principal: "nobody".into(),
            ..spec(&broker)
        };
        assert!(matches!(owner(&spec), Err(Refusal::Unauthorized(m)) if m.contains("nobody")));
    }
}
