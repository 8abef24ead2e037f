//! The image: applying records (epochs assigned from indexes, refusals that change
//! nothing, each index once) and the snapshot (round trip, bounds, checksum).

use super::*;
use crate::fuzz::sample_records;
use crate::records::{IncarnationId, PartitionChange, TopicId};

fn built() -> MetadataImage {
    let mut image = MetadataImage::new();
    let refused = image.apply_batch(1, &sample_records()).unwrap();
    assert!(refused.is_empty(), "{refused:?}");
    image
}

#[test]
fn a_registration_gets_its_index_as_broker_epoch_and_starts_fenced() {
    let mut image = MetadataImage::new();
    let MetadataRecord::RegisterBroker(mut registration) = sample_records()[2].clone() else {
        panic!("sample 2 registers")
    };
    image
        .apply(7, &MetadataRecord::RegisterBroker(registration.clone()))
        .unwrap();
    let broker = image.broker(1).unwrap();
    assert_eq!((broker.broker_epoch, broker.fenced), (7, true));
    registration.incarnation_id = IncarnationId([9; 16]);
    image
        .apply(12, &MetadataRecord::RegisterBroker(registration))
        .unwrap();
    assert_eq!(image.broker(1).unwrap().broker_epoch, 12);
    // A record naming the old registration is refused and changes nothing.
    let before = image.clone();
    let err = image
        .apply(
            13,
            &MetadataRecord::UnfenceBroker {
                node_id: 1,
                broker_epoch: 7,
            },
        )
        .unwrap_err();
    assert!(matches!(
        err,
        ApplyError::Refused(Refusal::StaleBrokerEpoch { .. })
    ));
    assert_eq!(image.last_applied_index(), 13);
    assert_eq!(image.broker(1), before.broker(1));
}

#[test]
fn an_index_is_applied_once() {
    let mut image = built();
    let before = image.clone();
    let again = image.apply_batch(1, &sample_records());
    assert_eq!(
        again,
        Err(IndexError {
            index: 1,
            last_applied_index: 1
        })
    );
    assert_eq!(image, before);
}

#[test]
fn partition_changes_bump_epochs_and_keep_the_shape() {
    let mut image = built();
    let id = TopicId([7; 16]);
    let p0 = image.partition(id, 0).unwrap().clone();
    assert_eq!((p0.leader, p0.leader_epoch, p0.partition_epoch), (2, 1, 1));
    // An ISR change bumps only the partition epoch.
    let isr = MetadataRecord::PartitionChange(PartitionChange {
        topic_id: id,
        partition: 0,
        leader: None,
        isr: Some(vec![2, 1]),
    });
    image.apply(2, &isr).unwrap();
    let p = image.partition(id, 0).unwrap();
    assert_eq!((p.leader_epoch, p.partition_epoch), (1, 2));
    // A leader outside the ISR, or an ISR outside the replicas, is refused.
    for bad in [
        PartitionChange {
            topic_id: id,
            partition: 0,
            leader: Some(3),
            isr: None,
        },
        PartitionChange {
            topic_id: id,
            partition: 0,
            leader: None,
            isr: Some(vec![3]),
        },
        PartitionChange {
            topic_id: id,
            partition: 0,
            leader: None,
            isr: Some(vec![1]),
        },
    ] {
        let before = image.clone();
        assert!(
            image
                .apply(
                    image.last_applied_index() + 1,
                    &MetadataRecord::PartitionChange(bad)
                )
                .is_err()
        );
        assert_eq!(image.topics(), before.topics());
    }
}

#[test]
fn removing_a_topic_removes_its_partitions_and_configs() {
    let mut image = built();
    assert_eq!(image.partition_count(), 2);
    assert_eq!(image.configs().len(), 1);
    image
        .apply(
            2,
            &MetadataRecord::RemoveTopic {
                topic_id: TopicId([7; 16]),
            },
        )
        .unwrap();
    assert_eq!(image.partition_count(), 0);
    assert!(image.topic_by_name("orders").is_none());
    assert!(image.configs().is_empty());
}

#[test]
fn producer_ids_and_generations_only_move_forward() {
    let mut image = built();
    assert_eq!(image.next_producer_id(), 1000);
    let back = MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: 1,
        broker_epoch: 1,
        next_producer_id: 1000,
    });
    assert!(matches!(
        image.apply(2, &back),
        Err(ApplyError::Refused(Refusal::ProducerIdsBackwards { .. }))
    ));
    let same = MetadataRecord::Transform {
        name: "enrich".into(),
        generation: 1,
        spec: b"{}".to_vec(),
    };
    assert!(matches!(
        image.apply(3, &same),
        Err(ApplyError::Refused(Refusal::StaleGeneration { .. }))
    ));
}

#[test]
fn the_snapshot_restores_the_image() {
    let image = built();
    let bytes = image.snapshot_bytes().unwrap();
    assert_eq!(MetadataImage::from_snapshot(&bytes).unwrap(), image);
    assert_eq!(
        MetadataImage::from_snapshot(&MetadataImage::new().snapshot_bytes().unwrap()).unwrap(),
        MetadataImage::new()
    );
}

#[test]
fn a_damaged_snapshot_is_refused() {
    let bytes = built().snapshot_bytes().unwrap();
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert_eq!(
        MetadataImage::from_snapshot(&flipped),
        Err(SnapshotError::Checksum)
    );
    assert_eq!(
        MetadataImage::from_snapshot(&bytes[..bytes.len() - 1]),
        Err(SnapshotError::Checksum)
    );
    let mut magic = bytes.clone();
    magic[0] = b'X';
    assert_eq!(
        MetadataImage::from_snapshot(&magic),
        Err(SnapshotError::Header)
    );
    assert_eq!(
        MetadataImage::from_snapshot(&bytes[..3]),
        Err(SnapshotError::Size(3))
    );
    let huge = vec![0; limits::SNAPSHOT_BYTES_MAX + 1];
    assert!(matches!(
        MetadataImage::from_snapshot(&huge),
        Err(SnapshotError::Size(_))
    ));
}

proptest::proptest! {
    #[test]
    fn any_records_replayed_equal_their_snapshot(seed in proptest::prelude::any::<u64>()) {
        // Random valid records, many refused by the image: whatever applied, the snapshot
        // restores exactly, and applying at a used index changes nothing.
        let mut rng = sluice_kafka::rng::SplitMix64::new(seed);
        let mut image = MetadataImage::new();
        image.apply_batch(1, &sample_records()).unwrap();
        for index in 2..40 {
            let records: Vec<_> = (0..1 + rng.below(4))
                .map(|_| crate::fuzz::random_record(&mut rng))
                .collect();
            image.apply_batch(index, &records).unwrap();
        }
        let bytes = image.snapshot_bytes().unwrap();
        proptest::prop_assert_eq!(&MetadataImage::from_snapshot(&bytes).unwrap(), &image);
        let before = image.clone();
        proptest::prop_assert!(image.apply_batch(39, &sample_records()).is_err());
        proptest::prop_assert_eq!(image, before);
    }
}
