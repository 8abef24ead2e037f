//! Property tests for the decoders that read bytes we did not write in this process: the
//! offsets-log records (a damaged or foreign log) and consumer-protocol subscriptions
//! (client input). Arbitrary bytes never panic; every record round-trips.

use proptest::prelude::*;
use sluice_group::subscription::{encode_subscription_v0, subscribed_topics};
use sluice_group::{CommittedOffset, OffsetRecord, OffsetStore, RecordKey, TopicPartition};

fn record() -> impl Strategy<Value = OffsetRecord> {
    let key = prop_oneof![
        ("[a-z]{0,12}", "[a-z.]{0,12}", any::<i32>()).prop_map(|(group, topic, partition)| {
            RecordKey::Offset {
                group,
                tp: TopicPartition { topic, partition },
            }
        }),
        "[a-z]{0,12}".prop_map(|group| RecordKey::Group { group }),
    ];
    let value = (any::<i64>(), any::<i32>(), ".{0,20}", any::<i64>()).prop_map(
        |(offset, leader_epoch, metadata, ts)| CommittedOffset {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp_ms: ts,
        },
    );
    (key, proptest::option::of(value)).prop_map(|(key, value)| match key {
        RecordKey::Group { .. } => OffsetRecord { key, value: None },
        RecordKey::Offset { .. } => OffsetRecord { key, value },
    })
}

proptest! {
    #[test]
    fn records_roundtrip(r in record()) {
        let value = r.encode_value();
        prop_assert_eq!(OffsetRecord::decode(&r.encode_key(), value.as_deref()), Ok(r));
    }

    #[test]
    fn arbitrary_bytes_never_panic(key in proptest::collection::vec(any::<u8>(), 0..64),
                                   value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64))) {
        let _ = OffsetRecord::decode(&key, value.as_deref());
        let _ = subscribed_topics(&key);
    }

    #[test]
    fn snapshot_replays_to_the_same_store(records in proptest::collection::vec(record(), 0..40)) {
        let store = OffsetStore::load(records);
        prop_assert_eq!(OffsetStore::load(store.snapshot()), store);
    }

    #[test]
    fn subscriptions_roundtrip(topics in proptest::collection::vec("[a-z]{1,10}", 0..8)) {
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        prop_assert_eq!(subscribed_topics(&encode_subscription_v0(&refs)), Some(topics));
    }
}
