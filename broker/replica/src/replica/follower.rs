//! The follower's side (Kafka's `ReplicaFetcherThread` for one partition): fetch from the
//! leader with the last fetched epoch, truncate where the leader says the logs diverge,
//! append what it sends.
//!
//! - One fetch in flight; an answer that is not to it (another correlation id, another
//!   leader or epoch: late, duplicated, reordered) is ignored.
//! - On `DivergingEpoch {epoch, end_offset}` the follower truncates to
//!   `min(end_offset, its own end of that epoch)` if it has the epoch, or to its own end of
//!   the largest epoch below (and asks again): Kafka's `getOffsetTruncationState`. Never to
//!   the high watermark.
//! - Under `sluice.acks.all.fsync` the next fetch (whose offset tells the leader how far
//!   this replica has the log) waits for the fsync of what the last one appended.
//! - Its high watermark is `min(leader's high watermark, its log end)`, raised only
//!   (Kafka's `maybeUpdateHighWatermark`); a truncation lowers it to the new log end.

use super::{Effect, FetchData, FetchRequest, FetchResponse, Replica, Role};
use crate::mutants::{Mutant, mutant};

/// A follower's state for one leader epoch.
#[derive(Debug)]
pub(super) struct FollowerState {
    leader: i32,
    epoch: i32,
    /// The fetch in flight: its correlation id and when it was sent.
    in_flight: Option<(u64, i64)>,
    next_fetch_ms: i64,
    next_correlation_id: u64,
    /// Mutant `NoTruncationOnDivergence`: fetch on without the epoch check.
    skip_epoch_check: bool,
}

impl FollowerState {
    pub(super) const fn new(leader: i32, epoch: i32, now_ms: i64) -> Self {
        Self {
            leader,
            epoch,
            in_flight: None,
            next_fetch_ms: now_ms,
            next_correlation_id: 0,
            skip_epoch_check: false,
        }
    }
}

impl Replica {
    /// Sends the next fetch if none is in flight (or the last timed out), its wait is over,
    /// and (fsync on) the log is durable to its end.
    pub(super) fn maybe_fetch(&mut self, now_ms: i64) {
        let leo = self.log.log_end_offset();
        let unsynced = self.config.acks_all_fsync
            && self.log.durable_offset() < leo
            && !mutant(Mutant::AckBeforeFollowerFsync);
        let timeout_ms = self.config.fetch_timeout_ms;
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        if let Some((_, sent_ms)) = f.in_flight {
            if now_ms - sent_ms < timeout_ms {
                return;
            }
            f.in_flight = None;
        }
        if now_ms < f.next_fetch_ms || unsynced {
            return;
        }
        f.next_correlation_id += 1;
        f.in_flight = Some((f.next_correlation_id, now_ms));
        let last_fetched_epoch = if f.skip_epoch_check {
            None
        } else {
            self.log.last_batch_epoch()
        };
        self.effects.push(Effect::SendFetch {
            to: f.leader,
            request: FetchRequest {
                replica_id: self.config.node_id,
                replica_epoch: self.broker_epoch,
                leader_epoch: f.epoch,
                fetch_offset: leo,
                last_fetched_epoch,
                correlation_id: f.next_correlation_id,
            },
        });
    }

    pub(super) fn on_fetch_response(&mut self, now_ms: i64, response: FetchResponse) {
        let (idle_ms, backoff_ms) = (self.config.fetch_idle_ms, self.config.fetch_backoff_ms);
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        let ours = f
            .in_flight
            .is_some_and(|(id, _)| id == response.correlation_id)
            && response.leader_id == f.leader
            && response.leader_epoch == f.epoch;
        if !ours {
            return;
        }
        f.in_flight = None;
        let data = match response.result {
            Ok(data) => data,
            Err(_) => {
                f.next_fetch_ms = now_ms + backoff_ms;
                return;
            }
        };
        let wait_ms = if data.diverging_epoch.is_some() {
            self.on_diverging(&data);
            0
        } else if data.batches.is_empty() {
            self.follow_high_watermark(data.high_watermark);
            idle_ms
        } else if self.append_fetched(&data) {
            0
        } else {
            backoff_ms
        };
        if let Role::Follower(f) = &mut self.role {
            f.next_fetch_ms = now_ms + wait_ms;
        }
        self.maybe_fsync();
        self.maybe_fetch(now_ms);
    }

    fn on_diverging(&mut self, data: &FetchData) {
        let Some(diverging) = data.diverging_epoch else {
            return;
        };
        if mutant(Mutant::NoTruncationOnDivergence) {
            if let Role::Follower(f) = &mut self.role {
                f.skip_epoch_check = true;
            }
            return;
        }
        let leo = self.log.log_end_offset();
        let target = match self.log.end_offset_for_epoch(diverging.epoch) {
            Some((epoch, end)) if epoch == diverging.epoch => end.min(diverging.end_offset),
            Some((_, end)) => end.min(leo),
            None => diverging.end_offset.min(leo),
        };
        if target < leo {
            self.truncate_to(target);
        }
    }

    /// Appends the leader's batches if they start at this log's end; false (nothing
    /// appended) when they do not follow it.
    fn append_fetched(&mut self, data: &FetchData) -> bool {
        let leo = self.log.log_end_offset();
        if data.batches.first().is_none_or(|b| b.base_offset != leo) {
            return false;
        }
        let mut appended = Vec::with_capacity(data.batches.len());
        for batch in &data.batches {
            if self.log.append(*batch).is_err() {
                break;
            }
            appended.push(*batch);
        }
        let ok = !appended.is_empty();
        if ok {
            self.effects.push(Effect::Append(appended));
        }
        self.follow_high_watermark(data.high_watermark);
        ok
    }

    fn follow_high_watermark(&mut self, leader_high_watermark: i64) {
        let hw = leader_high_watermark.min(self.log.log_end_offset());
        self.high_watermark = self.high_watermark.max(hw);
    }
}
