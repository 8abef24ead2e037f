//! The metadata quorum's decoders, for the `cluster_frames` fuzz target: the first byte picks
//! one (modulo 8): the body of each controller-listener frame a peer may send (Hello,
//! AppendEntries, Vote, a snapshot's header, a forwarded operation, a broker message), the
//! Raft entry codec over a stored record batch and the `quorum-state` file. Whatever decodes must not panic,
//! and no decoder may allocate beyond the bytes it was given.

use super::types::MetaTypes;
use super::{entry_codec, quorum_state, wire};

/// Runs one input through the decoder its first byte picks.
pub fn frames(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match selector % 8 {
        0 => drop(wire::decode::<wire::Hello>(body)),
        1 => drop(wire::decode::<
            openraft::raft::AppendEntriesRequest<MetaTypes>,
        >(body)),
        2 => drop(wire::decode::<openraft::raft::VoteRequest<MetaTypes>>(body)),
        3 => drop(wire::decode::<wire::SnapshotRequest>(body)),
        4 => drop(wire::decode::<super::ControllerOp>(body)),
        5 => drop(entry_codec::decode(body.to_vec())),
        6 => drop(quorum_state::QuorumState::decode(body)),
        _ => drop(wire::decode::<wire::BrokerMessage>(body)),
    }
}

/// Seeds: a valid body of each kind, behind its selector byte.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let with = |selector: u8, body: Vec<u8>| {
        let mut input = vec![selector];
        input.extend_from_slice(&body);
        input
    };
    let mut out = Vec::new();
    if let Ok(body) = wire::encode(&super::ControllerOp::DeleteTopics(vec!["orders".into()])) {
        out.push(("forwarded-op".to_owned(), with(4, body)));
    }
    let alter = super::ControllerOp::AlterPartition {
        broker_id: 1,
        broker_epoch: 7,
        topic_id: [3; 16],
        partition: 0,
        leader_epoch: 2,
        partition_epoch: 5,
        new_isr: vec![(1, 7), (2, -1)],
    };
    if let Ok(body) = wire::encode(&alter) {
        out.push(("forwarded-alter-partition".to_owned(), with(4, body)));
    }
    out.push((
        "quorum-state".to_owned(),
        with(6, quorum_state::QuorumState::default().encode()),
    ));
    let message = wire::BrokerMessage::CommitGroupOffsets {
        group_id: "readers".into(),
        offsets: vec![wire::TxnOffset {
            topic: "orders".into(),
            partition: 0,
            offset: 42,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    if let Ok(body) = wire::encode(&message) {
        out.push(("broker-message".to_owned(), with(7, body)));
    }
    let routed = wire::BrokerMessage::AppendRouted {
        topic: "orders".into(),
        topic_id: [7; 16],
        partition: 2,
        leader_epoch: 4,
        records: sluice_storage::testing::build_value_batch(2, 8, 7, 1_000),
        durable: true,
    };
    if let Ok(body) = wire::encode(&routed) {
        out.push(("broker-message-routed".to_owned(), with(7, body)));
    }
    let step = wire::BrokerMessage::TransformTxn {
        transactional_id: "__sluice_transform/orders-split/0".into(),
        step: wire::TransformTxnStep::AddPartitions {
            producer_id: 4_294_967_296,
            producer_epoch: 3,
            partitions: vec![("orders-eu".into(), 1), ("orders-us".into(), 0)],
        },
    };
    if let Ok(body) = wire::encode(&step) {
        out.push(("broker-message-transform-txn".to_owned(), with(7, body)));
    }
    let output = wire::BrokerMessage::AppendTransformed {
        topic: "orders-eu".into(),
        topic_id: [9; 16],
        partition: 1,
        transactional_id: "__sluice_transform/orders-split/0".into(),
        producer_id: 4_294_967_296,
        producer_epoch: 3,
        records: sluice_storage::testing::build_value_batch(2, 8, 7, 1_000),
        durable: true,
    };
    if let Ok(body) = wire::encode(&output) {
        out.push(("broker-message-transformed".to_owned(), with(7, body)));
    }
    out
}
