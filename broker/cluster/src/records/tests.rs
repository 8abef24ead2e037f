//! The record and batch codecs: round trips (every type, random fields), golden bytes, and
//! the strict decoder's refusals, each naming its bound.

use proptest::prelude::*;
use sluice_kafka::rng::SplitMix64;

use super::*;
use crate::fuzz::{random_record, sample_records};

#[test]
fn every_sample_round_trips_and_each_type_is_sampled() {
    let samples = sample_records();
    let mut types = std::collections::BTreeSet::new();
    for record in &samples {
        let bytes = record.encode();
        types.insert(bytes[1]);
        assert_eq!(&MetadataRecord::decode(&bytes).unwrap(), record);
    }
    assert_eq!(types.len(), 20, "one sample per record type: {types:?}");
    let batch = encode_batch(&samples).unwrap();
    assert_eq!(decode_batch(&batch).unwrap(), samples);
}

proptest! {
    #[test]
    fn random_records_round_trip(seed in any::<u64>(), n in 1usize..20) {
        let mut rng = SplitMix64::new(seed);
        let records: Vec<_> = (0..n).map(|_| random_record(&mut rng)).collect();
        for record in &records {
            let bytes = record.encode();
            prop_assert_eq!(&MetadataRecord::decode(&bytes).unwrap(), record);
            prop_assert_eq!(MetadataRecord::decode(&bytes).unwrap().encode(), bytes);
        }
        let batch = encode_batch(&records).unwrap();
        prop_assert_eq!(decode_batch(&batch).unwrap(), records);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        crate::fuzz::metadata_records(&bytes);
    }
}

#[test]
fn golden_bytes_pin_the_layout() {
    let record = MetadataRecord::FenceBroker {
        node_id: 2,
        broker_epoch: 0x0102,
    };
    assert_eq!(record.encode(), [0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]);
    let change = MetadataRecord::PartitionChange(PartitionChange {
        topic_id: TopicId([1; 16]),
        partition: 5,
        leader: Some(-1),
        isr: None,
    });
    let mut expected = vec![0, 8];
    expected.extend([1; 16]);
    expected.extend([0, 0, 0, 5, 1, 0xff, 0xff, 0xff, 0xff, 0]);
    assert_eq!(change.encode(), expected);
    let batch = encode_batch(&[record]).unwrap();
    assert_eq!(&batch[..9], &[0, 0, 0, 0, 1, 0, 0, 0, 14]);
}

#[test]
fn every_prefix_of_a_record_is_refused() {
    for record in sample_records() {
        let bytes = record.encode();
        for cut in 0..bytes.len() {
            assert!(
                MetadataRecord::decode(&bytes[..cut]).is_err(),
                "{record:?} cut at {cut}"
            );
        }
    }
}

#[test]
fn unknown_versions_types_and_trailing_bytes_are_refused() {
    let mut bytes = MetadataRecord::RemoveTopic {
        topic_id: TopicId([3; 16]),
    }
    .encode();
    bytes[0] = 1;
    assert_eq!(
        MetadataRecord::decode(&bytes),
        Err(DecodeError::UnknownVersion {
            what: "record",
            version: 1
        })
    );
    bytes[0] = 0;
    bytes[1] = 200;
    assert!(matches!(
        MetadataRecord::decode(&bytes),
        Err(DecodeError::Unknown { value: 200, .. })
    ));
    bytes[1] = 9;
    bytes.push(0);
    assert_eq!(
        MetadataRecord::decode(&bytes),
        Err(DecodeError::Read(ReadError::TrailingBytes(1)))
    );
}

#[test]
fn over_long_fields_name_their_bound() {
    // A topic name of 250 bytes: the length is refused before the bytes are read.
    let mut w = Writer::new();
    w.u8(0).u8(6).u16(250);
    let err = MetadataRecord::decode(w.as_slice()).unwrap_err();
    assert!(err.to_string().contains("TOPIC_NAME_BYTES_MAX"), "{err}");
    // 33 replicas.
    let mut w = Writer::new();
    w.u8(0).u8(7).raw(&[1; 16]).i32(0).i32(33);
    let err = MetadataRecord::decode(w.as_slice()).unwrap_err();
    assert!(err.to_string().contains("REPLICAS_MAX"), "{err}");
    // A spec over SPEC_BYTES_MAX.
    let mut w = Writer::new();
    w.u8(0)
        .u8(12)
        .str_u16("v")
        .u32(limits::SPEC_BYTES_MAX as u32 + 1);
    let err = MetadataRecord::decode(w.as_slice()).unwrap_err();
    assert!(err.to_string().contains("SPEC_BYTES_MAX"), "{err}");
    // A record over RECORD_BYTES_MAX.
    let err = MetadataRecord::decode(&vec![0; limits::RECORD_BYTES_MAX + 1]).unwrap_err();
    assert!(err.to_string().contains("RECORD_BYTES_MAX"), "{err}");
}

#[test]
fn batches_are_bounded_and_never_empty() {
    let mut w = Writer::new();
    w.u8(0).i32(limits::BATCH_RECORDS_MAX as i32 + 1);
    let err = decode_batch(w.as_slice()).unwrap_err();
    assert!(err.to_string().contains("BATCH_RECORDS_MAX"), "{err}");
    assert!(decode_batch(&[0, 0, 0, 0, 0]).is_err());
    assert!(encode_batch(&[]).is_err());
    let err = decode_batch(&vec![0; limits::BATCH_BYTES_MAX + 1]).unwrap_err();
    assert!(err.to_string().contains("BATCH_BYTES_MAX"), "{err}");
    let mut bytes = encode_batch(&sample_records()[..2]).unwrap();
    bytes.push(0);
    assert!(decode_batch(&bytes).is_err());
    bytes[0] = 1;
    assert!(matches!(
        decode_batch(&bytes),
        Err(DecodeError::UnknownVersion { what: "batch", .. })
    ));
}

#[test]
fn shapes_no_controller_writes_are_refused() {
    let p = PartitionRecord {
        topic_id: TopicId([1; 16]),
        partition: 0,
        replicas: vec![1, 2],
        isr: vec![1],
        leader: 2,
        leader_epoch: 0,
        partition_epoch: 0,
    };
    let bad = [
        MetadataRecord::Partition(p.clone()),
        MetadataRecord::Partition(PartitionRecord {
            replicas: vec![1, 1],
            ..p.clone()
        }),
        MetadataRecord::Partition(PartitionRecord {
            isr: vec![3],
            leader: 3,
            ..p.clone()
        }),
        MetadataRecord::Partition(PartitionRecord {
            topic_id: TopicId([0; 16]),
            leader: 1,
            ..p
        }),
        MetadataRecord::Topic {
            name: "a/b".into(),
            topic_id: TopicId([1; 16]),
        },
        MetadataRecord::View {
            name: "v".into(),
            spec: b"[1]".to_vec(),
        },
        MetadataRecord::View {
            name: "v".into(),
            spec: b"{".to_vec(),
        },
        MetadataRecord::PartitionChange(PartitionChange {
            topic_id: TopicId([1; 16]),
            partition: 0,
            leader: None,
            isr: None,
        }),
        MetadataRecord::Config {
            resource: ConfigResource {
                resource_type: ConfigResourceType::Broker,
                name: "01".into(),
            },
            key: "k".into(),
            value: None,
        },
    ];
    for record in bad {
        assert!(record.validate().is_err(), "{record:?}");
    }
    // Deeply nested JSON is an error, not a stack overflow.
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    let view = MetadataRecord::View {
        name: "v".into(),
        spec: deep.into_bytes(),
    };
    assert!(view.validate().is_err());
}

#[test]
#[should_panic(expected = "encoding an invalid metadata record")]
fn encoding_an_invalid_record_is_our_bug() {
    let _ = MetadataRecord::ClusterId {
        cluster_id: String::new(),
    }
    .encode();
}

#[test]
fn a_large_decision_splits_into_bounded_batches_in_order() {
    let change = |partition| {
        MetadataRecord::PartitionChange(PartitionChange {
            topic_id: TopicId([1; 16]),
            partition,
            leader: Some(-1),
            isr: None,
        })
    };
    let records: Vec<_> = (0..limits::BATCH_RECORDS_MAX as i32 + 5)
        .map(|p| change(p % 1000))
        .collect();
    let batches = encode_batches(&records);
    assert_eq!(batches.len(), 2);
    let decoded: Vec<_> = batches
        .iter()
        .flat_map(|b| decode_batch(b).unwrap())
        .collect();
    assert_eq!(decoded, records);
    assert_eq!(
        encode_batches(&records[..3]),
        vec![encode_batch(&records[..3]).unwrap()]
    );
    assert!(encode_batches(&[]).is_empty());
}
