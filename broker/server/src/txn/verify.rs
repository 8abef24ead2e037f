//! KIP-890's verification of a transactional produce, in-process: what Kafka's
//! `ReplicaManager` (`maybeStartTransactionVerificationForPartitions`) and
//! `AddPartitionsToTxnManager` do between a partition leader and the transaction
//! coordinator before a transactional batch is appended.
//!
//! ```text
//! per partition: Log::start_txn_verification ─▶ Open: append (its transaction here was
//!                (blocking pool)                 verified under this transactional id)
//!                                            └▶ Verify(guard) ─┐
//! the coordinator: verify_partitions (verify only) ◀───────────┘ one call for all of them
//!    in the transaction: append with the guard (`TxnAppend`); else the error below
//! ```
//!
//! Produce v12+ (the transaction protocol v2, KIP-890 part 2) asks the coordinator to add
//! the partitions instead (`TransactionSupportedOperation.ADD_PARTITION`): its producer
//! never sent AddPartitionsToTxn. The errors are Kafka's for Produce v3-v10
//! (`TransactionSupportedOperation.DEFAULT_ERROR`): PRODUCER_FENCED becomes
//! INVALID_PRODUCER_EPOCH, a partition not in the transaction (TRANSACTION_ABORTABLE)
//! INVALID_TXN_STATE "Partition was not added to the transaction", a retriable coordinator
//! error (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
//! NOT_COORDINATOR) NOT_ENOUGH_REPLICAS (which old clients retry without a metadata
//! refresh), and INVALID_PRODUCER_ID_MAPPING (another producer id, or no such transactional
//! id) stays itself. Produce v11+ is answered TRANSACTION_ABORTABLE where these versions get
//! INVALID_TXN_STATE; the rest is the same.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_storage::{Admission, TxnGuard};
use sluice_txn::{ErrorCode, TopicPartition};

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::{TxnHandle, TxnProducer};
use crate::error::KafkaError;
use crate::kraft::Kraft;
use crate::topics::Partition;
use crate::topics::append::append_error;

/// A partition's answer: append with this guard (`None`: its transaction there was verified
/// before), or refuse the partition with this error.
pub type Verdict = Result<Option<TxnGuard>, KafkaError>;

/// Verifies `producer`'s transactional produce to each of `partitions` (in order): the
/// partitions' side on the blocking pool, then one coordinator call for those that need it.
pub async fn verify(
    txns: &TxnHandle,
    producer: &TxnProducer,
    partitions: Vec<(TopicPartition, Arc<Partition>)>,
    answers: Answers,
    coordinator: Option<(&Kraft, i32)>,
) -> Vec<Verdict> {
    let claim = producer.clone();
    let started = tokio::task::spawn_blocking(move || {
        partitions
            .into_iter()
            .map(|(tp, partition)| (tp.clone(), start(&partition, &claim)))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_else(|e| {
        tracing::error!(error = %e, "transaction verification task failed");
        Vec::new()
    });
    let ask: Vec<TopicPartition> = started
        .iter()
        .filter(|(_, s)| matches!(s, Ok(Admission::Verify(_))))
        .map(|(tp, _)| tp.clone())
        .collect();
    let answered = match (ask.is_empty(), answers) {
        (true, _) => Some(Ok(Vec::new())),
        (false, _) if let Some((kraft, node)) = coordinator => {
            ask_remote(kraft, node, producer, ask, answers).await
        }
        (false, Answers::AddPartition) => txns
            .add_partitions(producer.clone(), ask.clone())
            .await
            .map(|code| match code {
                ErrorCode::None => Ok(added(ask)),
                code => Err(code),
            }),
        (false, _) => txns.verify_partitions(producer.clone(), ask).await,
    };
    started
        .into_iter()
        .map(|(tp, admission)| match admission? {
            Admission::Open => Ok(None),
            Admission::Verify(guard) => match &answered {
                None => Err(produce_error(ErrorCode::CoordinatorNotAvailable, answers)),
                Some(Err(code)) => Err(produce_error(*code, answers)),
                Some(Ok(verified)) => match verified.iter().find(|v| v.tp == tp) {
                    Some(v) if v.error.is_ok() => Ok(Some(guard)),
                    Some(v) => Err(produce_error(v.error, answers)),
                    None => Err(produce_error(ErrorCode::TransactionAbortable, answers)),
                },
            },
        })
        .collect()
}

/// The coordinator on broker `node` verifies (or adds) the partitions: AddPartitionsToTxn v5,
/// as Kafka's `AddPartitionsToTxnManager` sends it. `None` when it did not answer (the
/// producer retries).
async fn ask_remote(
    kraft: &Kraft,
    node: i32,
    producer: &TxnProducer,
    ask: Vec<TopicPartition>,
    answers: Answers,
) -> Option<Result<Vec<sluice_txn::PartitionVerification>, ErrorCode>> {
    // A materialized transform's output batch: its reserved id is refused on the Kafka
    // listener, so the leader asks by Sluice's own message (`crate::transforms::remote`).
    if answers != Answers::AddPartition
        && sluice_transform::spec::is_reserved(&producer.transactional_id)
    {
        return ask_remote_for_transform(kraft, node, producer, ask).await;
    }
    let by_topic = super::by_topic(&ask);
    let mut txn = AddPartitionsToTxnTransaction::default();
    txn.transactional_id =
        TransactionalId(StrBytes::from_string(producer.transactional_id.clone()));
    txn.producer_id = ProducerId(producer.producer_id);
    txn.producer_epoch = producer.producer_epoch;
    txn.verify_only = answers != Answers::AddPartition;
    txn.topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = AddPartitionsToTxnTopic::default();
            t.name = TopicName(StrBytes::from_string(name.to_owned()));
            t.partitions = partitions;
            t
        })
        .collect();
    let mut request = AddPartitionsToTxnRequest::default();
    request.transactions = vec![txn];
    let response = match kraft
        .call_broker(node, &request, REMOTE_VERIFY_VERSION)
        .await
    {
        Ok(response) => response,
        Err(e) => {
            tracing::warn!(coordinator = node, error = %e, "verifying a transactional produce with its coordinator failed");
            return None;
        }
    };
    let code = |c: i16| ErrorCode::from_code(c).unwrap_or(ErrorCode::UnknownServerError);
    if response.error_code != 0 {
        return Some(Err(code(response.error_code)));
    }
    let verified: Vec<sluice_txn::PartitionVerification> = response
        .results_by_transaction
        .iter()
        .flat_map(|r| &r.topic_results)
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(move |p| sluice_txn::PartitionVerification {
                    tp: TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    },
                    error: code(p.partition_error_code),
                })
        })
        .collect();
    if answers == Answers::AddPartition
        && let Some(refused) = verified.iter().find(|v| !v.error.is_ok())
    {
        return Some(Err(refused.error));
    }
    Some(Ok(verified))
}

/// [`ask_remote`] for a transform's transactional id: `TransformTxnStep::Verify` on the
/// controller listener.
async fn ask_remote_for_transform(
    kraft: &Kraft,
    node: i32,
    producer: &TxnProducer,
    ask: Vec<TopicPartition>,
) -> Option<Result<Vec<sluice_txn::PartitionVerification>, ErrorCode>> {
    use crate::cluster::{BrokerMessage, BrokerReply, TransformTxnStep};
    let message = BrokerMessage::TransformTxn {
        transactional_id: producer.transactional_id.clone(),
        step: TransformTxnStep::Verify {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            partitions: ask.into_iter().map(|tp| (tp.topic, tp.partition)).collect(),
        },
    };
    let code = |c: i16| ErrorCode::from_code(c).unwrap_or(ErrorCode::UnknownServerError);
    match kraft.ask(node, &message).await {
        Ok(BrokerReply::Verified(verified)) => Some(Ok(verified
            .into_iter()
            .map(
                |(topic, partition, error)| sluice_txn::PartitionVerification {
                    tp: TopicPartition { topic, partition },
                    error: code(error),
                },
            )
            .collect())),
        Ok(BrokerReply::Code(c)) => Some(Err(code(c))),
        Ok(other) => {
            tracing::warn!(
                coordinator = node,
                ?other,
                "a transform's verification answered out of turn"
            );
            None
        }
        Err(e) => {
            tracing::warn!(coordinator = node, error = %e, "verifying a transform's output batch with its coordinator failed");
            None
        }
    }
}

/// The AddPartitionsToTxn version a leader asks a remote coordinator with (KIP-890's, which
/// takes TRANSACTION_ABORTABLE).
const REMOTE_VERIFY_VERSION: i16 = 5;

/// Partitions the coordinator added to the transaction, as verified ones.
fn added(partitions: Vec<TopicPartition>) -> Vec<sluice_txn::PartitionVerification> {
    partitions
        .into_iter()
        .map(|tp| sluice_txn::PartitionVerification {
            tp,
            error: ErrorCode::None,
        })
        .collect()
}

/// The partition's side (blocking: takes the partition lock).
fn start(partition: &Partition, producer: &TxnProducer) -> Result<Admission, KafkaError> {
    partition
        .with_log(|log| {
            log.start_txn_verification(
                &producer.transactional_id,
                producer.producer_id,
                producer.producer_epoch,
            )
        })?
        .map_err(|e| append_error(partition, e, crate::clock::now_ms()))
}

/// What the producer expects of the coordinator, and which errors it understands (Kafka's
/// `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Produce v3-v10: verify only; a partition not in the transaction is INVALID_TXN_STATE.
    Before11,
    /// Produce v11 (KIP-890): verify only; TRANSACTION_ABORTABLE, which the producer
    /// recovers from by aborting.
    TransactionAbortable,
    /// Produce v12+ (the transaction protocol v2, KIP-890 part 2): the partition is added
    /// to the producer's transaction (starting one if none is open) instead of verified;
    /// errors as v11's.
    AddPartition,
}

impl Answers {
    /// What a Produce request of `version` expects.
    pub fn for_produce(version: i16) -> Self {
        match version {
            12.. => Self::AddPartition,
            11 => Self::TransactionAbortable,
            _ => Self::Before11,
        }
    }
}

/// A failed verification as Kafka answers Produce with it.
pub fn produce_error(code: ErrorCode, answers: Answers) -> KafkaError {
    if matches!(
        code,
        ErrorCode::ConcurrentTransactions
            | ErrorCode::CoordinatorLoadInProgress
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::NotCoordinator
    ) {
        return KafkaError::new(
            ResponseError::NotEnoughReplicas,
            format!(
                "Unable to verify the partition has been added to the transaction. \
                 Underlying error: {}",
                code.name()
            ),
        );
    }
    match code {
        ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => KafkaError::new(
            ResponseError::InvalidProducerEpoch,
            "Producer attempted to produce with an old epoch.",
        ),
        ErrorCode::TransactionAbortable if answers != Answers::Before11 => KafkaError::new(
            ResponseError::TransactionAbortable,
            "Partition was not added to the transaction",
        ),
        ErrorCode::TransactionAbortable | ErrorCode::InvalidTxnState => KafkaError::new(
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction",
        ),
        ErrorCode::InvalidProducerIdMapping => KafkaError::new(
            ResponseError::InvalidProducerIdMapping,
            "The producer attempted to use a producer id which is not currently assigned to \
             its transactional id.",
        ),
        other => {
            KafkaError::from_code(other, format!("transaction verification failed: {other:?}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_errors_are_kafkas_for_produce_before_v11() {
        let code = |c| produce_error(c, Answers::Before11).code;
        assert_eq!(
            code(ErrorCode::ProducerFenced),
            ResponseError::InvalidProducerEpoch
        );
        assert_eq!(
            code(ErrorCode::TransactionAbortable),
            ResponseError::InvalidTxnState
        );
        assert_eq!(
            code(ErrorCode::InvalidProducerIdMapping),
            ResponseError::InvalidProducerIdMapping
        );
        assert_eq!(
            code(ErrorCode::InvalidRequest),
            ResponseError::InvalidRequest
        );
        for retriable in [
            ErrorCode::ConcurrentTransactions,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
            ErrorCode::NotCoordinator,
        ] {
            assert_eq!(code(retriable), ResponseError::NotEnoughReplicas);
        }
        assert_eq!(
            produce_error(ErrorCode::TransactionAbortable, Answers::Before11).message,
            "Partition was not added to the transaction"
        );
    }

    #[test]
    fn produce_v11_is_told_the_transaction_is_abortable() {
        let answers = Answers::for_produce(11);
        let code = |c| produce_error(c, answers).code;
        assert_eq!(
            code(ErrorCode::TransactionAbortable),
            ResponseError::TransactionAbortable
        );
        assert_eq!(
            code(ErrorCode::InvalidTxnState),
            ResponseError::InvalidTxnState
        );
        assert_eq!(
            code(ErrorCode::ProducerFenced),
            ResponseError::InvalidProducerEpoch
        );
        assert_eq!(
            code(ErrorCode::CoordinatorNotAvailable),
            ResponseError::NotEnoughReplicas
        );
        assert_eq!(Answers::for_produce(10), Answers::Before11);
        assert_eq!(Answers::for_produce(12), Answers::AddPartition);
        let v12 = |c| produce_error(c, Answers::AddPartition).code;
        assert_eq!(
            v12(ErrorCode::TransactionAbortable),
            ResponseError::TransactionAbortable
        );
        assert_eq!(
            v12(ErrorCode::ProducerFenced),
            ResponseError::InvalidProducerEpoch
        );
    }
}
