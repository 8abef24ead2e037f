//! A broker's own data into the cluster, once: the first time a data dir starts with
//! `controller.quorum.voters` (a single-node Sluice joining, or growing into, a cluster), the
//! topics, views, plugins, users, ACLs, quotas and tokens it holds and the cluster does not are
//! submitted to the controller, each topic with its own id and its partitions assigned to this
//! broker (where their data is), so nothing it served is lost. The marker file
//! `<data.dir>/__cluster_metadata/migrated` (written through the durable-write path) makes it
//! once: later starts leave the cluster's word alone (a topic deleted while this broker was
//! down is not brought back).
//!
//! What stays this broker's own: committed offsets and transaction state live in its
//! coordinators' logs; a group or transactional id whose coordinator is now another broker
//! starts there afresh (docs/cluster.md says so).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sluice_security::records::SecurityRecord;

use super::Kraft;
use crate::cluster::{ControllerOp, TopicSpec};
use crate::security::Security;
use crate::topics::TopicRegistry;

/// The marker's file name under the quorum's directory.
const MARKER: &str = "migrated";
/// How long the migration waits for this broker's registration before giving up (it is
/// tried again at the next start).
const REGISTERED_WAIT_MS: u64 = 120_000;

/// What the broker held before the image took over (read before the publisher ran).
pub(super) struct Local {
    /// Its security records.
    pub security: Vec<SecurityRecord>,
    /// Its plugins' version records (the other brokers fetch the bytes from here:
    /// `plugins.rs`).
    pub plugins: Vec<sluice_cluster::records::PluginVersion>,
}

impl Local {
    pub(super) fn read(security: &Security, plugins: &sluice_plugin_host::Registry) -> Self {
        Self {
            security: security
                .store
                .read(sluice_security::state::SecurityState::snapshot),
            plugins: plugins
                .list()
                .iter()
                .filter_map(super::plugins::record_of)
                .collect(),
        }
    }
}

/// The marker's path.
pub(super) fn marker(metadata_dir: &Path) -> PathBuf {
    metadata_dir.join(MARKER)
}

/// Runs the migration once this broker is registered, unless the marker says it ran.
pub(super) async fn run(
    kraft: Arc<Kraft>,
    topics: Arc<TopicRegistry>,
    local: Local,
    marker: PathBuf,
) {
    if marker.exists() {
        return;
    }
    let mut image = kraft.image.clone();
    let me = kraft.node_id;
    let registered = image.wait_for(|i| i.cluster_id().is_some() && i.is_active(me));
    if tokio::time::timeout(Duration::from_millis(REGISTERED_WAIT_MS), registered)
        .await
        .is_err()
    {
        tracing::warn!(
            "not registered within REGISTERED_WAIT_MS: this broker's own data is migrated at the next start"
        );
        return;
    }
    let mut failed = false;
    for op in operations(&kraft, &topics, local) {
        let what = format!("{op:?}");
        match kraft.submit(op).await {
            Ok(reply) => {
                if let Some(e) = super::refusal_in(reply) {
                    tracing::warn!(op = %what.chars().take(200).collect::<String>(), error = %e.message, "the cluster refused part of this broker's data");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "migrating this broker's data failed; retried at the next start");
                failed = true;
            }
        }
    }
    if failed {
        return;
    }
    if let Err(e) = crate::files::write_durable(&marker, b"1\n") {
        tracing::warn!(path = %marker.display(), error = %e, "writing the migration marker failed; it runs again at the next start");
    } else {
        tracing::info!(
            "this broker's own topics, views and security records are the cluster's now"
        );
    }
}

/// The operations that give the cluster what this broker holds and it does not.
fn operations(kraft: &Kraft, topics: &TopicRegistry, local: Local) -> Vec<ControllerOp> {
    let image = kraft.image();
    let me = kraft.node_id;
    let mut ops = Vec::new();
    let specs: Vec<TopicSpec> = topics
        .topics()
        .into_iter()
        .filter(|t| t.offline.is_none())
        .filter(|t| match image.topic_by_name(&t.name) {
            None => true,
            Some(theirs) => {
                if theirs.topic_id.0 != *t.id.as_bytes() {
                    tracing::warn!(topic = %t.name, "the cluster has another topic of this name: this broker's is not migrated (its data stays on disk, unserved)");
                }
                false
            }
        })
        .map(|t| TopicSpec {
            name: t.name.clone(),
            num_partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            replication_factor: 1,
            configs: t.overrides.clone().into_iter().collect(),
            topic_id: Some(*t.id.as_bytes()),
            assignments: Some(vec![vec![me]; t.partitions.len()]),
        })
        .collect();
    if !specs.is_empty() {
        tracing::info!(topics = ?specs.iter().map(|s| &s.name).collect::<Vec<_>>(), "migrating this broker's topics into the cluster, on this broker");
        // One topic per operation: a refusal of one (a name taken meanwhile) spares the rest.
        ops.extend(
            specs
                .into_iter()
                .map(|s| ControllerOp::CreateTopics(vec![s])),
        );
    }
    for view in topics.views().into_iter().filter(|v| !v.spec.ephemeral) {
        if image.views().contains_key(&view.spec.name) {
            continue;
        }
        match serde_json::to_vec(&view.spec) {
            Ok(spec) => ops.push(ControllerOp::PutView {
                name: view.spec.name.clone(),
                spec,
            }),
            Err(e) => {
                tracing::warn!(view = %view.spec.name, error = %e, "a view could not be encoded; not migrated")
            }
        }
    }
    for plugin in local.plugins {
        if image.plugins().contains_key(&plugin.name) {
            continue;
        }
        tracing::info!(plugin = %plugin.name, "migrating this broker's plugin into the cluster (the other brokers fetch it from here)");
        ops.push(ControllerOp::PutPlugin(plugin));
    }
    let theirs = image.security().snapshot();
    let mine: Vec<SecurityRecord> = local
        .security
        .into_iter()
        .filter(|r| !theirs.contains(r))
        .collect();
    if !mine.is_empty() {
        tracing::info!(
            records = mine.len(),
            "migrating this broker's users, ACLs, quotas and tokens into the cluster"
        );
        for chunk in mine.chunks(SECURITY_RECORDS_PER_OP) {
            ops.push(ControllerOp::Security(chunk.to_vec()));
        }
    }
    ops
}

/// Security records per migrated operation (the controller's batch bound is larger).
const SECURITY_RECORDS_PER_OP: usize = 100;
