//! The transform service in a cluster of brokers (docs/cluster.md): the specs are records of
//! the metadata log (`PutTransform`, `RemoveTransform`), which every broker applies
//! ([`TransformService::apply_image`], after every image it applies and so after a restart
//! or a missed change too); each broker runs the runners of the source partitions it leads
//! (`placement.rs`), and `describe` and `list` gather every broker's runners
//! (`BrokerMessage::TransformReports`).

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_transform::{Finish, TransformSpec};

use super::report::partition_report;
use super::runner::Control;
use super::{PartitionReport, Running, TransformReport, TransformService, placement, stop_runners};
use crate::error::ServerError;

impl TransformService {
    /// Every transform with every partition: in a cluster, each partition's state from the
    /// broker running it (`placement.rs`).
    pub async fn list_everywhere(&self) -> Vec<TransformReport> {
        let local = self.list().await;
        if self.inner.broker.kraft().is_none() {
            return local;
        }
        let answers = self.gather(None).await;
        local
            .into_iter()
            .map(|r| self.aggregate(r, &answers))
            .collect()
    }

    /// `report` with its partitions from every broker (a cluster), else as it is.
    pub(super) async fn everywhere(&self, report: TransformReport) -> TransformReport {
        if self.inner.broker.kraft().is_none() {
            return report;
        }
        let answers = self.gather(Some(&report.name)).await;
        self.aggregate(report, &answers)
    }

    /// The reports of the partitions this broker runs, by transform (`name`, or all): what
    /// another broker's `describe` asks (`BrokerMessage::TransformReports`).
    pub async fn local_reports(
        &self,
        name: Option<&str>,
    ) -> BTreeMap<String, Vec<PartitionReport>> {
        let transforms = self.inner.transforms.lock().await;
        transforms
            .values()
            .filter(|r| name.is_none_or(|n| n == r.spec.name))
            .map(|r| {
                let partitions = r
                    .runners
                    .values()
                    .map(|h| partition_report(&self.inner.broker, &r.spec, &h.shared))
                    .collect();
                (r.spec.name.clone(), partitions)
            })
            .collect()
    }

    /// Every live broker's runner reports (this one's included), by node id; a broker that
    /// does not answer is left out (its partitions show `unavailable`).
    pub(super) async fn gather(
        &self,
        name: Option<&str>,
    ) -> BTreeMap<i32, BTreeMap<String, Vec<PartitionReport>>> {
        let mut answers = BTreeMap::new();
        let Some(kraft) = self.inner.broker.kraft() else {
            return answers;
        };
        answers.insert(kraft.node_id(), self.local_reports(name).await);
        let image = kraft.image();
        let others: Vec<i32> = image
            .brokers()
            .keys()
            .copied()
            .filter(|&n| n != kraft.node_id() && image.is_active(n))
            .collect();
        let message = crate::cluster::BrokerMessage::TransformReports {
            name: name.map(str::to_owned),
        };
        let asked = others.iter().map(|&node| {
            let message = &message;
            async move {
                let answer = kraft.ask(node, message).await;
                let reports = match answer {
                    Ok(crate::cluster::BrokerReply::Json(json)) => {
                        serde_json::from_slice(&json).map_err(|e| e.to_string())
                    }
                    Ok(other) => Err(format!("answered {other:?}")),
                    Err(e) => Err(e),
                };
                (node, reports)
            }
        });
        for (node, reports) in futures_util::future::join_all(asked).await {
            match reports {
                Ok(reports) => {
                    answers.insert(node, reports);
                }
                Err(e) => tracing::debug!(node, "transform reports not read: {e}"),
            }
        }
        answers
    }

    /// `report` (the spec, the partitions run here) with each partition's report from the
    /// broker that leads it.
    pub(super) fn aggregate(
        &self,
        mut report: TransformReport,
        answers: &BTreeMap<i32, BTreeMap<String, Vec<PartitionReport>>>,
    ) -> TransformReport {
        let broker = &self.inner.broker;
        let count = broker
            .topics
            .topic(&report.source)
            .map_or(report.start_offsets.len(), |t| t.partitions.len());
        let leaders: Vec<Option<i32>> = (0..count)
            .map(|p| {
                let index = i32::try_from(p).unwrap_or(i32::MAX);
                broker
                    .topics
                    .partition(&report.source, index)
                    .and_then(|p| p.placement())
                    .map(|p| p.leader)
                    .filter(|&l| l >= 0)
            })
            .collect();
        let by_node: BTreeMap<i32, Vec<PartitionReport>> = answers
            .iter()
            .map(|(&node, all)| (node, all.get(&report.name).cloned().unwrap_or_default()))
            .collect();
        report.partitions = placement::merge(&report.outputs, &leaders, &by_node);
        let (state, reason, lag) = placement::summarize(report.paused, &report.partitions);
        report.state = state;
        report.reason = reason;
        report.lag = lag;
        report
    }

    /// Makes this broker's transforms the image's (a cluster): a transform the image no
    /// longer holds is stopped (its runners abort); a new one is started; a changed one is
    /// paused or resumed, or (a restart, a new deploy under the name) stopped, committing,
    /// and started again. Runs after every image this broker applies, so a broker that was
    /// down or missed a change catches up.
    pub(super) async fn apply_image(&self, transforms: &mut BTreeMap<String, Running>) {
        let broker = &self.inner.broker;
        let Some(kraft) = broker.kraft() else {
            return;
        };
        let desired = image_specs(&kraft.image());
        let gone: Vec<String> = transforms
            .keys()
            .filter(|n| !desired.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(mut running) = transforms.remove(&name) {
                running.send(Control::Stop(Finish::Abort));
                stop_runners(running).await;
                broker.topics.forget_transform_topics(&name);
                tracing::info!(transform = %name, "transform removed from the cluster");
            }
        }
        for (name, spec) in desired {
            match transforms.get_mut(&name) {
                Some(running) if *running.spec == spec => {}
                Some(running) if only_paused_differs(&running.spec, &spec) => {
                    let control = if spec.paused {
                        Control::Pause
                    } else {
                        Control::Run
                    };
                    running.spec = Arc::new(spec);
                    running.send(control);
                }
                _ => {
                    if let Some(mut old) = transforms.remove(&name) {
                        old.send(Control::Stop(Finish::Commit));
                        stop_runners(old).await;
                    }
                    tracing::info!(transform = %name, source = %spec.source, generation = spec.generation, "transform from the cluster");
                    let running = self.start(Arc::new(spec));
                    transforms.insert(name, running);
                }
            }
        }
    }
}

/// The image's transform specs, by name (one that does not parse is left out, logged).
fn image_specs(image: &sluice_cluster::MetadataImage) -> BTreeMap<String, TransformSpec> {
    image
        .transforms()
        .iter()
        .filter_map(|(name, entry)| {
            let parsed = serde_json::from_slice::<TransformSpec>(&entry.spec)
                .map_err(|e| e.to_string())
                .and_then(|spec| spec.check().map(|()| spec).map_err(|e| e.to_string()));
            match parsed {
                Ok(spec) if spec.name == *name => Some((name.clone(), spec)),
                Ok(spec) => {
                    tracing::warn!(transform = %name, "the image's spec is named {:?}; skipped", spec.name);
                    None
                }
                Err(e) => {
                    tracing::warn!(transform = %name, "the image's spec does not parse; skipped: {e}");
                    None
                }
            }
        })
        .collect()
}

/// Whether two specs differ in `paused` only (a pause or resume, not a restart).
fn only_paused_differs(old: &TransformSpec, new: &TransformSpec) -> bool {
    let mut same = new.clone();
    same.paused = old.paused;
    same == *old
}

/// Whether `spec`'s source topic is gone from the cluster's image (another topic of the
/// name is not it).
pub(super) fn source_gone_from(
    image: &sluice_cluster::MetadataImage,
    spec: &TransformSpec,
) -> bool {
    match (image.topic_by_name(&spec.source), &spec.source_topic_id) {
        (None, _) => true,
        (Some(topic), Some(id)) => uuid::Uuid::from_bytes(topic.topic_id.0).to_string() != *id,
        (Some(_), None) => false,
    }
}

/// Spec files in a cluster are not read (the metadata log holds the transforms): say so.
pub(super) fn warn_unmigrated(dir: &std::path::Path) -> Result<(), ServerError> {
    let entries =
        std::fs::read_dir(dir).map_err(ServerError::io(format!("reading {}", dir.display())))?;
    let files = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    if files > 0 {
        tracing::warn!(dir = %dir.display(), files, "transform spec files are not read in a cluster (the metadata log holds the transforms): deploy them again");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TransformSpec {
        serde_json::from_value(serde_json::json!({
            "name": "t", "source": "in", "plugin": "p", "params": [], "outputs": ["out"],
            "dead_letter_topic": null, "on_error": "stop", "partitioning": "key",
            "commit_interval_ms": 100, "from_offset": "earliest", "start_offsets": [0],
            "paused": false, "generation": 0, "principal": "User:admin", "created_ms": 0
        }))
        .expect("a spec")
    }

    #[test]
    fn a_source_is_gone_when_the_image_lost_its_name_or_gave_it_another_topic() {
        use sluice_cluster::records::{MetadataRecord, TopicId};
        let id = [7; 16];
        let mut spec = spec();
        spec.source_topic_id = Some(uuid::Uuid::from_bytes(id).to_string());
        let mut image = sluice_cluster::MetadataImage::new();
        assert!(source_gone_from(&image, &spec), "no topic of the name");
        let created = |topic_id| MetadataRecord::Topic {
            name: "in".into(),
            topic_id: TopicId(topic_id),
        };
        image.apply(1, &created(id)).expect("applied");
        assert!(
            !source_gone_from(&image, &spec),
            "the topic it was deployed on"
        );
        let removed = MetadataRecord::RemoveTopic {
            topic_id: TopicId(id),
        };
        image.apply(2, &removed).expect("applied");
        image.apply(3, &created([8; 16])).expect("applied");
        assert!(source_gone_from(&image, &spec), "another topic of the name");
        spec.source_topic_id = None;
        assert!(
            !source_gone_from(&image, &spec),
            "an unbound spec is not judged by id"
        );
    }

    #[test]
    fn a_pause_is_applied_in_place_and_anything_else_restarts() {
        let old = spec();
        let mut paused = old.clone();
        paused.paused = true;
        assert!(only_paused_differs(&old, &paused));
        let mut restarted = paused.clone();
        restarted.generation = 1;
        assert!(!only_paused_differs(&old, &restarted));
        let mut redeployed = old.clone();
        redeployed.outputs = vec!["other".to_owned()];
        assert!(!only_paused_differs(&old, &redeployed));
    }
}
