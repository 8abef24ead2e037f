//! Quarantine: the start never depends on one bad topic. A topic whose `topic.json` cannot be
//! read or checked is loaded as *quarantined*: every partition directory it has is offline,
//! nothing of it is opened. A partition whose files fail the read-only probe, or whose log
//! fails to open (an error or a panic in recovery), is offline while the topic's other
//! partitions serve. Either way the reason (naming the path) is logged at error level, kept
//! in the registry for Metadata, DescribeConfigs, the admin API and `/metrics`, and the files
//! are left as they are: the probe only lists and opens, so a quarantined topic or a partition
//! that fails the probe is never truncated, rewritten or deleted at start. Deleting the topic
//! (DeleteTopics, `sluice topic delete`, `DELETE /v1/topics/{name}`) is the way out.
//!
//! What the wire says (docs/durability.md, "Quarantined topics"): Metadata lists an offline
//! partition with LEADER_NOT_AVAILABLE, leader -1 and this broker in `offline_replicas`, as
//! Kafka does for a partition whose only replica sits on a failed log dir; Produce, Fetch and
//! ListOffsets on it get KAFKA_STORAGE_ERROR; CreateTopics of the name gets
//! TOPIC_ALREADY_EXISTS (the name is taken on disk).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use sluice_storage::{Fs, Log, LogConfig};

use super::{Partition, TOPIC_FILE, Topic, TopicFile, TopicRegistry};
use crate::limits;
use crate::plugins::TopicPlugins;
use crate::topic_config::{self, TopicOverrides};

impl TopicRegistry {
    /// Loads `topics/<dir>`: a topic (some of its partitions perhaps offline), a quarantined
    /// topic, or `None` for a directory without `topic.json` (an unfinished creation, reused
    /// by the next creation of the name) or whose name is not UTF-8.
    pub(super) fn load_topic_dir(&self, dir: &Path) -> Option<Topic> {
        let file = dir.join(TOPIC_FILE);
        if std::fs::symlink_metadata(&file).is_err() {
            return None;
        }
        let Some(dir_name) = dir.file_name().and_then(|n| n.to_str()) else {
            tracing::error!(path = %dir.display(), "ignoring a topic directory whose name is not UTF-8");
            return None;
        };
        let meta = match read_topic_file(&file, dir_name) {
            Ok(meta) => meta,
            Err(reason) => return Some(self.quarantine_topic(dir_name, dir, reason)),
        };
        let plugins = TopicPlugins::bind_loaded(&self.plugins, &meta.name, &meta.configs);
        let log_config = topic_config::log_config(&self.config, &meta.configs);
        let partitions: Vec<Arc<Partition>> = (0..meta.partitions)
            .map(|index| Arc::new(self.open_partition_at_start(&meta.name, index, &log_config)))
            .collect();
        let offline = partitions
            .iter()
            .filter(|p| p.offline_reason().is_some())
            .count();
        tracing::info!(topic = %meta.name, partitions = meta.partitions, offline, "loaded topic");
        let id = meta
            .topic_id
            .as_deref()
            .and_then(super::topic_id::parse_topic_id)
            .unwrap_or_else(|| super::topic_id::derived_topic_id(&meta.name));
        Some(Topic {
            id,
            name: meta.name,
            overrides: meta.configs,
            partitions,
            plugins,
            offline: None,
        })
    }

    /// A topic whose metadata could not be read: each partition directory found on disk is
    /// an offline partition (indexes `0..=` the highest found), none is opened.
    fn quarantine_topic(&self, name: &str, dir: &Path, reason: String) -> Topic {
        tracing::error!(topic = name, path = %dir.display(), %reason, "topic quarantined: its metadata cannot be read; it is left untouched on disk and offline until deleted");
        let count = partition_dirs(dir);
        let partitions = (0..count)
            .map(|index| Arc::new(Partition::offline(name, index, reason.clone())))
            .collect();
        Topic {
            name: name.to_owned(),
            id: super::topic_id::derived_topic_id(name),
            overrides: TopicOverrides::new(),
            partitions,
            plugins: TopicPlugins::default(),
            offline: Some(reason),
        }
    }

    /// Probes, then opens one partition's log; offline (logged) if either fails.
    fn open_partition_at_start(&self, topic: &str, index: i32, config: &LogConfig) -> Partition {
        let dir = self.topic_dir(topic).join(index.to_string());
        let opened = probe(self.fs.as_ref(), &dir).and_then(|()| {
            let open = || {
                Log::open_shared(
                    self.fs.clone(),
                    &self.segment_files,
                    &dir,
                    config.clone(),
                    self.now_ms(),
                )
            };
            match catch_unwind(AssertUnwindSafe(open)) {
                Ok(Ok(log)) => Ok(log),
                Ok(Err(e)) => Err(format!("opening {}: {e}", dir.display())),
                Err(panic) => Err(format!(
                    "opening {} panicked: {}",
                    dir.display(),
                    panic_message(panic.as_ref())
                )),
            }
        });
        match opened {
            Ok(log) => Partition::new(topic, index, log),
            Err(reason) => {
                tracing::error!(topic, partition = index, path = %dir.display(), %reason, "partition offline: its log cannot be read; it is left on disk and answers KAFKA_STORAGE_ERROR until the topic is deleted");
                Partition::offline(topic, index, reason)
            }
        }
    }

    /// Topics with an offline partition or unreadable metadata, with their reasons (for
    /// `/metrics` and the admin API).
    pub fn quarantined(&self) -> Vec<(Arc<Topic>, Vec<String>)> {
        self.topics()
            .into_iter()
            .filter_map(|t| {
                let reasons = t.offline_reasons();
                (!reasons.is_empty()).then_some((t, reasons))
            })
            .collect()
    }
}

impl Topic {
    /// Why the topic or any of its partitions is offline: empty when it serves fully.
    pub fn offline_reasons(&self) -> Vec<String> {
        if let Some(reason) = &self.offline {
            return vec![reason.clone()];
        }
        self.partitions
            .iter()
            .filter_map(|p| {
                p.offline_reason()
                    .map(|r| format!("partition {}: {r}", p.index))
            })
            .collect()
    }
}

/// Reads and checks `topic.json`; the error names the path.
fn read_topic_file(file: &Path, dir_name: &str) -> Result<TopicFile, String> {
    if !file.is_file() {
        return Err(format!("{} is not a regular file", file.display()));
    }
    let text =
        std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let meta = TopicFile::parse(&text).map_err(|e| format!("parsing {}: {e}", file.display()))?;
    if meta.name != dir_name {
        return Err(format!(
            "{} names topic {:?}, not its directory's {dir_name:?}",
            file.display(),
            meta.name
        ));
    }
    Ok(meta)
}

/// One more than the highest partition directory (`<n>/`) under a topic directory, at most
/// `PARTITIONS_PER_TOPIC_MAX`.
fn partition_dirs(dir: &Path) -> i32 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|i| (0..limits::PARTITIONS_PER_TOPIC_MAX).contains(i))
        .max()
        .map_or(0, |highest| highest + 1)
}

/// Read-only check of a partition directory before recovery may write to it: every entry
/// must open as a file. A directory not there yet is fine (the log creates it).
fn probe(fs: &dyn Fs, dir: &Path) -> Result<(), String> {
    let named = |e: std::io::Error, path: &Path| format!("{}: {e}", path.display());
    if !fs.exists(dir).map_err(|e| named(e, dir))? {
        return Ok(());
    }
    for name in fs.list(dir).map_err(|e| named(e, dir))? {
        let path = dir.join(name);
        let file = fs.open(&path, false).map_err(|e| named(e, &path))?;
        file.len().map_err(|e| named(e, &path))?;
    }
    Ok(())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

#[cfg(test)]
#[path = "quarantine_tests.rs"]
mod tests;
