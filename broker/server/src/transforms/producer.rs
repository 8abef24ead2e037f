//! The transaction steps of a runner, done against the broker's own transaction coordinator
//! ([`TxnHandle`]) and partitions (`append_one`): what a Kafka Streams task does over the
//! wire (InitProducerId, AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit,
//! EndTxn; each output partition's first append of a transaction verified with the
//! coordinator, KIP-890), with no record crossing a socket. The runner's machine decides the order, the
//! sequences and when to commit; these only carry a step out and classify its failure.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_plugin_host::RecordView;
use sluice_storage::{Compression, TxnAppend, TxnGuard};
use sluice_transform::{Producer, StepError, StepErrorKind};
use sluice_txn::{ErrorCode, PendingOffset, TopicPartition, TxnProtocol};

use crate::broker::Broker;
use crate::error::KafkaError;
use crate::records::{self, ProducerFields};
use crate::topics::append::append_one;
use crate::topics::{Partition, group_commit};
use crate::txn::{TxnHandle, TxnProducer, verify};

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

fn stopping() -> StepError {
    retriable("the transaction coordinator is stopping")
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

    /// InitProducerId: fences earlier incarnations and aborts (or finishes) their transaction.
    pub async fn init(&mut self) -> Result<Producer, StepError> {
        self.appended.clear();
        let answer = self
            .txns
            .init_producer_id(Some(self.transactional_id.clone()), self.timeout_ms, None)
            .await
            .ok_or_else(stopping)?;
        match answer {
            Ok((producer_id, producer_epoch)) => Ok(Producer {
                producer_id,
                producer_epoch,
            }),
            Err(code) => Err(self.check(code, "InitProducerId").unwrap_err()),
        }
    }

    /// AddPartitionsToTxn.
    pub async fn add_partitions(
        &self,
        producer: Producer,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), StepError> {
        let partitions = partitions
            .into_iter()
            .map(|(topic, partition)| TopicPartition { topic, partition })
            .collect();
        let code = self
            .txns
            .add_partitions(self.txn(producer), partitions)
            .await
            .ok_or_else(stopping)?;
        self.check(code, "AddPartitionsToTxn")
    }

    /// Appends `records` as one transactional batch at `base_sequence` to `topic`-`partition`,
    /// verified with the coordinator first as a client's transactional produce is (KIP-890:
    /// a transaction that ended meanwhile, a timeout's abort, is not reopened).
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
        let guard = self.verify(producer, (topic, partition)).await?;
        let broker = self.broker.clone();
        let owned = topic.to_owned();
        let txn = self.txn(producer);
        let appended = tokio::task::spawn_blocking(move || {
            let claim = TxnAppend {
                transactional_id: &txn.transactional_id,
                producer_id: txn.producer_id,
                producer_epoch: txn.producer_epoch,
                guard,
            };
            append_one(
                &broker.topics,
                &owned,
                partition,
                Some(bytes.into()),
                Some(&claim),
            )
            .map(|a| (a.partition, a.end_offset))
        })
        .await
        .map_err(|e| retriable(format!("append task: {e}")))?;
        match appended {
            Ok((output, end_offset)) => {
                self.appended
                    .insert((topic.to_owned(), partition), (output, end_offset));
                Ok(())
            }
            Err(e) => Err(append_failed(topic, partition, &e)),
        }
    }

    /// KIP-890's verification of one output partition (`crate::txn::verify`): the guard to
    /// append with, `None` when the partition knows the transaction already.
    async fn verify(
        &self,
        producer: Producer,
        (topic, partition): (&str, i32),
    ) -> Result<Option<TxnGuard>, StepError> {
        let Some(output) = self.broker.topics.partition(topic, partition) else {
            return Ok(None); // the append answers UNKNOWN_TOPIC_OR_PARTITION
        };
        let tp = TopicPartition {
            topic: topic.to_owned(),
            partition,
        };
        let verdicts = verify::verify(
            &self.txns,
            &self.txn(producer),
            vec![(tp, output)],
            verify::Answers::Before11,
            // Transforms run on a single node only (refused in a cluster).
            None,
        )
        .await;
        match verdicts.into_iter().next() {
            Some(Ok(guard)) => Ok(guard),
            Some(Err(e)) => Err(append_failed(topic, partition, &e)),
            None => Err(retriable("the transaction verification task failed")),
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
        let txn = self.txn(producer);
        let code = self
            .txns
            .add_offsets(txn.clone(), self.group.clone())
            .await
            .ok_or_else(stopping)?;
        self.check(code, "AddOffsetsToTxn")?;
        let offset = PendingOffset {
            tp: TopicPartition {
                topic: source.to_owned(),
                partition,
            },
            committed_offset: position,
            leader_epoch: -1,
            metadata: Some(sluice_transform::spec::position_metadata(generation)),
        };
        let code = self
            .txns
            .commit_offsets(
                txn.clone(),
                self.group.clone(),
                vec![offset],
                TxnProtocol::V1,
            )
            .await
            .ok_or_else(stopping)?;
        self.check(code, "TxnOffsetCommit")?;
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
        // The runner speaks the transaction protocol v1: its epoch changes only when a new
        // runner fences it (InitProducerId), never per transaction.
        let ended = self.txns.end_txn(txn, true, TxnProtocol::V1).await;
        self.check(ended.ok_or_else(stopping)?.error, "EndTxn(commit)")?;
        self.appended.clear();
        Ok(())
    }

    /// Aborts the open transaction: its output stays invisible to read_committed consumers
    /// and the position does not move.
    pub async fn abort(&mut self, producer: Producer) -> Result<(), StepError> {
        self.appended.clear();
        let ended = self
            .txns
            .end_txn(self.txn(producer), false, TxnProtocol::V1)
            .await;
        self.check(ended.ok_or_else(stopping)?.error, "EndTxn(abort)")
    }
}
