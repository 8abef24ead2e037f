//! KIP-890's produce-side verification through the `Log` (`txn_guard.rs`): a client's
//! transactional batch is appended only with the guard of a verification or into its
//! producer's open transaction verified under the same transactional id; a marker between
//! the verification and the append drops the guard (no hanging transaction); the broker's
//! own appends are trusted.

use sluice_storage::io::FaultyFs;
use sluice_storage::limits::TXN_VERIFICATIONS_PER_PARTITION_MAX;
use sluice_storage::testing::producer_batch;
use sluice_storage::{
    Admission, AppendError, Durability, Fs, Log, LogConfig, Marker, Offset, TxnAppend,
};
use std::path::Path;
use std::sync::Arc;

fn open(fs: &FaultyFs) -> Log {
    let fs = Arc::new(fs.clone()) as Arc<dyn Fs>;
    Log::open_with(fs, Path::new("/p"), LogConfig::default(), 0).unwrap()
}

fn produce(log: &mut Log, batch: &[u8], txn: Option<&TxnAppend<'_>>) -> Result<bool, AppendError> {
    let mut bytes = batch.to_vec();
    let outcome = log.append_produced(&mut bytes, Durability::OsCache, 1_000, txn)?;
    Ok(outcome.duplicate)
}

fn claim(
    id: &str,
    producer_id: i64,
    producer_epoch: i16,
    guard: Option<Admission>,
) -> TxnAppend<'_> {
    TxnAppend {
        transactional_id: id,
        producer_id,
        producer_epoch,
        guard: match guard {
            Some(Admission::Verify(g)) => Some(g),
            _ => None,
        },
    }
}

fn refused_txn_state(result: Result<bool, AppendError>) -> bool {
    matches!(result, Err(AppendError::InvalidTxnState { .. }))
}

#[test]
fn a_transactional_batch_needs_a_verified_transaction() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    let batch = producer_batch(7, 0, 0, 2, true);
    assert!(refused_txn_state(produce(&mut log, &batch, None)));
    assert_eq!(log.log_end_offset(), Offset(0), "nothing appended");
    assert!(log.first_open_transaction().is_none());
    // Idempotent batches need nothing.
    produce(&mut log, &producer_batch(8, 0, 0, 1, false), None).unwrap();
    // The broker's own appends are trusted (recovery, internal logs, tests).
    log.append(&mut batch.clone(), Durability::OsCache, 1)
        .unwrap();
    assert_eq!(log.first_open_transaction(), Some((Offset(1), 7)));
}

#[test]
fn a_verified_append_binds_the_open_transaction_to_its_transactional_id() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    let admission = log.start_txn_verification("a-txn", 7, 0).unwrap();
    assert!(matches!(admission, Admission::Verify(_)));
    // A guard of another verification does not fit.
    let wrong = claim("a-txn", 7, 0, None);
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(7, 0, 0, 2, true),
        Some(&wrong)
    )));
    let txn = claim("a-txn", 7, 0, Some(admission));
    assert!(!produce(&mut log, &producer_batch(7, 0, 0, 2, true), Some(&txn)).unwrap());
    assert_eq!(log.last_stable_offset(), Offset(0));
    // From now on the partition knows the transaction: no coordinator round trip.
    assert_eq!(
        log.start_txn_verification("a-txn", 7, 0).unwrap(),
        Admission::Open
    );
    let open = claim("a-txn", 7, 0, None);
    produce(&mut log, &producer_batch(7, 0, 2, 1, true), Some(&open)).unwrap();
    // A retry of a batch already appended is a duplicate, before any transaction check.
    assert!(produce(&mut log, &producer_batch(7, 0, 2, 1, true), Some(&open)).unwrap());
    // Another transactional id claiming the producer is sent to the coordinator, and
    // without its confirmation the batch is refused.
    let other = log.start_txn_verification("attacker", 7, 0).unwrap();
    assert!(matches!(other, Admission::Verify(_)));
    let thief = claim("attacker", 7, 0, None);
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(7, 0, 3, 1, true),
        Some(&thief)
    )));
    // A request whose batches are another producer's than the one verified.
    let mixed = claim("a-txn", 8, 0, None);
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(7, 0, 3, 1, true),
        Some(&mixed)
    )));
    log.append_marker(7, 0, Marker::Commit, 0, Durability::OsCache, 2)
        .unwrap();
    assert_eq!(log.last_stable_offset(), log.log_end_offset());
    // The marker ended the binding: the next transaction is verified again.
    assert!(matches!(
        log.start_txn_verification("a-txn", 7, 0).unwrap(),
        Admission::Verify(_)
    ));
}

#[test]
fn a_marker_between_the_verification_and_the_append_refuses_the_append() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    let admission = log.start_txn_verification("a-txn", 7, 0).unwrap();
    // The coordinator aborts the transaction (a timeout) before the append lands.
    log.append_marker(7, 1, Marker::Abort, 0, Durability::OsCache, 2)
        .unwrap();
    let late = claim("a-txn", 7, 0, Some(admission));
    let result = produce(&mut log, &producer_batch(7, 0, 0, 2, true), Some(&late));
    assert!(
        matches!(
            result,
            Err(AppendError::InvalidProducerEpoch { .. })
                | Err(AppendError::InvalidTxnState { .. })
        ),
        "{result:?}"
    );
    let admission = log.start_txn_verification("a-txn", 7, 1).unwrap();
    log.append_marker(7, 1, Marker::Abort, 0, Durability::OsCache, 3)
        .unwrap();
    let late = claim("a-txn", 7, 1, Some(admission));
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(7, 1, 0, 2, true),
        Some(&late)
    )));
    assert!(
        log.first_open_transaction().is_none(),
        "no transaction left hanging"
    );
}

#[test]
fn an_older_epoch_is_refused_before_asking_the_coordinator() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    produce(&mut log, &producer_batch(7, 3, 0, 1, false), None).unwrap();
    let refused = log.start_txn_verification("a-txn", 7, 2).unwrap_err();
    assert!(
        matches!(
            refused,
            AppendError::InvalidProducerEpoch {
                current: 3,
                epoch: 2,
                ..
            }
        ),
        "{refused}"
    );
}

#[test]
fn a_reopen_forgets_bindings_and_a_recovered_open_transaction_is_verified_again() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    let admission = log.start_txn_verification("a-txn", 7, 0).unwrap();
    let txn = claim("a-txn", 7, 0, Some(admission));
    produce(&mut log, &producer_batch(7, 0, 0, 2, true), Some(&txn)).unwrap();
    log.close().unwrap();
    let mut log = open(&fs);
    assert_eq!(
        log.first_open_transaction(),
        Some((Offset(0), 7)),
        "recovery keeps it open"
    );
    let open = claim("a-txn", 7, 0, None);
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(7, 0, 2, 1, true),
        Some(&open)
    )));
    let admission = log.start_txn_verification("a-txn", 7, 0).unwrap();
    assert!(matches!(admission, Admission::Verify(_)));
    let txn = claim("a-txn", 7, 0, Some(admission));
    produce(&mut log, &producer_batch(7, 0, 2, 1, true), Some(&txn)).unwrap();
}

#[test]
fn guards_are_bounded_and_the_oldest_goes_first() {
    let fs = FaultyFs::new();
    let mut log = open(&fs);
    let first = log.start_txn_verification("a-txn", 0, 0).unwrap();
    // The same producer asking again shares its guard.
    assert_eq!(log.start_txn_verification("a-txn", 0, 0).unwrap(), first);
    for producer_id in 1..=TXN_VERIFICATIONS_PER_PARTITION_MAX as i64 {
        log.start_txn_verification("made-up", producer_id, 0)
            .unwrap();
    }
    let txn = claim("a-txn", 0, 0, Some(first));
    assert!(refused_txn_state(produce(
        &mut log,
        &producer_batch(0, 0, 0, 1, true),
        Some(&txn)
    )));
    let last = TXN_VERIFICATIONS_PER_PARTITION_MAX as i64;
    let again = log.start_txn_verification("made-up", last, 0).unwrap();
    let txn = claim("made-up", last, 0, Some(again));
    produce(&mut log, &producer_batch(last, 0, 0, 1, true), Some(&txn)).unwrap();
}
