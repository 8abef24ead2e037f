//! Quarantine at start: each kind of damage to one topic leaves the broker opening, the
//! damaged topic (or partition) offline with a reason naming the path and its files as they
//! were, the other topics serving, and deletion as the way out.

use std::collections::BTreeMap;
use std::path::Path;

use kafka_protocol::ResponseError;
use sluice_storage::Durability;

use super::super::TopicOverrides;
use crate::broker::Broker;
use crate::config::BrokerConfig;

fn config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_owned(),
        ..BrokerConfig::default()
    }
}

/// Every file's bytes and every directory (`None`) under `root`.
fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let key = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.insert(key, None);
                stack.push(path);
            } else {
                out.insert(key, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn one_batch() -> Vec<u8> {
    sluice_storage::testing::build_value_batch(1, 8, b'v', crate::clock::now_ms())
}

/// A data dir with a healthy topic `good` and a damaged topic `bad` (2 partitions), made by
/// `damage(topic dir)` after a clean close.
fn open_damaged(dir: &Path, damage: impl FnOnce(&Path)) -> Broker {
    let broker = Broker::open(config(dir)).unwrap();
    broker
        .topics
        .create_topic("good", 1, TopicOverrides::new())
        .unwrap();
    broker
        .topics
        .create_topic("bad", 2, TopicOverrides::new())
        .unwrap();
    for topic in ["good", "bad"] {
        let partition = broker.topics.partition(topic, 0).unwrap();
        partition
            .with_log(|log| log.append(&mut one_batch(), Durability::Fsync, 0))
            .unwrap()
            .unwrap();
    }
    broker.close_all().unwrap();
    drop(broker);
    damage(&dir.join("topics/bad"));
    Broker::open(config(dir)).expect("one bad topic never stops the start")
}

fn assert_good_serves(broker: &Broker) {
    let good = broker.topics.partition("good", 0).unwrap();
    let end = good
        .with_log(|log| log.append(&mut one_batch(), Durability::Fsync, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        end.base_offset.value(),
        1,
        "good kept its record and takes more"
    );
}

/// Damages a topic directory.
type Damage = fn(&Path);

#[test]
fn unreadable_topic_metadata_quarantines_only_that_topic() {
    let damages: [(&str, Damage); 4] = [
        ("garbage", |d| {
            std::fs::write(d.join("topic.json"), b"\xff{").unwrap()
        }),
        ("negative", |d| {
            let text = std::fs::read_to_string(d.join("topic.json")).unwrap();
            let text = text.replace("\"partitions\": 2", "\"partitions\": -1");
            std::fs::write(d.join("topic.json"), text).unwrap();
        }),
        ("renamed", |d| {
            let text = std::fs::read_to_string(d.join("topic.json")).unwrap();
            std::fs::write(d.join("topic.json"), text.replace("\"bad\"", "\"good\"")).unwrap();
        }),
        ("a directory", |d| {
            std::fs::remove_file(d.join("topic.json")).unwrap();
            std::fs::create_dir(d.join("topic.json")).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let mut before = None;
        let broker = open_damaged(dir.path(), |d| {
            damage(d);
            before = Some(snapshot(d));
        });
        let bad_dir = dir.path().join("topics/bad");
        assert_eq!(Some(snapshot(&bad_dir)), before, "{what}: bad was touched");
        let quarantined = broker.topics.quarantined();
        assert_eq!(quarantined.len(), 1, "{what}");
        let (topic, reasons) = &quarantined[0];
        assert_eq!(topic.name, "bad", "{what}");
        assert_eq!(topic.partitions.len(), 2, "{what}: one per partition dir");
        let path = bad_dir.join("topic.json").display().to_string();
        assert!(reasons[0].contains(&path), "{what}: {reasons:?}");
        let err = broker
            .topics
            .partition("bad", 0)
            .unwrap()
            .with_log(|_| ())
            .unwrap_err();
        assert_eq!(err.code, ResponseError::KafkaStorageError, "{what}");
        assert_good_serves(&broker);
        let exists = broker
            .topics
            .create_topic("bad", 1, TopicOverrides::new())
            .unwrap_err();
        assert_eq!(exists.code, ResponseError::TopicAlreadyExists, "{what}");
        let altered = broker
            .topics
            .alter_topic_config("bad", &[], false)
            .unwrap_err();
        assert_eq!(altered.code, ResponseError::KafkaStorageError, "{what}");
        broker.topics.delete_topic("bad").unwrap();
        assert!(!bad_dir.exists(), "{what}");
        broker
            .topics
            .create_topic("bad", 1, TopicOverrides::new())
            .unwrap();
        assert!(broker.topics.quarantined().is_empty(), "{what}");
    }
}

#[test]
fn an_unreadable_segment_takes_only_its_partition_offline() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = None;
    let broker = open_damaged(dir.path(), |d| {
        let segment = d.join("1/00000000000000000000.log");
        std::fs::remove_file(&segment).unwrap();
        std::fs::create_dir(&segment).unwrap();
        before = Some(snapshot(&d.join("1")));
    });
    let damaged = dir.path().join("topics/bad/1");
    assert_eq!(
        Some(snapshot(&damaged)),
        before,
        "the offline partition was touched"
    );
    let topic = broker.topics.topic("bad").unwrap();
    assert!(topic.offline.is_none(), "the topic's metadata is fine");
    let reasons = topic.offline_reasons();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].contains(
            &damaged
                .join("00000000000000000000.log")
                .display()
                .to_string()
        )
    );
    let err = topic.partitions[1].with_log(|_| ()).unwrap_err();
    assert_eq!(err.code, ResponseError::KafkaStorageError);
    assert!(err.message.contains("bad-1 is offline"), "{}", err.message);
    let healthy = topic.partitions[0]
        .with_log(|log| log.log_end_offset().value())
        .unwrap();
    assert_eq!(healthy, 1, "partition 0 of the damaged topic serves");
    assert_good_serves(&broker);
    broker.topics.delete_topic("bad").unwrap();
    assert!(broker.topics.quarantined().is_empty());
}
