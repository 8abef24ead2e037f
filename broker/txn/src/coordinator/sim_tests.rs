//! A randomised simulation: sequences of requests from two producer instances per
//! transactional id, timer ticks, marker completion, failed appends and restarts. After
//! every step it checks that replaying the confirmed log gives exactly the in-memory state,
//! and that no producer id is ever handed to two owners.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::api::{EndOutcome, InitOutcome};
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
    },
    End {
        id: usize,
        who: usize,
        commit: bool,
    },
    Markers {
        pick: usize,
    },
    Tick {
        advance_ms: i64,
    },
    Restart,
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
        (id.clone(), who.clone(), 0..100i64).prop_map(|(id, who, at)| Op::Commit { id, who, at }),
        (id, who, any::<bool>()).prop_map(|(id, who, commit)| Op::End { id, who, commit }),
        any::<usize>().prop_map(|pick| Op::Markers { pick }),
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

    fn end(&mut self, id: usize, who: usize, commit: bool) {
        let (pid, epoch) = self.producer(id, who);
        if let EndOutcome::Prepared { records, markers } =
            self.c.end_txn(self.now_ms, IDS[id], pid, epoch, commit)
            && self.persist(&records)
        {
            self.markers.push(markers);
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
            Op::Commit { id, who, at } => {
                let (pid, epoch) = self.producer(id, who);
                let tp = TopicPartition {
                    topic: "t".into(),
                    partition: 0,
                };
                let o = PendingOffset {
                    tp,
                    committed_offset: at,
                    leader_epoch: 0,
                    metadata: None,
                };
                self.c
                    .txn_offset_commit(now, IDS[id], pid, epoch, "g", &[o])
            }
            Op::End { id, who, commit } => {
                self.end(id, who, commit);
                Ok(Vec::new())
            }
            Op::Markers { pick } => self.markers_written(pick),
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
    }

    fn markers_written(&mut self, pick: usize) -> Result<Vec<TxnRecord>, ErrorCode> {
        if self.markers.is_empty() {
            return Ok(Vec::new());
        }
        let m = self.markers.remove(pick % self.markers.len());
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
        let mut sim = Sim {
            c: Coordinator::new(config()),
            log: Vec::new(),
            now_ms: 1_000,
            producers: BTreeMap::new(),
            owners: BTreeMap::new(),
            markers: Vec::new(),
            fail_every,
            appends: 0,
        };
        for op in ops {
            sim.step(op);
        }
    }
}
