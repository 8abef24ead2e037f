//! The image into the topic registry (Kafka's `BrokerMetadataPublisher`): after every new
//! image, each topic of the image exists here with its id, partition count and config
//! overrides (`TopicRegistry::apply`, the registry's one seam for changes), a topic gone
//! from the image is deleted here, and each partition learns its placement (leader, leader
//! epoch, replicas, ISR).
//!
//! The registry's `topic.json` files stay as this broker's cache of the image: a restart
//! opens its partitions from them at once and the first image checks them (a topic whose
//! id the image gives to another topic of the name is deleted and created anew).
//!
//! A topic is deleted here only when an image this publisher saw held its id and a later
//! one does not (or the name now has another id): a topic on disk that the cluster never
//! knew (a single-node data dir before its migration) is left alone, unserved (Metadata
//! answers from the image), with a warning.
//!
//! Every broker holds every partition's log directory; only the leader's takes writes
//! (`Partition::check_leader`), so with replication factor 1 the others stay empty. The
//! internal topics (`__consumer_offsets`, `__transaction_state`) are placement only.
//!
//! The security records (SCRAM users, ACLs, quotas, delegation tokens) of the image become
//! this broker's security state (its own security log is then no longer written:
//! `SecurityStore::set_remote`).
//!
//! A change that fails here (a full disk) is logged and retried at the next image.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_cluster::MetadataImage;
use sluice_cluster::records::{ConfigResource, ConfigResourceType, TopicId};
use tokio::sync::watch;
use uuid::Uuid;

use crate::security::Security;
use crate::topic_config::TopicOverrides;
use crate::topic_name::{OFFSETS_TOPIC, TRANSACTION_TOPIC};
use crate::topics::{Placement, Recorded, TopicChange, TopicRegistry};

/// Applies every new image to `topics` until `stop`, publishing the applied index.
pub(super) async fn run(
    mut image: watch::Receiver<Arc<MetadataImage>>,
    (topics, replicas): (Arc<TopicRegistry>, Arc<super::replicas::ReplicaManager>),
    security: Arc<Security>,
    node_id: i32,
    published: watch::Sender<u64>,
    mut stop: watch::Receiver<bool>,
    migrated: PathBuf,
) {
    let mut seen = Seen::default();
    let mut warned = false;
    loop {
        let current = image.borrow_and_update().clone();
        let registry = Arc::clone(&topics);
        let index = current.last_applied_index();
        let warn = !warned && current.cluster_id().is_some();
        warned |= warn;
        let users = Arc::clone(&security);
        let marker = migrated.clone();
        let replication = Arc::clone(&replicas);
        let applied = tokio::task::spawn_blocking(move || {
            reconcile(&registry, &current, node_id, &mut seen, &marker);
            replication.apply(&current);
            if current.cluster_id().is_some() {
                users.store.replace_state(current.security().snapshot());
            }
            if warn {
                warn_unknown(&registry, &current);
            }
            seen
        })
        .await;
        match applied {
            Ok(kept) => seen = kept,
            Err(e) => {
                tracing::error!(error = %e, "the metadata publisher failed");
                return;
            }
        }
        published.send_replace(index);
        tokio::select! {
            changed = image.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Whether `name` is one of Kafka's internal topics: placement in the image only.
pub(crate) fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TRANSACTION_TOPIC
}

/// What the images applied so far held: a topic or view is deleted here only once an image
/// held it.
#[derive(Debug, Default)]
struct Seen {
    topics: BTreeSet<TopicId>,
    views: BTreeSet<String>,
}

/// Makes `topics` what `image` says.
fn reconcile(
    topics: &TopicRegistry,
    image: &MetadataImage,
    node_id: i32,
    seen: &mut Seen,
    migrated: &Path,
) {
    reconcile_topics(topics, image, node_id, &mut seen.topics, migrated);
    reconcile_views(topics, image, &mut seen.views);
}

/// The image's views (their specs' JSON), created, replaced and deleted here.
fn reconcile_views(topics: &TopicRegistry, image: &MetadataImage, seen: &mut BTreeSet<String>) {
    for (name, json) in image.views() {
        let spec: crate::views::ViewSpec = match serde_json::from_slice(json) {
            Ok(spec) => spec,
            Err(e) => {
                tracing::warn!(view = %name, error = %e, "a view of the metadata image does not parse; skipped");
                continue;
            }
        };
        seen.insert(name.clone());
        match topics.view(name) {
            Some(local) if local.spec == spec => {}
            Some(_) => {
                change(topics, TopicChange::ViewDeleted { name: name.clone() });
                change(topics, TopicChange::ViewCreated { spec });
            }
            None => change(topics, TopicChange::ViewCreated { spec }),
        }
    }
    let gone: Vec<String> = seen
        .iter()
        .filter(|name| !image.views().contains_key(*name))
        .cloned()
        .collect();
    for name in gone {
        seen.remove(&name);
        if topics.view(&name).is_some() {
            change(topics, TopicChange::ViewDeleted { name });
        }
    }
}

/// The image's topics, with each partition's placement.
fn reconcile_topics(
    topics: &TopicRegistry,
    image: &MetadataImage,
    node_id: i32,
    seen: &mut BTreeSet<TopicId>,
    migrated: &Path,
) {
    for (id, topic) in image.topics() {
        if is_internal(&topic.name) {
            continue;
        }
        let uuid = Uuid::from_bytes(id.0);
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let resource = ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: topic.name.clone(),
        };
        let configs: TopicOverrides = image.configs().get(&resource).cloned().unwrap_or_default();
        let local = topics.topic(&topic.name);
        if let Some(local) = &local
            && local.id != uuid
        {
            let cluster_born = seen.contains(&TopicId(*local.id.as_bytes())) || migrated.exists();
            if !cluster_born {
                // This broker's own topic from before it joined (not migrated yet, and the
                // cluster has one of the name): its data is not deleted for it.
                tracing::warn!(topic = %topic.name, "the cluster has another topic of this broker's topic's name: this broker's stays on disk, unserved");
                continue;
            }
            tracing::info!(topic = %topic.name, "the cluster's topic of this name has another id: deleting the one on this broker");
            change(
                topics,
                TopicChange::TopicDeleted {
                    name: topic.name.clone(),
                },
            );
        }
        match topics.topic(&topic.name) {
            None => change(
                topics,
                TopicChange::TopicCreated {
                    name: topic.name.clone(),
                    id: uuid,
                    partitions: count,
                    configs,
                    assignments: None,
                    replication_factor: -1,
                },
            ),
            Some(local) => {
                let have = i32::try_from(local.partitions.len()).unwrap_or(i32::MAX);
                if have < count {
                    change(
                        topics,
                        TopicChange::PartitionsAdded {
                            name: topic.name.clone(),
                            partitions: count,
                        },
                    );
                }
                if local.overrides != configs {
                    change(
                        topics,
                        TopicChange::ConfigAltered {
                            name: topic.name.clone(),
                            configs,
                        },
                    );
                }
            }
        }
        seen.insert(*id);
        let Some(local) = topics.topic(&topic.name) else {
            continue;
        };
        place(&local, topic, node_id);
    }
    let gone: Vec<TopicId> = seen
        .iter()
        .filter(|id| !image.topics().contains_key(id))
        .copied()
        .collect();
    for id in gone {
        seen.remove(&id);
        if let Some(name) = topics.name_of_id(&Uuid::from_bytes(id.0)) {
            change(topics, TopicChange::TopicDeleted { name });
        }
    }
}

/// Each partition's placement, as the image says, on this broker's partitions.
fn place(local: &crate::topics::Topic, topic: &sluice_cluster::image::TopicImage, node_id: i32) {
    for (&index, state) in &topic.partitions {
        let Some(partition) = usize::try_from(index)
            .ok()
            .and_then(|i| local.partitions.get(i))
        else {
            continue;
        };
        partition.set_placement(Placement {
            leader: state.leader,
            leader_epoch: state.leader_epoch,
            replicas: state.replicas.clone(),
            isr: state.isr.clone(),
            here: state.leader == node_id,
        });
    }
}

/// Applies one change, logging a failure (retried at the next image).
fn change(topics: &TopicRegistry, change: TopicChange) {
    let what = format!("{change:?}");
    match topics.apply(change, Recorded::InFiles) {
        Ok(_) => tracing::debug!(change = %what, "applied from the metadata image"),
        Err(e) => {
            tracing::warn!(change = %what, error = %e.message, "applying the metadata image failed; retried at the next change");
        }
    }
}

/// Warns (at the first image) of topics on disk that the cluster does not know.
fn warn_unknown(topics: &TopicRegistry, image: &MetadataImage) {
    let unknown: Vec<String> = topics
        .topics()
        .iter()
        .filter(|t| !image.topic_ids().contains_key(&t.name))
        .map(|t| t.name.clone())
        .collect();
    if !unknown.is_empty() {
        tracing::warn!(
            topics = ?unknown,
            "topics on this broker's disk that the cluster's metadata does not list: not served (a single-node data dir is not migrated into a cluster yet)"
        );
    }
}
