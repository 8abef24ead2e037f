use super::*;
use crate::batch::parse_header;
use crate::testing::producer_batch;

/// The header of a producer batch placed at `base_offset`.
fn header(
    pid: i64,
    epoch: i16,
    seq: i32,
    count: usize,
    txn: bool,
    base_offset: i64,
) -> BatchHeader {
    let mut bytes = producer_batch(pid, epoch, seq, count, txn);
    crate::batch::set_base_offset(&mut bytes, base_offset);
    parse_header(&bytes).unwrap()
}

#[test]
fn a_retried_batch_is_a_duplicate_with_its_original_offsets() {
    let mut state = ProducerStateMap::new();
    let first = header(7, 0, 0, 3, false, 10);
    assert_eq!(state.check(&[first]).unwrap(), Check::Append);
    state.apply(&first, None);
    let retry = header(7, 0, 0, 3, false, 99);
    match state.check(&[retry]).unwrap() {
        Check::Duplicate(meta) => assert_eq!((meta.base_offset, meta.last_offset), (10, 12)),
        Check::Append => panic!("a retry must be a duplicate"),
    }
    let next = header(7, 0, 3, 2, false, 13);
    assert_eq!(state.check(&[next]).unwrap(), Check::Append);
}

#[test]
fn gaps_old_epochs_and_new_epochs_follow_kafka() {
    let mut state = ProducerStateMap::new();
    state.apply(&header(7, 1, 0, 5, false, 0), None);
    let gap = state.check(&[header(7, 1, 9, 1, false, 5)]).unwrap_err();
    assert!(
        matches!(
            gap,
            AppendError::OutOfOrderSequence {
                expected: 5,
                sequence: 9,
                ..
            }
        ),
        "{gap}"
    );
    let old = state.check(&[header(7, 0, 5, 1, false, 5)]).unwrap_err();
    assert!(
        matches!(
            old,
            AppendError::InvalidProducerEpoch {
                current: 1,
                epoch: 0,
                ..
            }
        ),
        "{old}"
    );
    let newer_not_zero = state.check(&[header(7, 2, 5, 1, false, 5)]).unwrap_err();
    assert!(matches!(
        newer_not_zero,
        AppendError::OutOfOrderSequence { expected: 0, .. }
    ));
    assert_eq!(
        state.check(&[header(7, 2, 0, 1, false, 5)]).unwrap(),
        Check::Append
    );
    // An unknown producer may start anywhere (KIP-360).
    assert_eq!(
        state.check(&[header(8, 0, 42, 1, false, 5)]).unwrap(),
        Check::Append
    );
}

#[test]
fn only_the_last_five_batches_are_remembered_and_sequences_wrap() {
    let mut state = ProducerStateMap::new();
    for i in 0..7 {
        state.apply(&header(7, 0, i, 1, false, i64::from(i)), None);
    }
    let entry = state.producer(7).unwrap();
    assert_eq!(entry.batches.len(), limits::PRODUCER_BATCHES_RETAINED);
    assert!(matches!(
        state.check(&[header(7, 0, 0, 1, false, 9)]),
        Err(AppendError::OutOfOrderSequence { .. })
    ));
    assert!(matches!(
        state.check(&[header(7, 0, 2, 1, false, 9)]),
        Ok(Check::Duplicate(_))
    ));
    let mut wrap = ProducerStateMap::new();
    wrap.apply(&header(9, 0, i32::MAX - 1, 3, false, 0), None);
    assert_eq!(
        wrap.producer(9).unwrap().last_seq(),
        0,
        "MAX-1 and 2 more records wrap to 0"
    );
    assert!(matches!(
        wrap.check(&[header(9, 0, 1, 1, false, 2)]),
        Ok(Check::Append)
    ));
}

#[test]
fn transactions_hold_the_last_stable_offset_and_aborts_are_listed() {
    let mut state = ProducerStateMap::new();
    let hw = Offset(100);
    state.apply(&header(1, 0, 0, 2, true, 10), None);
    state.apply(&header(2, 0, 0, 2, true, 12), None);
    assert_eq!(state.last_stable_offset(hw), Offset(10));
    let non_txn = state.check(&[header(1, 0, 2, 1, false, 14)]).unwrap_err();
    assert!(matches!(non_txn, AppendError::InvalidTxnState { .. }));
    state.apply(&header(1, 0, -1, 1, true, 14), Some((Marker::Abort, 0)));
    assert_eq!(state.last_stable_offset(hw), Offset(12));
    state.apply(&header(2, 0, -1, 1, true, 15), Some((Marker::Commit, 0)));
    assert_eq!(state.last_stable_offset(hw), hw);
    let aborted = state.aborted_between(Offset(0), hw);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 10,
            last_offset: 14
        }]
    );
    assert!(state.aborted_between(Offset(15), hw).is_empty());
    assert!(state.aborted_between(Offset(0), Offset(10)).is_empty());
    assert!(state.check_marker(1, 0).is_ok());
    state.apply(&header(1, 3, -1, 1, true, 16), Some((Marker::Abort, 0)));
    assert!(matches!(
        state.check_marker(1, 2),
        Err(AppendError::InvalidProducerEpoch { .. })
    ));
    state.truncate_head(Offset(15));
    assert!(state.aborted.is_empty());
}

#[test]
fn idle_producers_expire_but_not_those_in_a_transaction() {
    let mut state = ProducerStateMap::new();
    state.apply(&header(1, 0, 0, 1, false, 0), None);
    state.apply(&header(2, 0, 0, 1, true, 1), None);
    assert_eq!(state.expire(1_000 + 10_000, 5_000), 1);
    assert!(state.producer(1).is_none() && state.producer(2).is_some());
}

#[test]
fn snapshots_round_trip_and_damage_is_refused() {
    let mut state = ProducerStateMap::new();
    state.apply(&header(1, 0, 0, 3, true, 0), None);
    state.apply(&header(2, 4, 7, 2, false, 3), None);
    state.apply(&header(3, 0, 0, 1, true, 5), None);
    state.apply(&header(3, 0, -1, 1, true, 6), Some((Marker::Abort, 2)));
    let bytes = snapshot::encode(Offset(7), &state);
    let (offset, decoded) = snapshot::decode(&bytes).unwrap();
    assert_eq!((offset, &decoded), (Offset(7), &state));
    for cut in [0, 3, bytes.len() / 2, bytes.len() - 1] {
        assert!(snapshot::decode(&bytes[..cut]).is_err());
    }
    let mut flipped = bytes.clone();
    flipped[20] ^= 1;
    assert!(snapshot::decode(&flipped).is_err());
}

proptest::proptest! {
    #[test]
    fn snapshot_decoding_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
        let _ = snapshot::decode(&bytes);
    }
}

#[test]
fn write_fuzz_seeds() {
    let Ok(dir) = std::env::var("SLUICE_WRITE_SEEDS") else {
        return;
    };
    let mut state = ProducerStateMap::new();
    state.apply(&header(1, 0, 0, 3, true, 0), None);
    state.apply(&header(2, 4, 7, 2, false, 3), None);
    state.apply(&header(3, 0, 0, 1, true, 5), None);
    state.apply(&header(3, 0, -1, 1, true, 6), Some((Marker::Abort, 2)));
    std::fs::write(
        format!("{dir}/seed-three-producers"),
        snapshot::encode(Offset(7), &state),
    )
    .unwrap();
    std::fs::write(
        format!("{dir}/seed-empty"),
        snapshot::encode(Offset(0), &ProducerStateMap::new()),
    )
    .unwrap();
}

#[test]
fn at_the_producer_limit_only_a_new_producer_forgets_the_idlest() {
    let mut state = ProducerStateMap::new();
    let template = header(0, 0, 0, 1, false, 0);
    let max = limits::PRODUCERS_PER_PARTITION_MAX as i64;
    for producer_id in 0..max {
        state.apply(
            &BatchHeader {
                producer_id,
                ..template
            },
            None,
        );
    }
    state.producers.get_mut(&5).unwrap().last_timestamp_ms = 0;
    let known = header(10, 0, 1, 1, false, 1);
    assert_eq!(state.check(&[known]).unwrap(), Check::Append);
    state.apply(&known, None);
    assert_eq!(state.producers.len(), limits::PRODUCERS_PER_PARTITION_MAX);
    assert!(
        state.producer(5).is_some(),
        "a known producer's batch evicts nobody"
    );
    assert_eq!(state.producer(10).unwrap().last_seq(), 1);
    state.apply(&header(max, 0, 0, 1, false, 2), None);
    assert_eq!(state.producers.len(), limits::PRODUCERS_PER_PARTITION_MAX);
    assert!(
        state.producer(5).is_none(),
        "the idlest producer is forgotten"
    );
    assert!(state.producer(max).is_some());
}
