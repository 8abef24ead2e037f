//! The coordinator's rules, one test per rule, through a test server ([`Server`]) that
//! keeps the log the way the real server does (append, then apply) and can restart from
//! it; every restart checks that replaying the log gives exactly the in-memory state.

use super::*;
use crate::api::TxnProtocol::{V1, V2};
use crate::api::{EndOutcome, InitOutcome};
use crate::error::ErrorCode;
use crate::records::{PendingOffset, TopicPartition, decode};

const T: &str = "txn";
const TIMEOUT_MS: i32 = 60_000;

struct Server {
    c: Coordinator,
    log: Vec<TxnRecord>,
}

impl Server {
    fn new() -> Self {
        Self {
            c: Coordinator::new(TxnConfig::default()),
            log: Vec::new(),
        }
    }

    /// Appends (through the byte codec) and applies.
    fn persist(&mut self, records: &[TxnRecord]) {
        for r in records {
            let back = decode(&r.encode_key(), r.encode_value().as_deref()).unwrap();
            assert_eq!(&back, r);
            self.log.push(back);
        }
        self.c.apply(records);
    }

    /// A new coordinator from the log; it must hold what the old one held.
    fn restart(&mut self) {
        let mut c = Coordinator::new(TxnConfig::default());
        c.load(self.log.clone());
        assert_eq!(c.txns, self.c.txns, "replaying the log differs from memory");
        assert_eq!(c.block_end_durable, self.c.block_end_durable);
        self.c = c;
    }

    fn init(&mut self, now_ms: i64, id: Option<&str>) -> (ProducerId, i16) {
        self.init_expecting(now_ms, id, None)
    }

    fn init_expecting(
        &mut self,
        now_ms: i64,
        id: Option<&str>,
        expected: Option<(ProducerId, i16)>,
    ) -> (ProducerId, i16) {
        match self.c.init_producer_id(now_ms, id, TIMEOUT_MS, expected) {
            InitOutcome::Done {
                producer_id,
                producer_epoch,
                records,
            } => {
                self.persist(&records);
                (producer_id, producer_epoch)
            }
            other => panic!("init_producer_id: {other:?}"),
        }
    }

    fn add(&mut self, now_ms: i64, pid: ProducerId, epoch: i16, tps: &[TopicPartition]) {
        let records = self.c.add_partitions(now_ms, T, pid, epoch, tps).unwrap();
        self.persist(&records);
    }

    fn end(&mut self, now_ms: i64, pid: ProducerId, epoch: i16, commit: bool) -> WriteMarkers {
        match self.c.end_txn(now_ms, T, pid, epoch, commit, V1) {
            EndOutcome::Prepared { records, markers } => {
                self.persist(&records);
                markers
            }
            other => panic!("end_txn: {other:?}"),
        }
    }

    fn complete(&mut self, now_ms: i64, id: &str) {
        let records = self.c.markers_written(now_ms, id);
        assert_eq!(records.len(), 1);
        self.persist(&records);
    }

    fn state(&self) -> TxnState {
        self.c.txn(T).unwrap().state
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.to_owned(),
        partition,
    }
}

fn offset(topic: &str, partition: i32, at: i64) -> PendingOffset {
    PendingOffset {
        tp: tp(topic, partition),
        committed_offset: at,
        leader_epoch: 1,
        metadata: Some("m".into()),
    }
}

#[test]
fn idempotent_producers_get_fresh_ids_and_one_block_record_per_block() {
    let mut s = Server::new();
    let mut blocks = 0;
    for expected in 0..2_500 {
        let InitOutcome::Done {
            producer_id,
            producer_epoch,
            records,
        } = s.c.init_producer_id(0, None, 0, None)
        else {
            panic!("no transactional id always succeeds");
        };
        assert_eq!((producer_id, producer_epoch), (ProducerId(expected), 0));
        blocks += records.len();
        s.persist(&records);
    }
    assert_eq!(blocks, 3);
    assert_eq!(s.c.block_end_durable, 3_000);
}

#[test]
fn producer_ids_are_never_reused_after_a_restart() {
    let mut s = Server::new();
    let (first, _) = s.init(0, None);
    let (txn_pid, _) = s.init(0, Some(T));
    assert_eq!((first, txn_pid), (ProducerId(0), ProducerId(1)));
    s.restart();
    let (after, _) = s.init(0, None);
    assert_eq!(after, ProducerId(limits::PRODUCER_ID_BLOCK_SIZE));
    s.restart();
    let (again, _) = s.init(0, None);
    assert_eq!(again, ProducerId(2 * limits::PRODUCER_ID_BLOCK_SIZE));
}

#[test]
fn a_failed_block_append_wastes_the_id_and_the_next_call_reserves_again() {
    let mut s = Server::new();
    let InitOutcome::Done {
        producer_id,
        records,
        ..
    } = s.c.init_producer_id(0, None, 0, None)
    else {
        panic!();
    };
    assert_eq!(producer_id, ProducerId(0));
    s.c.persist_failed(&records);
    let InitOutcome::Done {
        producer_id,
        records,
        ..
    } = s.c.init_producer_id(0, None, 0, None)
    else {
        panic!();
    };
    assert_eq!(producer_id, ProducerId(1));
    assert_eq!(
        records,
        vec![TxnRecord::ProducerIdBlock {
            next_producer_id: limits::PRODUCER_ID_BLOCK_SIZE
        }]
    );
    s.persist(&records);
    s.restart();
    assert_eq!(
        s.init(0, None).0,
        ProducerId(limits::PRODUCER_ID_BLOCK_SIZE)
    );
}

#[test]
fn a_new_transactional_id_starts_empty_at_epoch_0_and_reinit_bumps_the_epoch() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(5, Some(T));
    assert_eq!(epoch, 0);
    assert_eq!(s.state(), TxnState::Empty);
    let (pid2, epoch2) = s.init(6, Some(T));
    assert_eq!((pid2, epoch2), (pid, 1));
    assert_eq!(s.c.txn(T).unwrap().last_producer_epoch, -1);
    s.restart();
}

#[test]
fn a_zombie_with_an_older_epoch_is_fenced() {
    let mut s = Server::new();
    let (pid, old) = s.init(0, Some(T));
    let (_, new) = s.init(1, Some(T));
    let add = s.c.add_partitions(2, T, pid, old, &[tp("a", 0)]);
    assert_eq!(add, Err(ErrorCode::ProducerFenced));
    let end = s.c.end_txn(2, T, pid, old, true, V1);
    assert_eq!(end, EndOutcome::Error(ErrorCode::ProducerFenced));
    let offsets = s.c.add_offsets(2, T, pid, old, "g");
    assert_eq!(offsets, Err(ErrorCode::ProducerFenced));
    s.add(3, pid, new, &[tp("a", 0)]);
}

#[test]
fn bad_init_requests_are_rejected() {
    let mut s = Server::new();
    for timeout_ms in [0, -1, TxnConfig::default().max_timeout_ms + 1] {
        let out = s.c.init_producer_id(0, Some(T), timeout_ms, None);
        assert_eq!(
            out,
            InitOutcome::Error(ErrorCode::InvalidTransactionTimeout)
        );
    }
    let out = s.c.init_producer_id(0, Some(""), TIMEOUT_MS, None);
    assert_eq!(out, InitOutcome::Error(ErrorCode::InvalidRequest));
    let long = "x".repeat(limits::TRANSACTIONAL_ID_BYTES_MAX + 1);
    let out = s.c.init_producer_id(0, Some(&long), TIMEOUT_MS, None);
    assert_eq!(out, InitOutcome::Error(ErrorCode::InvalidRequest));
    assert!(s.c.is_empty());
}

#[test]
fn init_on_an_ongoing_transaction_aborts_it_first_with_a_bumped_epoch() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1, pid, epoch, &[tp("a", 0)]);
    let InitOutcome::AbortFirst { records, markers } =
        s.c.init_producer_id(2, Some(T), TIMEOUT_MS, None)
    else {
        panic!("an Ongoing transaction is aborted first");
    };
    assert_eq!(markers.producer_epoch, epoch + 1);
    assert!(!markers.commit);
    assert_eq!(markers.partitions, vec![tp("a", 0)]);
    s.persist(&records);
    assert_eq!(s.state(), TxnState::PrepareAbort);
    // The old producer is fenced by the bump.
    let end = s.c.end_txn(3, T, pid, epoch, true, V1);
    assert_eq!(end, EndOutcome::Error(ErrorCode::ProducerFenced));
    // The client's retry waits for the markers.
    let out = s.c.init_producer_id(3, Some(T), TIMEOUT_MS, None);
    assert_eq!(out, InitOutcome::Error(ErrorCode::ConcurrentTransactions));
    s.complete(4, T);
    assert_eq!(s.state(), TxnState::CompleteAbort);
    assert_eq!(s.init(5, Some(T)), (pid, epoch + 2));
    s.restart();
}

#[test]
fn add_partitions_rules() {
    let mut s = Server::new();
    let unknown = s.c.add_partitions(0, T, ProducerId(0), 0, &[tp("a", 0)]);
    assert_eq!(unknown, Err(ErrorCode::InvalidProducerIdMapping));
    let (pid, epoch) = s.init(0, Some(T));
    let wrong =
        s.c.add_partitions(0, T, ProducerId(pid.0 + 1), epoch, &[tp("a", 0)]);
    assert_eq!(wrong, Err(ErrorCode::InvalidProducerIdMapping));
    let newer = s.c.add_partitions(0, T, pid, epoch + 1, &[tp("a", 0)]);
    assert_eq!(newer, Err(ErrorCode::ProducerFenced));
    s.add(10, pid, epoch, &[tp("b", 0), tp("a", 0), tp("a", 0)]);
    let m = s.c.txn(T).unwrap();
    assert_eq!((m.state, m.txn_start_ms), (TxnState::Ongoing, 10));
    assert_eq!(m.partitions, vec![tp("a", 0), tp("b", 0)]);
    // Already present: success, nothing to persist.
    assert_eq!(
        s.c.add_partitions(11, T, pid, epoch, &[tp("a", 0)]),
        Ok(Vec::new())
    );
    s.add(12, pid, epoch, &[tp("c", 0)]);
    assert_eq!(s.c.txn(T).unwrap().txn_start_ms, 10, "the start time stays");
    let too_many: Vec<TopicPartition> = (0..limits::TXN_PARTITIONS_MAX as i32)
        .map(|p| tp("d", p))
        .collect();
    let over = s.c.add_partitions(13, T, pid, epoch, &too_many);
    assert_eq!(over, Err(ErrorCode::InvalidRequest));
    let _ = s.end(14, pid, epoch, true);
    let busy = s.c.add_partitions(15, T, pid, epoch, &[tp("a", 0)]);
    assert_eq!(busy, Err(ErrorCode::ConcurrentTransactions));
    s.complete(16, T);
    s.add(17, pid, epoch, &[tp("z", 0)]);
    let m = s.c.txn(T).unwrap();
    assert_eq!(
        (m.txn_start_ms, m.partitions.clone()),
        (17, vec![tp("z", 0)])
    );
    s.restart();
}

#[test]
fn verify_partitions_reports_membership_of_the_ongoing_transaction() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let before = s.c.verify_partitions(T, pid, epoch, &[tp("a", 0)]).unwrap();
    assert_eq!(before[0].error, ErrorCode::TransactionAbortable);
    s.add(1, pid, epoch, &[tp("a", 0)]);
    let after =
        s.c.verify_partitions(T, pid, epoch, &[tp("a", 0), tp("b", 0)])
            .unwrap();
    let errors: Vec<ErrorCode> = after.iter().map(|v| v.error).collect();
    assert_eq!(errors, [ErrorCode::None, ErrorCode::TransactionAbortable]);
    // Kafka's order of checks: the producer id, then the epoch, then a completing state.
    let fenced = s.c.verify_partitions(T, pid, epoch + 1, &[tp("a", 0)]);
    assert_eq!(fenced, Err(ErrorCode::ProducerFenced));
    let other =
        s.c.verify_partitions(T, ProducerId(pid.0 + 1), epoch + 1, &[tp("a", 0)]);
    assert_eq!(other, Err(ErrorCode::InvalidProducerIdMapping));
    let unknown = s.c.verify_partitions("nobody", pid, epoch, &[tp("a", 0)]);
    assert_eq!(unknown, Err(ErrorCode::InvalidProducerIdMapping));
    assert_eq!(
        s.c.verify_partitions("", pid, epoch, &[tp("a", 0)]),
        Err(ErrorCode::InvalidRequest)
    );
    let EndOutcome::Prepared { records, .. } = s.c.end_txn(2, T, pid, epoch, true, V1) else {
        panic!("an Ongoing transaction commits");
    };
    s.persist(&records);
    let completing = s.c.verify_partitions(T, pid, epoch, &[tp("a", 0)]);
    assert_eq!(completing, Err(ErrorCode::ConcurrentTransactions));
    s.complete(3, T);
    let done = s.c.verify_partitions(T, pid, epoch, &[tp("a", 0)]).unwrap();
    assert_eq!(
        done[0].error,
        ErrorCode::TransactionAbortable,
        "markers end it"
    );
}

#[test]
fn offsets_need_add_offsets_and_are_committed_with_the_markers() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let early =
        s.c.txn_offset_commit(1, T, pid, epoch, "g", &[offset("a", 0, 5)], V1);
    assert_eq!(early, Err(ErrorCode::InvalidTxnState));
    let records = s.c.add_offsets(1, T, pid, epoch, "g").unwrap();
    s.persist(&records);
    assert_eq!(s.state(), TxnState::Ongoing);
    assert_eq!(s.c.add_offsets(2, T, pid, epoch, "g"), Ok(Vec::new()));
    let other =
        s.c.txn_offset_commit(2, T, pid, epoch, "h", &[offset("a", 0, 5)], V1);
    assert_eq!(
        other,
        Err(ErrorCode::InvalidTxnState),
        "group h was not added"
    );
    for at in [5, 9] {
        let records =
            s.c.txn_offset_commit(2, T, pid, epoch, "g", &[offset("a", 0, at)], V1);
        s.persist(&records.unwrap());
    }
    let mut big = offset("a", 1, 1);
    big.metadata = Some("x".repeat(limits::OFFSET_METADATA_BYTES_MAX + 1));
    let too_big = s.c.txn_offset_commit(3, T, pid, epoch, "g", &[big], V1);
    assert_eq!(too_big, Err(ErrorCode::OffsetMetadataTooLarge));
    assert_eq!(
        s.c.add_offsets(3, T, pid, epoch, ""),
        Err(ErrorCode::InvalidGroupId)
    );
    s.restart();
    let markers = s.end(4, pid, epoch, true);
    assert_eq!(markers.offsets_to_commit.len(), 1);
    assert_eq!(
        markers.offsets_to_commit[0].offsets,
        vec![offset("a", 0, 9)]
    );
    s.complete(5, T);
    assert!(s.c.txn(T).unwrap().pending_offsets.is_empty());
    // An abort drops the offsets.
    let records = s.c.add_offsets(6, T, pid, epoch, "g").unwrap();
    s.persist(&records);
    let records =
        s.c.txn_offset_commit(6, T, pid, epoch, "g", &[offset("a", 0, 20)], V1);
    s.persist(&records.unwrap());
    assert!(s.end(7, pid, epoch, false).offsets_to_commit.is_empty());
}

#[test]
fn end_txn_rules_and_the_idempotent_retry() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let empty = s.c.end_txn(1, T, pid, epoch, true, V1);
    assert_eq!(empty, EndOutcome::Error(ErrorCode::InvalidTxnState));
    s.add(1, pid, epoch, &[tp("a", 0)]);
    let markers = s.end(2, pid, epoch, true);
    assert!(markers.commit);
    assert_eq!((markers.producer_id, markers.producer_epoch), (pid, epoch));
    let retry = s.c.end_txn(3, T, pid, epoch, true, V1);
    assert_eq!(retry, EndOutcome::Error(ErrorCode::ConcurrentTransactions));
    let flip = s.c.end_txn(3, T, pid, epoch, false, V1);
    assert_eq!(flip, EndOutcome::Error(ErrorCode::InvalidTxnState));
    s.complete(4, T);
    assert_eq!(
        s.c.end_txn(5, T, pid, epoch, true, V1),
        EndOutcome::AlreadyDone {
            producer_id: pid,
            producer_epoch: epoch
        }
    );
    let flip = s.c.end_txn(5, T, pid, epoch, false, V1);
    assert_eq!(flip, EndOutcome::Error(ErrorCode::InvalidTxnState));
    assert_eq!(
        s.c.markers_written(6, T),
        Vec::new(),
        "nothing left to complete"
    );
    let unknown = s.c.end_txn(6, "other", pid, epoch, true, V1);
    assert_eq!(
        unknown,
        EndOutcome::Error(ErrorCode::InvalidProducerIdMapping)
    );
    s.restart();
}

#[test]
fn a_timed_out_transaction_is_aborted_with_a_bumped_epoch() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1_000, pid, epoch, &[tp("a", 0)]);
    let tick = s.c.on_tick(1_000);
    assert_eq!(tick, Tick::default());
    assert_eq!(s.c.next_deadline_ms(), 11_000);
    // Not yet: the start plus the timeout is not passed.
    let at = 1_000 + i64::from(TIMEOUT_MS);
    assert!(s.c.on_tick(at).records.is_empty());
    let tick = s.c.on_tick(at + 10_000);
    assert_eq!(tick.markers.len(), 1);
    assert_eq!(tick.markers[0].producer_epoch, epoch + 1);
    assert!(!tick.markers[0].commit);
    s.persist(&tick.records);
    assert_eq!(s.state(), TxnState::PrepareAbort);
    let zombie = s.c.end_txn(at + 10_001, T, pid, epoch, true, V1);
    assert_eq!(zombie, EndOutcome::Error(ErrorCode::ProducerFenced));
    s.complete(at + 10_002, T);
    let zombie =
        s.c.add_partitions(at + 10_003, T, pid, epoch, &[tp("a", 0)]);
    assert_eq!(zombie, Err(ErrorCode::ProducerFenced));
    s.restart();
}

#[test]
fn idle_transactional_ids_expire_with_a_tombstone() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.init(0, Some("busy"));
    let busy = s.c.txn("busy").unwrap().clone();
    let records = s.c.add_partitions(
        0,
        "busy",
        busy.producer_id,
        busy.producer_epoch,
        &[tp("a", 0)],
    );
    s.persist(&records.unwrap());
    let _ = s.c.on_tick(0);
    let expiration_ms = TxnConfig::default().transactional_id_expiration_ms;
    let tick = s.c.on_tick(expiration_ms + 1);
    let tombstone = TxnRecord::Tombstone {
        transactional_id: T.into(),
    };
    assert!(tick.records.contains(&tombstone));
    assert_eq!(tick.markers.len(), 1, "the Ongoing one times out instead");
    s.persist(&tick.records);
    assert!(s.c.txn(T).is_none());
    s.restart();
    assert!(s.c.txn(T).is_none());
    let gone = s.c.add_partitions(0, T, pid, epoch, &[tp("a", 0)]);
    assert_eq!(gone, Err(ErrorCode::InvalidProducerIdMapping));
}

#[test]
fn prepare_commit_found_at_load_is_completed_by_recovery_effects() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1, pid, epoch, &[tp("a", 0), tp("b", 1)]);
    let _ = s.end(2, pid, epoch, true);
    s.restart();
    let effects = s.c.recovery_effects();
    assert_eq!(effects.len(), 1);
    assert!(effects[0].commit);
    assert_eq!(effects[0].partitions, vec![tp("a", 0), tp("b", 1)]);
    s.complete(3, T);
    assert_eq!(s.state(), TxnState::CompleteCommit);
    assert!(s.c.recovery_effects().is_empty());
    s.restart();
}

#[test]
fn a_failed_append_leaves_the_coordinator_as_it_was() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let before = s.c.txn(T).unwrap().clone();
    let records = s.c.add_partitions(1, T, pid, epoch, &[tp("a", 0)]).unwrap();
    // While in flight, the id is busy.
    let busy = s.c.end_txn(1, T, pid, epoch, true, V1);
    assert_eq!(busy, EndOutcome::Error(ErrorCode::ConcurrentTransactions));
    s.c.persist_failed(&records);
    assert_eq!(s.c.txn(T), Some(&before));
    s.add(2, pid, epoch, &[tp("a", 0)]);
    assert_eq!(s.state(), TxnState::Ongoing);
}

#[test]
fn kip_360_bumps_for_the_current_epoch_and_fences_others() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let (pid2, epoch2) = s.init_expecting(1, Some(T), Some((pid, epoch)));
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    assert_eq!(s.c.txn(T).unwrap().last_producer_epoch, epoch);
    // A retry of that request (its answer was lost) gets the same epoch back.
    assert_eq!(
        s.init_expecting(2, Some(T), Some((pid, epoch))),
        (pid, epoch + 1)
    );
    let stale =
        s.c.init_producer_id(3, Some(T), TIMEOUT_MS, Some((pid, epoch + 5)));
    assert_eq!(stale, InitOutcome::Error(ErrorCode::ProducerFenced));
    let other =
        s.c.init_producer_id(3, Some(T), TIMEOUT_MS, Some((ProducerId(99), 0)));
    assert_eq!(other, InitOutcome::Error(ErrorCode::ProducerFenced));
    s.restart();
}

#[test]
fn kip_360_recovers_after_an_aborted_transaction_across_a_restart() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1, pid, epoch, &[tp("a", 0)]);
    s.end(2, pid, epoch, false);
    s.complete(3, T);
    assert_eq!(s.state(), TxnState::CompleteAbort);
    s.restart();
    // The producer that aborted resumes: the same id, the next epoch, a new transaction.
    let (pid2, epoch2) = s.init_expecting(4, Some(T), Some((pid, epoch)));
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    s.restart();
    assert_eq!(
        s.init_expecting(5, Some(T), Some((pid, epoch))),
        (pid, epoch + 1),
        "the retry of that bump, after a restart"
    );
    s.add(6, pid, epoch2, &[tp("a", 0)]);
    assert_eq!(s.state(), TxnState::Ongoing);
    let fenced =
        s.c.init_producer_id(7, Some(T), TIMEOUT_MS, Some((pid, epoch)));
    assert!(
        matches!(fenced, InitOutcome::AbortFirst { .. }),
        "as Kafka: an Ongoing transaction is fenced and aborted first, the pair checked on the retry: {fenced:?}"
    );
}

#[test]
fn an_exhausted_epoch_rotates_the_producer_id() {
    let mut s = Server::new();
    let (pid, _) = s.init(0, Some(T));
    let mut m = s.c.txn(T).unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    m.state = TxnState::CompleteCommit;
    s.persist(&[TxnRecord::Metadata(m)]);
    let (pid2, epoch2) = s.init_expecting(1, Some(T), Some((pid, i16::MAX - 1)));
    assert_ne!(pid2, pid);
    assert_eq!(epoch2, 0);
    let m = s.c.txn(T).unwrap();
    assert_eq!(
        (m.last_producer_id, m.last_producer_epoch),
        (pid, i16::MAX - 1)
    );
    // The lost-answer retry with the old id and exhausted epoch gets the new id back.
    assert_eq!(
        s.init_expecting(2, Some(T), Some((pid, i16::MAX - 1))),
        (pid2, 0)
    );
    s.restart();
}

#[test]
fn describe_list_and_snapshot() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.init(0, Some("idle"));
    s.add(7, pid, epoch, &[tp("a", 0)]);
    let d = s.c.describe(T).unwrap();
    assert_eq!(
        (d.state, d.txn_start_ms, d.timeout_ms),
        ("Ongoing", 7, TIMEOUT_MS)
    );
    assert_eq!(d.partitions, vec![tp("a", 0)]);
    assert!(s.c.describe("nope").is_none());
    let ongoing = s.c.list(&[TxnState::Ongoing], &[]);
    assert_eq!(ongoing.len(), 1);
    assert_eq!(
        (ongoing[0].transactional_id.as_str(), ongoing[0].state),
        (T, "Ongoing")
    );
    assert_eq!(s.c.list(&[], &[]).len(), 2);
    assert_eq!(s.c.list(&[], &[pid.0]).len(), 1);
    let mut fresh = Coordinator::new(TxnConfig::default());
    fresh.load(s.c.snapshot());
    assert_eq!(fresh.txns, s.c.txns);
    assert_eq!(fresh.next_producer_id, limits::PRODUCER_ID_BLOCK_SIZE);
}

#[test]
fn new_ids_beyond_txns_max_are_refused_and_existing_ones_keep_working() {
    let mut s = Server::new();
    let (pid, _) = s.init(0, Some(T));
    let template = s.c.txn(T).unwrap().clone();
    let others = (1..limits::TXNS_MAX).map(|i| {
        let mut m = template.clone();
        m.transactional_id = format!("id-{i}");
        TxnRecord::Metadata(m)
    });
    s.c.load(others);
    assert_eq!(s.c.len(), limits::TXNS_MAX);
    let out = s.c.init_producer_id(1, Some("one-more"), TIMEOUT_MS, None);
    assert_eq!(out, InitOutcome::Error(ErrorCode::CoordinatorNotAvailable));
    assert_eq!(s.init(1, Some(T)), (pid, 1));
}

#[test]
fn pending_offsets_are_capped() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let records = s.c.add_offsets(1, T, pid, epoch, "g").unwrap();
    s.persist(&records);
    let many: Vec<PendingOffset> = (0..=limits::PENDING_OFFSETS_MAX as i32)
        .map(|p| offset("a", p, 1))
        .collect();
    let over = s.c.txn_offset_commit(2, T, pid, epoch, "g", &many, V1);
    assert_eq!(over, Err(ErrorCode::InvalidCommitOffsetSize));
    let records =
        s.c.txn_offset_commit(2, T, pid, epoch, "g", &many[1..], V1)
            .unwrap();
    s.persist(&records);
    let one_more = s.c.txn_offset_commit(3, T, pid, epoch, "g", &many[..1], V1);
    assert_eq!(one_more, Err(ErrorCode::InvalidCommitOffsetSize));
    // Replacing an offset already held is not growth.
    let records =
        s.c.txn_offset_commit(3, T, pid, epoch, "g", &many[1..2], V1)
            .unwrap();
    s.persist(&records);
}

impl Server {
    fn end_v2(&mut self, now_ms: i64, pid: ProducerId, epoch: i16, commit: bool) -> WriteMarkers {
        match self.c.end_txn(now_ms, T, pid, epoch, commit, V2) {
            EndOutcome::Prepared { records, markers } => {
                self.persist(&records);
                markers
            }
            other => panic!("end_txn v2: {other:?}"),
        }
    }
}

/// KIP-890 part 2: every EndTxn bumps the epoch and the markers carry the new one, so a
/// write of the old epoch cannot join the next transaction; the new epoch starts the next
/// transaction with its first partition.
#[test]
fn end_txn_v2_bumps_the_epoch_with_every_transaction() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1, pid, epoch, &[tp("a", 0)]);
    let markers = s.end_v2(2, pid, epoch, true);
    assert_eq!(
        (markers.producer_id, markers.producer_epoch),
        (pid, epoch + 1)
    );
    assert_eq!(markers.partitions, vec![tp("a", 0)]);
    s.complete(3, T);
    assert_eq!(s.state(), TxnState::CompleteCommit);
    // A zombie write at the old epoch is fenced; the new epoch opens the next transaction.
    let zombie = s.c.add_partitions(4, T, pid, epoch, &[tp("a", 1)]);
    assert_eq!(zombie, Err(ErrorCode::ProducerFenced));
    s.add(4, pid, epoch + 1, &[tp("a", 1)]);
    assert_eq!(s.state(), TxnState::Ongoing);
    let markers = s.end_v2(5, pid, epoch + 1, false);
    assert_eq!(markers.producer_epoch, epoch + 2);
    assert!(!markers.commit);
    s.complete(6, T);
    s.restart();
    assert_eq!(s.c.txn(T).unwrap().producer_epoch, epoch + 2);
}

/// A retried EndTxn v5 (its answer lost) comes with the epoch before the bump: it gets the
/// current pair if the transaction ended the same way, INVALID_TXN_STATE otherwise, and
/// CONCURRENT_TRANSACTIONS while the markers are being written. An older epoch cannot end
/// the next transaction.
#[test]
fn a_retried_end_txn_v2_is_answered_with_the_current_epoch() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    s.add(1, pid, epoch, &[tp("a", 0)]);
    s.end_v2(2, pid, epoch, true);
    let busy = s.c.end_txn(3, T, pid, epoch, true, V2);
    assert_eq!(busy, EndOutcome::Error(ErrorCode::ConcurrentTransactions));
    s.complete(3, T);
    let retry = s.c.end_txn(4, T, pid, epoch, true, V2);
    let current = EndOutcome::AlreadyDone {
        producer_id: pid,
        producer_epoch: epoch + 1,
    };
    assert_eq!(retry, current);
    let flip = s.c.end_txn(4, T, pid, epoch, false, V2);
    assert_eq!(flip, EndOutcome::Error(ErrorCode::InvalidTxnState));
    let stale = s.c.end_txn(4, T, pid, epoch - 1, true, V2);
    assert_eq!(stale, EndOutcome::Error(ErrorCode::ProducerFenced));
    s.add(5, pid, epoch + 1, &[tp("a", 0)]);
    let late = s.c.end_txn(6, T, pid, epoch, true, V2);
    assert_eq!(late, EndOutcome::Error(ErrorCode::ProducerFenced));
}

/// Protocol v2 lets a producer abort with nothing added (Kafka answers it, bumping the
/// epoch); a commit of nothing stays INVALID_TXN_STATE, as with v1.
#[test]
fn end_txn_v2_aborts_an_empty_transaction() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let commit = s.c.end_txn(1, T, pid, epoch, true, V2);
    assert_eq!(commit, EndOutcome::Error(ErrorCode::InvalidTxnState));
    let markers = s.end_v2(1, pid, epoch, false);
    assert!(markers.partitions.is_empty() && !markers.commit);
    assert_eq!(markers.producer_epoch, epoch + 1);
    s.complete(2, T);
    assert_eq!(s.state(), TxnState::CompleteAbort);
    let again = s.end_v2(3, pid, epoch + 1, false);
    assert_eq!(again.producer_epoch, epoch + 2);
}

/// An epoch bumped to `i16::MAX` by EndTxn v5 moves the transactional id to a new producer
/// id at epoch 0 once the markers are written (the markers keep the old id, whose batches
/// they close); a retry with the pair before the bump gets the new one.
#[test]
fn end_txn_v2_at_the_last_epoch_moves_to_a_new_producer_id() {
    let mut s = Server::new();
    let (pid, _) = s.init(0, Some(T));
    let mut m = s.c.txn(T).unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    s.persist(&[TxnRecord::Metadata(m)]);
    s.add(1, pid, i16::MAX - 1, &[tp("a", 0)]);
    let markers = s.end_v2(2, pid, i16::MAX - 1, true);
    assert_eq!(
        (markers.producer_id, markers.producer_epoch),
        (pid, i16::MAX)
    );
    let records = s.c.markers_written(3, T);
    s.persist(&records);
    let now = s.c.txn(T).unwrap().clone();
    assert_ne!(now.producer_id, pid);
    assert_eq!(now.producer_epoch, 0);
    assert_eq!(now.state, TxnState::CompleteCommit);
    let retry = s.c.end_txn(4, T, pid, i16::MAX - 1, true, V2);
    let moved = EndOutcome::AlreadyDone {
        producer_id: now.producer_id,
        producer_epoch: 0,
    };
    assert_eq!(retry, moved);
    s.add(5, now.producer_id, 0, &[tp("a", 0)]);
    s.restart();
}

/// TxnOffsetCommit v5+ adds the group itself (no AddOffsetsToTxn), starting a transaction
/// if none is open; the offsets commit with it. v0-v4 still need AddOffsetsToTxn.
#[test]
fn txn_offset_commit_v5_adds_its_group() {
    let mut s = Server::new();
    let (pid, epoch) = s.init(0, Some(T));
    let v1 =
        s.c.txn_offset_commit(1, T, pid, epoch, "g", &[offset("a", 0, 5)], V1);
    assert_eq!(v1, Err(ErrorCode::InvalidTxnState));
    let records =
        s.c.txn_offset_commit(1, T, pid, epoch, "g", &[offset("a", 0, 5)], V2);
    s.persist(&records.unwrap());
    assert_eq!(s.state(), TxnState::Ongoing);
    let markers = s.end_v2(2, pid, epoch, true);
    assert_eq!(markers.offsets_to_commit.len(), 1);
    assert_eq!(markers.offsets_to_commit[0].offsets[0].committed_offset, 5);
    s.complete(3, T);
    let fenced =
        s.c.txn_offset_commit(4, T, pid, epoch, "g", &[offset("a", 0, 6)], V2);
    assert_eq!(fenced, Err(ErrorCode::ProducerFenced));
}

#[test]
fn a_cluster_broker_hands_out_ids_only_from_its_own_range() {
    let config = TxnConfig {
        producer_id_start: 5 << 32,
        producer_id_end: (5 << 32) + 2,
        ..TxnConfig::default()
    };
    let mut c = Coordinator::new(config);
    let mut ids = Vec::new();
    for _ in 0..3 {
        match c.init_producer_id(0, None, 0, None) {
            InitOutcome::Done {
                producer_id,
                records,
                ..
            } => {
                c.apply(&records);
                ids.push(Ok(producer_id.0));
            }
            InitOutcome::Error(code) => ids.push(Err(code)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ids[..2], [Ok(5 << 32), Ok((5 << 32) + 1)]);
    assert!(ids[2].is_err(), "past the range: {:?}", ids[2]);
    // The block record never reaches past the range.
    let mut fresh = Coordinator::new(TxnConfig {
        producer_id_start: 5 << 32,
        producer_id_end: (5 << 32) + 2,
        ..TxnConfig::default()
    });
    let InitOutcome::Done { records, .. } = fresh.init_producer_id(0, None, 0, None) else {
        panic!();
    };
    assert_eq!(
        records,
        vec![TxnRecord::ProducerIdBlock {
            next_producer_id: (5 << 32) + 2
        }]
    );
}
