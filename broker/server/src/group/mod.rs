//! The consumer-group coordinator service: one tokio task owns the pure
//! [`sluice_group::Coordinator`] and feeds it requests one at a time; a second task owns the
//! internal offsets log and appends the records the coordinator hands out, in order.
//!
//! ```text
//! handler ──Command──▶ coordinator task ──WriterJob──▶ writer task (blocking pool: append, fsync)
//!    ▲                   │   ▲                              │
//!    └── oneshot reply ──┘   └────────── WriterDone ────────┘
//! ```
//! - [`GroupHandle`]: what handlers hold; every call is a message with a oneshot reply, so a
//!   deferred JoinGroup/SyncGroup/OffsetCommit answer arrives when the coordinator says so.
//! - `task.rs`: the coordinator loop (commands, persist results, the one timer).
//! - `writer.rs`: the offsets-log writer (group commit: consecutive batches share an fsync).
//! - `offsets_log.rs`: the log's directory, replay, compaction.
//!
//! Architecture Invariant: only the coordinator task touches the `Coordinator`; only the
//! writer task touches the offsets log, and it appends batches in the order they were handed
//! out. A commit is answered after its append (fsynced when `sluice.acks.all.fsync`).

pub(crate) mod offsets_log;
mod task;
mod writer;

use std::path::Path;

use sluice_group::{
    CommitPartition, ConsumerGroup, ErrorCode, FetchedOffset, GroupConfig, GroupDescription,
    ListedGroup, OffsetDeleteResult, PartitionResult, Request, Response, TopicPartition,
    TxnCommitRequest, TxnOffsetCommitMember,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use offsets_log::OffsetsLog;
pub use task::Access;

use crate::clock::SharedClock;
use crate::error::ServerError;
use crate::limits;

/// A message to the coordinator task.
#[derive(Debug)]
enum Command {
    /// A state-changing request; the answer may come later.
    Handle {
        request: Request,
        reply: oneshot::Sender<Response>,
    },
    /// OffsetFetch (`None`: every partition of the group), v9+ with the member's check.
    FetchOffsets {
        group_id: String,
        member: Option<(String, i32)>,
        partitions: Option<Vec<TopicPartition>>,
        reply: oneshot::Sender<Result<Vec<FetchedOffset>, ErrorCode>>,
    },
    /// ConsumerGroupDescribe: a copy of each consumer-protocol group.
    DescribeConsumerGroups {
        group_ids: Vec<String>,
        reply: oneshot::Sender<Vec<Result<ConsumerGroup, ErrorCode>>>,
    },
    /// ListGroups.
    ListGroups {
        reply: oneshot::Sender<Vec<ListedGroup>>,
    },
    /// DescribeGroups.
    DescribeGroups {
        group_ids: Vec<String>,
        reply: oneshot::Sender<Vec<GroupDescription>>,
    },
    /// DeleteGroups: answered once the tombstones are appended.
    DeleteGroups {
        group_ids: Vec<String>,
        reply: oneshot::Sender<Vec<(String, ErrorCode)>>,
    },
    /// OffsetDelete: answered once the tombstones are appended.
    DeleteOffsets {
        group_id: String,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<OffsetDeleteResult>,
    },
    /// TxnOffsetCommit's member check, when the request arrives.
    CheckTxnCommit {
        check: Box<(TxnOffsetCommitMember, Vec<CommitPartition>)>,
        reply: oneshot::Sender<Result<(), ErrorCode>>,
    },
    /// A topic was deleted: drop its committed offsets.
    DeleteTopic { topic: String },
    /// Stop: close the offsets log.
    Shutdown,
}

/// The handlers' side of the coordinator. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupHandle {
    /// Bounded: a flood of group requests waits here instead of growing memory.
    commands: mpsc::Sender<Command>,
}

/// The running service: its handle and the tasks to await at shutdown.
#[derive(Debug)]
pub struct GroupService {
    /// Cloned into every connection.
    pub handle: GroupHandle,
    /// The coordinator task; it stops the writer (closing the log) before it ends.
    task: JoinHandle<()>,
}

impl GroupService {
    /// Opens the offsets log (blocking I/O: call from the blocking pool or at start) and
    /// loads the committed offsets; the tasks start with [`GroupService::spawn`].
    pub fn open(
        data_dir: &Path,
        fsync: bool,
        clock: SharedClock,
    ) -> Result<(OffsetsLog, Vec<sluice_group::OffsetRecord>), ServerError> {
        OffsetsLog::open_with(
            data_dir,
            fsync,
            std::sync::Arc::new(sluice_storage::RealFs),
            clock,
        )
    }

    /// Starts the coordinator and writer tasks on the current runtime. `topics` is the
    /// broker's topic shapes (`Broker::topic_shapes`), which consumer groups assign from.
    /// Coordinator time (sessions, rebalance timers, commit timestamps) is read from `clock`.
    pub fn spawn(
        config: GroupConfig,
        log: OffsetsLog,
        records: Vec<sluice_group::OffsetRecord>,
        topics: tokio::sync::watch::Receiver<std::collections::BTreeMap<String, i32>>,
        clock: SharedClock,
    ) -> Result<Self, ServerError> {
        Self::spawn_authorized(config, log, records, (topics, None), clock)
    }

    /// As [`GroupService::spawn`], with regex subscriptions filtered by `access`: the ACL
    /// check and the security state's changes, after which every regex resolves again.
    pub fn spawn_authorized(
        config: GroupConfig,
        log: OffsetsLog,
        records: Vec<sluice_group::OffsetRecord>,
        (topics, access): (
            tokio::sync::watch::Receiver<std::collections::BTreeMap<String, i32>>,
            Option<Access>,
        ),
        clock: SharedClock,
    ) -> Result<Self, ServerError> {
        let (commands, rx) = mpsc::channel(limits::GROUP_COMMANDS_QUEUED_MAX);
        let task = task::spawn(config, log, records, rx, (topics, access), clock)?;
        Ok(Self {
            handle: GroupHandle { commands },
            task,
        })
    }

    /// Stops the coordinator (after the connections are gone) and closes the offsets log.
    pub async fn stop(self) {
        self.handle.commands.send(Command::Shutdown).await.ok();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "group coordinator task failed");
        }
    }
}

impl GroupHandle {
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(make(reply)).await.ok()?;
        answer.await.ok()
    }

    /// Sends a state-changing request; `None` if the coordinator is gone (shutting down).
    pub async fn call(&self, request: Request) -> Option<Response> {
        self.ask(|reply| Command::Handle { request, reply }).await
    }

    /// Writes the offsets a transaction committed for `group_id` (its TxnOffsetCommits), with
    /// no member or generation check, into the group whatever its state (created if
    /// missing); answered, per partition in request order, after the offsets-log append.
    /// `None` if the coordinator is gone.
    ///
    /// The caller (the transaction coordinator) passes only partitions that exist, as the
    /// OffsetCommit handler does (`Broker::read_partition`): this module does not know the
    /// broker's topics. Errors: `COORDINATOR_NOT_AVAILABLE` (the offsets log is behind or its
    /// append failed: retriable, send again), `OFFSET_METADATA_TOO_LARGE` and
    /// `INVALID_COMMIT_OFFSET_SIZE` (that partition is never written), `INVALID_GROUP_ID`.
    pub async fn commit_txn_offsets(
        &self,
        group_id: String,
        partitions: Vec<CommitPartition>,
    ) -> Option<Vec<PartitionResult>> {
        let request = Request::CommitTxnOffsets(TxnCommitRequest {
            group_id,
            partitions,
        });
        match self.call(request).await? {
            Response::OffsetCommit(answer) => Some(answer.partitions),
            other => {
                // A coordinator bug: logged, and retried by the caller like a gone coordinator.
                tracing::error!(answer = ?other, "CommitTxnOffsets answered with another response");
                None
            }
        }
    }

    /// TxnOffsetCommit's group check, when the request arrives (KIP-447): the v3+ member id,
    /// generation and instance id must be the group's (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
    /// FENCED_INSTANCE_ID); v0-v2's none (-1, empty) pass. `partitions` are the offsets to
    /// commit. `None` if the coordinator is gone.
    pub async fn check_txn_offset_commit(
        &self,
        member: TxnOffsetCommitMember,
        partitions: Vec<CommitPartition>,
    ) -> Option<Result<(), ErrorCode>> {
        let check = Box::new((member, partitions));
        self.ask(|reply| Command::CheckTxnCommit { check, reply })
            .await
    }

    /// OffsetFetch. `member` (v9+: member id and epoch) is checked first as Kafka does:
    /// UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH for a consumer group's member that is not
    /// (or no longer) at that epoch.
    pub async fn fetch_offsets(
        &self,
        group_id: String,
        member: Option<(String, i32)>,
        partitions: Option<Vec<TopicPartition>>,
    ) -> Option<Result<Vec<FetchedOffset>, ErrorCode>> {
        self.ask(|reply| Command::FetchOffsets {
            group_id,
            member,
            partitions,
            reply,
        })
        .await
    }

    /// ConsumerGroupDescribe: per group in request order, a copy of the consumer-protocol
    /// group, or GROUP_ID_NOT_FOUND (also for a classic group, as Kafka: the admin client
    /// then describes it with DescribeGroups).
    pub async fn describe_consumer_groups(
        &self,
        group_ids: Vec<String>,
    ) -> Option<Vec<Result<ConsumerGroup, ErrorCode>>> {
        self.ask(|reply| Command::DescribeConsumerGroups { group_ids, reply })
            .await
    }

    /// ListGroups.
    pub async fn list_groups(&self) -> Option<Vec<ListedGroup>> {
        self.ask(|reply| Command::ListGroups { reply }).await
    }

    /// DescribeGroups.
    pub async fn describe_groups(&self, group_ids: Vec<String>) -> Option<Vec<GroupDescription>> {
        self.ask(|reply| Command::DescribeGroups { group_ids, reply })
            .await
    }

    /// DeleteGroups.
    pub async fn delete_groups(&self, group_ids: Vec<String>) -> Option<Vec<(String, ErrorCode)>> {
        self.ask(|reply| Command::DeleteGroups { group_ids, reply })
            .await
    }

    /// OffsetDelete of `partitions` of `group_id`; answered after the tombstones' append.
    pub async fn delete_offsets(
        &self,
        group_id: String,
        partitions: Vec<TopicPartition>,
    ) -> Option<OffsetDeleteResult> {
        self.ask(|reply| Command::DeleteOffsets {
            group_id,
            partitions,
            reply,
        })
        .await
    }

    /// Drops the committed offsets of a deleted topic (fire and forget).
    pub async fn delete_topic(&self, topic: String) {
        self.commands
            .send(Command::DeleteTopic { topic })
            .await
            .ok();
    }
}

#[cfg(test)]
mod tests;
