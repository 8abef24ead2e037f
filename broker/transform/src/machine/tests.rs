//! The runner step by step: start-up, commit triggers, sequences, routing, the policies
//! with bisect, backoff, pause/resume/stop at a boundary, reload, failed steps.

use super::*;
use crate::limits::{
    TRANSFORM_DLQ_REASON_BYTES_MAX, TRANSFORM_IDLE_COMMIT_MS, TRANSFORM_TXN_OUTPUT_BYTES_MAX,
};
use crate::spec::{OnError, Partitioning};

#[derive(Debug, Clone, PartialEq, Eq)]
struct R {
    offset: i64,
    key: Option<Vec<u8>>,
}

impl SourceRecord for R {
    fn offset(&self) -> i64 {
        self.offset
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn size_bytes(&self) -> u64 {
        10
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct O {
    output: u32,
    key: Option<Vec<u8>>,
    bytes: u64,
    source: i64,
}

impl OutputRecord for O {
    fn output(&self) -> u32 {
        self.output
    }
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn size_bytes(&self) -> u64 {
        self.bytes
    }
    fn source_offset(&self) -> i64 {
        self.source
    }
}

type E = Effect<R, O>;

fn config(on_error: OnError) -> RunnerConfig {
    let dead = on_error == OnError::DeadLetter;
    RunnerConfig {
        source_partition: 1,
        outputs: 2,
        on_error,
        partitioning: Partitioning::Source,
        commit_interval_ms: 100,
        start_offset: Some(10),
        paused: false,
        partition_counts: if dead { vec![4, 4, 3] } else { vec![4, 4] },
    }
}

fn records(offsets: &[i64]) -> Vec<R> {
    offsets
        .iter()
        .map(|&offset| R { offset, key: None })
        .collect()
}

fn out(output: u32) -> O {
    O {
        output,
        key: None,
        bytes: 10,
        source: 0,
    }
}

/// An output record to `output` of the source record at `source`.
fn out_of(output: u32, source: i64) -> O {
    O {
        source,
        ..out(output)
    }
}

fn err(kind: StepErrorKind) -> StepError {
    StepError {
        kind,
        message: format!("{kind:?}"),
    }
}

fn call_err(kind: CallErrorKind) -> CallError {
    CallError {
        kind,
        message: "it broke".into(),
    }
}

const PRODUCER: Producer = Producer {
    producer_id: 3,
    producer_epoch: 0,
};

/// A runner past start-up, about to read from 10.
fn running(on_error: OnError) -> Runner<R, O> {
    let mut r = Runner::new(config(on_error));
    assert_eq!(r.start(0), E::InitProducer);
    assert_eq!(r.on_producer(0, Ok(PRODUCER)), E::FetchPosition);
    let position = Position {
        committed: None,
        log_start_offset: 0,
    };
    assert_eq!(r.on_position(0, Ok(position)), E::Read { from: 10 });
    assert_eq!(r.state(), State::Running);
    r
}

/// Reads `offsets` at `now` and answers the one call with `outputs`.
fn read_and_call(r: &mut Runner<R, O>, now: i64, offsets: &[i64], next: i64, outputs: Vec<O>) -> E {
    let n = offsets.len();
    let read = ReadResult::Records {
        records: records(offsets),
        next_offset: next,
    };
    assert_eq!(r.on_read(now, Ok(read)), E::Call { range: 0..n });
    r.on_called(now, Ok(outputs))
}

#[test]
fn a_transaction_from_read_to_commit() {
    let mut r = running(OnError::Stop);
    let effect = read_and_call(&mut r, 0, &[10, 11, 13], 15, vec![out(0), out(1), out(0)]);
    let tp = |output| TargetPartition {
        target: Target::Output(output),
        partition: 1,
    };
    assert_eq!(
        effect,
        E::AddPartitions {
            partitions: vec![tp(0), tp(1)]
        }
    );
    let effect = r.on_added(0, Ok(()));
    assert_eq!(
        effect,
        E::Append {
            output: 0,
            partition: 1,
            base_sequence: 0,
            records: vec![out(0), out(0)]
        }
    );
    let effect = r.on_appended(0, Ok(()));
    assert_eq!(
        effect,
        E::Append {
            output: 1,
            partition: 1,
            base_sequence: 0,
            records: vec![out(1)]
        }
    );
    // Young transaction: read on.
    assert_eq!(r.on_appended(10, Ok(())), E::Read { from: 15 });
    assert_eq!(r.status().open_position, Some(15));
    assert_eq!(r.status().position, Some(10));
    // Caught up: wait for more until TRANSFORM_IDLE_COMMIT_MS after the last read (at 0),
    // then commit without waiting for the interval (100).
    assert_eq!(
        r.on_read(12, Ok(ReadResult::Nothing)),
        E::Wait {
            until_ms: Some(TRANSFORM_IDLE_COMMIT_MS)
        }
    );
    assert_eq!(r.on_tick(TRANSFORM_IDLE_COMMIT_MS), E::Read { from: 15 });
    assert_eq!(
        r.on_read(TRANSFORM_IDLE_COMMIT_MS, Ok(ReadResult::Nothing)),
        E::Commit { position: 15 }
    );
    assert_eq!(r.status().records_in, 0, "counted at commit");
    assert_eq!(r.on_committed(101, Ok(())), E::Read { from: 15 });
    let s = r.status();
    assert_eq!(
        (s.position, s.records_in, s.records_out.clone()),
        (Some(15), 3, vec![2, 1])
    );
    assert_eq!(
        (s.transactions, s.last_commit_ms, s.txn_opened_ms),
        (1, Some(101), None)
    );
    // Nothing open: wait without a deadline.
    assert_eq!(
        r.on_read(102, Ok(ReadResult::Nothing)),
        E::Wait { until_ms: None }
    );
    assert_eq!(r.on_tick(500), E::Read { from: 15 });
}

#[test]
fn a_transaction_commits_at_its_interval_while_records_keep_coming_and_when_they_stop() {
    let mut r = running(OnError::Stop);
    // Records every 15 ms: each read extends the wait; the interval (100) ends it.
    let mut from = 10;
    for now in (0..100).step_by(15) {
        let read = ReadResult::Records {
            records: records(&[from]),
            next_offset: from + 1,
        };
        assert_eq!(r.on_read(now, Ok(read)), E::Call { range: 0..1 });
        let mut effect = r.on_called(now, Ok(vec![out(0)]));
        if matches!(effect, E::AddPartitions { .. }) {
            effect = r.on_added(now, Ok(()));
        }
        assert!(matches!(effect, E::Append { .. }), "{effect:?}");
        from += 1;
        assert_eq!(r.on_appended(now, Ok(())), E::Read { from });
        assert_eq!(
            r.on_read(now + 1, Ok(ReadResult::Nothing)),
            E::Wait {
                until_ms: Some((now + TRANSFORM_IDLE_COMMIT_MS).min(100))
            }
        );
        if now + 15 < 100 {
            assert_eq!(r.on_tick(now + 15), E::Read { from });
        }
    }
    assert_eq!(r.on_tick(100), E::Commit { position: from });
    assert_eq!(r.on_committed(100, Ok(())), E::Read { from });
    assert_eq!(r.status().transactions, 1);
}

#[test]
fn sequences_continue_across_transactions_and_restart_at_a_new_producer() {
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10, 11], 12, vec![out(0), out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(
        r.on_added(0, Ok(())),
        E::Append {
            base_sequence: 0,
            ..
        }
    ));
    assert_eq!(r.on_appended(200, Ok(())), E::Commit { position: 12 });
    assert_eq!(r.on_committed(200, Ok(())), E::Read { from: 12 });
    // The partition was added in the last transaction, so again now.
    assert!(matches!(
        read_and_call(&mut r, 200, &[12], 13, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(
        r.on_added(200, Ok(())),
        E::Append {
            base_sequence: 2,
            ..
        }
    ));
    // A failed append: abort, back off, new producer, sequences from 0.
    assert_eq!(
        r.on_appended(200, Err(err(StepErrorKind::Retriable))),
        E::Abort
    );
    assert_eq!(r.on_aborted(200, Ok(())), E::Backoff { until_ms: 300 });
    assert_eq!(r.status().aborts, 1);
    assert_eq!(r.state(), State::Starting);
    assert_eq!(r.on_tick(299), E::Backoff { until_ms: 300 }, "woke early");
    assert_eq!(r.on_tick(300), E::InitProducer);
    let bumped = Producer {
        producer_epoch: 1,
        ..PRODUCER
    };
    assert_eq!(r.on_producer(300, Ok(bumped)), E::FetchPosition);
    let position = Position {
        committed: Some(12),
        log_start_offset: 0,
    };
    assert_eq!(r.on_position(300, Ok(position)), E::Read { from: 12 });
    assert!(matches!(
        read_and_call(&mut r, 300, &[12], 13, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(
        r.on_added(300, Ok(())),
        E::Append {
            base_sequence: 0,
            ..
        }
    ));
}

#[test]
fn a_full_transaction_commits_at_once() {
    let mut r = running(OnError::Stop);
    let big = O {
        bytes: TRANSFORM_TXN_OUTPUT_BYTES_MAX,
        ..out(0)
    };
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![big]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
    assert_eq!(r.on_appended(0, Ok(())), E::Commit { position: 11 });
}

#[test]
fn partition_counts_are_taken_when_a_transaction_opens() {
    let mut r = running(OnError::Stop);
    let keyed = O {
        key: Some(b"foobar".to_vec()),
        ..out(0)
    };
    r.config.partitioning = Partitioning::Key;
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![keyed.clone()]),
        E::AddPartitions { .. }
    ));
    r.set_partition_counts(&[12, 4]);
    // murmur2("foobar") is 6 of 12 and 2 of 4: the open transaction keeps 4.
    let tp = TargetPartition {
        target: Target::Output(0),
        partition: 2,
    };
    assert!(matches!(
        r.on_added(0, Ok(())),
        E::Append { partition: 2, .. }
    ));
    assert_eq!(r.on_appended(100, Ok(())), E::Commit { position: 11 });
    assert_eq!(r.on_committed(100, Ok(())), E::Read { from: 11 });
    let effect = read_and_call(&mut r, 100, &[11], 12, vec![keyed]);
    let moved = TargetPartition { partition: 6, ..tp };
    assert_eq!(
        effect,
        E::AddPartitions {
            partitions: vec![moved]
        }
    );
}

/// Drives the bisect of a call over `offsets` failing on calls that include `poison`.
fn bisect(r: &mut Runner<R, O>, offsets: &[i64], poison: i64) -> E {
    let read = ReadResult::Records {
        records: records(offsets),
        next_offset: offsets[offsets.len() - 1] + 1,
    };
    let mut effect = r.on_read(0, Ok(read));
    while let E::Call { range } = effect.clone() {
        let hit = r.inputs()[range.clone()].iter().any(|x| x.offset == poison);
        let result = if hit {
            Err(call_err(CallErrorKind::Trap))
        } else {
            Ok(vec![out(0); range.len()])
        };
        effect = r.on_called(0, result);
    }
    effect
}

#[test]
fn stop_commits_what_precedes_the_first_failed_record_and_fails() {
    let mut r = running(OnError::Stop);
    assert!(matches!(
        bisect(&mut r, &[10, 11, 12, 13], 12),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { ref records, .. } if records.len() == 2));
    assert_eq!(r.on_appended(0, Ok(())), E::Commit { position: 12 });
    assert_eq!(r.on_committed(0, Ok(())), E::Idle);
    let s = r.status();
    assert_eq!(
        (s.state, s.position, s.records_in),
        (State::Failed, Some(12), 2)
    );
    let error = s.last_error.clone().unwrap();
    assert_eq!((error.kind, error.offset), ("trap", Some(12)));
    // resume (or a new plugin version) retries from the failed record.
    assert_eq!(r.resume(5), Some(E::Read { from: 12 }));
    // The failure on the very first record: nothing to commit, fail at once.
    assert_eq!(bisect(&mut r, &[12, 13], 12), E::Idle);
    assert_eq!((r.state(), r.status().transactions), (State::Failed, 1));
}

#[test]
fn skip_drops_and_counts_exactly_the_failed_records() {
    let mut r = running(OnError::Skip);
    assert!(matches!(
        bisect(&mut r, &[10, 11, 12, 13, 14], 11),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { ref records, .. } if records.len() == 4));
    assert_eq!(r.on_appended(100, Ok(())), E::Commit { position: 15 });
    assert_eq!(r.on_committed(100, Ok(())), E::Read { from: 15 });
    let s = r.status();
    assert_eq!(
        (s.records_in, s.records_skipped, s.records_out[0]),
        (5, 1, 4)
    );
}

#[test]
fn dead_letter_writes_the_failed_inputs_in_the_same_transaction() {
    let mut r = running(OnError::DeadLetter);
    let read = ReadResult::Records {
        records: records(&[10, 11]),
        next_offset: 12,
    };
    assert_eq!(r.on_read(0, Ok(read)), E::Call { range: 0..2 });
    let long = CallError {
        kind: CallErrorKind::Guest,
        message: "é".repeat(TRANSFORM_DLQ_REASON_BYTES_MAX),
    };
    assert_eq!(r.on_called(0, Err(long)), E::Call { range: 0..1 });
    assert_eq!(r.on_called(0, Ok(vec![out(1)])), E::Call { range: 1..2 });
    let effect = r.on_called(0, Err(call_err(CallErrorKind::Contract)));
    let dlq = TargetPartition {
        target: Target::DeadLetter,
        partition: 1,
    };
    let out1 = TargetPartition {
        target: Target::Output(1),
        partition: 1,
    };
    assert_eq!(
        effect,
        E::AddPartitions {
            partitions: vec![out1, dlq]
        }
    );
    assert!(matches!(r.on_added(0, Ok(())), E::Append { output: 1, .. }));
    let E::AppendDeadLetters {
        partition: 1,
        base_sequence: 0,
        records,
    } = r.on_appended(0, Ok(()))
    else {
        panic!("dead letters next");
    };
    assert_eq!(records.len(), 1);
    assert_eq!(
        (records[0].record.offset, records[0].kind),
        (11, CallErrorKind::Contract)
    );
    assert_eq!(r.on_appended(100, Ok(())), E::Commit { position: 12 });
    assert_eq!(r.on_committed(100, Ok(())), E::Read { from: 12 });
    assert_eq!(r.status().records_dead_lettered, 1);
    // The reason is cut at a character boundary.
    let letter = DeadLetter::new(
        R {
            offset: 0,
            key: None,
        },
        &CallError {
            kind: CallErrorKind::Guest,
            message: "é".repeat(TRANSFORM_DLQ_REASON_BYTES_MAX),
        },
    );
    assert_eq!(letter.reason.len(), TRANSFORM_DLQ_REASON_BYTES_MAX);
}

#[test]
fn a_call_answered_in_part_fails_exactly_the_refused_records_without_bisecting() {
    let refused = |indices: &[usize]| {
        indices
            .iter()
            .map(|&i| (i, call_err(CallErrorKind::Validator)))
            .collect::<Vec<_>>()
    };
    let read = || ReadResult::Records {
        records: records(&[10, 11, 12, 13]),
        next_offset: 14,
    };
    // dead-letter: the refused records go to the dead-letter topic, the others' outputs to
    // their outputs, in the same transaction, with no further call.
    let mut r = running(OnError::DeadLetter);
    assert_eq!(r.on_read(0, Ok(read())), E::Call { range: 0..4 });
    let outputs = vec![out_of(0, 10), out_of(1, 12), out_of(0, 12)];
    let effect = r.on_called_in_part(0, outputs, refused(&[1, 3]));
    assert!(matches!(effect, E::AddPartitions { .. }), "{effect:?}");
    assert!(
        matches!(r.on_added(0, Ok(())), E::Append { output: 0, ref records, .. } if records.len() == 2)
    );
    assert!(
        matches!(r.on_appended(0, Ok(())), E::Append { output: 1, ref records, .. } if records.len() == 1)
    );
    let E::AppendDeadLetters { records, .. } = r.on_appended(0, Ok(())) else {
        panic!("dead letters next");
    };
    let dead: Vec<_> = records.iter().map(|d| (d.record.offset, d.kind)).collect();
    assert_eq!(
        dead,
        [
            (11, CallErrorKind::Validator),
            (13, CallErrorKind::Validator)
        ]
    );
    assert_eq!(r.on_appended(100, Ok(())), E::Commit { position: 14 });
    assert_eq!(r.on_committed(100, Ok(())), E::Read { from: 14 });
    assert_eq!(
        (r.status().records_in, r.status().records_dead_lettered),
        (4, 2)
    );

    // stop: what precedes the first refused record is committed, nothing after it.
    let mut r = running(OnError::Stop);
    assert_eq!(r.on_read(0, Ok(read())), E::Call { range: 0..4 });
    let outputs = vec![out_of(0, 10), out_of(0, 12), out_of(0, 13)];
    assert!(matches!(
        r.on_called_in_part(0, outputs, refused(&[1])),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { ref records, .. } if records.len() == 1));
    assert_eq!(r.on_appended(0, Ok(())), E::Commit { position: 11 });
    assert_eq!(r.on_committed(0, Ok(())), E::Idle);
    let error = r.status().last_error.clone().unwrap();
    assert_eq!(
        (r.state(), error.kind, error.offset),
        (State::Failed, "validator", Some(11))
    );
}

#[test]
fn a_routing_error_is_a_contract_failure_of_the_call() {
    let mut r = running(OnError::Skip);
    let read = ReadResult::Records {
        records: records(&[10]),
        next_offset: 11,
    };
    assert_eq!(r.on_read(0, Ok(read)), E::Call { range: 0..1 });
    assert_eq!(r.on_called(0, Ok(vec![out(2)])), E::Read { from: 11 });
    assert_eq!(r.status().last_error.as_ref().unwrap().kind, "contract");
}

#[test]
fn busy_backs_off_doubling_to_the_cap_and_stale_commits_then_rereads() {
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
    assert_eq!(r.on_appended(0, Ok(())), E::Read { from: 11 });
    let read = ReadResult::Records {
        records: records(&[11, 12]),
        next_offset: 13,
    };
    assert_eq!(r.on_read(0, Ok(read)), E::Call { range: 0..2 });
    let mut now = 0;
    let mut waits = vec![];
    for _ in 0..12 {
        let E::Backoff { until_ms } = r.on_called(now, Err(call_err(CallErrorKind::Busy))) else {
            panic!("busy backs off");
        };
        waits.push(until_ms - now);
        now = until_ms;
        assert_eq!(r.on_tick(now), E::Call { range: 0..2 });
    }
    assert_eq!(&waits[..4], &[100, 200, 400, 800]);
    assert_eq!(waits[11], TRANSFORM_RETRY_BACKOFF_MS_MAX);
    // The plugin moved on: commit the old version's output, read the chunk again.
    assert_eq!(
        r.on_called(now, Err(call_err(CallErrorKind::Stale))),
        E::Commit { position: 11 }
    );
    assert_eq!(r.on_committed(now, Ok(())), E::Read { from: 11 });
}

#[test]
fn pause_commits_at_the_boundary_and_resume_reads_on() {
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert_eq!(r.pause(0), None, "acted on at the boundary");
    assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
    assert_eq!(r.on_appended(0, Ok(())), E::Commit { position: 11 });
    assert_eq!(r.on_committed(0, Ok(())), E::Idle);
    assert_eq!(r.state(), State::Paused);
    assert_eq!(r.resume(1), Some(E::Read { from: 11 }));
    // Pausing a wait with an open transaction commits it now.
    let read = ReadResult::Records {
        records: vec![],
        next_offset: 20,
    };
    assert_eq!(r.on_read(1, Ok(read)), E::Read { from: 20 });
    assert_eq!(
        r.on_read(1, Ok(ReadResult::Nothing)),
        E::Wait {
            until_ms: Some(1 + TRANSFORM_IDLE_COMMIT_MS)
        }
    );
    assert_eq!(r.pause(2), Some(E::Commit { position: 20 }));
    assert_eq!(r.on_committed(2, Ok(())), E::Idle);
    // Nothing open: pausing a wait is immediate; resume cancels a pause not yet reached.
    assert_eq!(r.resume(3), Some(E::Read { from: 20 }));
    assert_eq!(
        r.on_read(3, Ok(ReadResult::Nothing)),
        E::Wait { until_ms: None }
    );
    assert_eq!(r.pause(4), Some(E::Idle));
    assert_eq!(r.resume(5), Some(E::Read { from: 20 }));
    assert_eq!(r.pause(6), None);
    assert_eq!(r.resume(6), None);
    assert_eq!(
        r.on_read(6, Ok(ReadResult::Nothing)),
        E::Wait { until_ms: None }
    );
}

#[test]
fn a_paused_spec_starts_idle_and_resumes_from_init() {
    let mut r: Runner<R, O> = Runner::new(RunnerConfig {
        paused: true,
        ..config(OnError::Stop)
    });
    assert_eq!(r.start(0), E::Idle);
    assert_eq!(r.state(), State::Paused);
    assert_eq!(r.resume(1), Some(E::InitProducer));
    assert_eq!(r.on_producer(1, Ok(PRODUCER)), E::FetchPosition);
}

#[test]
fn commands_before_the_start_are_kept() {
    let mut r: Runner<R, O> = Runner::new(config(OnError::Stop));
    assert_eq!(r.pause(0), None);
    assert_eq!((r.start(0), r.state()), (E::Idle, State::Paused));
    let mut r: Runner<R, O> = Runner::new(config(OnError::Stop));
    assert_eq!(r.stop(0, Finish::Commit), Some(E::Idle));
    assert_eq!((r.start(0), r.state()), (E::Idle, State::Stopped));
}

#[test]
fn stop_commits_or_aborts_the_open_transaction() {
    for (finish, end) in [
        (Finish::Commit, E::Commit { position: 11 }),
        (Finish::Abort, E::Abort),
    ] {
        let mut r = running(OnError::Stop);
        assert!(matches!(
            read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
            E::AddPartitions { .. }
        ));
        assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
        assert_eq!(r.on_appended(0, Ok(())), E::Read { from: 11 });
        assert_eq!(
            r.on_read(0, Ok(ReadResult::Nothing)),
            E::Wait {
                until_ms: Some(TRANSFORM_IDLE_COMMIT_MS)
            }
        );
        assert_eq!(r.stop(1, finish), Some(end));
        let last = match finish {
            Finish::Commit => r.on_committed(1, Ok(())),
            Finish::Abort => r.on_aborted(1, Ok(())),
        };
        assert_eq!((last, r.state()), (E::Idle, State::Stopped));
        assert_eq!(r.resume(2), None, "stopped for good");
    }
    let mut r = running(OnError::Stop);
    assert_eq!(r.stop(0, Finish::Commit), None, "a read is in flight");
    assert_eq!(r.on_read(0, Ok(ReadResult::Nothing)), E::Idle);
    assert_eq!(r.state(), State::Stopped);
}

#[test]
fn failed_steps_retry_fence_or_fail() {
    let mut r: Runner<R, O> = Runner::new(config(OnError::Stop));
    assert_eq!(r.start(0), E::InitProducer);
    assert_eq!(
        r.on_producer(0, Err(err(StepErrorKind::Retriable))),
        E::Backoff { until_ms: 100 }
    );
    assert_eq!(r.on_tick(100), E::InitProducer);
    assert_eq!(r.on_producer(100, Err(err(StepErrorKind::Fatal))), E::Idle);
    assert_eq!(
        (r.state(), r.status().last_error.as_ref().unwrap().kind),
        (State::Failed, "producer")
    );

    // Fenced during an append: stop without aborting (the newer incarnation owns the id).
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
    assert_eq!(r.on_appended(0, Err(err(StepErrorKind::Fenced))), E::Idle);
    assert_eq!(
        (r.state(), r.status().last_error.as_ref().unwrap().kind),
        (State::Stopped, "fenced")
    );

    // Fatal during AddPartitions: abort, then fail; resume starts over from InitProducerId.
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert_eq!(r.on_added(0, Err(err(StepErrorKind::Fatal))), E::Abort);
    assert_eq!(r.on_aborted(0, Err(err(StepErrorKind::Retriable))), E::Idle);
    assert_eq!((r.state(), r.status().aborts), (State::Failed, 0));
    assert_eq!(r.resume(1), Some(E::InitProducer));

    // A commit of unknown outcome: start over and learn the position from the group.
    let mut r = running(OnError::Stop);
    assert!(matches!(
        read_and_call(&mut r, 0, &[10], 11, vec![out(0)]),
        E::AddPartitions { .. }
    ));
    assert!(matches!(r.on_added(0, Ok(())), E::Append { .. }));
    assert_eq!(r.on_appended(100, Ok(())), E::Commit { position: 11 });
    assert_eq!(
        r.on_committed(100, Err(err(StepErrorKind::Retriable))),
        E::Backoff { until_ms: 200 }
    );
    assert_eq!(r.on_tick(200), E::InitProducer);
    assert_eq!(r.status().position, Some(10));

    // A read error backs off and reads again.
    let mut r = running(OnError::Stop);
    assert_eq!(
        r.on_read(0, Err(err(StepErrorKind::Retriable))),
        E::Backoff { until_ms: 100 }
    );
    assert_eq!(r.on_tick(100), E::Read { from: 10 });
}

#[test]
fn retention_past_the_position_is_counted() {
    let mut r: Runner<R, O> = Runner::new(config(OnError::Stop));
    let _ = r.start(0);
    let _ = r.on_producer(0, Ok(PRODUCER));
    let position = Position {
        committed: Some(4),
        log_start_offset: 7,
    };
    assert_eq!(r.on_position(0, Ok(position)), E::Read { from: 7 });
    assert_eq!(r.status().records_lost_to_retention, 3);
    let read = ReadResult::OutOfRange {
        log_start_offset: 9,
    };
    assert_eq!(r.on_read(0, Ok(read)), E::Read { from: 9 });
    assert_eq!(r.status().records_lost_to_retention, 5);
    assert_eq!(
        r.on_read(100, Ok(ReadResult::Nothing)),
        E::Commit { position: 9 }
    );
}

#[test]
fn config_from_a_spec() {
    let spec = crate::spec::TransformSpec {
        name: "t".into(),
        source: "s".into(),
        plugin: "p".into(),
        params: vec![],
        outputs: vec!["a".into(), "b".into()],
        dead_letter_topic: Some("d".into()),
        on_error: OnError::DeadLetter,
        partitioning: Partitioning::Key,
        commit_interval_ms: 250,
        from_offset: crate::spec::FromOffset::Earliest,
        start_offsets: vec![0, 42],
        paused: true,
        generation: 1,
        partitioner: None,
        partitioner_params: Vec::new(),
        principal: "User:a".into(),
        principal_host: None,
        source_topic_id: None,
        created_ms: 0,
    };
    let c = RunnerConfig::from_spec(&spec, 1, vec![1, 2, 3]);
    assert_eq!(
        (c.outputs, c.start_offset, c.paused, c.targets()),
        (2, Some(42), true, 3)
    );
    assert_eq!(
        RunnerConfig::from_spec(&spec, 2, vec![1, 2, 3]).start_offset,
        None
    );
}

#[test]
#[should_panic(expected = "on_appended answers the effect in progress")]
fn answering_another_effect_is_the_servers_bug() {
    let mut r = running(OnError::Stop);
    let _ = r.on_appended(0, Ok(()));
}

#[test]
#[should_panic(expected = "a partition count per output")]
fn partition_counts_match_the_targets() {
    let mut r = running(OnError::Stop);
    r.set_partition_counts(&[1]);
}

#[test]
fn an_open_transaction_holding_the_source_is_in_the_status_until_it_ends() {
    let mut r = running(OnError::Stop);
    let held = |producer_id, first_offset| ReadResult::Held {
        producer_id,
        first_offset,
    };
    // Waits as for nothing to read, and says on whom, since the first such read.
    assert_eq!(r.on_read(5, Ok(held(7, 10))), E::Wait { until_ms: None });
    let since = Held {
        producer_id: 7,
        first_offset: 10,
        since_ms: 5,
    };
    assert_eq!(r.status().held, Some(since));
    assert_eq!(r.on_tick(500), E::Read { from: 10 });
    assert_eq!(r.on_read(500, Ok(held(7, 10))), E::Wait { until_ms: None });
    assert_eq!(
        r.status().held,
        Some(since),
        "the same transaction: the wait goes on"
    );
    // Another transaction now holds the source: a new wait.
    assert_eq!(r.on_tick(900), E::Read { from: 10 });
    assert_eq!(r.on_read(900, Ok(held(8, 10))), E::Wait { until_ms: None });
    assert_eq!(
        r.status().held.map(|h| (h.producer_id, h.since_ms)),
        Some((8, 900))
    );
    // A failed read says nothing new; records (the marker came) end the wait.
    assert_eq!(r.on_tick(950), E::Read { from: 10 });
    let failed = StepError {
        kind: StepErrorKind::Retriable,
        message: "offline".into(),
    };
    assert!(matches!(r.on_read(950, Err(failed)), E::Backoff { .. }));
    assert!(r.status().held.is_some());
    assert_eq!(r.on_tick(10_000), E::Read { from: 10 });
    let read = ReadResult::Records {
        records: vec![],
        next_offset: 12,
    };
    assert_eq!(r.on_read(10_000, Ok(read)), E::Read { from: 12 });
    assert_eq!(r.status().held, None);
    // Paused, it waits on no one.
    // (the move past the marker is committed before the pause)
    let effect = r.on_read(10_001, Ok(held(9, 12)));
    assert!(matches!(effect, E::Wait { .. }), "{effect:?}");
    assert!(r.status().held.is_some());
    assert_eq!(r.pause(10_002), Some(E::Commit { position: 12 }));
    assert_eq!(r.on_committed(10_003, Ok(())), E::Idle);
    assert_eq!(r.status().held, None);
}
