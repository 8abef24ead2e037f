//! Test scaffolding (the `fuzz` feature, and this crate's tests): the `metadata_records`
//! fuzz target's entry point, its seed corpus, and generators of valid records shared by the
//! round-trip tests and the seeds.

use sluice_kafka::rng::SplitMix64;
use sluice_security::acl::AclBinding;
use sluice_security::records::SecurityRecord;
use sluice_security::scram::ScramMechanism;

use crate::image::MetadataImage;
use crate::records::{
    BrokerRegistration, ConfigResource, ConfigResourceType, IncarnationId, Listener,
    MetadataRecord, PartitionChange, PartitionRecord, PluginKind, PluginVersion, ProducerIdsRecord,
    SecurityProtocol, TopicId, decode_batch, encode_batch,
};

/// `metadata_records`: the input is tried as one record, as a batch and as a snapshot.
/// Whatever decodes must re-encode to the same bytes (records and batches) or restore to
/// an image whose own snapshot restores equal (snapshots); a decoded batch is applied to an
/// empty image, whose snapshot must restore equal. Nothing may panic.
pub fn metadata_records(data: &[u8]) {
    if let Ok(record) = MetadataRecord::decode(data) {
        assert_eq!(
            record.encode(),
            data,
            "a decoded record re-encodes to its bytes"
        );
    }
    if let Ok(records) = decode_batch(data) {
        assert_eq!(
            encode_batch(&records).expect("a decoded batch is within its bounds"),
            data,
            "a decoded batch re-encodes to its bytes"
        );
        let mut image = MetadataImage::new();
        image.apply_batch(1, &records).expect("index 1 follows 0");
        assert_round_trip(&image);
    }
    if let Ok(image) = MetadataImage::from_snapshot(data) {
        assert_round_trip(&image);
    }
}

fn assert_round_trip(image: &MetadataImage) {
    let bytes = image.snapshot_bytes().expect("an image within its bounds");
    let restored = MetadataImage::from_snapshot(&bytes).expect("its own snapshot restores");
    assert_eq!(&restored, image, "the snapshot restores the image");
}

/// The seed corpus: `(target, name, bytes)`: each sample record, a batch of all of them,
/// and the snapshot of the image they build.
#[must_use]
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let records = sample_records();
    let mut out: Vec<_> = records
        .iter()
        .enumerate()
        .map(|(i, r)| ("metadata_records", format!("record-{i:02}"), r.encode()))
        .collect();
    let batch = encode_batch(&records).expect("the samples fit a batch");
    out.push(("metadata_records", "batch".into(), batch));
    let mut image = MetadataImage::new();
    let refused = image.apply_batch(1, &records).expect("index 1");
    assert!(refused.is_empty(), "the samples apply: {refused:?}");
    let snapshot = image.snapshot_bytes().expect("a small image");
    out.push(("metadata_records", "snapshot".into(), snapshot));
    out
}

/// One record of every type, in an order that applies to an empty image as one batch at
/// index 1 (so every broker epoch is 1).
#[must_use]
pub fn sample_records() -> Vec<MetadataRecord> {
    let topic_id = TopicId([7; 16]);
    let partition = |p, replicas: Vec<i32>| {
        MetadataRecord::Partition(PartitionRecord {
            topic_id,
            partition: p,
            isr: replicas.clone(),
            leader: replicas[0],
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
        })
    };
    let broker = |node_id| MetadataRecord::UnfenceBroker {
        node_id,
        broker_epoch: 1,
    };
    let mut records = vec![
        MetadataRecord::ClusterId {
            cluster_id: "q1Sh-9_ISia_zwGINzRvyQ".into(),
        },
        MetadataRecord::FeatureLevel {
            name: "metadata.version".into(),
            level: 1,
        },
        MetadataRecord::RegisterBroker(registration(1, Some("a"))),
        MetadataRecord::RegisterBroker(registration(2, Some("b"))),
        MetadataRecord::RegisterBroker(registration(3, None)),
        broker(1),
        broker(2),
        MetadataRecord::Topic {
            name: "orders".into(),
            topic_id,
        },
        MetadataRecord::Config {
            resource: ConfigResource {
                resource_type: ConfigResourceType::Topic,
                name: "orders".into(),
            },
            key: "retention.ms".into(),
            value: Some("86400000".into()),
        },
        MetadataRecord::Config {
            resource: ConfigResource {
                resource_type: ConfigResourceType::Broker,
                name: "2".into(),
            },
            key: "log.retention.ms".into(),
            value: None,
        },
        partition(0, vec![1, 2]),
        partition(1, vec![2, 1]),
        MetadataRecord::PartitionChange(PartitionChange {
            topic_id,
            partition: 0,
            leader: Some(2),
            isr: Some(vec![2]),
        }),
    ];
    records.extend(object_samples());
    records
}

/// The samples after the partitions: security, objects, producer ids, removals.
fn object_samples() -> Vec<MetadataRecord> {
    let acl = AclBinding::from_wire(2, "orders", 3, "User:alice", "*", 3, 3).expect("valid");
    vec![
        MetadataRecord::Security(SecurityRecord::AclCreate(acl)),
        MetadataRecord::Security(SecurityRecord::ScramCredentialDelete {
            user: "alice".into(),
            mechanism: ScramMechanism::Sha256,
        }),
        MetadataRecord::View {
            name: "big-orders".into(),
            spec: br#"{"source":"orders","filter":"amount > 100"}"#.to_vec(),
        },
        MetadataRecord::Transform {
            name: "enrich".into(),
            generation: 1,
            spec: br#"{"source":"orders","plugin":"enrich"}"#.to_vec(),
        },
        MetadataRecord::PluginVersion(PluginVersion {
            name: "enrich".into(),
            sha256: [0xab; 32],
            size_bytes: 123_456,
            kind: PluginKind::Transform,
        }),
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 1,
            next_producer_id: 1000,
        }),
        MetadataRecord::BrokerControlledShutdown {
            node_id: 2,
            broker_epoch: 1,
        },
        MetadataRecord::FenceBroker {
            node_id: 3,
            broker_epoch: 1,
        },
        MetadataRecord::RemovePlugin {
            name: "nothing".into(),
        },
        MetadataRecord::RemoveView {
            name: "nothing".into(),
        },
        MetadataRecord::RemoveTransform {
            name: "nothing".into(),
        },
        MetadataRecord::UnregisterBroker {
            node_id: 3,
            broker_epoch: 1,
        },
        MetadataRecord::Topic {
            name: "gone".into(),
            topic_id: TopicId([9; 16]),
        },
        MetadataRecord::RemoveTopic {
            topic_id: TopicId([9; 16]),
        },
    ]
}

fn registration(node_id: i32, rack: Option<&str>) -> BrokerRegistration {
    BrokerRegistration {
        node_id,
        incarnation_id: IncarnationId([node_id as u8; 16]),
        listeners: vec![
            Listener {
                name: "PLAINTEXT".into(),
                host: format!("127.0.0.{node_id}"),
                port: 9092,
                security_protocol: SecurityProtocol::Plaintext,
            },
            Listener {
                name: "CONTROLLER".into(),
                host: format!("127.0.0.{node_id}"),
                port: 9093,
                security_protocol: SecurityProtocol::SaslSsl,
            },
        ],
        rack: rack.map(str::to_owned),
    }
}

/// A random valid record (any type, random fields within their bounds), for round trips.
pub fn random_record(rng: &mut SplitMix64) -> MetadataRecord {
    let samples = sample_records();
    let mut record = samples[rng.below(samples.len() as u64) as usize].clone();
    let name = |rng: &mut SplitMix64, max: u64| -> String {
        let len = 1 + rng.below(max) as usize;
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
        let s: String = (0..len)
            .map(|_| CHARS[rng.below(CHARS.len() as u64) as usize] as char)
            .collect();
        if s == "." || s == ".." { "x".into() } else { s }
    };
    let id = |rng: &mut SplitMix64| rng.below(1 << 20) as i32;
    let ids = |rng: &mut SplitMix64| {
        let n = 1 + rng.below(crate::limits::REPLICAS_MAX as u64) as usize;
        let start = rng.below(1000) as i32;
        (start..)
            .step_by(1 + rng.below(5) as usize)
            .take(n)
            .collect::<Vec<i32>>()
    };
    match &mut record {
        MetadataRecord::ClusterId { cluster_id } => *cluster_id = name(rng, 64),
        MetadataRecord::RegisterBroker(r) => {
            r.node_id = id(rng);
            r.incarnation_id.0 = rng
                .next_u64()
                .to_be_bytes()
                .repeat(2)
                .try_into()
                .expect("16");
            r.listeners.truncate(rng.below(3) as usize);
            r.rack = rng.chance(500).then(|| name(rng, 255));
        }
        MetadataRecord::FenceBroker {
            node_id,
            broker_epoch,
        } => {
            *node_id = id(rng);
            *broker_epoch = (rng.next_u64() >> 1) as i64;
        }
        MetadataRecord::Topic { name: n, topic_id } => {
            *n = name(rng, 249);
            topic_id.0[0] = rng.below(255) as u8 + 1;
        }
        MetadataRecord::Partition(p) => {
            p.replicas = ids(rng);
            p.isr = p.replicas[..1 + rng.below(p.replicas.len() as u64) as usize].to_vec();
            p.leader = if rng.chance(200) { -1 } else { p.isr[0] };
            p.leader_epoch = (rng.next_u64() >> 33) as i32;
            p.partition_epoch = (rng.next_u64() >> 33) as i32;
            p.partition = rng.below(10_000) as i32;
        }
        MetadataRecord::PartitionChange(c) => {
            c.leader = rng.chance(500).then(|| id(rng));
            c.isr = (c.leader.is_none() || rng.chance(500)).then(|| ids(rng));
        }
        MetadataRecord::Config { key, value, .. } => {
            *key = name(rng, 255);
            *value = rng.chance(700).then(|| name(rng, 2000));
        }
        MetadataRecord::View { name: n, .. } => *n = name(rng, 249),
        MetadataRecord::Transform { generation, .. } => *generation = rng.next_u64() as u32,
        MetadataRecord::PluginVersion(p) => {
            p.sha256 = [rng.below(256) as u8; 32];
            p.size_bytes = 1 + rng.below(crate::limits::PLUGIN_BYTES_MAX);
            p.kind = [
                PluginKind::Partitioner,
                PluginKind::Filter,
                PluginKind::Transform,
                PluginKind::Validator,
            ][rng.below(4) as usize];
        }
        MetadataRecord::ProducerIds(p) => {
            p.next_producer_id = 1000 + (rng.next_u64() >> 2) as i64;
        }
        MetadataRecord::FeatureLevel { level, .. } => *level = rng.below(i16::MAX as u64) as i16,
        _ => {}
    }
    record
}
