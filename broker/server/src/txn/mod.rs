//! The transaction coordinator service: one tokio task owns the pure
//! [`sluice_txn::Coordinator`] and the transaction log, feeds the coordinator one request at
//! a time, persists the records it returns, and carries out its markers.
//!
//! ```text
//! handler ──Command──▶ coordinator task ──▶ transaction log (blocking pool: append, fsync)
//!    ▲                   │                ──▶ partitions: COMMIT/ABORT markers (append_marker)
//!    └── oneshot reply ──┘                ──▶ group coordinator: a commit's offsets
//! ```
//! - [`TxnHandle`]: what handlers hold; every call is a message with a oneshot reply.
//! - `task.rs`: the loop (commands, the timer of timeouts and expiry, retries of markers
//!   that could not be written, compaction of the log).
//! - `markers.rs`: a transaction's markers and, for a commit, its offsets.
//! - `log.rs`: the transaction log (`data.dir/transaction-state/`).
//! - `verify.rs`: KIP-890's verification of a transactional produce (the partitions'
//!   guards, then one verify-only call), shared by Produce and the transform runners; in a
//!   cluster the call goes to the transaction's coordinator on its broker.
//! - `peers.rs`: a transaction's consumer offsets between brokers: held in the transaction's
//!   coordinator, handed to the group's coordinator at commit.
//!
//! Every request is finished before the next starts: EndTxn is answered once its markers are
//! written (so a read_committed consumer sees a committed transaction as soon as the
//! producer's commit returns), and an InitProducerId that had to abort an open transaction
//! first answers the new epoch instead of CONCURRENT_TRANSACTIONS. The cost is that
//! transactions from different producers are serialised through one task; each waits for
//! the fsyncs of the ones before it.
//!
//! Architecture Invariant: only the coordinator task touches the `Coordinator` and the
//! transaction log, and a request's answer goes out only after its records are durable.
//! State that outlives the process is in the transaction log or in the partitions' own
//! logs (markers), never only in memory, so a replicated log can carry it later.

mod log;
mod markers;
pub mod peers;
mod task;
pub mod verify;

use std::sync::Arc;

use sluice_txn::{
    ErrorCode, ListedTxn, PartitionVerification, PendingOffset, TopicPartition, TxnDescription,
    TxnProtocol, TxnRecord, TxnState,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use log::TxnLog;
#[cfg(feature = "fuzz")]
pub(crate) use log::decode_chunk;

use crate::broker::Broker;
use crate::error::ServerError;
use crate::group::GroupHandle;
use crate::limits;

/// The answer to EndTxn: the error, and (for EndTxn v5, [`TxnProtocol::V2`]) the producer
/// id and epoch the next transaction uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndAnswer {
    /// The error (`NONE` on success).
    pub error: ErrorCode,
    /// The producer id to use next (-1 with an error).
    pub producer_id: i64,
    /// The epoch to use next (-1 with an error).
    pub producer_epoch: i16,
}

impl EndAnswer {
    /// An error with no producer.
    pub const fn error(error: ErrorCode) -> Self {
        Self {
            error,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

/// A producer in a transaction, as the requests name it.
#[derive(Debug, Clone)]
pub struct TxnProducer {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
}

/// An InitProducerId for the coordinator task.
#[derive(Debug)]
struct InitRequest {
    transactional_id: Option<String>,
    timeout_ms: i32,
    /// KIP-360 (v3+): the producer id and epoch the producer has, `None` for a new one.
    expected: Option<(i64, i16)>,
}

/// A message to the coordinator task.
#[derive(Debug)]
enum Command {
    /// InitProducerId: a transactional id (or `None` for an idempotent producer).
    InitProducerId {
        request: InitRequest,
        reply: oneshot::Sender<Result<(i64, i16), ErrorCode>>,
    },
    /// AddPartitionsToTxn.
    AddPartitions {
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// AddPartitionsToTxn v4's `verify_only`.
    VerifyPartitions {
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
        reply: oneshot::Sender<Result<Vec<PartitionVerification>, ErrorCode>>,
    },
    /// AddOffsetsToTxn.
    AddOffsets {
        txn: TxnProducer,
        group_id: String,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// TxnOffsetCommit: offsets held until the transaction commits.
    CommitOffsets {
        txn: TxnProducer,
        group_id: String,
        offsets: Vec<PendingOffset>,
        protocol: TxnProtocol,
        reply: oneshot::Sender<ErrorCode>,
    },
    /// EndTxn.
    EndTxn {
        txn: TxnProducer,
        commit: bool,
        protocol: TxnProtocol,
        reply: oneshot::Sender<EndAnswer>,
    },
    /// DescribeTransactions (`None`: unknown id).
    Describe {
        transactional_ids: Vec<String>,
        reply: oneshot::Sender<Vec<Option<TxnDescription>>>,
    },
    /// ListTransactions.
    List {
        states: Vec<TxnState>,
        producer_ids: Vec<i64>,
        reply: oneshot::Sender<Vec<ListedTxn>>,
    },
    /// Stop: close the transaction log.
    Shutdown,
}

/// The handlers' side of the coordinator. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TxnHandle {
    /// Bounded: a flood of transaction requests waits here instead of growing memory.
    commands: mpsc::Sender<Command>,
}

/// The running service: its handle and the task to await at shutdown.
#[derive(Debug)]
pub struct TxnService {
    /// Cloned into every connection.
    pub handle: TxnHandle,
    /// The coordinator task; it closes the transaction log before it ends.
    task: JoinHandle<()>,
}

impl TxnService {
    /// Opens the transaction log under `broker`'s data dir (blocking I/O: call from the
    /// blocking pool or at start) and reads its records.
    pub fn open(broker: &Broker) -> Result<(TxnLog, Vec<TxnRecord>), ServerError> {
        let (mut log, records) = TxnLog::open_with(
            &broker.config.data_dir,
            broker.config.acks_all_fsync,
            Arc::new(sluice_storage::RealFs),
            broker.clock().clone(),
        )?;
        log.report_fences_to(broker.metrics.fences.clone());
        Ok((log, records))
    }

    /// Starts the coordinator task: it replays `records`, finishes the transactions the log
    /// left prepared (their markers), then serves requests.
    pub fn spawn(
        broker: Arc<Broker>,
        groups: GroupHandle,
        log: TxnLog,
        records: Vec<TxnRecord>,
    ) -> Result<Self, ServerError> {
        let config = broker.config.txn_config();
        config.validate().map_err(|e| {
            ServerError::Config(crate::error::ConfigError::Inconsistent(e.to_string()))
        })?;
        let (commands, rx) = mpsc::channel(limits::TXN_COMMANDS_QUEUED_MAX);
        let task = task::spawn(config, broker, groups, log, records, rx);
        Ok(Self {
            handle: TxnHandle { commands },
            task,
        })
    }

    /// Stops the coordinator (after the connections are gone) and closes the log.
    pub async fn stop(self) {
        self.handle.commands.send(Command::Shutdown).await.ok();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "transaction coordinator task failed");
        }
    }
}

impl TxnHandle {
    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Option<T> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(make(reply)).await.ok()?;
        answer.await.ok()
    }

    /// InitProducerId; `expected` is a KIP-360 producer's current id and epoch (v3+): a
    /// transactional id's producer at that epoch gets it bumped, the same id kept; a stale
    /// pair is PRODUCER_FENCED. `None` if the coordinator is gone (shutting down).
    pub async fn init_producer_id(
        &self,
        transactional_id: Option<String>,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Option<Result<(i64, i16), ErrorCode>> {
        let request = InitRequest {
            transactional_id,
            timeout_ms,
            expected,
        };
        self.ask(|reply| Command::InitProducerId { request, reply })
            .await
    }

    /// AddPartitionsToTxn.
    pub async fn add_partitions(
        &self,
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
    ) -> Option<ErrorCode> {
        self.ask(|reply| Command::AddPartitions {
            txn,
            partitions,
            reply,
        })
        .await
    }

    /// AddPartitionsToTxn v4 with `verify_only`.
    pub async fn verify_partitions(
        &self,
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
    ) -> Option<Result<Vec<PartitionVerification>, ErrorCode>> {
        self.ask(|reply| Command::VerifyPartitions {
            txn,
            partitions,
            reply,
        })
        .await
    }

    /// AddOffsetsToTxn.
    pub async fn add_offsets(&self, txn: TxnProducer, group_id: String) -> Option<ErrorCode> {
        self.ask(|reply| Command::AddOffsets {
            txn,
            group_id,
            reply,
        })
        .await
    }

    /// TxnOffsetCommit (with [`TxnProtocol::V2`], v5+, the group joins the transaction).
    pub async fn commit_offsets(
        &self,
        txn: TxnProducer,
        group_id: String,
        offsets: Vec<PendingOffset>,
        protocol: TxnProtocol,
    ) -> Option<ErrorCode> {
        self.ask(|reply| Command::CommitOffsets {
            txn,
            group_id,
            offsets,
            protocol,
            reply,
        })
        .await
    }

    /// EndTxn: answered once the markers are written.
    pub async fn end_txn(
        &self,
        txn: TxnProducer,
        commit: bool,
        protocol: TxnProtocol,
    ) -> Option<EndAnswer> {
        self.ask(|reply| Command::EndTxn {
            txn,
            commit,
            protocol,
            reply,
        })
        .await
    }

    /// DescribeTransactions.
    pub async fn describe(
        &self,
        transactional_ids: Vec<String>,
    ) -> Option<Vec<Option<TxnDescription>>> {
        self.ask(|reply| Command::Describe {
            transactional_ids,
            reply,
        })
        .await
    }

    /// ListTransactions.
    pub async fn list(
        &self,
        states: Vec<TxnState>,
        producer_ids: Vec<i64>,
    ) -> Option<Vec<ListedTxn>> {
        self.ask(|reply| Command::List {
            states,
            producer_ids,
            reply,
        })
        .await
    }
}

/// Partitions grouped by topic, in topic order (the shape of Kafka's per-topic arrays).
pub(crate) fn by_topic(
    partitions: &[sluice_txn::TopicPartition],
) -> std::collections::BTreeMap<&str, Vec<i32>> {
    let mut out: std::collections::BTreeMap<&str, Vec<i32>> = std::collections::BTreeMap::new();
    for tp in partitions {
        out.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    out
}

/// A transaction's offset as the group coordinator takes it.
pub fn group_offset(offset: &sluice_txn::PendingOffset) -> sluice_group::CommitPartition {
    sluice_group::CommitPartition {
        tp: sluice_group::TopicPartition {
            topic: offset.tp.topic.clone(),
            partition: offset.tp.partition,
        },
        offset: offset.committed_offset,
        leader_epoch: offset.leader_epoch,
        metadata: offset.metadata.clone(),
    }
}
