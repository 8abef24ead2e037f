//! Config sources and precedence: defaults < TOML < env < flags; unknown keys and bad values
//! are errors naming the key.

use super::*;

#[test]
fn defaults_match_kafka() {
    let c = BrokerConfig::default();
    assert_eq!(c.get("listeners").unwrap(), "PLAINTEXT://127.0.0.1:9092");
    assert_eq!(c.num_partitions, 1);
    assert!(c.auto_create_topics_enable);
    assert_eq!(c.socket_request_max_bytes, 100 * 1024 * 1024);
    assert!(c.acks_all_fsync);
    c.validate().unwrap();
}

#[test]
fn every_key_round_trips_through_get_and_set() {
    let base = BrokerConfig::default();
    for key in BROKER_KEYS {
        let mut c = base.clone();
        let value = base
            .get(key)
            .unwrap_or_else(|| panic!("{key} has no getter"));
        c.set(key, &value)
            .unwrap_or_else(|e| panic!("{key}={value}: {e}"));
        assert_eq!(c, base, "{key}");
    }
}

#[test]
fn the_table_declares_each_key_topic_key_and_env_name_once() {
    let mut names = std::collections::HashSet::new();
    let mut envs = std::collections::HashSet::new();
    for key in KEYS {
        assert!(names.insert(key.name), "{} twice", key.name);
        assert!(
            envs.insert(env_name(key.name)),
            "{} twice",
            env_name(key.name)
        );
    }
    let listed: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    assert_eq!(BROKER_KEYS, listed);
    let mut topic_keys = std::collections::HashSet::new();
    for (key, broker_key) in crate::topic_config::topic_keys() {
        assert!(topic_keys.insert(key), "topic key {key} twice");
        // A topic key may share a name only with the broker key it overrides (Kafka's
        // `min.insync.replicas`, `unclean.leader.election.enable`).
        assert!(
            !names.contains(key) || broker_key == Some(key),
            "topic key {key} is also another broker key"
        );
        assert_eq!(broker_key, crate::topic_config::broker_key(key), "{key}");
    }
    let secrets: Vec<&str> = BROKER_KEYS
        .iter()
        .copied()
        .filter(|k| is_sensitive(k))
        .collect();
    assert_eq!(
        secrets,
        [
            "delegation.token.secret.key",
            "sasl.jaas.config",
            "admin.token"
        ]
    );
}

#[test]
fn the_default_log_config_is_the_storage_engines() {
    assert_eq!(
        BrokerConfig::default().log_config(),
        sluice_storage::LogConfig::default()
    );
}

#[test]
fn toml_accepts_bare_and_quoted_dotted_keys() {
    let mut c = BrokerConfig::default();
    let text =
        "num.partitions = 3\n\"log.retention.ms\" = \"2d\"\n[auto.create.topics]\nenable = false\n";
    c.apply_toml(Path::new("x.toml"), text).unwrap();
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.log_retention_ms, 2 * 86_400_000);
    assert!(!c.auto_create_topics_enable);
}

#[test]
fn unknown_keys_and_bad_values_name_the_key() {
    let mut c = BrokerConfig::default();
    let err = c.set("num.partition", "3").unwrap_err().to_string();
    assert!(err.contains("num.partition"), "{err}");
    let err = c.set("message.max.bytes", "big").unwrap_err().to_string();
    assert!(err.contains("message.max.bytes"), "{err}");
    let err = c
        .apply_toml(Path::new("x.toml"), "log.retention.mss = 1")
        .unwrap_err()
        .to_string();
    assert!(err.contains("log.retention.mss"), "{err}");
}

#[test]
fn env_names_are_uppercased_keys() {
    assert_eq!(
        env_name("auto.create.topics.enable"),
        "SLUICE_AUTO_CREATE_TOPICS_ENABLE"
    );
    let mut c = BrokerConfig::default();
    c.apply_env([
        (
            "SLUICE_AUTO_CREATE_TOPICS_ENABLE".to_owned(),
            "false".to_owned(),
        ),
        ("PATH".into(), "/bin".into()),
    ])
    .unwrap();
    assert!(!c.auto_create_topics_enable);
    let err = c
        .apply_env([("SLUICE_NUM_PARTITION".to_owned(), "2".to_owned())])
        .unwrap_err();
    assert!(err.to_string().contains("SLUICE_NUM_PARTITION"));
}

#[test]
fn listeners_accept_kafka_spelling() {
    let mut c = BrokerConfig::default();
    c.set("listeners", "PLAINTEXT://127.0.0.1:0").unwrap();
    assert_eq!(c.listeners[0].addr.port, 0);
    c.set("advertised.listeners", "PLAINTEXT://kafka.example:19092")
        .unwrap();
    assert_eq!(c.advertised_for("PLAINTEXT").unwrap().host, "kafka.example");
    // Several listeners are fine now (listener_keys' tests); one name twice is not.
    assert!(
        c.set("listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2")
            .is_err()
    );
}

#[test]
fn message_max_must_fit_in_a_request() {
    let mut c = BrokerConfig::default();
    c.set("socket.request.max.bytes", "1000").unwrap();
    assert!(c.validate().is_err());
}

#[test]
fn the_shipped_sluice_toml_documents_every_key_at_its_default() {
    let shipped = include_str!("../../../../sluice.toml");
    // Uncomment the `# key = value` lines: the result must parse and equal the defaults.
    let uncommented: String = shipped
        .lines()
        .filter_map(|line| line.strip_prefix("# "))
        .filter(|line| {
            line.split_once(" = ")
                .is_some_and(|(k, _)| !k.contains(' '))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let mut c = BrokerConfig::default();
    c.apply_toml(Path::new("sluice.toml"), &uncommented)
        .unwrap();
    assert_eq!(c, BrokerConfig::default());
    for key in BROKER_KEYS {
        assert!(
            uncommented.contains(&format!("{key} = "))
                || uncommented.contains(&format!("\"{key}\" = ")),
            "sluice.toml does not document {key}"
        );
    }
}

#[test]
fn group_keys_reach_the_coordinator_config_and_are_checked_together() {
    let mut c = BrokerConfig::default();
    c.set("group.initial.rebalance.delay.ms", "250ms").unwrap();
    c.set("group.min.session.timeout.ms", "1s").unwrap();
    c.set("offsets.retention.minutes", "60").unwrap();
    let g = c.group_config();
    assert_eq!(g.initial_rebalance_delay_ms, 250);
    assert_eq!(g.session_timeout_min_ms, 1000);
    assert_eq!(g.offsets_retention_ms, 3_600_000);
    c.validate().unwrap();
    c.set("group.max.session.timeout.ms", "500").unwrap();
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("group.min.session.timeout.ms"), "{err}");
    assert!(c.set("group.max.size", "0").is_err());
}
