//! The broker's background work, in one place: what starts it, in which order, what holds
//! its handles, and the order it stops in at shutdown.
//!
//! Started in this order:
//! 1. at bind, the coordinators: the group coordinator (its consumer groups' regex
//!    subscriptions filtered by the ACLs), then the transaction coordinator (a commit's
//!    markers hand offsets to the groups), then the transforms service (its runners use
//!    both);
//! 2. when the server runs, the log work: the log ticker (flush.ms, segment.ms, recovery
//!    checkpoints, retention and the idle ephemeral views' expiry), the fence prober
//!    (`fence`), the log cleaner (`cleaner`) and the delegation token sweeper (expired
//!    tokens removed from the security log).
//!
//! Stopped in this order, after the listener has stopped accepting, flipped the shutdown
//! flag and waited for its connections (in a cluster the transforms service stops then,
//! before the broker leaves the quorum: its runners commit through other brokers):
//! 1. the log work, which ends by itself once the flag flips ([`Background::stop_log_work`]
//!    waits for it: a cleaning round or a tick in progress finishes first);
//! 2. (the listener stops the admin API here: it reads the coordinators)
//! 3. the services ([`Background::stop_services`]): transforms first, so every runner
//!    commits (or aborts) its open transaction; then the transaction coordinator; then the
//!    group coordinator, which closes the offsets log. The listener then closes every
//!    partition (`Broker::close_all`).

use std::sync::Arc;
use std::time::Duration;

use sluice_security::records::SecurityRecord;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::error::ServerError;
use crate::group::{GroupHandle, GroupService, OffsetsLog};
use crate::limits;
use crate::transforms::TransformService;
use crate::txn::{TxnHandle, TxnLog, TxnService};

/// The coordinators' internal logs, opened with the broker (blocking I/O), and the records
/// each replays.
#[derive(Debug)]
pub(crate) struct Opened {
    offsets: (OffsetsLog, Vec<sluice_group::OffsetRecord>),
    txns: (TxnLog, Vec<sluice_txn::TxnRecord>),
}

impl Opened {
    /// Opens the offsets log and the transaction log under `broker`'s data dir (blocking:
    /// call from the blocking pool).
    pub(crate) fn open(broker: &Broker) -> Result<Self, ServerError> {
        let mut offsets = GroupService::open(
            &broker.config.data_dir,
            broker.config.acks_all_fsync,
            broker.clock().clone(),
        )?;
        offsets.0.report_fences_to(broker.metrics.fences.clone());
        let txns = TxnService::open(broker)?;
        Ok(Self { offsets, txns })
    }
}

/// The background tasks of a broker and their handles.
#[derive(Debug)]
pub(crate) struct Background {
    /// The group coordinator; stopped last of the services (the transaction coordinator's
    /// commits may still hand it offsets), closing the offsets log.
    groups: GroupService,
    /// The transaction coordinator; stopped after the transforms, before the groups.
    txns: TxnService,
    /// Materialized transforms; stopped first of the services, so every runner commits (or
    /// aborts) its open transaction while the coordinators still run.
    transforms: TransformService,
    /// The log ticker, the fence prober and the log cleaner, once the server runs; each
    /// returns when the shutdown flag flips.
    log_work: Vec<(&'static str, JoinHandle<()>)>,
}

impl Background {
    /// Starts the coordinators, in order: groups, transactions, transforms.
    pub(crate) fn start(broker: &Arc<Broker>, opened: Opened) -> Result<Self, ServerError> {
        let Opened {
            offsets: (offsets_log, offsets),
            txns: (txn_log, txn_records),
        } = opened;
        let groups = spawn_groups(broker, offsets_log, offsets)?;
        let txns = TxnService::spawn(broker.clone(), groups.handle.clone(), txn_log, txn_records)?;
        let transforms =
            TransformService::spawn(broker.clone(), txns.handle.clone(), groups.handle.clone())?;
        Ok(Self {
            groups,
            txns,
            transforms,
            log_work: Vec::new(),
        })
    }

    /// The group coordinator, for connections and the admin API.
    pub(crate) fn groups(&self) -> &GroupHandle {
        &self.groups.handle
    }

    /// The transaction coordinator, for connections.
    pub(crate) fn txns(&self) -> &TxnHandle {
        &self.txns.handle
    }

    /// The transforms service, for the admin API.
    pub(crate) fn transforms(&self) -> &TransformService {
        &self.transforms
    }

    /// Starts the log work, in order: the log ticker, the fence prober, the log cleaner, the
    /// delegation token sweeper; each ends when `shutdown` flips.
    pub(crate) fn start_log_work(&mut self, broker: &Arc<Broker>, shutdown: &watch::Sender<bool>) {
        self.log_work = vec![
            (
                "log ticker",
                tokio::spawn(tick_logs(broker.clone(), shutdown.subscribe())),
            ),
            (
                "fence prober",
                crate::fence::spawn(&broker.topics, &broker.metrics.fences, shutdown),
            ),
            (
                "log cleaner",
                crate::cleaner::spawn(&broker.topics, &broker.metrics.cleaner, shutdown),
            ),
            (
                "token sweeper",
                tokio::spawn(sweep_tokens(broker.clone(), shutdown.subscribe())),
            ),
        ];
    }

    /// Waits for the log work to end, in the order it started (the shutdown flag has
    /// flipped).
    pub(crate) async fn stop_log_work(&mut self) {
        for (name, task) in self.log_work.drain(..) {
            if let Err(e) = task.await {
                tracing::error!(task = name, error = %e, "background task failed");
            }
        }
    }

    /// Stops the services, in order: transforms, transactions, groups.
    pub(crate) async fn stop_services(self) {
        self.transforms.stop().await;
        self.txns.stop().await;
        self.groups.stop().await;
    }
}

/// The group coordinator, its consumer groups' regexes filtered by the broker's ACLs.
fn spawn_groups(
    broker: &Arc<Broker>,
    log: OffsetsLog,
    offsets: Vec<sluice_group::OffsetRecord>,
) -> Result<GroupService, ServerError> {
    let access = crate::group::Access {
        describe: describe_check(broker),
        changes: broker.security.store.changes(),
    };
    GroupService::spawn_authorized(
        broker.config.group_config(),
        log,
        offsets,
        (broker.topics.topic_shapes(), Some(access)),
        broker.clock().clone(),
    )
}

/// DESCRIBE on a topic for a group member's principal, as its connection is checked
/// (consumer groups' regex subscriptions, `topic_regex.rs`).
fn describe_check(broker: &Arc<Broker>) -> crate::topic_regex::DescribeCheck {
    let security = Arc::downgrade(&broker.security);
    Arc::new(move |principal, host, topic| {
        security.upgrade().is_some_and(|security| {
            crate::authz::allowed_for(
                &security,
                principal,
                host,
                sluice_security::acl::AclOperation::Describe,
                sluice_security::acl::ResourceType::Topic,
                topic,
            )
        })
    })
}

/// Periodic log work until shutdown: `tick_without_retention` (flush.ms, segment.ms, recovery
/// checkpoints) every `LOG_TICK_INTERVAL_MS`, and retention every
/// `log.retention.check.interval.ms` (first run after `LOG_RETENTION_INITIAL_DELAY_MS` at
/// most, like Kafka, so a broker restarted often still enforces retention). Idle ephemeral
/// views are dropped with retention.
async fn tick_logs(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(Duration::from_millis(limits::LOG_TICK_INTERVAL_MS));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let retention_every = Duration::from_millis(broker.config.log_retention_check_interval_ms);
    let first_retention = retention_every.min(Duration::from_millis(
        limits::LOG_RETENTION_INITIAL_DELAY_MS,
    ));
    let mut next_retention = tokio::time::Instant::now() + first_retention;
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let retention = tokio::time::Instant::now() >= next_retention;
        if retention {
            next_retention = tokio::time::Instant::now() + retention_every;
        }
        let broker = broker.clone();
        tokio::task::spawn_blocking(move || tick_all(&broker, retention))
            .await
            .ok();
    }
}

/// Removes expired delegation tokens every `delegation.token.expiry.check.interval.ms`
/// (Kafka's token expiry check), as security-log records, so a restart does not bring them
/// back. Nothing to do while tokens are disabled; an expired token already stopped
/// authenticating when it expired.
async fn sweep_tokens(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    if broker.security.tokens.is_none() {
        return;
    }
    let every = u64::try_from(broker.config.delegation_token_expiry_check_interval_ms).unwrap_or(1);
    let mut interval = tokio::time::interval(Duration::from_millis(every.max(1)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        let broker = broker.clone();
        tokio::task::spawn_blocking(move || remove_expired_tokens(&broker))
            .await
            .ok();
    }
}

fn remove_expired_tokens(broker: &Broker) {
    let now = broker.now_ms();
    let removed = broker.security.store.decide(|state| {
        let records: Vec<SecurityRecord> = state
            .tokens()
            .filter(|t| t.expired(now))
            .map(|t| SecurityRecord::DelegationTokenRemove {
                token_id: t.token_id.clone(),
            })
            .collect();
        let count = records.len();
        (records, count)
    });
    match removed {
        Ok(0) => {}
        Ok(count) => tracing::info!(count, "removed expired delegation tokens"),
        Err(e) => tracing::warn!(error = %e, "removing expired delegation tokens failed"),
    }
}

fn tick_all(broker: &Broker, retention: bool) {
    if retention {
        broker.topics.expire_views(broker.now_ms());
    }
    for partition in broker.topics.partitions() {
        let result = partition.with_log(|log| {
            let now = broker.now_ms();
            // A fenced log still runs retention: deleting old segments frees its disk.
            match log.tick_without_retention(now) {
                Ok(_) | Err(sluice_storage::StorageError::Fenced) => {}
                Err(e) => return Err(e),
            }
            if retention {
                let deleted = log.enforce_retention(now)?;
                if deleted > 0 {
                    tracing::info!(topic = %partition.topic, partition = partition.index, deleted, "retention deleted segments");
                }
            }
            Ok::<_, sluice_storage::StorageError>(())
        });
        match result {
            Ok(Err(sluice_storage::StorageError::Fenced)) | Ok(Ok(())) | Err(_) => {}
            Ok(Err(e)) => {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "periodic log work failed");
            }
        }
    }
}
