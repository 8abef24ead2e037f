//! Plugins in a cluster: the metadata image's plugin versions (name, SHA-256, size, kind;
//! never the bytes, `sluice_cluster::records::PluginVersion`) are the plugins every broker
//! runs.
//!
//! - An upload (`PUT /v1/plugins/NAME` on any broker) is installed there, copied to every
//!   other live broker (verified against its SHA-256 and compiled there), and its version
//!   record commits only once a majority of the live brokers store it ([`publish`]); a
//!   deletion commits its removal ([`unpublish`]).
//! - [`run`] makes this broker what each new image says: a version it lacks (it was down
//!   during the upload, or the copy failed) is fetched from a broker that has it
//!   (`BrokerMessage::FetchPlugin`, checked against the digest here) and installed; a plugin
//!   an image held and a later one does not is deleted here; at the first image after this
//!   broker registered (its data migrated), a plugin the image does not name (deleted while
//!   this broker was down) is deleted too. A fetch that fails is retried every
//!   `PLUGIN_SYNC_RETRY_MS`.
//! - `plugin.dir` is then the registry's own store: files an operator drops or removes
//!   there are refused with a log line (`Registry::manage_from_cluster`).
//! - Before the migration (a single-node data dir joining) this broker's own plugins are
//!   published once by `migrate.rs`; the other brokers fetch them from here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::MetadataImage;
use sluice_cluster::records::{PluginKind as RecordKind, PluginVersion as VersionRecord};
use sluice_plugin_host::{Install, PluginInfo, PluginKind, Registry};

use super::Kraft;
use crate::cluster::ControllerOp;

/// How often a version this broker could not fetch is tried again.
pub const PLUGIN_SYNC_RETRY_MS: u64 = 5_000;

/// How long a version installed here (an upload, or another broker's copy) may wait for its
/// record before the image's version is fetched over it: an upload commits its record after
/// copying to every broker, so meanwhile the image still names the version it replaces.
pub const PLUGIN_COMMIT_WAIT_MS: u64 = 60_000;

/// Installed-here versions awaiting their record: name -> (SHA-256, when). Bounded by the
/// registry's plugins (one entry per name).
#[derive(Debug, Default)]
pub(super) struct Uncommitted(std::sync::Mutex<BTreeMap<String, (String, std::time::Instant)>>);

impl Uncommitted {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, std::time::Instant)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `name` at `sha256` was installed here within `PLUGIN_COMMIT_WAIT_MS`.
    fn waiting(&self, name: &str, sha256: &str) -> bool {
        self.lock().get(name).is_some_and(|(sha, at)| {
            sha == sha256 && at.elapsed() < Duration::from_millis(PLUGIN_COMMIT_WAIT_MS)
        })
    }

    fn settle(&self, name: &str) {
        self.lock().remove(name);
    }
}

impl Kraft {
    /// A plugin version was installed here (uploaded, or copied from the broker it was
    /// uploaded to): the sync leaves it alone until its record commits (or
    /// `PLUGIN_COMMIT_WAIT_MS` passes).
    pub fn plugin_installed(&self, name: &str, sha256: &str) {
        self.uncommitted_plugins.lock().insert(
            name.to_owned(),
            (sha256.to_owned(), std::time::Instant::now()),
        );
    }
}

/// The version record of an installed plugin.
pub(super) fn record_of(info: &PluginInfo) -> Option<VersionRecord> {
    let mut sha256 = [0u8; 32];
    let hex = info.sha256.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    for (i, byte) in sha256.iter_mut().enumerate() {
        let pair = std::str::from_utf8(&hex[2 * i..2 * i + 2]).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(VersionRecord {
        name: info.name.clone(),
        sha256,
        size_bytes: info.size_bytes,
        kind: match info.kind {
            PluginKind::Partitioner => RecordKind::Partitioner,
            PluginKind::Filter => RecordKind::Filter,
            PluginKind::Transform => RecordKind::Transform,
            PluginKind::Validator => RecordKind::Validator,
        },
    })
}

fn hex(sha256: &[u8; 32]) -> String {
    use std::fmt::Write as _;
    sha256.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Commits `info` as the cluster's version of its plugin, once `stored` of the `live`
/// brokers (this one included) hold it: a majority.
///
/// # Errors
/// Too few brokers store it (nothing committed), or the controller refused.
pub async fn publish(
    kraft: &Kraft,
    info: &PluginInfo,
    stored: usize,
    live: usize,
) -> Result<(), String> {
    if stored * 2 <= live {
        return Err(format!(
            "stored on {stored} of {live} live brokers, not a majority: the version is not committed"
        ));
    }
    let record =
        record_of(info).ok_or_else(|| format!("plugin {}: a malformed digest", info.name))?;
    kraft
        .submit(ControllerOp::PutPlugin(record))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Commits the removal of plugin `name` (a cluster that never recorded it is fine).
///
/// # Errors
/// The controller could not be reached.
pub async fn unpublish(kraft: &Kraft, name: &str) -> Result<(), String> {
    if !kraft.image().plugins().contains_key(name) {
        return Ok(());
    }
    kraft
        .submit(ControllerOp::RemovePlugin {
            name: name.to_owned(),
        })
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Makes this broker's plugins the image's, until the cluster side stops.
pub(super) async fn run(kraft: Arc<Kraft>, registry: Arc<Registry>, migrated: PathBuf) {
    registry.manage_from_cluster();
    let mut image = kraft.image.clone();
    let mut stop = kraft.stop.subscribe();
    let mut seen: Option<BTreeMap<String, [u8; 32]>> = None;
    loop {
        let current = image.borrow_and_update().clone();
        let mut pending = false;
        if current.cluster_id().is_some() && current.is_active(kraft.node_id) {
            pending = sync(&kraft, &registry, &current, seen.as_ref(), &migrated).await;
            seen = Some(versions(&current));
        }
        let retry = async {
            if pending {
                tokio::time::sleep(Duration::from_millis(PLUGIN_SYNC_RETRY_MS)).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            changed = image.changed() => if changed.is_err() { return },
            () = retry => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

fn versions(image: &MetadataImage) -> BTreeMap<String, [u8; 32]> {
    image
        .plugins()
        .iter()
        .map(|(name, v)| (name.clone(), v.sha256))
        .collect()
}

/// One pass; whether a version is still missing here.
async fn sync(
    kraft: &Kraft,
    registry: &Arc<Registry>,
    image: &MetadataImage,
    seen: Option<&BTreeMap<String, [u8; 32]>>,
    migrated: &std::path::Path,
) -> bool {
    let wanted = versions(image);
    let gone: Vec<String> = match seen {
        Some(before) => before
            .keys()
            .filter(|name| !wanted.contains_key(*name))
            .cloned()
            .collect(),
        // The first image since this broker registered: what it names is the cluster's;
        // anything else here was deleted while this broker was down. Before the migration,
        // this broker's own plugins are the migration's to publish.
        None if migrated.exists() => registry
            .list()
            .into_iter()
            .map(|info| info.name)
            .filter(|name| !wanted.contains_key(name))
            .collect(),
        None => Vec::new(),
    };
    for name in gone {
        let registry = Arc::clone(registry);
        let deleted = tokio::task::spawn_blocking(move || {
            let found = registry.describe(&name).is_some();
            (found, registry.delete(&name, true), name)
        })
        .await;
        match deleted {
            Ok((true, Ok(()), name)) => {
                tracing::info!(plugin = %name, "deleted a plugin the cluster's metadata no longer names");
            }
            Ok((true, Err(e), name)) => {
                tracing::warn!(plugin = %name, error = %e, "a plugin the cluster deleted could not be deleted here");
            }
            _ => {}
        }
    }
    let mut missing = false;
    for (name, sha256) in &wanted {
        let sha256 = hex(sha256);
        let here = registry.describe(name).map(|i| i.sha256);
        if here.as_deref() == Some(sha256.as_str()) {
            kraft.uncommitted_plugins.settle(name);
            continue;
        }
        if here.is_some_and(|mine| kraft.uncommitted_plugins.waiting(name, &mine)) {
            // A newer upload, its record not committed yet: not replaced by the old one.
            missing = true;
            continue;
        }
        if let Err(e) = fetch(kraft, registry, name, &sha256).await {
            tracing::warn!(plugin = %name, sha256 = %sha256, error = %e, retry_ms = PLUGIN_SYNC_RETRY_MS, "the cluster's version of a plugin is not on this broker yet");
            missing = true;
        }
    }
    missing
}

/// Fetches `name` at `sha256` from the first live broker that has it, and installs it.
async fn fetch(
    kraft: &Kraft,
    registry: &Arc<Registry>,
    name: &str,
    sha256: &str,
) -> Result<(), String> {
    let me = kraft.node_id;
    let others: Vec<i32> = kraft
        .image()
        .brokers()
        .iter()
        .filter(|(id, b)| **id != me && b.is_active())
        .map(|(id, _)| *id)
        .collect();
    let mut why = Vec::new();
    for node in others {
        match kraft.fetch_plugin(node, name, sha256).await {
            Ok(bytes) => {
                let registry = Arc::clone(registry);
                let plugin = name.to_owned();
                let installed = tokio::task::spawn_blocking(move || {
                    registry.install_as(&plugin, &bytes, Install::NewOrReplace)
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("broker {node}'s copy does not install here: {e}"))?;
                tracing::info!(plugin = %name, sha256 = %installed.sha256, from = node, "installed the cluster's version of a plugin, fetched from another broker");
                return Ok(());
            }
            Err(e) => why.push(e),
        }
    }
    Err(if why.is_empty() {
        "no other live broker".to_owned()
    } else {
        why.join("; ")
    })
}
