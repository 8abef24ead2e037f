//! Restart and crash recovery of the metadata log store and state machine: what was
//! appended, voted, committed and purged is what a reopen of the same directory finds; a
//! torn last write of the Raft log (`FaultyFs`, crashed three ways) loses only that entry,
//! never the vote saved before it; a snapshot restores the image at open.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use openraft::RaftLogReader;
use openraft::entry::RaftEntry;
use openraft::impls::leader_id_adv::LeaderId;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::TypeConfigExt;
use sluice_storage::io::{CrashMode, FaultyFs, WriteFault};

use super::TestImage;
use crate::cluster::{
    Entry, LogId, Membership, MetaLogStore, MetaTypes, MetadataPayload, MetadataStateMachine, Vote,
};

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(LeaderId { term, node_id: 1 }, index)
}

fn normal(term: u64, index: u64) -> Entry {
    let payload = MetadataPayload::new(format!("records of {index}").into_bytes()).unwrap();
    Entry::new_normal(log_id(term, index), payload)
}

/// Entries 0..n: a blank, a membership, then normal ones, terms rising every 3.
fn entries(n: u64) -> Vec<Entry> {
    (0..n)
        .map(|i| match i {
            0 => Entry::new_blank(log_id(1, 0)),
            1 => Entry::new_membership(
                log_id(1, 1),
                Membership::new_with_defaults(vec![BTreeSet::from([1, 2, 3])], []),
            ),
            i => normal(1 + i / 3, i),
        })
        .collect()
}

/// Appends and waits for the flush callback (which must report success).
async fn append(store: &mut MetaLogStore, entries: Vec<Entry>) -> std::io::Result<()> {
    let (tx, rx) = MetaTypes::oneshot();
    store.append(entries, IOFlushed::signal(tx)).await?;
    rx.await.expect("the flush callback fired")
}

async fn all_entries(store: &mut MetaLogStore) -> Vec<Entry> {
    let mut reader = store.get_log_reader().await;
    reader.try_get_log_entries(0..).await.unwrap()
}

fn open_faulty(fs: &FaultyFs, dir: &str) -> std::io::Result<MetaLogStore> {
    MetaLogStore::open_with(Arc::new(fs.clone()), Path::new(dir))
}

#[tokio::test]
async fn a_reopened_store_has_the_same_entries_vote_committed_and_purge_mark() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaLogStore::open(dir.path()).unwrap();
    append(&mut store, entries(12)).await.unwrap();
    let vote = Vote::new(4, 1);
    store.save_vote(&vote).await.unwrap();
    store.save_committed(Some(log_id(4, 10))).await.unwrap();
    store.purge(log_id(1, 2)).await.unwrap();
    store.truncate_after(Some(log_id(4, 10))).await.unwrap();
    let state = store.get_log_state().await.unwrap();
    let before = all_entries(&mut store).await;
    assert_eq!(before.first().map(|e| e.log_id.index), Some(3));
    assert_eq!(before.last().map(|e| e.log_id), Some(log_id(4, 10)));
    drop(store);

    let mut store = MetaLogStore::open(dir.path()).unwrap();
    assert_eq!(store.get_log_state().await.unwrap(), state);
    assert_eq!(all_entries(&mut store).await, before);
    let mut reader = store.get_log_reader().await;
    assert_eq!(reader.read_vote().await.unwrap(), Some(vote));
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(4, 10)));
    append(&mut store, vec![normal(5, 11)]).await.unwrap();
    assert_eq!(all_entries(&mut store).await.len(), before.len() + 1);
}

#[tokio::test]
async fn a_torn_last_entry_is_cut_at_recovery_and_the_vote_survives() {
    for mode in [
        CrashMode::DurableOnly,
        CrashMode::AllWritten,
        CrashMode::TornLastWrite,
    ] {
        let fs = FaultyFs::new();
        let mut store = open_faulty(&fs, "/data/__cluster_metadata").unwrap();
        append(&mut store, entries(6)).await.unwrap();
        let vote = Vote::new(7, 2);
        store.save_vote(&vote).await.unwrap();
        fs.fail_nth_write_as(1, WriteFault::Torn);
        let torn = append(&mut store, vec![normal(7, 6)]).await;
        assert!(torn.is_err(), "{mode:?}: the torn append is reported");
        drop(store);

        let mut store = open_faulty(&fs.crash(mode), "/data/__cluster_metadata").unwrap();
        assert_eq!(all_entries(&mut store).await, entries(6), "{mode:?}");
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(log_id(2, 5)), "{mode:?}");
        let mut reader = store.get_log_reader().await;
        assert_eq!(reader.read_vote().await.unwrap(), Some(vote), "{mode:?}");
        append(&mut store, vec![normal(7, 6)]).await.unwrap();
    }
}

#[tokio::test]
async fn purging_past_the_last_entry_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaLogStore::open(dir.path()).unwrap();
    append(&mut store, entries(4)).await.unwrap();
    store.purge(log_id(3, 20)).await.unwrap();
    drop(store);
    let mut store = MetaLogStore::open(dir.path()).unwrap();
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(3, 20)));
    assert_eq!(state.last_log_id, Some(log_id(3, 20)));
    append(&mut store, vec![normal(3, 21)]).await.unwrap();
    assert_eq!(all_entries(&mut store).await, vec![normal(3, 21)]);
}

#[tokio::test]
async fn the_state_machine_restarts_from_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = MetadataStateMachine::open(dir.path(), TestImage::default()).unwrap();
    let applied = entries(8);
    let stream = futures_util::stream::iter(applied.into_iter().map(|e| Ok((e, None))));
    sm.apply(stream).await.unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(3, 7)));
    let image = sm.read_image(Clone::clone).unwrap();
    assert_eq!(image.applied.len(), 6, "the normal entries 2..8");
    drop(sm);

    let mut sm = MetadataStateMachine::open(dir.path(), TestImage::default()).unwrap();
    let (last_applied, membership) = sm.applied_state().await.unwrap();
    assert_eq!(last_applied, Some(log_id(3, 7)));
    assert_eq!(membership.log_id(), &Some(log_id(1, 1)));
    assert_eq!(sm.read_image(Clone::clone).unwrap(), image);
    let current = sm.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot.meta);
}

#[tokio::test]
async fn a_damaged_snapshot_is_refused_at_install_and_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = MetadataStateMachine::open(dir.path(), TestImage::default()).unwrap();
    let stream = futures_util::stream::iter(entries(4).into_iter().map(|e| Ok((e, None))));
    sm.apply(stream).await.unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut data = snapshot.snapshot.into_inner();
    let last = data.len() - 5;
    data[last] ^= 1;
    let other = tempfile::tempdir().unwrap();
    let mut follower = MetadataStateMachine::open(other.path(), TestImage::default()).unwrap();
    let refused = follower
        .install_snapshot(&snapshot.meta, std::io::Cursor::new(data))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("CRC"), "{refused}");
    assert_eq!(
        follower.applied_state().await.unwrap().0,
        None,
        "nothing installed"
    );
    drop(sm);
    let file = dir
        .path()
        .join(crate::cluster::state_machine::SNAPSHOT_FILE);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    assert!(MetadataStateMachine::open(dir.path(), TestImage::default()).is_err());
}

#[tokio::test]
async fn limited_reads_stop_near_their_byte_bound_and_full_reads_do_not() {
    use crate::cluster::limits::{ENTRY_PAYLOAD_BYTES_MAX, LIMITED_READ_BYTES_MAX};
    let dir = tempfile::tempdir().unwrap();
    let mut store = MetaLogStore::open(dir.path()).unwrap();
    let count = (2 * LIMITED_READ_BYTES_MAX / ENTRY_PAYLOAD_BYTES_MAX) as u64;
    let big: Vec<Entry> = (0..count)
        .map(|i| {
            let payload = MetadataPayload::new(vec![i as u8; ENTRY_PAYLOAD_BYTES_MAX]).unwrap();
            Entry::new_normal(log_id(1, i), payload)
        })
        .collect();
    append(&mut store, big).await.unwrap();
    let mut reader = store.get_log_reader().await;
    let limited = reader.limited_get_log_entries(0, count).await.unwrap();
    assert!(
        !limited.is_empty() && (limited.len() as u64) < count,
        "{}",
        limited.len()
    );
    let bytes: usize = limited.len() * ENTRY_PAYLOAD_BYTES_MAX;
    assert!(
        bytes <= LIMITED_READ_BYTES_MAX + ENTRY_PAYLOAD_BYTES_MAX,
        "{bytes}"
    );
    let all = reader.try_get_log_entries(0..count).await.unwrap();
    assert_eq!(
        all.len() as u64,
        count,
        "try_get_log_entries never stops early"
    );
    let from_middle = reader
        .limited_get_log_entries(count - 1, count)
        .await
        .unwrap();
    assert_eq!(from_middle.len(), 1);
}
