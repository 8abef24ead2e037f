//! `Log::append_replicated` (a follower copies its leader's batches byte for byte) and
//! `Log::assign_leader_epoch` (the cluster's leader epochs): the follower's bytes, offsets,
//! epoch cache and producer state equal the leader's, also after a reopen; a batch that does
//! not continue the log or fails its CRC is refused with nothing written; an epoch this
//! broker began on its own is overridden by the cluster's.

use sluice_storage::testing::{build_value_batch, producer_batch};
use sluice_storage::{AppendError, Durability, Log, LogConfig, Marker, Offset};

fn all_bytes(log: &Log) -> Vec<u8> {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    if start == end {
        return Vec::new();
    }
    log.read(start, u32::MAX).unwrap().read_to_vec().unwrap()
}

/// A leader at epoch 3: a plain batch, an idempotent one, a transaction and its commit,
/// then epoch 5 and one more batch.
fn leader(dir: &std::path::Path) -> Log {
    let mut log = Log::open(dir, LogConfig::default(), 0).unwrap();
    log.assign_leader_epoch(3).unwrap();
    let mut plain = build_value_batch(3, 20, 1, 1_000);
    log.append(&mut plain, Durability::OsCache, 1_000).unwrap();
    let mut idempotent = producer_batch(7, 0, 0, 2, false);
    log.append(&mut idempotent, Durability::OsCache, 1_000)
        .unwrap();
    let mut txn = producer_batch(9, 1, 0, 2, true);
    log.append(&mut txn, Durability::OsCache, 1_000).unwrap();
    log.append_marker(9, 1, Marker::Commit, 4, Durability::OsCache, 1_000)
        .unwrap();
    log.assign_leader_epoch(5).unwrap();
    let mut later = build_value_batch(1, 20, 2, 2_000);
    log.append(&mut later, Durability::Fsync, 2_000).unwrap();
    log
}

#[test]
fn a_follower_holds_the_leaders_bytes_epochs_and_producer_state() {
    let (ldir, fdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ldir.path());
    let bytes = all_bytes(&leader);
    let mut follower = Log::open(fdir.path(), LogConfig::default(), 0).unwrap();
    // Split in two fetches at a batch boundary: after the first three batches.
    let first = follower
        .append_replicated(&bytes[..split_after(&bytes, 3)], 3_000)
        .unwrap();
    assert_eq!(first.batches, 3);
    let rest = follower
        .append_replicated(&bytes[split_after(&bytes, 3)..], 3_000)
        .unwrap();
    assert_eq!(rest.log_end_offset, leader.log_end_offset());
    assert_eq!(all_bytes(&follower), bytes, "byte for byte");
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
    assert_eq!(follower.leader_epochs(), vec![(3, 0), (5, 8)]);
    assert_eq!(follower.last_stable_offset(), leader.last_stable_offset());
    assert_eq!(follower.leader_epoch(), 5);
    assert_eq!(
        follower.last_batch_header().unwrap().unwrap().base_offset,
        8,
        "the last batch"
    );
    // The producer state came with the batches: the idempotent batch again is a duplicate.
    let mut again = producer_batch(7, 0, 0, 2, false);
    let dup = follower
        .append(&mut again, Durability::OsCache, 4_000)
        .unwrap();
    assert!(dup.duplicate);
    assert_eq!(dup.base_offset, Offset(3));
    // A reopen finds the same log and epochs.
    follower.flush().unwrap();
    drop(follower);
    let reopened = Log::open(fdir.path(), LogConfig::default(), 5_000).unwrap();
    assert_eq!(all_bytes(&reopened), bytes);
    assert_eq!(reopened.leader_epochs(), vec![(3, 0), (5, 8)]);
}

/// The end of the first `n` batches of `bytes`.
fn split_after(bytes: &[u8], n: usize) -> usize {
    sluice_storage::batch::iter_batches(bytes)
        .take(n)
        .map(|b| b.unwrap().1.len())
        .sum()
}

#[test]
fn a_batch_that_does_not_continue_the_log_or_fails_its_crc_writes_nothing() {
    let (ldir, fdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ldir.path());
    let bytes = all_bytes(&leader);
    let mut follower = Log::open(fdir.path(), LogConfig::default(), 0).unwrap();
    let skip = split_after(&bytes, 1);
    let refused = follower.append_replicated(&bytes[skip..], 3_000);
    assert!(
        matches!(
            refused,
            Err(AppendError::NotContiguous {
                base_offset: 3,
                log_end_offset: 0
            })
        ),
        "{refused:?}"
    );
    let mut damaged = bytes.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    assert!(follower.append_replicated(&damaged, 3_000).is_err());
    assert_eq!(follower.log_end_offset(), Offset(0));
    assert!(all_bytes(&follower).is_empty());
    assert!(follower.leader_epochs().is_empty());
    // Nothing at all is not an error.
    assert_eq!(follower.append_replicated(&[], 3_000).unwrap().batches, 0);
}

#[test]
fn the_clusters_epochs_override_one_this_broker_began_on_its_own() {
    let (ldir, fdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ldir.path());
    let bytes = all_bytes(&leader);
    let mut follower = Log::open(fdir.path(), LogConfig::default(), 0).unwrap();
    // A single-node open begins epoch 0 at the log end; the leader's epochs replace it.
    assert_eq!(follower.begin_next_leader_epoch().unwrap(), 0);
    follower.append_replicated(&bytes, 3_000).unwrap();
    assert_eq!(follower.leader_epochs(), vec![(3, 0), (5, 8)]);
    // A leader's epoch at the log end, assigned twice, is one entry.
    follower.assign_leader_epoch(7).unwrap();
    follower.assign_leader_epoch(7).unwrap();
    let end = follower.log_end_offset().value();
    assert_eq!(follower.leader_epochs(), vec![(3, 0), (5, 8), (7, end)]);
    assert_eq!(follower.end_offset_for_leader_epoch(5), (5, end));
    // A truncation to where epoch 5 began forgets epochs 5 and 7 (Kafka's truncateFromEnd).
    follower.truncate_to(Offset(8), 4_000).unwrap();
    assert_eq!(follower.leader_epochs(), vec![(3, 0)]);
}

#[test]
fn every_replicated_append_corpus_file_replays_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/corpus/replicated_append");
    let mut taken = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        sluice_storage::fuzz::replicated_append(&bytes);
        let fs = std::sync::Arc::new(sluice_storage::io::FaultyFs::new());
        let mut log =
            Log::open_with(fs, std::path::Path::new("/r/t-0"), LogConfig::default(), 0).unwrap();
        taken += usize::from(
            log.append_replicated(&bytes, 0)
                .is_ok_and(|a| a.batches > 0),
        );
    }
    assert!(taken >= 2, "the committed seeds are taken");
}

/// Found by the replication trial (a consumer sent back thousands of offsets by
/// OffsetForLeaderEpoch): a restarted follower's own epoch, begun at its log end when it
/// opened the log, newer than the leader's batches it then copied, stayed in its cache; once
/// it led, it answered the end of the leader's epoch as that stale entry's start.
#[test]
fn a_newer_epoch_begun_here_gives_way_to_the_leaders_older_batches() {
    let (ldir, fdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader(ldir.path());
    let bytes = all_bytes(&leader);
    let mut follower = Log::open(fdir.path(), LogConfig::default(), 0).unwrap();
    let first = split_after(&bytes, 2);
    follower.append_replicated(&bytes[..first], 1_000).unwrap();
    // The follower restarts: opening the log begins epoch 4 at its end, with no records.
    follower.flush().unwrap();
    drop(follower);
    let mut follower = Log::open(fdir.path(), LogConfig::default(), 2_000).unwrap();
    follower.begin_next_leader_epoch().unwrap();
    assert_eq!(follower.leader_epoch(), 4);
    follower.append_replicated(&bytes[first..], 3_000).unwrap();
    assert_eq!(follower.leader_epochs(), leader.leader_epochs());
    assert_eq!(follower.end_offset_for_leader_epoch(3), (3, 8));
}
