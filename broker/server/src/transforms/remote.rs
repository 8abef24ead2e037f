//! Transforms across brokers: where a runner's requests go (the other side is `peers.rs`).
//!
//! A runner runs on the broker that leads its source partition (`placement.rs`). What it
//! asks of others goes where Kafka would send it, by Sluice's own messages on the controller
//! listener (which only this cluster's brokers reach), so the reserved `__sluice_transform/`
//! ids stay out of the Kafka listeners' reach:
//!
//! ```text
//! runner ─▶ InitProducerId, AddPartitions,      ─▶ the transactional id's coordinator
//!           TxnOffsetCommit, EndTxn                (BrokerMessage::TransformTxn)
//!        ─▶ each output batch                   ─▶ the output partition's leader, which
//!                                                  verifies it with the coordinator (KIP-890)
//!                                                  (BrokerMessage::AppendTransformed)
//!        ─▶ the committed position, its deletion ─▶ the group's coordinator
//!                                                  (FetchTransformPosition, DeleteTransformGroup)
//! ```
//!
//! The coordinator writes the COMMIT or ABORT markers on every output leader
//! (WriteTxnMarkers) and hands the position to the group's coordinator when the transaction
//! commits, as for any client's transaction. On a single node, or when the coordinator or
//! leader is this broker, the same steps run in-process; `peers.rs` serves the other
//! brokers' messages. Deploy and restart ask the leaders for start offsets
//! ([`start_offsets`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use sluice_storage::{Offset, TxnAppend};
use sluice_transform::FromOffset;
use sluice_txn::{ErrorCode, PendingOffset, TopicPartition, TxnProtocol};

use crate::broker::Broker;
use crate::cluster::{BrokerMessage, BrokerReply, TransformTxnStep, TxnOffset};
use crate::error::KafkaError;
use crate::group::GroupHandle;
use crate::kraft::{CoordinatorKind, Kraft};
use crate::topics::append::append_one;
use crate::topics::{Partition, Topic};
use crate::txn::{TxnHandle, TxnProducer, verify};

/// Where a coordinator is: this broker, or another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Here,
    Broker(i32),
}

/// The coordinator of `key` (a single node coordinates everything).
async fn route(broker: &Broker, kind: CoordinatorKind, key: &str) -> Result<Route, String> {
    let Some(kraft) = broker.kraft() else {
        return Ok(Route::Here);
    };
    let found = kraft
        .find_coordinator(kind, key)
        .await
        .map_err(|e| e.message)?;
    Ok(if found.node_id == kraft.node_id() {
        Route::Here
    } else {
        Route::Broker(found.node_id)
    })
}

fn kraft(broker: &Broker) -> Result<&Arc<Kraft>, String> {
    broker.kraft().ok_or_else(|| "not in a cluster".to_owned())
}

/// A transaction step's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TxnAnswer {
    Producer {
        producer_id: i64,
        producer_epoch: i16,
    },
    Code(ErrorCode),
    /// Each partition's verification: topic, partition, error.
    Verified(Vec<(String, i32, i16)>),
}

/// Carries out `step` of `transactional_id` at this broker's coordinator; `None` when it is
/// stopping.
pub(super) async fn txn_step_here(
    txns: &TxnHandle,
    transactional_id: String,
    step: TransformTxnStep,
) -> Option<TxnAnswer> {
    let txn = |producer_id, producer_epoch| TxnProducer {
        transactional_id: transactional_id.clone(),
        producer_id,
        producer_epoch,
    };
    Some(match step {
        TransformTxnStep::Init { timeout_ms } => {
            match txns
                .init_producer_id(Some(transactional_id.clone()), timeout_ms, None)
                .await?
            {
                Ok((producer_id, producer_epoch)) => TxnAnswer::Producer {
                    producer_id,
                    producer_epoch,
                },
                Err(code) => TxnAnswer::Code(code),
            }
        }
        TransformTxnStep::AddPartitions {
            producer_id,
            producer_epoch,
            partitions,
        } => {
            let partitions = partitions
                .into_iter()
                .map(|(topic, partition)| TopicPartition { topic, partition })
                .collect();
            TxnAnswer::Code(
                txns.add_partitions(txn(producer_id, producer_epoch), partitions)
                    .await?,
            )
        }
        TransformTxnStep::CommitOffsets {
            producer_id,
            producer_epoch,
            group_id,
            offsets,
        } => {
            let producer = txn(producer_id, producer_epoch);
            let added = txns.add_offsets(producer.clone(), group_id.clone()).await?;
            if added != ErrorCode::None {
                return Some(TxnAnswer::Code(added));
            }
            let offsets = offsets.into_iter().map(PendingOffset::from).collect();
            TxnAnswer::Code(
                txns.commit_offsets(producer, group_id, offsets, TxnProtocol::V1)
                    .await?,
            )
        }
        TransformTxnStep::Verify {
            producer_id,
            producer_epoch,
            partitions,
        } => verify_here(txns, txn(producer_id, producer_epoch), partitions).await?,
        TransformTxnStep::End {
            producer_id,
            producer_epoch,
            commit,
        } => {
            // The runner speaks the transaction protocol v1: its epoch changes only when a
            // new runner fences it (InitProducerId), never per transaction.
            let ended = txns
                .end_txn(txn(producer_id, producer_epoch), commit, TxnProtocol::V1)
                .await?;
            TxnAnswer::Code(ended.error)
        }
    })
}

/// KIP-890's verification of a transform's output partitions at this coordinator.
async fn verify_here(
    txns: &TxnHandle,
    producer: TxnProducer,
    partitions: Vec<(String, i32)>,
) -> Option<TxnAnswer> {
    let partitions = partitions
        .into_iter()
        .map(|(topic, partition)| TopicPartition { topic, partition })
        .collect();
    Some(match txns.verify_partitions(producer, partitions).await? {
        Ok(verified) => TxnAnswer::Verified(
            verified
                .into_iter()
                .map(|v| (v.tp.topic, v.tp.partition, v.error.code()))
                .collect(),
        ),
        Err(code) => TxnAnswer::Code(code),
    })
}

/// Carries out `step` at `transactional_id`'s coordinator, wherever it is.
///
/// # Errors
/// The coordinator is stopping, has no live broker, or did not answer (retriable).
pub(super) async fn txn_step(
    broker: &Broker,
    txns: &TxnHandle,
    transactional_id: &str,
    step: TransformTxnStep,
) -> Result<TxnAnswer, String> {
    match route(broker, CoordinatorKind::Transaction, transactional_id).await? {
        Route::Here => txn_step_here(txns, transactional_id.to_owned(), step)
            .await
            .ok_or_else(|| "the transaction coordinator is stopping".to_owned()),
        Route::Broker(node) => {
            let message = BrokerMessage::TransformTxn {
                transactional_id: transactional_id.to_owned(),
                step,
            };
            match kraft(broker)?.ask(node, &message).await? {
                BrokerReply::Producer {
                    producer_id,
                    producer_epoch,
                } => Ok(TxnAnswer::Producer {
                    producer_id,
                    producer_epoch,
                }),
                BrokerReply::Code(code) => Ok(TxnAnswer::Code(
                    ErrorCode::from_code(code).unwrap_or(ErrorCode::UnknownServerError),
                )),
                BrokerReply::Verified(verified) => Ok(TxnAnswer::Verified(verified)),
                other => Err(format!(
                    "broker {node} answered {other:?} to a transaction step"
                )),
            }
        }
    }
}

/// The transaction's coordinator for KIP-890's verification at a leader
/// (`crate::txn::verify`): `None` when it is this broker (or a single node).
fn verifier<'a>(broker: &'a Broker, transactional_id: &str) -> Option<(&'a Kraft, i32)> {
    let kraft = broker.kraft()?;
    match kraft.coordinator_node(CoordinatorKind::Transaction, transactional_id) {
        Some(node) if node == kraft.node_id() => None,
        Some(node) => Some((kraft.as_ref(), node)),
        // No live coordinator: the verification answers a retriable error.
        None => Some((kraft.as_ref(), -1)),
    }
}

/// Appends a runner's transactional batch to `topic`-`index`, which this broker leads,
/// after verifying the transaction with its coordinator (KIP-890: a transaction that ended
/// meanwhile, a timeout's abort, is not reopened). Answers the partition and its log end
/// after the batch.
pub(super) async fn append_here(
    broker: &Arc<Broker>,
    txns: &TxnHandle,
    producer: &TxnProducer,
    (topic, index): (&str, i32),
    records: Bytes,
) -> Result<(Arc<Partition>, i64), KafkaError> {
    let output = broker.topics.partition(topic, index).ok_or_else(|| {
        KafkaError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("unknown partition {topic}-{index}"),
        )
    })?;
    output.check_leader()?;
    let tp = TopicPartition {
        topic: topic.to_owned(),
        partition: index,
    };
    let verdicts = verify::verify(
        txns,
        producer,
        vec![(tp, output)],
        verify::Answers::Before11,
        verifier(broker, &producer.transactional_id),
    )
    .await;
    let guard = match verdicts.into_iter().next() {
        Some(verdict) => verdict?,
        None => {
            return Err(KafkaError::new(
                ResponseError::NotEnoughReplicas,
                "the transaction verification task failed",
            ));
        }
    };
    let (broker, owned, txn) = (broker.clone(), topic.to_owned(), producer.clone());
    tokio::task::spawn_blocking(move || {
        let claim = TxnAppend {
            transactional_id: &txn.transactional_id,
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
            guard,
        };
        append_one(&broker.topics, &owned, index, Some(records), Some(&claim))
            .map(|a| (a.partition, a.end_offset))
    })
    .await
    .map_err(|e| {
        KafkaError::new(
            ResponseError::UnknownServerError,
            format!("append task: {e}"),
        )
    })?
}

/// Where an output batch went: appended here (the commit waits for it to be durable), or at
/// another broker, which answered once it was durable if asked to.
#[derive(Debug)]
pub(super) enum Appended {
    Here(Arc<Partition>, i64),
    Elsewhere,
}

/// Appends a runner's transactional batch where `topic`-`index` is led: here, or at its
/// leader (`durable`: answered once on disk there).
///
/// # Errors
/// The append's error (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or
/// REQUEST_TIMED_OUT while leadership moves or the leader cannot be reached).
pub(super) async fn append(
    broker: &Arc<Broker>,
    txns: &TxnHandle,
    producer: &TxnProducer,
    (topic, index): (&str, i32),
    records: Bytes,
    durable: bool,
) -> Result<Appended, KafkaError> {
    let leader = broker
        .topics
        .partition(topic, index)
        .and_then(|p| p.placement())
        .filter(|p| !p.here)
        .map(|p| p.leader);
    let Some(leader) = leader else {
        let (partition, end) = append_here(broker, txns, producer, (topic, index), records).await?;
        return Ok(Appended::Here(partition, end));
    };
    if leader < 0 {
        return Err(KafkaError::new(
            ResponseError::LeaderNotAvailable,
            format!("{topic}-{index} has no live leader"),
        ));
    }
    let topic_id = broker
        .topics
        .topic(topic)
        .map(|t| *t.id.as_bytes())
        .unwrap_or_default();
    let message = BrokerMessage::AppendTransformed {
        topic: topic.to_owned(),
        topic_id,
        partition: index,
        transactional_id: producer.transactional_id.clone(),
        producer_id: producer.producer_id,
        producer_epoch: producer.producer_epoch,
        records: records.to_vec(),
        durable,
    };
    let timed_out = |e: String| KafkaError::new(ResponseError::RequestTimedOut, e);
    let code = kraft(broker)
        .map_err(timed_out)?
        .message(leader, &message)
        .await
        .map_err(timed_out)?;
    match code {
        0 => Ok(Appended::Elsewhere),
        code => {
            let error =
                ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError);
            Err(KafkaError::new(
                error,
                format!("broker {leader}, the leader, answered {error:?}"),
            ))
        }
    }
}

/// The committed position of `topic`-`partition` in `group_id` (where its coordinator is):
/// the offset and its metadata, `None` if none is committed.
///
/// # Errors
/// The coordinator is loading, stopping or unreachable (retriable).
pub(super) async fn fetch_position(
    broker: &Broker,
    groups: &GroupHandle,
    group_id: &str,
    (topic, partition): (&str, i32),
) -> Result<Option<(i64, String)>, String> {
    let offsets = match route(broker, CoordinatorKind::Group, group_id).await? {
        Route::Here => position_here(groups, group_id.to_owned(), topic.to_owned(), partition)
            .await
            .map_err(|code| format!("{code:?}"))?,
        Route::Broker(node) => {
            let message = BrokerMessage::FetchTransformPosition {
                group_id: group_id.to_owned(),
                topic: topic.to_owned(),
                partition,
            };
            match kraft(broker)?.ask(node, &message).await? {
                BrokerReply::Offsets(offsets) => offsets,
                BrokerReply::Code(code) => {
                    return Err(format!("broker {node} answered {}", code_name(code)));
                }
                other => return Err(format!("broker {node} answered {other:?} to a position")),
            }
        }
    };
    Ok(offsets
        .into_iter()
        .find(|o| o.offset >= 0)
        .map(|o| (o.offset, o.metadata.unwrap_or_default())))
}

/// The position at this broker's group coordinator.
pub(super) async fn position_here(
    groups: &GroupHandle,
    group_id: String,
    topic: String,
    partition: i32,
) -> Result<Vec<TxnOffset>, ErrorCode> {
    let tp = sluice_group::TopicPartition { topic, partition };
    let fetched = groups
        .fetch_offsets(group_id, None, Some(vec![tp]))
        .await
        .ok_or(ErrorCode::CoordinatorNotAvailable)??;
    Ok(fetched
        .into_iter()
        .map(|f| TxnOffset {
            topic: f.tp.topic,
            partition: f.tp.partition,
            offset: f.offset,
            leader_epoch: f.leader_epoch,
            metadata: Some(f.metadata),
        })
        .collect())
}

/// How long dropping a transform's group waits for its coordinator to be ready: a group
/// coordinator placed a moment ago (the first transform) or moving (a broker returning)
/// answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until every broker applied the
/// placement.
const GROUP_COORDINATOR_WAIT_MS: u64 = 5_000;

/// The pause between two tries within `GROUP_COORDINATOR_WAIT_MS`.
const GROUP_COORDINATOR_RETRY_MS: u64 = 100;

const _: () = assert!(GROUP_COORDINATOR_RETRY_MS < GROUP_COORDINATOR_WAIT_MS);

/// Drops `group_id` at its coordinator (a group that does not exist is dropped already),
/// waiting up to `GROUP_COORDINATOR_WAIT_MS` for a coordinator that is not ready.
///
/// # Errors
/// The coordinator is stopping or unreachable, or refused.
pub(super) async fn delete_group(
    broker: &Broker,
    groups: &GroupHandle,
    group_id: &str,
) -> Result<(), String> {
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(GROUP_COORDINATOR_WAIT_MS);
    loop {
        let code = delete_group_once(broker, groups, group_id).await?;
        let not_ready = [
            ErrorCode::NotCoordinator,
            ErrorCode::CoordinatorLoadInProgress,
            ErrorCode::CoordinatorNotAvailable,
        ]
        .iter()
        .any(|c| c.code() == code);
        match code {
            0 => return Ok(()),
            _ if not_ready && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(GROUP_COORDINATOR_RETRY_MS))
                    .await;
            }
            code => return Err(format!("dropping {group_id}: {}", code_name(code))),
        }
    }
}

async fn delete_group_once(
    broker: &Broker,
    groups: &GroupHandle,
    group_id: &str,
) -> Result<i16, String> {
    Ok(
        match route(broker, CoordinatorKind::Group, group_id).await? {
            Route::Here => delete_group_here(groups, group_id.to_owned()).await,
            Route::Broker(node) => {
                let message = BrokerMessage::DeleteTransformGroup {
                    group_id: group_id.to_owned(),
                };
                kraft(broker)?.message(node, &message).await?
            }
        },
    )
}

pub(super) async fn delete_group_here(groups: &GroupHandle, group_id: String) -> i16 {
    match groups.delete_groups(vec![group_id]).await.as_deref() {
        Some([(_, sluice_group::ErrorCode::None | sluice_group::ErrorCode::GroupIdNotFound)]) => 0,
        Some([(_, code)]) => code.code(),
        _ => ErrorCode::CoordinatorNotAvailable.code(),
    }
}

fn code_name(code: i16) -> String {
    ResponseError::try_from_code(code).map_or_else(|| format!("error {code}"), |e| format!("{e:?}"))
}

/// Each source partition's start offset for `from`, resolved now where each is led: here
/// from the log, elsewhere by its leader (one message per broker).
///
/// # Errors
/// A partition without a live leader, a leader that cannot be reached, or a time that cannot
/// be looked up.
pub(super) async fn start_offsets(
    broker: &Broker,
    source: &Topic,
    from: FromOffset,
) -> Result<Vec<i64>, KafkaError> {
    let mut offsets = vec![-1; source.partitions.len()];
    let mut elsewhere: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (slot, partition) in offsets.iter_mut().zip(source.partitions.iter()) {
        match partition.placement() {
            Some(p) if !p.here && p.leader < 0 => {
                return Err(KafkaError::new(
                    ResponseError::LeaderNotAvailable,
                    format!(
                        "the start offset of {}-{} cannot be resolved: it has no live leader",
                        source.name, partition.index
                    ),
                ));
            }
            Some(p) if !p.here => elsewhere.entry(p.leader).or_default().push(partition.index),
            _ => *slot = start_offset_here(partition, from)?,
        }
    }
    for (node, partitions) in elsewhere {
        let message = BrokerMessage::TransformStartOffsets {
            topic: source.name.clone(),
            partitions: partitions.clone(),
            from: from.to_string(),
        };
        let failed = |e: String| {
            KafkaError::new(
                ResponseError::LeaderNotAvailable,
                format!(
                    "resolving start offsets of {} at broker {node}: {e}",
                    source.name
                ),
            )
        };
        let answer = ask_patiently(kraft(broker).map_err(failed)?, node, &message)
            .await
            .map_err(failed)?;
        let BrokerReply::Offsets(answered) = answer else {
            return Err(failed(format!("answered {answer:?}")));
        };
        for o in answered {
            let slot = usize::try_from(o.partition)
                .ok()
                .and_then(|i| offsets.get_mut(i));
            match slot {
                Some(slot) if partitions.contains(&o.partition) && o.offset >= 0 => {
                    *slot = o.offset
                }
                _ => {
                    return Err(failed(format!(
                        "answered partition {} offset {}",
                        o.partition, o.offset
                    )));
                }
            }
        }
    }
    if let Some(missing) = offsets.iter().position(|&o| o < 0) {
        return Err(KafkaError::new(
            ResponseError::LeaderNotAvailable,
            format!(
                "the start offset of {}-{missing} was not resolved",
                source.name
            ),
        ));
    }
    Ok(offsets)
}

/// How long a deploy or restart waits for a source partition's leader to resolve its start
/// offset: a topic created a moment ago may not be applied on its leader yet.
const START_OFFSETS_WAIT_MS: u64 = 5_000;

/// The pause between two tries within `START_OFFSETS_WAIT_MS`.
const START_OFFSETS_RETRY_MS: u64 = 100;

const _: () = assert!(START_OFFSETS_RETRY_MS < START_OFFSETS_WAIT_MS);

/// `message` to broker `node`, asked again for up to `START_OFFSETS_WAIT_MS` while it fails.
async fn ask_patiently(
    kraft: &Kraft,
    node: i32,
    message: &BrokerMessage,
) -> Result<BrokerReply, String> {
    let deadline =
        tokio::time::Instant::now() + std::time::Duration::from_millis(START_OFFSETS_WAIT_MS);
    loop {
        match kraft.ask(node, message).await {
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(START_OFFSETS_RETRY_MS)).await;
            }
            answer => return answer,
        }
    }
}

/// One partition's start offset for `from`, from its log here.
pub(super) fn start_offset_here(
    partition: &Partition,
    from: FromOffset,
) -> Result<i64, KafkaError> {
    partition.with_log(|log| {
        let start = log.log_start_offset().value();
        let end = log.log_end_offset().value();
        match from {
            FromOffset::Earliest => Ok(start),
            FromOffset::Latest => Ok(end),
            FromOffset::Offset(o) => Ok(o.clamp(start, end)),
            FromOffset::Timestamp(ms) => log
                .offset_for_timestamp_with(ms, Some(&crate::codec::decompress_for_timestamp_lookup))
                .map(|found| found.map_or(end, |(o, _): (Offset, i64)| o.value()))
                .map_err(|e| KafkaError::new(ResponseError::KafkaStorageError, e.to_string())),
        }
    })?
}
