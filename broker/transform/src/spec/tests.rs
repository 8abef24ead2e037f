use super::*;

fn spec() -> TransformSpec {
    TransformSpec {
        name: "orders-split".into(),
        source: "orders".into(),
        plugin: "split-transform".into(),
        params: vec![
            ("field".into(), "$.region".into()),
            ("value".into(), "eu".into()),
        ],
        outputs: vec!["orders-eu".into(), "orders-us".into()],
        dead_letter_topic: None,
        on_error: OnError::Stop,
        partitioning: Partitioning::Key,
        commit_interval_ms: 100,
        from_offset: FromOffset::Earliest,
        start_offsets: vec![0, 0, 0],
        paused: false,
        generation: 0,
        partitioner: None,
        partitioner_params: Vec::new(),
        principal: "User:alice".into(),
        principal_host: Some("10.0.0.7".into()),
        source_topic_id: Some("5d2c6a3e-4b1f-4c1d-9a2e-0f1e2d3c4b5a".into()),
        created_ms: 1_764_547_200_000,
    }
}

#[test]
fn a_good_spec_passes() {
    assert_eq!(spec().check(), Ok(()));
}

#[test]
fn names_follow_the_topic_rules_with_the_id_bound() {
    let mut s = spec();
    s.name = "n".repeat(TRANSFORM_NAME_BYTES_MAX);
    assert_eq!(s.check(), Ok(()));
    s.name.push('n');
    let err = s.check().unwrap_err().to_string();
    assert!(err.contains("longer than 225 bytes"), "{err}");
    for bad in ["", ".", "..", "a/b", "é", "a b"] {
        s.name = bad.into();
        assert!(
            matches!(
                s.check(),
                Err(SpecError::Name {
                    what: "transform name",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    s = spec();
    s.source = "s".repeat(TOPIC_NAME_BYTES_MAX + 1);
    assert!(matches!(
        s.check(),
        Err(SpecError::Name {
            what: "source topic",
            ..
        })
    ));
}

#[test]
fn outputs_are_one_to_eight_distinct_topics_other_than_the_source() {
    let mut s = spec();
    s.outputs = (0..TRANSFORM_OUTPUTS_MAX)
        .map(|i| format!("out-{i}"))
        .collect();
    assert_eq!(s.check(), Ok(()));
    s.outputs.push("out-8".into());
    assert_eq!(s.check(), Err(SpecError::OutputCount(9)));
    assert!(
        s.check()
            .unwrap_err()
            .to_string()
            .contains("1 to 8 outputs")
    );
    s.outputs.clear();
    assert_eq!(s.check(), Err(SpecError::OutputCount(0)));
    s.outputs = vec!["a".into(), "b".into(), "a".into()];
    assert_eq!(s.check(), Err(SpecError::DuplicateOutput("a".into())));
    s.outputs = vec!["a".into(), "orders".into()];
    assert_eq!(s.check(), Err(SpecError::OutputIsSource("orders".into())));
    s.outputs = vec!["a".into(), "bad/name".into()];
    assert!(matches!(
        s.check(),
        Err(SpecError::Name {
            what: "output topic",
            ..
        })
    ));
}

#[test]
fn a_dead_letter_topic_is_given_exactly_with_its_policy() {
    let mut s = spec();
    s.on_error = OnError::DeadLetter;
    assert_eq!(s.check(), Err(SpecError::DeadLetterMissing));
    s.dead_letter_topic = Some("orders".into());
    assert_eq!(
        s.check(),
        Err(SpecError::DeadLetterIsSource("orders".into()))
    );
    s.dead_letter_topic = Some("orders-dlq".into());
    assert_eq!(s.check(), Ok(()));
    // The DLQ may also be an output (one place for the plugin's and the broker's rejects).
    s.dead_letter_topic = Some("orders-eu".into());
    assert_eq!(s.check(), Ok(()));
    s.on_error = OnError::Skip;
    assert_eq!(
        s.check(),
        Err(SpecError::DeadLetterUnused("orders-eu".into()))
    );
}

#[test]
fn bounds_on_interval_params_offsets_and_principal() {
    let mut s = spec();
    s.commit_interval_ms = TRANSFORM_COMMIT_INTERVAL_MS_MAX + 1;
    let err = s.check().unwrap_err().to_string();
    assert!(
        err.contains("TRANSFORM_COMMIT_INTERVAL_MS_MAX") && err.contains("5000"),
        "{err}"
    );
    s.commit_interval_ms = TRANSFORM_COMMIT_INTERVAL_MS_MIN - 1;
    assert!(matches!(s.check(), Err(SpecError::CommitInterval(_))));

    s = spec();
    s.params = (0..=TRANSFORM_PARAMS_MAX)
        .map(|i| (format!("k{i}"), String::new()))
        .collect();
    assert_eq!(
        s.check(),
        Err(SpecError::ParamCount(TRANSFORM_PARAMS_MAX + 1))
    );
    s.params = vec![("k".into(), "v".repeat(TRANSFORM_PARAM_BYTES_MAX + 1))];
    assert_eq!(s.check(), Err(SpecError::ParamBytes("k".into())));
    s.params = vec![(String::new(), "v".into())];
    assert_eq!(s.check(), Err(SpecError::ParamBytes(String::new())));
    s.params = vec![("k".into(), "1".into()), ("k".into(), "2".into())];
    assert_eq!(s.check(), Err(SpecError::DuplicateParam("k".into())));

    s = spec();
    s.start_offsets = vec![0, -1];
    assert!(s.check().unwrap_err().to_string().contains("partition 1"));
    s.start_offsets = vec![];
    assert_eq!(s.check(), Err(SpecError::SourcePartitions(0)));
    s.start_offsets = vec![0];
    s.from_offset = FromOffset::Offset(-5);
    assert!(matches!(
        s.check(),
        Err(SpecError::NegativeOffset { value: -5, .. })
    ));

    s = spec();
    s.principal = String::new();
    assert_eq!(s.check(), Err(SpecError::Principal));
    s = spec();
    s.plugin = String::new();
    assert!(matches!(s.check(), Err(SpecError::Plugin(_))));
}

#[test]
fn from_offset_text() {
    assert_eq!(FromOffset::parse("earliest"), Ok(FromOffset::Earliest));
    assert_eq!(FromOffset::parse("latest"), Ok(FromOffset::Latest));
    assert_eq!(FromOffset::parse("0"), Ok(FromOffset::Offset(0)));
    assert_eq!(FromOffset::parse("42"), Ok(FromOffset::Offset(42)));
    assert_eq!(
        FromOffset::parse("1764547200000ms"),
        Ok(FromOffset::Timestamp(1_764_547_200_000))
    );
    for bad in [
        "",
        "ms",
        "-1",
        "+1",
        "1.5",
        "Earliest",
        "12 ms",
        "1s",
        "99999999999999999999",
        "2026-12-01T00:00:00Z",
    ] {
        assert_eq!(
            FromOffset::parse(bad),
            Err(FromOffsetError(bad.into())),
            "{bad:?}"
        );
    }
    for from in [
        FromOffset::Earliest,
        FromOffset::Latest,
        FromOffset::Offset(7),
        FromOffset::Timestamp(9),
    ] {
        assert_eq!(FromOffset::parse(&from.to_string()), Ok(from));
    }
}

#[test]
fn the_spec_round_trips_through_json_with_the_cli_words() {
    let mut s = spec();
    s.on_error = OnError::DeadLetter;
    s.dead_letter_topic = Some("orders-dlq".into());
    s.from_offset = FromOffset::Timestamp(1_764_547_200_000);
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains(r#""on_error":"dead-letter""#), "{json}");
    assert!(
        json.contains(r#""from_offset":"1764547200000ms""#),
        "{json}"
    );
    assert!(
        json.contains(r#""params":[["field","$.region"],["value","eu"]]"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<TransformSpec>(&json).unwrap(), s);
    let bad = json.replace("1764547200000ms", "yesterday");
    assert!(serde_json::from_str::<TransformSpec>(&bad).is_err());
}

#[test]
fn ids_of_a_transform() {
    let s = spec();
    assert_eq!(s.group_id(), "__sluice_transform/orders-split");
    assert_eq!(s.transactional_id(2), "__sluice_transform/orders-split/2");
    assert!(is_reserved(&s.transactional_id(0)));
    assert!(!is_reserved("orders-split"));
    assert_eq!(s.start_offset(2), Some(0));
    assert_eq!(s.start_offset(3), None);
}

#[test]
fn cut_keeps_characters_whole() {
    assert_eq!(cut("héllo", 2), "h");
    assert_eq!(cut("héllo", 3), "hé");
    assert_eq!(cut("abc", 10), "abc");
}

#[test]
fn a_partitioner_plugin_is_named_and_its_params_bounded() {
    let mut s = spec();
    s.partitioner = Some("murmur2".into());
    s.partitioner_params = vec![("seed".into(), "1".into())];
    assert_eq!(s.check(), Ok(()));
    s.partitioner = Some(String::new());
    assert!(matches!(s.check(), Err(SpecError::Plugin(_))));
    s.partitioner = Some("crc32".into());
    s.partitioner_params = vec![("a".into(), "1".into()), ("a".into(), "2".into())];
    assert!(matches!(s.check(), Err(SpecError::DuplicateParam(_))));
    // A spec file written before the partitioner existed still reads.
    let mut value = serde_json::to_value(spec()).unwrap();
    value.as_object_mut().unwrap().remove("partitioner");
    value.as_object_mut().unwrap().remove("partitioner_params");
    let old: TransformSpec = serde_json::from_value(value).unwrap();
    assert_eq!(old.partitioner, None);
}

#[test]
fn the_owners_host_and_the_source_id_are_kept_and_optional() {
    let text = serde_json::to_string(&spec()).unwrap();
    assert_eq!(
        serde_json::from_str::<TransformSpec>(&text).unwrap(),
        spec()
    );
    // A spec file written before they were recorded still reads, without them.
    let mut value = serde_json::to_value(spec()).unwrap();
    value.as_object_mut().unwrap().remove("principal_host");
    value.as_object_mut().unwrap().remove("source_topic_id");
    let old: TransformSpec = serde_json::from_value(value).unwrap();
    assert_eq!((&old.principal_host, &old.source_topic_id), (&None, &None));
    assert_eq!(old.check(), Ok(()));
}

fn feeding(
    name: &str,
    source: &str,
    outputs: &[&str],
    dead_letters: Option<&str>,
) -> TransformSpec {
    TransformSpec {
        name: name.into(),
        source: source.into(),
        outputs: outputs.iter().map(|&o| o.into()).collect(),
        dead_letter_topic: dead_letters.map(Into::into),
        on_error: if dead_letters.is_some() {
            OnError::DeadLetter
        } else {
            OnError::Stop
        },
        ..spec()
    }
}

#[test]
fn a_transform_that_would_close_a_cycle_is_named_with_the_cycle() {
    let a = feeding("a", "t1", &["t2"], None);
    let b = feeding("b", "t2", &["t3", "side"], None);
    let c = feeding("c", "t3", &["t4"], Some("t9"));
    let unrelated = feeding("u", "x", &["t1"], None);
    let existing = [&unrelated, &a, &b, &c];

    // A chain is fine; writing back into it closes a cycle, through outputs or dead letters.
    assert_eq!(feeding("d", "t4", &["out"], None).cycle(&existing), None);
    assert_eq!(
        feeding("d", "t4", &["out", "t1"], None).cycle(&existing),
        Some(vec!["d", "a", "b", "c", "d"])
    );
    assert_eq!(
        feeding("d", "t9", &["t3"], None).cycle(&existing),
        Some(vec!["d", "c", "d"])
    );
    assert_eq!(
        feeding("d", "t4", &["out"], Some("t2")).cycle(&existing),
        Some(vec!["d", "b", "c", "d"])
    );
    // The shortest cycle is named.
    assert_eq!(
        feeding("d", "t3", &["t1", "t3x", "t2"], None).cycle(&existing),
        Some(vec!["d", "b", "d"])
    );
    // Nothing exists yet: no cycle (its own source is check()'s to refuse).
    assert_eq!(feeding("d", "t4", &["t1"], None).cycle(&[]), None);
}

#[test]
fn a_position_from_before_a_restart_is_not_current() {
    use super::{position_is_current, position_metadata};
    assert!(position_is_current(&position_metadata(3), 3));
    assert!(
        position_is_current(&position_metadata(4), 3),
        "never rolled back"
    );
    assert!(!position_is_current(&position_metadata(2), 3));
    // Positions committed before generations were recorded: trusted.
    assert!(position_is_current("", 3));
    assert!(position_is_current("something else", 3));
}
