//! A broker's lifecycle in the cluster (KIP-631): it registers with a random incarnation
//! id drawn at each start, heartbeats every `broker.heartbeat.interval.ms` (reporting the
//! metadata index it has applied, which unfences it once it caught up to its registration),
//! registers again if the controller no longer knows its epoch, and on shutdown asks for a
//! controlled shutdown until the controller releases it (bounded by
//! `CONTROLLED_SHUTDOWN_TIMEOUT_MS`).

use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::records::{BrokerRegistration, IncarnationId};
use sluice_kafka::ErrorCode;
use tokio::sync::watch;

use super::limits::{CONTROLLED_SHUTDOWN_RETRY_MS, CONTROLLED_SHUTDOWN_TIMEOUT_MS};
use super::ops::{ControllerOp, ControllerReply};
use super::service::{BrokerConfig, ClusterError, Shared};

/// Runs the lifecycle of broker `node_id` until `stop`, then its controlled shutdown.
pub(crate) async fn run(
    shared: Arc<Shared>,
    config: BrokerConfig,
    node_id: i32,
    mut stop: watch::Receiver<bool>,
) {
    let mut incarnation = [0u8; 16];
    crate::random::OsRng::fill(&mut incarnation).expect("getrandom(2) failed");
    let incarnation = *shared.incarnation.get_or_init(|| incarnation);
    let registration = BrokerRegistration {
        node_id,
        incarnation_id: IncarnationId(incarnation),
        listeners: config.listeners.clone(),
        rack: config.rack.clone(),
    };
    let interval = Duration::from_millis(config.heartbeat_interval_ms);
    if !shared.is_voter() {
        // A broker-only node follows the metadata log as a learner before it registers.
        let join = ControllerOp::AddLearner {
            node_id,
            controller_addr: shared.controller_addr.clone(),
        };
        loop {
            let step = shared.submit(join.clone());
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                joined = step => match joined {
                    Ok(_) => break,
                    Err(e) => tracing::info!(error = %e, "joining the metadata quorum as a learner; retrying"),
                },
            }
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => return,
                () = tokio::time::sleep(interval) => {}
            }
        }
    }
    let mut epoch = None;
    loop {
        // A stop interrupts a registration or heartbeat waiting for a leader.
        let step = async {
            match epoch {
                None => register(&shared, &registration).await,
                Some(epoch) => heartbeat(&shared, node_id, epoch, false)
                    .await
                    .map(|_| epoch),
            }
        };
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            next = step => epoch = next,
        }
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            () = tokio::time::sleep(interval) => {}
        }
    }
    if let Some(epoch) = epoch {
        let limit = Duration::from_millis(CONTROLLED_SHUTDOWN_TIMEOUT_MS);
        let shutdown = controlled_shutdown(&shared, node_id, epoch, interval);
        if tokio::time::timeout(limit, shutdown).await.is_err() {
            tracing::warn!(
                node = node_id,
                "controlled shutdown not confirmed within CONTROLLED_SHUTDOWN_TIMEOUT_MS \
                 ({CONTROLLED_SHUTDOWN_TIMEOUT_MS} ms)"
            );
        }
    }
}

async fn register(shared: &Shared, registration: &BrokerRegistration) -> Option<i64> {
    match shared
        .submit(ControllerOp::RegisterBroker(registration.clone()))
        .await
    {
        Ok(ControllerReply::BrokerEpoch(epoch)) => {
            tracing::info!(node = registration.node_id, epoch, "broker registered");
            Some(epoch)
        }
        Ok(other) => {
            tracing::error!(?other, "unexpected answer to a registration");
            None
        }
        Err(ClusterError::Refused(e))
            if e.code == ErrorCode::DuplicateBrokerRegistration.code() =>
        {
            tracing::error!(
                node = registration.node_id,
                error = %e,
                "another live broker is registered with this node.id: give each broker its own node.id (this one retries until the other is gone)"
            );
            None
        }
        Err(e) => {
            tracing::info!(error = %e, "broker registration failed; retrying");
            None
        }
    }
}

/// One heartbeat; `None` when the registration is gone (register again), `Some(should
/// shut down)` otherwise (a failed heartbeat keeps the registration: it is retried).
async fn heartbeat(shared: &Shared, node_id: i32, epoch: i64, shut_down: bool) -> Option<bool> {
    let applied = shared.image.borrow().last_applied_index();
    let op = ControllerOp::Heartbeat {
        node_id,
        broker_epoch: epoch,
        current_metadata_offset: i64::try_from(applied).unwrap_or(i64::MAX),
        want_fence: false,
        want_shut_down: shut_down,
    };
    match shared.submit(op).await {
        Ok(ControllerReply::Heartbeat {
            should_shut_down, ..
        }) => Some(should_shut_down),
        Err(ClusterError::Refused(e))
            if e.code == ErrorCode::StaleBrokerEpoch.code()
                || e.code == ErrorCode::BrokerIdNotRegistered.code() =>
        {
            tracing::info!(node = node_id, error = %e, "registration lost; registering again");
            None
        }
        Ok(other) => {
            tracing::error!(?other, "unexpected answer to a heartbeat");
            Some(false)
        }
        Err(e) => {
            tracing::debug!(error = %e, "heartbeat failed");
            Some(false)
        }
    }
}

/// Heartbeats asking for a controlled shutdown until the controller releases the broker
/// (the caller bounds it).
async fn controlled_shutdown(shared: &Shared, node_id: i32, epoch: i64, interval: Duration) {
    let retry = interval.min(Duration::from_millis(CONTROLLED_SHUTDOWN_RETRY_MS));
    loop {
        match heartbeat(shared, node_id, epoch, true).await {
            Some(true) | None => {
                tracing::info!(node = node_id, "controlled shutdown complete");
                return;
            }
            Some(false) => tokio::time::sleep(retry).await,
        }
    }
}
