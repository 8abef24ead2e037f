//! The other side of the runners' messages (`remote.rs`): what this broker does for a
//! runner on another broker, as its transactional id's coordinator, its output partition's
//! leader, its group's coordinator or its source partition's leader, and its own runners'
//! state for another broker's `describe`. Each message is checked first: only
//! `__sluice_transform/` ids and groups, only what this broker coordinates or leads now
//! (else NOT_COORDINATOR or NOT_LEADER_OR_FOLLOWER: the runner retries where the image
//! says), counts within the transform limits.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_transform::{FromOffset, limits};
use sluice_txn::ErrorCode;

use crate::broker::Broker;
use crate::cluster::{
    BrokerAnswer, BrokerMessage, BrokerMessages, BrokerReply, TransformTxnStep, TxnOffset,
};
use crate::group::GroupHandle;
use crate::kraft::CoordinatorKind;
use crate::topics::group_commit;
use crate::txn::{TxnHandle, TxnProducer};

use super::TransformService;

// A broker's reports fit one broker message frame.
const _: () = assert!(
    crate::limits::TRANSFORM_REPORTS_BYTES_MAX
        < crate::cluster::limits::BROKER_FRAME_BYTES_MAX as usize
);
use super::remote::{
    TxnAnswer, append_here, delete_group_here, position_here, start_offset_here, txn_step_here,
};

/// Serves the other brokers' transform messages; every other message goes to `next`.
pub fn handler(
    broker: Arc<Broker>,
    txns: TxnHandle,
    groups: GroupHandle,
    service: TransformService,
    next: BrokerMessages,
) -> BrokerMessages {
    BrokerMessages(Arc::new(move |message| {
        let is_ours = matches!(
            message,
            BrokerMessage::TransformTxn { .. }
                | BrokerMessage::AppendTransformed { .. }
                | BrokerMessage::FetchTransformPosition { .. }
                | BrokerMessage::DeleteTransformGroup { .. }
                | BrokerMessage::TransformStartOffsets { .. }
                | BrokerMessage::TransformReports { .. }
        );
        if !is_ours {
            return (next.0)(message);
        }
        let (broker, txns, groups, service) = (
            broker.clone(),
            txns.clone(),
            groups.clone(),
            service.clone(),
        );
        Box::pin(async move { serve(&broker, &txns, &groups, &service, message).await })
    }))
}

/// Whether this broker coordinates `key` now (a peer's map may be a step behind).
fn coordinates(broker: &Broker, kind: CoordinatorKind, key: &str) -> bool {
    broker.kraft().is_some_and(|k| k.coordinates(kind, key))
}

/// Refuses an id or group that is not a transform's: these messages are the runners' only.
fn reserved(id: &str) -> Result<(), String> {
    if sluice_transform::spec::is_reserved(id) {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a transform's: transform messages carry only __sluice_transform/ ids"
        ))
    }
}

async fn serve(
    broker: &Arc<Broker>,
    txns: &TxnHandle,
    groups: &GroupHandle,
    service: &TransformService,
    message: BrokerMessage,
) -> BrokerAnswer {
    let not_coordinator = BrokerReply::Code(ErrorCode::NotCoordinator.code());
    match message {
        BrokerMessage::TransformTxn {
            transactional_id,
            step,
        } => txn_step(broker, txns, transactional_id, step).await,
        BrokerMessage::AppendTransformed {
            topic,
            topic_id,
            partition,
            transactional_id,
            producer_id,
            producer_epoch,
            records,
            durable,
        } => {
            reserved(&transactional_id)?;
            let producer = TxnProducer {
                transactional_id,
                producer_id,
                producer_epoch,
            };
            let batch = (topic.as_str(), topic_id, partition);
            Ok(BrokerReply::Code(
                append(broker, txns, &producer, batch, records, durable).await,
            ))
        }
        BrokerMessage::FetchTransformPosition {
            group_id,
            topic,
            partition,
        } => {
            reserved(&group_id)?;
            if !coordinates(broker, CoordinatorKind::Group, &group_id) {
                return Ok(not_coordinator);
            }
            Ok(
                match position_here(groups, group_id, topic, partition).await {
                    Ok(offsets) => BrokerReply::Offsets(offsets),
                    Err(code) => BrokerReply::Code(code.code()),
                },
            )
        }
        BrokerMessage::DeleteTransformGroup { group_id } => {
            reserved(&group_id)?;
            if !coordinates(broker, CoordinatorKind::Group, &group_id) {
                return Ok(not_coordinator);
            }
            Ok(BrokerReply::Code(delete_group_here(groups, group_id).await))
        }
        BrokerMessage::TransformStartOffsets {
            topic,
            partitions,
            from,
        } => start_offsets(broker, topic, partitions, &from).await,
        BrokerMessage::TransformReports { name } => reports(service, name.as_deref()).await,
        other => Err(format!("not a transform message: {other:?}")),
    }
}

/// A runner's transaction step at this broker's coordinator.
async fn txn_step(
    broker: &Broker,
    txns: &TxnHandle,
    transactional_id: String,
    step: TransformTxnStep,
) -> BrokerAnswer {
    reserved(&transactional_id)?;
    if let TransformTxnStep::AddPartitions { partitions, .. }
    | TransformTxnStep::Verify { partitions, .. } = &step
        && partitions.len() > limits::TRANSFORM_TXN_PARTITIONS_MAX
    {
        return Err(format!(
            "{} partitions in one transaction step, over TRANSFORM_TXN_PARTITIONS_MAX ({})",
            partitions.len(),
            limits::TRANSFORM_TXN_PARTITIONS_MAX
        ));
    }
    if !coordinates(broker, CoordinatorKind::Transaction, &transactional_id) {
        return Ok(BrokerReply::Code(ErrorCode::NotCoordinator.code()));
    }
    Ok(match txn_step_here(txns, transactional_id, step).await {
        Some(TxnAnswer::Producer {
            producer_id,
            producer_epoch,
        }) => BrokerReply::Producer {
            producer_id,
            producer_epoch,
        },
        Some(TxnAnswer::Code(code)) => BrokerReply::Code(code.code()),
        Some(TxnAnswer::Verified(verified)) => BrokerReply::Verified(verified),
        None => BrokerReply::Code(ErrorCode::CoordinatorNotAvailable.code()),
    })
}

/// A runner's output batch for a partition this broker leads (of the topic with that id):
/// Kafka's error code, 0 once appended (and durable, with `durable`).
async fn append(
    broker: &Arc<Broker>,
    txns: &TxnHandle,
    producer: &TxnProducer,
    (topic, topic_id, partition): (&str, [u8; 16], i32),
    records: Vec<u8>,
    durable: bool,
) -> i16 {
    let known = broker
        .topics
        .topic(topic)
        .is_some_and(|t| *t.id.as_bytes() == topic_id);
    if !known {
        return ResponseError::UnknownTopicOrPartition.code();
    }
    match append_here(broker, txns, producer, (topic, partition), records.into()).await {
        Ok((output, end_offset)) if durable => group_commit::wait_durable(&output, end_offset)
            .await
            .map_or_else(|e| e.code.code(), |()| 0),
        Ok(_) => 0,
        Err(e) => {
            tracing::debug!(%topic, partition, code = ?e.code, "a transform's output batch refused: {}", e.message);
            e.code.code()
        }
    }
}

/// The start offsets of source partitions this broker leads, for a deploy or restart.
async fn start_offsets(
    broker: &Arc<Broker>,
    topic: String,
    partitions: Vec<i32>,
    from: &str,
) -> BrokerAnswer {
    if partitions.len() > limits::TRANSFORM_SOURCE_PARTITIONS_MAX {
        return Err(format!(
            "{} partitions asked, over TRANSFORM_SOURCE_PARTITIONS_MAX ({})",
            partitions.len(),
            limits::TRANSFORM_SOURCE_PARTITIONS_MAX
        ));
    }
    let from = FromOffset::parse(from).map_err(|e| e.to_string())?;
    let broker = broker.clone();
    tokio::task::spawn_blocking(move || {
        partitions
            .into_iter()
            .map(|index| {
                let partition = broker
                    .topics
                    .partition(&topic, index)
                    .ok_or_else(|| format!("unknown partition {topic}-{index}"))?;
                partition.check_leader().map_err(|e| e.message)?;
                let offset = start_offset_here(&partition, from).map_err(|e| e.message)?;
                Ok(TxnOffset {
                    topic: topic.clone(),
                    partition: index,
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map(BrokerReply::Offsets)
    })
    .await
    .map_err(|e| e.to_string())?
}

/// This broker's runners' reports, JSON, within `TRANSFORM_REPORTS_BYTES_MAX`.
async fn reports(service: &TransformService, name: Option<&str>) -> BrokerAnswer {
    let reports = service.local_reports(name).await;
    let json = serde_json::to_vec(&reports).map_err(|e| e.to_string())?;
    if json.len() > crate::limits::TRANSFORM_REPORTS_BYTES_MAX {
        return Err(format!(
            "the transform reports of this broker take {} bytes, over TRANSFORM_REPORTS_BYTES_MAX ({}): describe one transform",
            json.len(),
            crate::limits::TRANSFORM_REPORTS_BYTES_MAX
        ));
    }
    Ok(BrokerReply::Json(json))
}
