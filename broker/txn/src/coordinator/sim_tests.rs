//! A randomised simulation: sequences of requests from two producer instances per
//! transactional id, transactional produces verified with the coordinator (KIP-890) and
//! appended later, timer ticks, marker completion, failed appends and restarts. After every
//! step it checks that replaying the confirmed log gives exactly the in-memory state, that
//! no producer id is ever handed to two owners, and that no partition holds a hanging
//! transaction: every transaction open in a partition is one the coordinator will end (it
//! still lists the partition, or owes its markers).
//!
//! The partitions are a model of the storage side (`sluice_storage::txn_guard`): a produce
//! is verified (the coordinator says the partition is in the transaction) and appended in a
//! later step, and a marker drops the guard of a verification in flight, so a transaction
//! that ended in between is not reopened. `a_late_append_without_the_guard_hangs` shows the
//! oracle catching the bug the guard prevents.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::api::{EndOutcome, InitOutcome, TxnProtocol};
use crate::error::ErrorCode;
use crate::records::{PendingOffset, TopicPartition};

const IDS: [&str; 3] = ["a", "b", "c"];

/// Short expiry so ids expire within a run.
fn config() -> TxnConfig {
    TxnConfig {
        transactional_id_expiration_ms: 300_000,
        remove_expired_transactional_id_cleanup_interval_ms: 60_000,
        ..TxnConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Init {
        id: usize,
        who: usize,
        kip360: bool,
    },
    Idempotent,
    Add {
        id: usize,
        who: usize,
        partition: i32,
    },
    AddOffsets {
        id: usize,
        who: usize,
    },
    Commit {
        id: usize,
        who: usize,
        at: i64,
        protocol: TxnProtocol,
    },
    End {
        id: usize,
        who: usize,
        commit: bool,
        protocol: TxnProtocol,
    },
    Markers {
        pick: usize,
    },
    /// A transactional produce to `partition` asks the coordinator: verify only (V1), or
    /// add the partition (V2, Produce v12+).
    Verify {
        id: usize,
        who: usize,
        partition: i32,
        protocol: TxnProtocol,
    },
    /// A verified produce reaches its partition.
    Append {
        pick: usize,
    },
    Tick {
        advance_ms: i64,
    },
    Restart,
}

fn protocol() -> impl Strategy<Value = TxnProtocol> {
    prop_oneof![Just(TxnProtocol::V1), Just(TxnProtocol::V2)]
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    let who = 0..2usize;
    prop_oneof![
        (id.clone(), who.clone(), any::<bool>()).prop_map(|(id, who, kip360)| Op::Init {
            id,
            who,
            kip360
        }),
        Just(Op::Idempotent),
        (id.clone(), who.clone(), 0..4i32).prop_map(|(id, who, partition)| Op::Add {
            id,
            who,
            partition
        }),
        (id.clone(), who.clone()).prop_map(|(id, who)| Op::AddOffsets { id, who }),
        (id.clone(), who.clone(), 0..100i64, protocol()).prop_map(|(id, who, at, protocol)| {
            Op::Commit {
                id,
                who,
                at,
                protocol,
            }
        }),
        (id, who, any::<bool>(), protocol()).prop_map(|(id, who, commit, protocol)| Op::End {
            id,
            who,
            commit,
            protocol
        }),
        any::<usize>().prop_map(|pick| Op::Markers { pick }),
        (0..IDS.len(), 0..2usize, 0..4i32, protocol()).prop_map(
            |(id, who, partition, protocol)| Op::Verify {
                id,
                who,
                partition,
                protocol,
            }
        ),
        any::<usize>().prop_map(|pick| Op::Append { pick }),
        (0..120_000i64).prop_map(|advance_ms| Op::Tick { advance_ms }),
        Just(Op::Restart),
    ]
}

struct Sim {
    c: Coordinator,
    log: Vec<TxnRecord>,
    now_ms: i64,
    /// What each producer instance last got from InitProducerId, by (id, who).
    producers: BTreeMap<(usize, usize), (ProducerId, i16)>,
    /// Who each producer id was handed to (`None` = an idempotent producer).
    owners: BTreeMap<ProducerId, Option<usize>>,
    markers: Vec<WriteMarkers>,
    /// Fail every n-th append.
    fail_every: usize,
    appends: usize,
    /// The partitions of topic "t": per partition, the producers with a transaction open
    /// there and their epoch.
    open: BTreeMap<i32, BTreeMap<ProducerId, i16>>,
    /// Verified produces not yet appended.
    in_flight: Vec<Claim>,
    /// The storage rule under test: a marker drops the guards of its producer's
    /// verifications in flight in that partition.
    markers_drop_guards: bool,
    /// The newest epoch each producer id was persisted with: it never goes back.
    epochs: BTreeMap<ProducerId, i16>,
}

/// A verified transactional produce on its way to its partition.
#[derive(Debug, Clone)]
struct Claim {
    pid: ProducerId,
    epoch: i16,
    partition: i32,
    /// Still valid: no marker of the producer reached the partition since the verification.
    guard: bool,
}

impl Sim {
    fn new(fail_every: usize, markers_drop_guards: bool) -> Self {
        Sim {
            c: Coordinator::new(config()),
            log: Vec::new(),
            now_ms: 1_000,
            producers: BTreeMap::new(),
            owners: BTreeMap::new(),
            markers: Vec::new(),
            fail_every,
            appends: 0,
            open: BTreeMap::new(),
            in_flight: Vec::new(),
            markers_drop_guards,
            epochs: BTreeMap::new(),
        }
    }

    /// The coordinator confirms the partition is in the transaction (V1), or adds it
    /// (V2): the produce goes on.
    fn verify(&mut self, id: usize, who: usize, partition: i32, protocol: TxnProtocol) {
        let (pid, epoch) = self.producer(id, who);
        let tp = TopicPartition {
            topic: "t".into(),
            partition,
        };
        let verified = match protocol {
            TxnProtocol::V1 => self
                .c
                .verify_partitions(IDS[id], pid, epoch, &[tp])
                .is_ok_and(|v| v[0].error == ErrorCode::None),
            TxnProtocol::V2 => {
                let (now, tps) = (self.now_ms, [tp]);
                let added = self.c.add_partitions(now, IDS[id], pid, epoch, &tps);
                added.is_ok_and(|records| self.persist(&records))
            }
        };
        if verified {
            self.in_flight.push(Claim {
                pid,
                epoch,
                partition,
                guard: true,
            });
        }
    }

    /// The partition's check at the append: an open transaction of the producer at that
    /// epoch takes it, else its guard must still hold.
    fn append(&mut self, pick: usize) {
        if self.in_flight.is_empty() {
            return;
        }
        let claim = self.in_flight.remove(pick % self.in_flight.len());
        let open = self.open.entry(claim.partition).or_default();
        let continues = open.get(&claim.pid) == Some(&claim.epoch);
        if continues || claim.guard {
            open.insert(claim.pid, claim.epoch);
        }
    }

    /// A transaction's markers reach its partitions: its transactions there end, and the
    /// guards of its producer's verifications in flight there go.
    fn write_markers(&mut self, m: &WriteMarkers) {
        for tp in &m.partitions {
            if let Some(open) = self.open.get_mut(&tp.partition) {
                open.remove(&m.producer_id);
            }
            if self.markers_drop_guards {
                for claim in &mut self.in_flight {
                    if claim.pid == m.producer_id && claim.partition == tp.partition {
                        claim.guard = false;
                    }
                }
            }
        }
    }

    /// No hanging transaction: each transaction open in a partition belongs to one the
    /// coordinator lists the partition in, or whose markers are owed.
    fn check_no_hanging(&self) -> Result<(), String> {
        let owed: BTreeSet<(ProducerId, i32)> = self
            .markers
            .iter()
            .flat_map(|m| m.partitions.iter().map(|tp| (m.producer_id, tp.partition)))
            .collect();
        for (&partition, open) in &self.open {
            for &pid in open.keys() {
                let tp = TopicPartition {
                    topic: "t".into(),
                    partition,
                };
                let listed = self
                    .c
                    .txns
                    .values()
                    .any(|m| m.producer_id == pid && m.partitions.binary_search(&tp).is_ok());
                if !listed && !owed.contains(&(pid, partition)) {
                    return Err(format!(
                        "{pid:?}'s transaction in t-{partition} hangs: no coordinator will end it"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Sim {
    /// Appends unless this append is chosen to fail; true when persisted.
    fn persist(&mut self, records: &[TxnRecord]) -> bool {
        if records.is_empty() {
            return true;
        }
        self.appends += 1;
        if self.appends.is_multiple_of(self.fail_every) {
            self.c.persist_failed(records);
            return false;
        }
        for record in records {
            if let TxnRecord::Metadata(m) = record {
                let newest = self.epochs.entry(m.producer_id).or_insert(m.producer_epoch);
                assert!(
                    m.producer_epoch >= *newest,
                    "{:?}'s epoch went back from {newest} to {}",
                    m.producer_id,
                    m.producer_epoch
                );
                *newest = m.producer_epoch;
            }
        }
        self.log.extend_from_slice(records);
        self.c.apply(records);
        true
    }

    fn owned(&mut self, pid: ProducerId, owner: Option<usize>) {
        let previous = *self.owners.entry(pid).or_insert(owner);
        assert_eq!(previous, owner, "{pid:?} handed to two owners");
    }

    fn producer(&self, id: usize, who: usize) -> (ProducerId, i16) {
        self.producers
            .get(&(id, who))
            .copied()
            .unwrap_or((ProducerId(0), 0))
    }

    fn init(&mut self, id: usize, who: usize, kip360: bool) {
        let expected = kip360.then(|| self.producer(id, who));
        let out = self
            .c
            .init_producer_id(self.now_ms, Some(IDS[id]), 60_000, expected);
        match out {
            InitOutcome::Done {
                producer_id,
                producer_epoch,
                records,
            } => {
                if self.persist(&records) {
                    self.owned(producer_id, Some(id));
                    self.producers
                        .insert((id, who), (producer_id, producer_epoch));
                }
            }
            InitOutcome::AbortFirst { records, markers } => {
                if self.persist(&records) {
                    self.markers.push(markers);
                }
            }
            InitOutcome::Error(_) => {}
        }
    }

    fn idempotent(&mut self) {
        if let InitOutcome::Done {
            producer_id,
            records,
            ..
        } = self.c.init_producer_id(self.now_ms, None, 0, None)
            && self.persist(&records)
        {
            self.owned(producer_id, None);
        }
    }

    /// EndTxn. A V2 producer takes the pair the answer carries: the bumped epoch once the
    /// decision is durable (unless the id moves to a new producer id, which the server
    /// answers only after the markers: the client retries and gets `AlreadyDone`).
    fn end(&mut self, id: usize, who: usize, commit: bool, protocol: TxnProtocol) {
        let (pid, epoch) = self.producer(id, who);
        match self
            .c
            .end_txn(self.now_ms, IDS[id], pid, epoch, commit, protocol)
        {
            EndOutcome::Prepared { records, markers } if self.persist(&records) => {
                if protocol == TxnProtocol::V2 && markers.producer_epoch < i16::MAX {
                    self.producers
                        .insert((id, who), (markers.producer_id, markers.producer_epoch));
                }
                self.markers.push(markers);
            }
            EndOutcome::AlreadyDone {
                producer_id,
                producer_epoch,
            } if protocol == TxnProtocol::V2 => {
                self.owned(producer_id, Some(id));
                self.producers
                    .insert((id, who), (producer_id, producer_epoch));
            }
            _ => {}
        }
    }

    fn step(&mut self, op: Op) {
        let now = self.now_ms;
        let result = match op {
            Op::Init { id, who, kip360 } => {
                self.init(id, who, kip360);
                Ok(Vec::new())
            }
            Op::Idempotent => {
                self.idempotent();
                Ok(Vec::new())
            }
            Op::Add { id, who, partition } => {
                let (pid, epoch) = self.producer(id, who);
                let tp = TopicPartition {
                    topic: "t".into(),
                    partition,
                };
                self.c.add_partitions(now, IDS[id], pid, epoch, &[tp])
            }
            Op::AddOffsets { id, who } => {
                let (pid, epoch) = self.producer(id, who);
                self.c.add_offsets(now, IDS[id], pid, epoch, "g")
            }
            Op::Commit {
                id,
                who,
                at,
                protocol,
            } => self.commit_offsets(id, who, at, protocol),
            Op::End {
                id,
                who,
                commit,
                protocol,
            } => {
                self.end(id, who, commit, protocol);
                Ok(Vec::new())
            }
            Op::Markers { pick } => self.markers_written(pick),
            Op::Verify {
                id,
                who,
                partition,
                protocol,
            } => {
                self.verify(id, who, partition, protocol);
                Ok(Vec::new())
            }
            Op::Append { pick } => {
                self.append(pick);
                Ok(Vec::new())
            }
            Op::Tick { advance_ms } => {
                self.now_ms += advance_ms;
                let tick = self.c.on_tick(self.now_ms);
                if self.persist(&tick.records) {
                    self.markers.extend(tick.markers);
                }
                Ok(Vec::new())
            }
            Op::Restart => {
                self.restart();
                Ok(Vec::new())
            }
        };
        if let Ok(records) = result {
            self.persist(&records);
        }
        self.check_replay();
        if let Err(hanging) = self.check_no_hanging() {
            panic!("{hanging}");
        }
    }

    fn commit_offsets(
        &mut self,
        id: usize,
        who: usize,
        at: i64,
        protocol: TxnProtocol,
    ) -> Result<Vec<TxnRecord>, ErrorCode> {
        let (pid, epoch) = self.producer(id, who);
        let o = PendingOffset {
            tp: TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            committed_offset: at,
            leader_epoch: 0,
            metadata: None,
        };
        let now = self.now_ms;
        self.c
            .txn_offset_commit(now, IDS[id], pid, epoch, "g", &[o], protocol)
    }

    fn markers_written(&mut self, pick: usize) -> Result<Vec<TxnRecord>, ErrorCode> {
        if self.markers.is_empty() {
            return Ok(Vec::new());
        }
        let m = self.markers.remove(pick % self.markers.len());
        self.write_markers(&m);
        let records = self.c.markers_written(self.now_ms, &m.transactional_id);
        if !self.persist(&records) {
            self.markers.push(m);
        }
        Ok(Vec::new())
    }

    fn restart(&mut self) {
        let mut c = Coordinator::new(config());
        c.load(self.log.clone());
        self.markers = c.recovery_effects();
        self.c = c;
        // Produces in flight die with the broker; the partitions' logs stay.
        self.in_flight.clear();
    }

    fn check_replay(&self) {
        let mut replayed = Coordinator::new(config());
        replayed.load(self.log.clone());
        assert_eq!(replayed.txns, self.c.txns, "replay differs from memory");
        assert!(
            self.c.pending.is_empty(),
            "a record batch was left in flight"
        );
        for m in self.c.txns.values() {
            assert!(m.partitions.windows(2).all(|w| w[0] < w[1]));
            if m.state.is_idle() {
                assert!(m.partitions.is_empty() && m.pending_offsets.is_empty());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn replay_matches_memory_and_producer_ids_are_unique(
        ops in proptest::collection::vec(op(), 1..80),
        fail_every in 2..12usize,
    ) {
        let mut sim = Sim::new(fail_every, true);
        for op in ops {
            sim.step(op);
        }
    }
}

/// The oracle catches the bug KIP-890's guard prevents: a produce verified before its
/// transaction committed, appended after the markers, opens a transaction no coordinator
/// will end.
#[test]
fn a_late_append_without_the_guard_hangs() {
    for markers_drop_guards in [true, false] {
        let mut sim = Sim::new(usize::MAX, markers_drop_guards);
        sim.step(Op::Init {
            id: 0,
            who: 0,
            kip360: false,
        });
        sim.step(Op::Add {
            id: 0,
            who: 0,
            partition: 1,
        });
        sim.step(Op::Verify {
            id: 0,
            who: 0,
            partition: 1,
            protocol: TxnProtocol::V1,
        });
        sim.step(Op::End {
            id: 0,
            who: 0,
            commit: true,
            protocol: TxnProtocol::V1,
        });
        sim.step(Op::Markers { pick: 0 });
        sim.append(0);
        let hanging = sim.check_no_hanging();
        assert_eq!(hanging.is_err(), !markers_drop_guards, "{hanging:?}");
    }
}
