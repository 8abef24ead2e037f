//! The replica state machine step by step, without a network: a leader's acks and high
//! watermark against `min.insync.replicas` and fsync, ISR shrink and expand proposals, a
//! follower's truncation on a diverging epoch, its fetch waiting for its fsync, and a
//! restarted broker that stays offline until the image holds its registration.

use super::*;

const TOPIC: TopicId = TopicId([1; 16]);

fn config(node_id: i32, min_isr: usize) -> ReplicaConfig {
    ReplicaConfig {
        min_insync_replicas: min_isr,
        replica_lag_time_max_ms: 1_000,
        ..ReplicaConfig::new(node_id)
    }
}

fn state(leader: i32, leader_epoch: i32, isr: &[i32]) -> PartitionState {
    PartitionState {
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
        leader,
        leader_epoch,
        partition_epoch: leader_epoch,
    }
}

fn metadata(p: PartitionState) -> Event {
    Event::Metadata {
        broker_epoch: Some(10),
        partition: p,
    }
}

fn produce(request_id: u64, acks: Acks) -> Event {
    Event::Produce(ProduceRequest {
        request_id,
        acks,
        records: 2,
        producer_id: -1,
        base_sequence: -1,
        payload: request_id,
        deadline_ms: 10_000,
    })
}

fn fetch(replica_id: i32, fetch_offset: i64, last_fetched_epoch: Option<i32>) -> Event {
    Event::Fetch(FetchRequest {
        replica_id,
        replica_epoch: 20,
        leader_epoch: 1,
        fetch_offset,
        last_fetched_epoch,
        correlation_id: 1,
    })
}

fn answers(effects: &[Effect]) -> Vec<(u64, Result<i64, ErrorCode>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::ProduceAnswer { request_id, result } => {
                Some((*request_id, result.map(|a| a.base_offset)))
            }
            _ => None,
        })
        .collect()
}

fn fsync_token(effects: &[Effect]) -> Option<u64> {
    effects.iter().find_map(|e| match e {
        Effect::Fsync { token, .. } => Some(*token),
        _ => None,
    })
}

/// Leader 1 of {1, 2, 3} at epoch 1 with min ISR 2.
fn leader() -> Replica {
    let mut r = Replica::new(config(1, 2), TOPIC, 0, ReplicaLog::new());
    let effects = r.handle(0, metadata(state(1, 1, &[1, 2, 3])));
    assert!(effects.contains(&Effect::BeginEpoch {
        epoch: 1,
        start_offset: 0
    }));
    r
}

#[test]
fn acks_all_waits_for_every_isr_member_and_the_leaders_fsync() {
    let mut r = leader();
    let effects = r.handle(1, produce(7, Acks::All));
    let token = fsync_token(&effects).expect("the append is fsynced");
    assert!(answers(&effects).is_empty());
    r.handle(2, fetch(2, 2, Some(1)));
    let effects = r.handle(3, fetch(3, 2, Some(1)));
    assert!(
        answers(&effects).is_empty(),
        "the leader's own fsync is not done"
    );
    assert_eq!(r.high_watermark(), 0);
    let effects = r.handle(4, Event::Fsynced { token });
    assert_eq!(answers(&effects), vec![(7, Ok(0))]);
    assert_eq!(r.high_watermark(), 2);
}

#[test]
fn acks_one_answers_after_the_append() {
    let mut r = leader();
    let effects = r.handle(1, produce(7, Acks::Leader));
    assert_eq!(answers(&effects), vec![(7, Ok(0))]);
    assert_eq!(r.high_watermark(), 0);
}

#[test]
fn a_small_isr_refuses_acks_all_and_holds_the_high_watermark() {
    let mut r = leader();
    r.handle(
        1,
        metadata(PartitionState {
            partition_epoch: 2,
            ..state(1, 1, &[1])
        }),
    );
    let effects = r.handle(2, produce(7, Acks::All));
    assert_eq!(
        answers(&effects),
        vec![(7, Err(ErrorCode::NotEnoughReplicas))]
    );
    let effects = r.handle(3, produce(8, Acks::Leader));
    let token = fsync_token(&effects).unwrap();
    r.handle(4, Event::Fsynced { token });
    assert_eq!(
        r.high_watermark(),
        0,
        "under min.insync.replicas it stands still"
    );
}

#[test]
fn a_lagging_follower_is_proposed_out_and_a_caught_up_one_back_in() {
    let mut r = leader();
    r.handle(500, fetch(2, 0, None));
    let effects = r.handle(1_200, Event::Tick);
    let Some(Effect::SendAlterPartition(req)) = effects.first() else {
        panic!("no shrink: {effects:?}");
    };
    let isr: Vec<i32> = req.new_isr.iter().map(|m| m.broker_id).collect();
    assert_eq!(isr, vec![1, 2], "3 never fetched within the lag time");
    let after = PartitionState {
        partition_epoch: 2,
        ..state(1, 1, &[1, 2])
    };
    r.handle(1_201, Event::AlterPartitionResponse(Ok(after)));
    assert_eq!(r.isr(), &[1, 2]);
    let effects = r.handle(1_300, fetch(3, 0, None));
    let proposed = effects.iter().find_map(|e| match e {
        Effect::SendAlterPartition(req) => Some(req.new_isr.clone()),
        _ => None,
    });
    let proposed = proposed.expect("3 caught up to the high watermark");
    assert_eq!(
        proposed.last().map(|m| (m.broker_id, m.broker_epoch)),
        Some((3, 20))
    );
}

#[test]
fn a_stale_or_newer_epoch_fetch_is_refused() {
    let mut r = leader();
    for (epoch, code) in [
        (0, ErrorCode::FencedLeaderEpoch),
        (2, ErrorCode::UnknownLeaderEpoch),
    ] {
        let effects = r.handle(
            1,
            Event::Fetch(FetchRequest {
                replica_id: 2,
                replica_epoch: 20,
                leader_epoch: epoch,
                fetch_offset: 0,
                last_fetched_epoch: None,
                correlation_id: 1,
            }),
        );
        let Some(Effect::SendFetchResponse { response, .. }) = effects.first() else {
            panic!("{effects:?}");
        };
        assert_eq!(response.result, Err(code));
    }
}

fn batch(base: i64, records: i64, epoch: i32) -> Batch {
    Batch {
        base_offset: base,
        last_offset: base + records - 1,
        leader_epoch: epoch,
        producer_id: -1,
        base_sequence: -1,
        payload: (base as u64) << 8 | epoch as u64,
    }
}

#[test]
fn a_follower_truncates_to_the_leaders_end_of_the_diverging_epoch() {
    // The follower has epoch 1 up to 5 and epoch 2 (never committed) up to 8; the new
    // leader (epoch 3) has epoch 1 only up to 4.
    let log = ReplicaLog::recover(&[batch(0, 4, 1), batch(4, 1, 1), batch(5, 3, 2)]).unwrap();
    let mut r = Replica::new(config(2, 2), TOPIC, 0, log);
    let effects = r.handle(0, metadata(state(1, 3, &[1, 2, 3])));
    let Some(Effect::SendFetch { request, .. }) = effects.first() else {
        panic!("{effects:?}");
    };
    assert_eq!(
        (request.fetch_offset, request.last_fetched_epoch),
        (8, Some(2))
    );
    let answer = |correlation_id, epoch, end_offset| {
        Event::FetchResponse(FetchResponse {
            leader_id: 1,
            leader_epoch: 3,
            correlation_id,
            result: Ok(FetchData {
                high_watermark: 4,
                diverging_epoch: Some(EpochEndOffset { epoch, end_offset }),
                batches: vec![],
            }),
        })
    };
    // The leader never had epoch 2: its floor is 1, which ends at 4.
    let effects = r.handle(1, answer(request.correlation_id, 1, 4));
    assert_eq!(effects.first(), Some(&Effect::Truncate { offset: 4 }));
    assert_eq!(r.log().log_end_offset(), 4);
    assert_eq!(r.log().latest_epoch(), Some(1));
}

#[test]
fn a_follower_reports_an_offset_only_once_fsynced() {
    let mut r = Replica::new(config(2, 2), TOPIC, 0, ReplicaLog::new());
    let effects = r.handle(0, metadata(state(1, 1, &[1, 2, 3])));
    let Some(Effect::SendFetch { request, .. }) = effects.first() else {
        panic!("{effects:?}");
    };
    let effects = r.handle(
        1,
        Event::FetchResponse(FetchResponse {
            leader_id: 1,
            leader_epoch: 1,
            correlation_id: request.correlation_id,
            result: Ok(FetchData {
                high_watermark: 0,
                diverging_epoch: None,
                batches: vec![batch(0, 2, 1)],
            }),
        }),
    );
    let token = fsync_token(&effects).unwrap();
    assert!(
        !effects
            .iter()
            .any(|e| matches!(e, Effect::SendFetch { .. })),
        "no fetch (offset 2) before the fsync: {effects:?}"
    );
    let effects = r.handle(2, Event::Fsynced { token });
    assert!(matches!(
        effects.first(),
        Some(Effect::SendFetch { request, .. }) if request.fetch_offset == 2
    ));
}

#[test]
fn a_restarted_broker_stays_offline_until_the_image_holds_its_registration() {
    let log = ReplicaLog::recover(&[batch(0, 2, 1)]).unwrap();
    let mut r = Replica::new(config(1, 2), TOPIC, 0, log);
    let effects = r.handle(
        0,
        Event::Metadata {
            broker_epoch: None,
            partition: state(1, 1, &[1, 2, 3]),
        },
    );
    assert!(effects.is_empty());
    assert_eq!(r.role_name(), "offline");
    let effects = r.handle(1, produce(7, Acks::Leader));
    assert_eq!(
        answers(&effects),
        vec![(7, Err(ErrorCode::NotLeaderOrFollower))]
    );
}

#[test]
fn a_server_replica_keeps_the_tail_and_answers_what_its_storage_appended() {
    // The server's view of a real log: 100 records, epoch 0 from offset 0.
    let epochs = [crate::log::EpochEntry {
        epoch: 0,
        start_offset: 0,
    }];
    let log = ReplicaLog::tail(100, &epochs, Some(0));
    let mut r = Replica::new(config(1, 2), TOPIC, 0, log);
    let effects = r.handle(0, metadata(state(1, 1, &[1, 2, 3])));
    assert!(effects.contains(&Effect::BeginEpoch {
        epoch: 1,
        start_offset: 100
    }));
    assert_eq!(r.check_produce(Acks::All), Ok(()));
    // The storage log appended offsets 100..=101; a duplicate of it answers the same.
    let appended = |request_id, duplicate| {
        Event::Appended(Appended {
            request_id,
            acks: Acks::All,
            batch: batch(100, 2, 1),
            duplicate,
            deadline_ms: 10_000,
        })
    };
    let effects = r.handle(1, appended(7, false));
    assert!(answers(&effects).is_empty(), "acks=all waits");
    assert_eq!(r.log().log_end_offset(), 102);
    let token = fsync_token(&effects).expect("the leader fsyncs its share");
    r.handle(2, Event::Fsynced { token });
    assert!(answers(&r.handle(3, appended(8, true))).is_empty());
    r.handle(4, fetch(2, 102, Some(1)));
    let effects = r.handle(5, fetch(3, 102, Some(1)));
    assert_eq!(answers(&effects), vec![(7, Ok(100)), (8, Ok(100))]);
    assert_eq!(r.high_watermark(), 102);
    // A follower fetching from below the tail kept is answered by the storage log (the
    // server reads the bytes): here only the high watermark and no divergence.
    let effects = r.handle(6, fetch(2, 50, Some(0)));
    let response = effects.iter().find_map(|e| match e {
        Effect::SendFetchResponse { response, .. } => Some(response.clone()),
        _ => None,
    });
    let data = response.unwrap().result.unwrap();
    assert_eq!(data.diverging_epoch, None);
    // Not the leader: refused before the append.
    let mut f = Replica::new(config(2, 2), TOPIC, 0, ReplicaLog::tail(0, &[], None));
    f.handle(0, metadata(state(1, 1, &[1, 2, 3])));
    assert_eq!(
        f.check_produce(Acks::Leader),
        Err(ErrorCode::NotLeaderOrFollower)
    );
}

#[test]
fn the_tail_log_knows_its_end_and_last_epoch_below_the_batches_kept() {
    let mut log = ReplicaLog::tail(
        10,
        &[crate::log::EpochEntry {
            epoch: 2,
            start_offset: 0,
        }],
        Some(2),
    );
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(log.last_batch_epoch(), Some(2));
    let kept = crate::limits::TAIL_BATCHES_KEPT as i64;
    for i in 0..kept + 10 {
        log.append(batch(10 + i, 1, 3)).unwrap();
    }
    assert_eq!(log.batches().len() as i64, kept);
    assert_eq!(log.log_end_offset(), 20 + kept);
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 10)));
    // Truncating below every batch kept, to where epoch 3 began: the end and epoch follow.
    assert_eq!(log.truncate_to(10), 10);
    assert_eq!(log.last_batch_epoch(), Some(2));
    assert_eq!(log.end_offset_for_epoch(2), Some((2, 10)));
}

/// Found by the three-broker e2e test: a follower whose log ends with an epoch that holds
/// no records (begun at its log end when it opened the log, or a leadership that appended
/// nothing) must take its leader's batches of an older epoch at that end (Kafka's `assign`
/// drops the empty newer epoch); refusing them left the follower fetching the same offset
/// forever and out of the ISR.
#[test]
fn an_empty_newer_epoch_gives_way_to_the_leaders_older_batches() {
    let epochs = [
        crate::log::EpochEntry {
            epoch: 0,
            start_offset: 0,
        },
        crate::log::EpochEntry {
            epoch: 1,
            start_offset: 6,
        },
    ];
    let mut f = Replica::new(
        config(3, 1),
        TOPIC,
        0,
        ReplicaLog::tail(6, &epochs, Some(0)),
    );
    let effects = f.handle(0, metadata(state(2, 0, &[2, 3])));
    let request = effects
        .iter()
        .find_map(|e| match e {
            Effect::SendFetch { request, .. } => Some(*request),
            _ => None,
        })
        .expect("a fetch");
    assert_eq!(request.fetch_offset, 6);
    assert_eq!(request.last_fetched_epoch, Some(0));
    let effects = f.handle(
        1,
        Event::FetchResponse(FetchResponse {
            leader_id: 2,
            leader_epoch: 0,
            correlation_id: request.correlation_id,
            result: Ok(FetchData {
                high_watermark: 8,
                diverging_epoch: None,
                batches: vec![batch(6, 2, 0)],
            }),
        }),
    );
    assert!(
        effects.contains(&Effect::Append(vec![batch(6, 2, 0)])),
        "{effects:?}"
    );
    assert_eq!(f.log().log_end_offset(), 8);
    assert_eq!(f.log().latest_epoch(), Some(0));
    // An older epoch after records of a newer one is still refused.
    let mut log = ReplicaLog::new();
    log.append(batch(0, 1, 2)).unwrap();
    assert!(log.append(batch(1, 1, 1)).is_err());
}
