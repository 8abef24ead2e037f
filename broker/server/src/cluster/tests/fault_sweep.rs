//! Fault injection at every write and sync of the metadata log store, over `FaultyFs`, in
//! the style of the storage crate's `fault_sweep.rs`.
//!
//! The scenario is what openraft asks of the store: open, appends of one and of several
//! entries, votes, committed log ids, a `truncate_after` of a conflicting suffix and the
//! appends that replace it, a purge inside the log, and a purge past its end (a follower that
//! installed a snapshot) followed by an append. A run without faults counts its writes and
//! syncs; then each one fails in turn (a torn write, a failed fsync, one that loses its dirty
//! pages), the scenario stops at the first error (openraft stops a Raft instance on any
//! storage error), and the filesystem is crashed three ways (durable bytes only, all
//! written, all written with the last write torn) and reopened. The reopened store must be
//! the state after the last call that returned `Ok`, or the state after the failed call, or
//! (when that was an append) the last state plus a prefix of the failed append's entries:
//! never a lost vote, committed id, entry or purge that was acknowledged, never a hole.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use openraft::RaftLogReader;
use openraft::entry::RaftEntry;
use openraft::impls::leader_id_adv::LeaderId;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use sluice_storage::io::{CrashMode, FaultyFs, WriteFault};

use crate::cluster::{Entry, LogId, Membership, MetaLogStore, MetaTypes, MetadataPayload, Vote};

const DIR: &str = "/data/__cluster_metadata";
const MODES: [CrashMode; 3] = [
    CrashMode::DurableOnly,
    CrashMode::AllWritten,
    CrashMode::TornLastWrite,
];

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(LeaderId { term, node_id: 1 }, index)
}

fn normal(term: u64, index: u64) -> Entry {
    let payload = MetadataPayload::new(format!("t{term} i{index}").into_bytes()).unwrap();
    Entry::new_normal(log_id(term, index), payload)
}

/// One call openraft makes.
#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Entry>),
    Vote(Vote),
    Committed(LogId),
    TruncateAfter(LogId),
    Purge(LogId),
}

fn ops() -> Vec<Op> {
    let membership = Membership::new_with_defaults(vec![BTreeSet::from([1, 2, 3])], []);
    vec![
        Op::Vote(Vote::new(1, 1)),
        Op::Append(vec![
            Entry::new_blank(log_id(1, 0)),
            Entry::new_membership(log_id(1, 1), membership),
            normal(1, 2),
        ]),
        Op::Append(vec![normal(1, 3)]),
        Op::Committed(log_id(1, 3)),
        Op::Append((4..9).map(|i| normal(1, i)).collect()),
        Op::Vote(Vote::new(2, 2)),
        Op::TruncateAfter(log_id(1, 5)),
        Op::Append(vec![normal(2, 6), normal(2, 7)]),
        Op::Committed(log_id(2, 7)),
        Op::Purge(log_id(1, 3)),
        Op::Vote(Vote::new(3, 1)),
        Op::Purge(log_id(3, 12)),
        Op::Append(vec![normal(3, 13)]),
    ]
}

/// What a store holds, as openraft reads it back.
#[derive(Debug, Clone, Default, PartialEq)]
struct Model {
    entries: Vec<Entry>,
    purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
}

impl Model {
    /// The state after `op` took full effect.
    fn after(&self, op: &Op) -> Model {
        let mut next = self.clone();
        match op {
            Op::Append(entries) => next.entries.extend(entries.iter().cloned()),
            Op::Vote(vote) => next.vote = Some(*vote),
            Op::Committed(id) => next.committed = Some(*id),
            Op::TruncateAfter(id) => next.entries.retain(|e| e.log_id.index <= id.index),
            Op::Purge(id) => {
                next.entries.retain(|e| e.log_id.index > id.index);
                next.purged = Some(*id);
            }
        }
        next
    }
}

async fn run_op(store: &mut MetaLogStore, op: &Op) -> std::io::Result<()> {
    match op.clone() {
        Op::Append(entries) => {
            let (tx, rx) = MetaTypes::oneshot();
            store.append(entries, IOFlushed::signal(tx)).await?;
            rx.await.expect("the flush callback fired")
        }
        Op::Vote(vote) => store.save_vote(&vote).await,
        Op::Committed(id) => store.save_committed(Some(id)).await,
        Op::TruncateAfter(id) => store.truncate_after(Some(id)).await,
        Op::Purge(id) => store.purge(id).await,
    }
}

/// The acknowledged state when the scenario stopped, and the op that failed, if one did.
async fn run_scenario(fs: &FaultyFs) -> (Model, Option<Op>) {
    let Ok(mut store) = MetaLogStore::open_with(Arc::new(fs.clone()), Path::new(DIR)) else {
        // The open failed: nothing was acknowledged (an empty append stands for the open).
        return (Model::default(), Some(Op::Append(Vec::new())));
    };
    let mut acked = Model::default();
    for op in ops() {
        if run_op(&mut store, &op).await.is_err() {
            return (acked, Some(op));
        }
        acked = acked.after(&op);
    }
    (acked, None)
}

async fn recovered(fs: &FaultyFs, what: &str) -> Model {
    let mut store = MetaLogStore::open_with(Arc::new(fs.clone()), Path::new(DIR))
        .unwrap_or_else(|e| panic!("{what}: the store does not reopen: {e}"));
    let state = store.get_log_state().await.unwrap();
    let mut reader = store.get_log_reader().await;
    let entries = reader.try_get_log_entries(0..).await.unwrap();
    let last = entries
        .last()
        .map(|e| e.log_id)
        .or(state.last_purged_log_id);
    assert_eq!(
        state.last_log_id, last,
        "{what}: last_log_id is the last entry's"
    );
    Model {
        entries,
        purged: state.last_purged_log_id,
        vote: reader.read_vote().await.unwrap(),
        committed: store.read_committed().await.unwrap(),
    }
}

/// The reopened store is the acknowledged state, the failed op's full effect, or the
/// acknowledged state plus a prefix of a failed append.
fn check(found: &Model, acked: &Model, failed: Option<&Op>, what: &str) {
    if found == acked || failed.is_some_and(|op| *found == acked.after(op)) {
        return;
    }
    if let Some(Op::Append(entries)) = failed {
        let n = found.entries.len().saturating_sub(acked.entries.len());
        let partial = Model {
            entries: found.entries.clone(),
            ..acked.clone()
        };
        if n <= entries.len()
            && *found == partial
            && found.entries[..acked.entries.len()] == acked.entries[..]
            && found.entries[acked.entries.len()..] == entries[..n]
        {
            return;
        }
    }
    panic!("{what}: reopened as {found:?}\nacknowledged: {acked:?}\nfailed: {failed:?}");
}

async fn sweep_one(arm: impl FnOnce(&FaultyFs), what: &str) -> u64 {
    let fs = FaultyFs::new();
    arm(&fs);
    let (acked, failed) = run_scenario(&fs).await;
    assert!(failed.is_some(), "{what}: the fault was not reported");
    for mode in MODES {
        let what = format!("{what}, crash {mode:?}");
        let found = recovered(&fs.crash(mode), &what).await;
        check(&found, &acked, failed.as_ref(), &what);
    }
    MODES.len() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_and_sync_of_the_metadata_log_store_fails_and_crashes() {
    let fs = FaultyFs::new();
    let (acked, failed) = run_scenario(&fs).await;
    assert!(failed.is_none(), "the reference run has no faults");
    let (writes, syncs) = (fs.writes(), fs.syncs());
    check(&recovered(&fs, "no fault").await, &acked, None, "no fault");
    assert!(
        writes > 20 && syncs > 20,
        "the scenario exercises I/O ({writes}, {syncs})"
    );
    let mut checked = 0;
    for n in 1..=writes {
        let what = format!("write {n}/{writes} torn");
        checked += sweep_one(|fs| fs.fail_nth_write_as(n, WriteFault::Torn), &what).await;
    }
    for n in 1..=syncs {
        let what = format!("sync {n}/{syncs} fails");
        checked += sweep_one(|fs| fs.fail_nth_sync(n), &what).await;
        let what = format!("sync {n}/{syncs} fails, pages lost");
        checked += sweep_one(|fs| fs.fail_nth_sync_losing_pages(n), &what).await;
    }
    println!(
        "metadata log store fault points: {writes} writes + {syncs} syncs x 2, {checked} crash images checked"
    );
}
