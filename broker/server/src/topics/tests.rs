//! Topic registry: creation, validation, persistence across reopen, deletion.

use super::*;
use crate::broker::Broker;
use std::path::Path;

fn config(dir: &Path) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_owned(),
        ..BrokerConfig::default()
    }
}

#[test]
fn topics_survive_reopen_with_their_configs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let overrides: TopicOverrides = [("retention.ms".to_owned(), "60000".to_owned())].into();
    broker
        .topics
        .create_topic("orders", 3, overrides.clone())
        .unwrap();
    let cluster_id = broker.cluster_id.clone();
    broker.close_all().unwrap();
    drop(broker);

    let broker = Broker::open(config(dir.path())).unwrap();
    let topic = broker.topics.topic("orders").expect("topic reloaded");
    assert_eq!(topic.partitions.len(), 3);
    assert_eq!(topic.overrides, overrides);
    assert_eq!(broker.cluster_id, cluster_id);
}

#[test]
fn the_id_index_follows_creation_deletion_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let topics = &broker.topics;
    let a = topics
        .create_topic("a", 1, TopicOverrides::new())
        .unwrap()
        .id;
    let b = topics
        .create_topic("b", 2, TopicOverrides::new())
        .unwrap()
        .id;
    assert_eq!(topics.name_of_id(&a).as_deref(), Some("a"));
    assert_eq!(topics.id_of_name("b"), Some(b));
    assert_eq!(topics.name_of_id(&Uuid::from_u128(7)), None);
    topics.delete_topic("a").unwrap();
    assert_eq!(topics.name_of_id(&a), None);
    assert_eq!(topics.id_of_name("a"), None);
    broker.close_all().unwrap();
    drop(broker);
    let broker = Broker::open(config(dir.path())).unwrap();
    assert_eq!(
        broker.topics.name_of_id(&b).as_deref(),
        Some("b"),
        "rebuilt at open"
    );
}

#[test]
fn topic_ids_survive_reopen_and_growth_and_differ_after_recreation() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let id = broker
        .topics
        .create_topic("t", 1, TopicOverrides::new())
        .unwrap()
        .id;
    let grown = broker.topics.create_partitions("t", 2, false).unwrap();
    assert_eq!(grown.id, id);
    // A topic.json from before topic ids: the id is derived from the name, every start.
    std::fs::write(
        dir.path().join("topics/t/topic.json"),
        r#"{"name": "t", "partitions": 2, "configs": {}}"#,
    )
    .unwrap();
    broker.close_all().unwrap();
    drop(broker);
    let broker = Broker::open(config(dir.path())).unwrap();
    assert_eq!(
        broker.topics.topic("t").unwrap().id,
        topic_id::derived_topic_id("t")
    );
    broker.topics.delete_topic("t").unwrap();
    let again = broker
        .topics
        .create_topic("t", 1, TopicOverrides::new())
        .unwrap()
        .id;
    assert_ne!(again, topic_id::derived_topic_id("t"));
    broker.close_all().unwrap();
    drop(broker);
    let broker = Broker::open(config(dir.path())).unwrap();
    assert_eq!(broker.topics.topic("t").unwrap().id, again);
}

#[test]
fn bad_names_and_duplicates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    for name in ["", ".", "..", "a/b", "sp ace", &"x".repeat(250)] {
        let err = broker
            .topics
            .create_topic(name, 1, TopicOverrides::new())
            .unwrap_err();
        assert_eq!(err.code, ResponseError::InvalidTopicException, "{name:?}");
    }
    broker
        .topics
        .create_topic("t", 1, TopicOverrides::new())
        .unwrap();
    let err = broker
        .topics
        .create_topic("t", 1, TopicOverrides::new())
        .unwrap_err();
    assert_eq!(err.code, ResponseError::TopicAlreadyExists);
    let err = broker
        .topics
        .create_topic("u", 0, TopicOverrides::new())
        .unwrap_err();
    assert_eq!(err.code, ResponseError::InvalidPartitions);
}

#[test]
fn deleted_topics_are_gone_and_can_be_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    broker
        .topics
        .create_topic("t", 2, TopicOverrides::new())
        .unwrap();
    let partition = broker.topics.partition("t", 1).unwrap();
    broker.topics.delete_topic("t").unwrap();
    assert!(broker.topics.topic("t").is_none());
    assert!(!dir.path().join("topics/t").exists());
    let err = partition.with_log(|_| ()).unwrap_err();
    assert_eq!(err.code, ResponseError::UnknownTopicOrPartition);
    assert_eq!(
        broker.topics.delete_topic("t").unwrap_err().code,
        ResponseError::UnknownTopicOrPartition
    );
    broker
        .topics
        .create_topic("t", 1, TopicOverrides::new())
        .unwrap();
    assert_eq!(broker.topics.topic("t").unwrap().partitions.len(), 1);
}

#[test]
fn auto_create_follows_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config(dir.path());
    c.num_partitions = 4;
    let broker = Broker::open(c.clone()).unwrap();
    assert_eq!(
        broker.topics.auto_create("new").unwrap().partitions.len(),
        4
    );
    broker.close_all().unwrap();
    c.auto_create_topics_enable = false;
    let broker = Broker::open(c).unwrap();
    assert_eq!(
        broker.topics.auto_create("other").unwrap_err().code,
        ResponseError::UnknownTopicOrPartition
    );
}

#[test]
fn a_data_dir_is_opened_by_one_broker_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let first = Broker::open(config(dir.path())).unwrap();
    let err = Broker::open(config(dir.path())).unwrap_err().to_string();
    assert!(err.contains("in use by another sluice broker"), "{err}");
    first.close_all().unwrap();
    Broker::open(config(dir.path())).unwrap();
}

#[test]
fn topic_names_cannot_collide_with_the_brokers_files() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    for name in [
        "cluster.json",
        ".lock",
        "topics",
        "deleting",
        "cluster.tmp",
        "x.123-delete",
    ] {
        broker
            .topics
            .create_topic(name, 1, TopicOverrides::new())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    broker.topics.delete_topic("topics").unwrap();
    broker.close_all().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    assert_eq!(broker.topics.topics().len(), 5);
}

/// Appends one record to `topic`-0 and returns the log end after it.
fn append_one_record(broker: &Broker, topic: &str) -> i64 {
    let mut batch = sluice_storage::testing::build_value_batch(1, 8, 7, 1_000);
    broker
        .topics
        .partition(topic, 0)
        .unwrap()
        .with_log(|log| {
            log.append(&mut batch, sluice_storage::Durability::Fsync, 1_000)
                .unwrap();
            log.log_end_offset().value()
        })
        .unwrap()
}

#[test]
fn deleting_needs_no_new_directory_and_falls_back_to_removing_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    let deleting = dir.path().join(DELETING_DIR);
    assert!(deleting.is_dir(), "made at start, while there is room");
    broker
        .topics
        .create_topic("t", 2, TopicOverrides::new())
        .unwrap();
    assert_eq!(append_one_record(&broker, "t"), 1);
    // The move aside cannot happen (a full disk cannot make `deleting/`; here it is a file).
    std::fs::remove_dir(&deleting).unwrap();
    std::fs::write(&deleting, b"in the way").unwrap();
    broker.topics.delete_topic("t").unwrap();
    assert!(broker.topics.topic("t").is_none());
    assert!(!dir.path().join("topics/t").exists(), "removed in place");
    broker.close_all().unwrap();
    drop(broker);
    std::fs::remove_file(&deleting).unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(
        broker.topics.topic("t").is_none(),
        "still deleted after a restart"
    );
}

#[test]
fn a_topic_dir_without_topic_json_is_not_reused_by_the_next_creation() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    broker
        .topics
        .create_topic("u", 1, TopicOverrides::new())
        .unwrap();
    assert_eq!(append_one_record(&broker, "u"), 1);
    broker.close_all().unwrap();
    drop(broker);
    // What a deletion in place leaves if it stops after its commit point (topic.json gone).
    std::fs::remove_file(dir.path().join("topics/u").join(TOPIC_FILE)).unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(broker.topics.topic("u").is_none(), "ignored at start");
    broker
        .topics
        .create_topic("u", 1, TopicOverrides::new())
        .unwrap();
    let end = broker
        .topics
        .partition("u", 0)
        .unwrap()
        .with_log(|log| log.log_end_offset().value())
        .unwrap();
    assert_eq!(
        end, 0,
        "the new topic starts empty: none of the old records came back"
    );
}

/// A persisted view of `source` named `name` (its plugin need not exist: loaded unbound).
fn write_view_file(dir: &Path, name: &str, source: &str) {
    let views = dir.join(views::VIEWS_DIR);
    std::fs::create_dir_all(&views).unwrap();
    let text = format!(
        r#"{{"name":"{name}","source":"{source}","stages":[{{"plugin":"p"}}],"owner":"User:b","owner_host":"127.0.0.1"}}"#
    );
    std::fs::write(views.join(format!("{name}.json")), text).unwrap();
}

#[test]
fn deleting_a_topic_removes_its_views_and_reports_the_transforms_using_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(config(dir.path())).unwrap();
    broker
        .topics
        .create_topic("src", 1, TopicOverrides::new())
        .unwrap();
    broker
        .topics
        .create_topic("other", 1, TopicOverrides::new())
        .unwrap();
    broker.close_all().unwrap();
    drop(broker);
    write_view_file(dir.path(), "v1", "src");
    write_view_file(dir.path(), "v2", "other");
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(broker.topics.view("v1").is_some() && broker.topics.view("v2").is_some());
    broker
        .topics
        .note_transform_topics("reads", "src", &["out"]);
    broker
        .topics
        .note_transform_topics("writes", "other", &["src"]);

    let deleted = broker.topics.delete_topic("src").unwrap();
    assert_eq!(
        deleted,
        TopicDeleted {
            views: vec!["v1".into()],
            reading: vec!["reads".into()],
            writing: vec!["writes".into()],
        }
    );
    assert!(broker.topics.view("v1").is_none() && broker.topics.view("v2").is_some());
    assert!(!dir.path().join("views/v1.json").exists());
    // A topic made again under the name has no view and no transform noted against it
    // until one is made for it.
    broker.topics.forget_transform_topics("reads");
    broker
        .topics
        .create_topic("src", 1, TopicOverrides::new())
        .unwrap();
    assert!(broker.topics.view("v1").is_none());
    let again = broker.topics.delete_topic("src").unwrap();
    assert_eq!((again.views.len(), again.reading.len()), (0, 0));
    assert_eq!(again.writing, vec!["writes".to_owned()]);
}

#[test]
fn a_view_file_whose_source_is_gone_is_removed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    Broker::open(config(dir.path()))
        .unwrap()
        .close_all()
        .unwrap();
    // A crash between removing a deleted topic's views and the topic leaves none; a view
    // file of a topic that is gone is what the other order would leave.
    write_view_file(dir.path(), "orphan", "gone");
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(broker.topics.view("orphan").is_none());
    assert!(!dir.path().join("views/orphan.json").exists());
    broker
        .topics
        .create_topic("gone", 1, TopicOverrides::new())
        .unwrap();
    broker.close_all().unwrap();
    drop(broker);
    let broker = Broker::open(config(dir.path())).unwrap();
    assert!(
        broker.topics.view("orphan").is_none(),
        "a new topic of the name is never read by it"
    );
}

/// The metadata log's path through the seam (`change.rs`): a change recorded elsewhere is
/// applied to this broker (partitions opened, grown, reconfigured, closed; the shapes
/// published) without writing the file-backed source's topic.json.
#[test]
fn changes_recorded_in_a_log_are_applied_without_writing_topic_files() {
    let dir = tempfile::tempdir().unwrap();
    let config = Arc::new(config(dir.path()));
    let plugins = crate::plugins::Plugins::open(&config).unwrap();
    let registry = TopicRegistry::open(
        config.clone(),
        plugins.registry.clone(),
        Arc::new(RealFs),
        crate::clock::system(),
    )
    .unwrap();
    let shapes = registry.topic_shapes();
    let apply = |change| registry.apply(change, Recorded::InLog).unwrap();
    let id = topic_id::new_topic_id();
    apply(TopicChange::TopicCreated {
        name: "t".into(),
        id,
        partitions: 2,
        configs: TopicOverrides::new(),
        assignments: None,
        replication_factor: -1,
    });
    let topic_json = dir.path().join("topics/t/topic.json");
    assert!(!topic_json.exists(), "the log is the record");
    assert!(dir.path().join("topics/t/1").is_dir());
    assert_eq!(registry.topic("t").unwrap().id, id);
    assert_eq!(shapes.borrow().get("t"), Some(&2));

    apply(TopicChange::PartitionsAdded {
        name: "t".into(),
        partitions: 3,
    });
    let configs: TopicOverrides = [("retention.ms".to_owned(), "60000".to_owned())].into();
    apply(TopicChange::ConfigAltered {
        name: "t".into(),
        configs: configs.clone(),
    });
    let topic = registry.topic("t").unwrap();
    assert_eq!((topic.partitions.len(), &topic.overrides), (3, &configs));
    assert_eq!(shapes.borrow().get("t"), Some(&3));
    assert!(!topic_json.exists());

    apply(TopicChange::TopicDeleted { name: "t".into() });
    assert!(registry.topic("t").is_none());
    assert!(!dir.path().join("topics/t").exists());
    assert!(shapes.borrow().is_empty());
}
