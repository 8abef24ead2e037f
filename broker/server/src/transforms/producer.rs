//! The transaction steps of a runner, done against its transactional id's coordinator and
//! its output partitions' leaders (`remote.rs`: in-process when they are this broker, by
//! message when another broker of a cluster): what a Kafka Streams task does over the wire
//! (InitProducerId, AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn;
//! each output partition's first append of a transaction verified with the coordinator,
//! KIP-890). The runner's machine decides the order, the sequences and when to commit; these
//! only carry a step out and classify its failure.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_plugin_host::RecordView;
use sluice_storage::Compression;
use sluice_transform::{Producer, StepError, StepErrorKind};
use sluice_txn::ErrorCode;

use crate::broker::Broker;
use crate::cluster::{TransformTxnStep, TxnOffset};
use crate::error::KafkaError;
use crate::records::{self, ProducerFields};
use crate::topics::{Partition, group_commit};
use crate::txn::{TxnHandle, TxnProducer};

use super::remote::{self, Appended, TxnAnswer};

/// A failed append (or its verification) as a step result.
fn append_failed(topic: &str, partition: i32, e: &KafkaError) -> StepError {
    let kind = match e.code {
        ResponseError::InvalidProducerEpoch | ResponseError::ProducerFenced => {
            StepErrorKind::Fenced
        }
        // Retrying the same records cannot help (a record over the output's
        // max.message.bytes): the partition fails, naming it, until resumed.
        ResponseError::MessageTooLarge
        | ResponseError::RecordListTooLarge
        | ResponseError::InvalidRecord
        | ResponseError::CorruptMessage => StepErrorKind::Fatal,
        _ => StepErrorKind::Retriable,
    };
    StepError {
        kind,
        message: format!("appending to {topic}-{partition}: {}", e.message),
    }
}

/// One runner's transactional producer.
#[derive(Debug)]
pub struct TxnSteps {
    broker: Arc<Broker>,
    txns: TxnHandle,
    /// The transactional id (`__sluice_transform/<name>/<partition>`).
    pub transactional_id: String,
    /// `transaction.timeout.ms` asked at InitProducerId.
    timeout_ms: i32,
    /// The transform's group (`__sluice_transform/<name>`).
    group: String,
    /// Per output partition of the open transaction, its log end after our last append:
    /// what the commit waits to be durable under `sluice.acks.all.fsync`.
    appended: HashMap<(String, i32), (Arc<Partition>, i64)>,
}

fn retriable(message: impl Into<String>) -> StepError {
    StepError {
        kind: StepErrorKind::Retriable,
        message: message.into(),
    }
}

impl TxnSteps {
    pub fn new(
        broker: Arc<Broker>,
        txns: TxnHandle,
        transactional_id: String,
        timeout_ms: i32,
        group: String,
    ) -> Self {
        Self {
            broker,
            txns,
            transactional_id,
            timeout_ms,
            group,
            appended: HashMap::new(),
        }
    }

    fn txn(&self, producer: Producer) -> TxnProducer {
        TxnProducer {
            transactional_id: self.transactional_id.clone(),
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
        }
    }

    /// A coordinator answer as a step result.
    fn check(&self, code: ErrorCode, step: &str) -> Result<(), StepError> {
        let kind = match code {
            ErrorCode::None => return Ok(()),
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => StepErrorKind::Fenced,
            ErrorCode::InvalidTransactionTimeout | ErrorCode::InvalidRequest => {
                StepErrorKind::Fatal
            }
            _ => StepErrorKind::Retriable,
        };
        Err(StepError {
            kind,
            message: format!("{step} for {}: {code:?}", self.transactional_id),
        })
    }

    /// `step` at the coordinator, wherever it is; a coordinator that cannot be reached is
    /// a retriable failure of `name`.
    async fn at_coordinator(
        &self,
        step: TransformTxnStep,
        name: &str,
    ) -> Result<TxnAnswer, StepError> {
        remote::txn_step(&self.broker, &self.txns, &self.transactional_id, step)
            .await
            .map_err(|e| retriable(format!("{name} for {}: {e}", self.transactional_id)))
    }

    /// A step answered with a code.
    async fn coded(&self, step: TransformTxnStep, name: &str) -> Result<(), StepError> {
        match self.at_coordinator(step, name).await? {
            TxnAnswer::Code(code) => self.check(code, name),
            other => Err(retriable(format!(
                "{name} for {}: answered {other:?}",
                self.transactional_id
            ))),
        }
    }

    /// InitProducerId: fences earlier incarnations and aborts (or finishes) their transaction.
    pub async fn init(&mut self) -> Result<Producer, StepError> {
        self.appended.clear();
        let step = TransformTxnStep::Init {
            timeout_ms: self.timeout_ms,
        };
        match self.at_coordinator(step, "InitProducerId").await? {
            TxnAnswer::Producer {
                producer_id,
                producer_epoch,
            } => Ok(Producer {
                producer_id,
                producer_epoch,
            }),
            TxnAnswer::Code(code) => Err(self
                .check(code, "InitProducerId")
                .err()
                .unwrap_or_else(|| retriable("InitProducerId answered no producer"))),
            TxnAnswer::Verified(_) => Err(retriable("InitProducerId answered out of turn")),
        }
    }

    /// AddPartitionsToTxn.
    pub async fn add_partitions(
        &self,
        producer: Producer,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), StepError> {
        let step = TransformTxnStep::AddPartitions {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            partitions,
        };
        self.coded(step, "AddPartitionsToTxn").await
    }

    /// Appends `records` as one transactional batch at `base_sequence` to `topic`-`partition`
    /// where it is led, verified with the coordinator first as a client's transactional
    /// produce is (KIP-890: a transaction that ended meanwhile, a timeout's abort, is not
    /// reopened).
    pub async fn append(
        &mut self,
        producer: Producer,
        (topic, partition): (&str, i32),
        records: &[RecordView<'_>],
        base_sequence: i32,
        codec: Compression,
    ) -> Result<(), StepError> {
        let fields = ProducerFields {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            base_sequence,
            transactional: true,
        };
        let bytes = records::encode_produced(records, fields, codec)
            .map_err(|e| retriable(format!("encoding output for {topic}-{partition}: {e}")))?;
        // Another broker's leader answers once the batch is durable there (under
        // `sluice.acks.all.fsync`); one appended here is waited for at the commit.
        let durable = self.broker.config.acks_all_fsync;
        let appended = remote::append(
            &self.broker,
            &self.txns,
            &self.txn(producer),
            (topic, partition),
            bytes.into(),
            durable,
        )
        .await;
        match appended {
            Ok(Appended::Here(output, end_offset)) => {
                self.appended
                    .insert((topic.to_owned(), partition), (output, end_offset));
                Ok(())
            }
            Ok(Appended::Elsewhere) => Ok(()),
            Err(e) => Err(append_failed(topic, partition, &e)),
        }
    }

    /// Commits the open transaction with `position` as the committed offset of
    /// `source`-`partition` in the transform's group: the output and the position become
    /// visible in one coordinator decision, or neither does.
    pub async fn commit(
        &mut self,
        producer: Producer,
        (source, partition): (&str, i32),
        position: i64,
        generation: u32,
    ) -> Result<(), StepError> {
        let offset = TxnOffset {
            topic: source.to_owned(),
            partition,
            offset: position,
            leader_epoch: -1,
            metadata: Some(sluice_transform::spec::position_metadata(generation)),
        };
        let step = TransformTxnStep::CommitOffsets {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            group_id: self.group.clone(),
            offsets: vec![offset],
        };
        self.coded(step, "TxnOffsetCommit").await?;
        // As an acks=all producer waits: the output is durable before the commit decision
        // is (under `sluice.acks.all.fsync`), so a power loss cannot commit a position past
        // output the disk lost.
        if self.broker.config.acks_all_fsync {
            for ((topic, index), (output, end_offset)) in &self.appended {
                group_commit::wait_durable(output, *end_offset)
                    .await
                    .map_err(|e| retriable(format!("syncing {topic}-{index}: {}", e.message)))?;
            }
        }
        self.coded(self.end(producer, true), "EndTxn(commit)")
            .await?;
        self.appended.clear();
        Ok(())
    }

    fn end(&self, producer: Producer, commit: bool) -> TransformTxnStep {
        TransformTxnStep::End {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            commit,
        }
    }

    /// Aborts the open transaction: its output stays invisible to read_committed consumers
    /// and the position does not move.
    pub async fn abort(&mut self, producer: Producer) -> Result<(), StepError> {
        self.appended.clear();
        self.coded(self.end(producer, false), "EndTxn(abort)").await
    }
}
