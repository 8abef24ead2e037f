//! Other brokers' messages to this broker's services (a cluster), and first a transaction's
//! consumer offsets between brokers: the group's coordinator
//! checks a TxnOffsetCommit's member (KIP-447) and hands the offsets to the transaction's
//! coordinator, where they wait in the transaction (`hold`); when it commits, the
//! transaction's coordinator hands them to the group's coordinator (`markers.rs`). Both travel
//! as [`BrokerMessage`]s on the controller listener, which only this cluster's brokers reach.
//! A plugin uploaded to one broker is installed on the others the same way
//! (`crate::plugins::apply_remote`), and records a partitioner plugin routed to a partition
//! another broker leads are appended there (`crate::reroute::append_forwarded`).

use std::sync::Arc;

use sluice_txn::{ErrorCode, PendingOffset, PendingOffsets, TxnProtocol};

use super::{TxnHandle, TxnProducer};
use crate::broker::Broker;
use crate::cluster::{BrokerAnswer, BrokerMessage, BrokerMessages, BrokerReply, TxnOffset};
use crate::group::GroupHandle;

/// The handler of other brokers' messages to this broker's coordinators.
pub fn handler(broker: Arc<Broker>, txns: TxnHandle, groups: GroupHandle) -> BrokerMessages {
    BrokerMessages(Arc::new(move |message| {
        let (broker, txns, groups) = (Arc::clone(&broker), txns.clone(), groups.clone());
        Box::pin(async move { handle(&broker, &txns, &groups, message).await })
    }))
}

async fn handle(
    broker: &Arc<Broker>,
    txns: &TxnHandle,
    groups: &GroupHandle,
    message: BrokerMessage,
) -> BrokerAnswer {
    match message {
        BrokerMessage::HoldTxnOffsets {
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
            offsets,
            protocol_v2,
        } => {
            let txn = TxnProducer {
                transactional_id,
                producer_id,
                producer_epoch,
            };
            let protocol = if protocol_v2 {
                TxnProtocol::V2
            } else {
                TxnProtocol::V1
            };
            let offsets = offsets.into_iter().map(PendingOffset::from).collect();
            let code = txns
                .commit_offsets(txn, group_id, offsets, protocol)
                .await
                .unwrap_or(ErrorCode::CoordinatorNotAvailable);
            Ok(BrokerReply::Code(code.code()))
        }
        BrokerMessage::CommitGroupOffsets { group_id, offsets } => {
            let pending = PendingOffsets {
                group_id,
                offsets: offsets.into_iter().map(PendingOffset::from).collect(),
            };
            let written = super::markers::commit_offsets(broker, groups, &pending).await;
            Ok(BrokerReply::Code(if written {
                0
            } else {
                ErrorCode::CoordinatorNotAvailable.code()
            }))
        }
        other => services(broker, other).await,
    }
}

/// The messages for the broker's other services: plugins, ephemeral views, re-routed
/// records.
async fn services(broker: &Arc<Broker>, message: BrokerMessage) -> BrokerAnswer {
    match message {
        message @ (BrokerMessage::PutEphemeralView { .. }
        | BrokerMessage::RemoveEphemeralView { .. }) => {
            let topics = Arc::clone(&broker.topics);
            tokio::task::spawn_blocking(move || match message {
                BrokerMessage::PutEphemeralView { spec } => topics.put_ephemeral_view(&spec),
                BrokerMessage::RemoveEphemeralView { name } => topics.remove_ephemeral_view(&name),
                _ => Ok(()),
            })
            .await
            .map_err(|e| e.to_string())?
            .map(|()| BrokerReply::Code(0))
        }
        BrokerMessage::FetchPlugin { name, sha256 } => {
            let broker = Arc::clone(broker);
            tokio::task::spawn_blocking(move || {
                crate::plugins::bytes_for_peer(&broker.plugins, &name, &sha256)
            })
            .await
            .map_err(|e| e.to_string())?
            .map(BrokerReply::Plugin)
        }
        message @ (BrokerMessage::InstallPlugin { .. } | BrokerMessage::RemovePlugin { .. }) => {
            let installing = match &message {
                BrokerMessage::InstallPlugin { name, .. } => Some(name.clone()),
                _ => None,
            };
            let plugins = Arc::clone(broker);
            let code = tokio::task::spawn_blocking(move || {
                crate::plugins::apply_remote(&plugins.plugins, message)
            })
            .await
            .map_err(|e| e.to_string())??;
            // Its record commits once the sender has copied it everywhere: until then the
            // image still names the version it replaces (`kraft::plugins`).
            if let (Some(name), Some(kraft)) = (installing, broker.kraft())
                && let Some(info) = broker.plugins.registry.describe(&name)
            {
                kraft.plugin_installed(&name, &info.sha256);
            }
            Ok(BrokerReply::Code(code))
        }
        BrokerMessage::AppendRouted {
            topic,
            topic_id,
            partition,
            leader_epoch,
            records,
            durable,
        } => {
            let forward = crate::reroute::Forward {
                topic,
                topic_id: uuid::Uuid::from_bytes(topic_id),
                partition,
                leader: -1,
                leader_epoch,
                records: records.into(),
            };
            Ok(BrokerReply::Code(
                crate::reroute::append_forwarded(&broker.topics, forward, durable).await,
            ))
        }
        BrokerMessage::HoldTxnOffsets { .. } | BrokerMessage::CommitGroupOffsets { .. } => {
            Err("a transaction message reached the services' handler".to_owned())
        }
        // Taken by `crate::transforms::remote`'s handler before this one.
        BrokerMessage::TransformTxn { .. }
        | BrokerMessage::AppendTransformed { .. }
        | BrokerMessage::FetchTransformPosition { .. }
        | BrokerMessage::DeleteTransformGroup { .. }
        | BrokerMessage::TransformStartOffsets { .. }
        | BrokerMessage::TransformReports { .. } => {
            Err("a transform message reached the coordinators' handler".to_owned())
        }
    }
}

/// An offset of a transaction for the wire.
pub fn wire_offset(o: &PendingOffset) -> TxnOffset {
    TxnOffset {
        topic: o.tp.topic.clone(),
        partition: o.tp.partition,
        offset: o.committed_offset,
        leader_epoch: o.leader_epoch,
        metadata: o.metadata.clone(),
    }
}
