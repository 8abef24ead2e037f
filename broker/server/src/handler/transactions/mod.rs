//! Idempotent and transactional producers: everything the transaction coordinator answers
//! (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
//! DescribeTransactions, ListTransactions), the producer state the transaction tools read
//! (DescribeProducers, KIP-664), and WriteTxnMarkers (an operator ending a hanging
//! transaction). `txn_common.rs`: the round trip to the coordinator task, the transactional
//! id's ACL check, the coordinator's codes on the wire. One `match` over their API keys.

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod describe_producers;
mod describe_transactions;
mod end_txn;
mod init_producer_id;
mod list_transactions;
mod txn_common;
mod txn_offset_commit;
mod write_txn_markers;

use kafka_protocol::messages::ApiKey;

use std::sync::Arc;

use crate::authz::Authz;
use crate::config::BrokerConfig;
use crate::group::GroupHandle;
use crate::topics::TopicRegistry;
use crate::txn::TxnHandle;
use crate::wire::{Client, ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// What a transaction handler is given: who asks, what they may do, the coordinator, the
/// group coordinator (TxnOffsetCommit checks members against it), the
/// topics (their partitions, for markers and producer state) and the config (the offset
/// metadata bound, whether markers are fsynced).
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub auth: Authz<'a>,
    pub txns: &'a TxnHandle,
    /// TxnOffsetCommit v3+ checks the consumer's member fields with the group (KIP-447).
    pub groups: &'a GroupHandle,
    pub topics: &'a Arc<TopicRegistry>,
    pub config: &'a BrokerConfig,
    /// The cluster side, when this broker is in a cluster (it coordinates only its ids).
    pub kraft: Option<&'a Arc<crate::kraft::Kraft>>,
}

/// Answers a transaction request.
pub(super) async fn dispatch(
    conn: &ConnectionContext,
    mut call: Call,
) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        client: &conn.client,
        auth: Authz::new(&conn.broker.security, &conn.client),
        txns: &conn.txns,
        groups: &conn.groups,
        topics: &conn.broker.topics,
        config: &conn.broker.config,
        kraft: conn.broker.kraft(),
    };
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::InitProducerId => {
            answer.reply(&init_producer_id::handle(ctx, call.request()?, v).await)
        }
        ApiKey::AddPartitionsToTxn => {
            answer.reply(&add_partitions_to_txn::handle(ctx, call.request()?, v).await)
        }
        ApiKey::AddOffsetsToTxn => {
            answer.reply(&add_offsets_to_txn::handle(ctx, call.request()?, v).await)
        }
        ApiKey::TxnOffsetCommit => {
            answer.reply(&txn_offset_commit::handle(ctx, call.request()?, v).await)
        }
        ApiKey::EndTxn => answer.reply(&end_txn::handle(ctx, call.request()?, v).await),
        ApiKey::DescribeTransactions => {
            answer.reply(&describe_transactions::handle(ctx, call.request()?).await)
        }
        ApiKey::ListTransactions => {
            let now_ms = conn.broker.now_ms();
            answer.reply(&list_transactions::handle(ctx, call.request()?, now_ms).await)
        }
        ApiKey::DescribeProducers => {
            answer.reply(&describe_producers::handle(ctx, call.request()?).await)
        }
        ApiKey::WriteTxnMarkers => {
            answer.reply(&write_txn_markers::handle(ctx, call.request()?).await)
        }
        other => Err(no_handler(other)),
    }
}
