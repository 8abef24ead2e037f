//! Record codec tests: golden layout, strict rejection, round trips of arbitrary valid
//! records and decoding arbitrary bytes without panicking.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use sluice_kafka::bytes::ReadError;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.to_owned(),
        partition,
    }
}

fn sample() -> TxnMetadata {
    TxnMetadata {
        transactional_id: "t".into(),
        producer_id: ProducerId(7),
        last_producer_id: ProducerId::NONE,
        producer_epoch: 3,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: vec![tp("a", 0), tp("a", 1)],
        pending_offsets: vec![PendingOffsets {
            group_id: "g".into(),
            offsets: vec![PendingOffset {
                tp: tp("a", 0),
                committed_offset: 5,
                leader_epoch: -1,
                metadata: None,
            }],
        }],
        txn_start_ms: 100,
        last_update_ms: 200,
    }
}

fn round_trip(record: &TxnRecord) -> Result<TxnRecord, DecodeError> {
    decode(&record.encode_key(), record.encode_value().as_deref())
}

#[test]
fn block_layout_is_pinned() {
    let r = TxnRecord::ProducerIdBlock {
        next_producer_id: 1000,
    };
    assert_eq!(r.encode_key(), [0, 0, 0, 0]);
    assert_eq!(
        r.encode_value().unwrap(),
        [0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xe8]
    );
    assert_eq!(round_trip(&r), Ok(r));
}

#[test]
fn metadata_and_tombstone_round_trip() {
    let m = TxnRecord::Metadata(sample());
    assert_eq!(m.encode_key(), [0, 0, 0, 1, 0, 1, b't']);
    assert_eq!(round_trip(&m), Ok(m));
    let t = TxnRecord::Tombstone {
        transactional_id: "t".into(),
    };
    assert_eq!(t.encode_value(), None);
    assert_eq!(round_trip(&t), Ok(t));
}

#[test]
fn malformed_records_are_rejected() {
    let key = TxnRecord::Metadata(sample()).encode_key();
    let value = TxnRecord::Metadata(sample()).encode_value().unwrap();
    assert_eq!(
        decode(&[0, 1, 0, 1], None),
        Err(DecodeError::UnknownVersion(1))
    );
    assert_eq!(
        decode(&[0, 0, 0, 9], None),
        Err(DecodeError::UnknownKeyKind(9))
    );
    assert_eq!(
        decode(&[0, 0, 0, 0], None),
        Err(DecodeError::BlockTombstone)
    );
    assert_eq!(
        decode(&[0, 0, 0, 1, 0, 0], None),
        Err(DecodeError::EmptyTransactionalId)
    );
    assert_eq!(
        decode(&[0, 0, 0, 1, 0xff, 0xfe, b'x'], None),
        Err(DecodeError::Read(ReadError::Negative {
            what: "transactional id",
            value: -2
        }))
    );
    assert_eq!(
        decode(&[0, 0, 0, 1, 0, 1, 0xff], None),
        Err(DecodeError::Read(ReadError::InvalidUtf8 {
            what: "transactional id"
        }))
    );
    let mut long = value.clone();
    long.push(0);
    assert_eq!(
        decode(&key, Some(&long)),
        Err(DecodeError::Read(ReadError::TrailingBytes(1)))
    );
    for cut in 0..value.len() {
        assert!(decode(&key, Some(&value[..cut])).is_err(), "cut at {cut}");
    }
    // State byte (after version 2 + ids 16 + epochs 4 + timeout 4).
    let mut bad_state = value.clone();
    bad_state[26] = 7;
    assert_eq!(
        decode(&key, Some(&bad_state)),
        Err(DecodeError::UnknownState(7))
    );
}

#[test]
fn counts_are_bounded_before_allocating() {
    let mut value = TxnRecord::Metadata(sample()).encode_value().unwrap();
    value.truncate(2 + 16 + 4 + 4 + 1 + 16);
    let key = TxnRecord::Metadata(sample()).encode_key();
    let mut huge = value.clone();
    huge.extend_from_slice(&i32::MAX.to_be_bytes());
    assert_eq!(
        decode(&key, Some(&huge)),
        Err(DecodeError::Read(ReadError::TooMany {
            what: "partitions",
            count: i32::MAX as usize,
            limit: PARTITIONS
        }))
    );
    let mut many = value.clone();
    many.extend_from_slice(&1000i32.to_be_bytes());
    assert!(matches!(
        decode(&key, Some(&many)),
        Err(DecodeError::Read(ReadError::Truncated { needed: 6000, .. }))
    ));
    let mut negative = value;
    negative.extend_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(
        decode(&key, Some(&negative)),
        Err(DecodeError::Read(ReadError::Negative {
            what: "partitions",
            value: -1
        }))
    );
}

#[test]
fn unsorted_or_repeated_partitions_are_rejected() {
    let mut m = sample();
    m.partitions = vec![tp("a", 1), tp("a", 0)];
    let r = TxnRecord::Metadata(m.clone());
    assert_eq!(round_trip(&r), Err(DecodeError::NotSorted("partitions")));
    m.partitions = vec![tp("a", 0), tp("a", 0)];
    let r = TxnRecord::Metadata(m);
    assert_eq!(round_trip(&r), Err(DecodeError::NotSorted("partitions")));
}

fn name(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-z0-9._-]{{0,{max}}}")).unwrap()
}

fn tps() -> impl Strategy<Value = Vec<TopicPartition>> {
    proptest::collection::btree_set((name(12), any::<i32>()), 0..6).prop_map(|set| {
        set.into_iter()
            .map(|(topic, partition)| TopicPartition { topic, partition })
            .collect()
    })
}

fn offsets() -> impl Strategy<Value = Vec<PendingOffset>> {
    let entry = (any::<i64>(), any::<i32>(), proptest::option::of(name(20)));
    proptest::collection::btree_map((name(8), 0..4i32), entry, 0..4).prop_map(|map| {
        map.into_iter()
            .map(
                |((topic, partition), (committed_offset, leader_epoch, metadata))| PendingOffset {
                    tp: TopicPartition { topic, partition },
                    committed_offset,
                    leader_epoch,
                    metadata,
                },
            )
            .collect()
    })
}

fn pending() -> impl Strategy<Value = Vec<PendingOffsets>> {
    proptest::collection::btree_map(name(10), offsets(), 0..3).prop_map(|map: BTreeMap<_, _>| {
        map.into_iter()
            .map(|(group_id, offsets)| PendingOffsets { group_id, offsets })
            .collect()
    })
}

fn metadata() -> impl Strategy<Value = TxnMetadata> {
    let ids = (
        "[a-zA-Z0-9]{1,40}",
        any::<i64>(),
        any::<i64>(),
        any::<i16>(),
        any::<i16>(),
        any::<i32>(),
    );
    let rest = (
        proptest::sample::select(TxnState::ALL.to_vec()),
        tps(),
        pending(),
        any::<i64>(),
        any::<i64>(),
    );
    (ids, rest).prop_map(|((id, pid, last, epoch, last_epoch, timeout), rest)| {
        let (state, partitions, pending_offsets, txn_start_ms, last_update_ms) = rest;
        TxnMetadata {
            transactional_id: id,
            producer_id: ProducerId(pid),
            last_producer_id: ProducerId(last),
            producer_epoch: epoch,
            last_producer_epoch: last_epoch,
            timeout_ms: timeout,
            state,
            partitions,
            pending_offsets,
            txn_start_ms,
            last_update_ms,
        }
    })
}

fn record() -> impl Strategy<Value = TxnRecord> {
    prop_oneof![
        any::<i64>().prop_map(|n| TxnRecord::ProducerIdBlock {
            next_producer_id: n
        }),
        metadata().prop_map(TxnRecord::Metadata),
        "[a-z]{1,30}".prop_map(|id| TxnRecord::Tombstone {
            transactional_id: id
        }),
    ]
}

proptest! {
    #[test]
    fn every_valid_record_round_trips(r in record()) {
        prop_assert_eq!(round_trip(&r), Ok(r));
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        key in proptest::collection::vec(any::<u8>(), 0..64),
        value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..256)),
    ) {
        let _ = decode(&key, value.as_deref());
    }

    #[test]
    fn mutated_records_never_panic(r in record(), at in any::<usize>(), byte in any::<u8>()) {
        let key = r.encode_key();
        if let Some(mut value) = r.encode_value() {
            let i = at % value.len();
            value[i] = byte;
            if let Ok(decoded) = decode(&key, Some(&value)) {
                // Whatever decodes is canonical: it re-encodes to the same bytes.
                prop_assert_eq!(decoded.encode_value(), Some(value));
            }
        }
    }

}
