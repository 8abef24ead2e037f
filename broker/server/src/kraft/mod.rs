//! The broker in a KRaft cluster: what a broker with `controller.quorum.voters` runs beside
//! its listeners. [`Kraft::start`] starts this node of the metadata quorum
//! (`crate::cluster`'s [`ClusterService`]: Raft, the controller listener, registration and
//! heartbeats with the broker's advertised listeners) and the publisher that makes the
//! broker what the image says; the handlers ask it where things are and submit every
//! change through it.
//!
//! # Layout
//! - `mod.rs`: [`Kraft`]: start, [`Kraft::submit`] (the controller's answer once this
//!   broker has applied the change: read-your-writes), the image, the quorum status,
//!   shutdown (a controlled shutdown first).
//! - `quorum.rs`: the [`QuorumConfig`] built from the broker's keys and its `meta.json`.
//! - `publisher.rs`: the image into the topic registry (Kafka's `BrokerMetadataPublisher`):
//!   topics created, grown, reconfigured and deleted, and each partition's placement
//!   (leader, epoch, replicas, ISR), which the data path checks (`Partition::check_leader`).
//! - `migrate.rs`: once, the first time a data dir starts in a cluster, the topics (on this
//!   broker, with their ids), views and security records it holds and the cluster does not
//!   are submitted to the controller.
//! - `peers.rs`: Kafka requests to the other brokers on their inter-broker listener (a
//!   coordinator's WriteTxnMarkers, a leader's AddPartitionsToTxn verification).
//! - `plugins.rs`: the image's plugin versions on this broker: uploads committed once a
//!   majority stores them, versions fetched from another broker when missing here, deletions
//!   applied; `plugin.dir` changes refused.
//! - `replicas.rs`: this broker's partition replicas (Kafka's `ReplicaManager`): a
//!   `sluice_replica::Replica` state machine per replica of a replicated partition, fed by
//!   the images, produces, followers' fetches and fsyncs, its effects carried out on the
//!   storage log; `replica_fetcher.rs`: one fetcher per leader broker sending followers'
//!   Kafka Fetch requests (v12, `LastFetchedEpoch`) over `peers.rs`.
//! - `routing.rs`: where a client goes: the live brokers with their advertised listener,
//!   and a group's or transactional id's coordinator (Kafka's placement: the leader of
//!   partition `hash(key) % n` of `__consumer_offsets` / `__transaction_state`, whose
//!   placement lives in the image only: their state stays in Sluice's own logs).
//!
//! A single node (no voters) runs none of this: it is a cluster of one as before.

mod migrate;
mod peers;
pub mod plugins;
mod publisher;
mod quorum;
mod replica_fetcher;
pub mod replicas;
mod routing;

use std::sync::Arc;
use std::time::Duration;

use sluice_cluster::MetadataImage;
use tokio::net::TcpListener;
use tokio::sync::{RwLock, watch};
use tokio::task::JoinHandle;

use crate::cluster::{
    ClusterError, ClusterHandle, ClusterService, ControllerOp, ControllerReply, QuorumStatus,
};
use crate::config::BrokerConfig;
use crate::error::ServerError;
use crate::security::Security;
use crate::topics::{TopicChange, TopicRegistry};

pub use quorum::{controller_listener, quorum_config};
pub use routing::{Coordinator, CoordinatorKind, LiveBroker};

/// How long [`Kraft::submit`] waits for this broker's publisher to apply a committed change
/// after the image did (the file work of a topic creation): past it the change is answered
/// as not yet visible here (REQUEST_TIMED_OUT), though it is committed.
pub const PUBLISH_WAIT_MS: u64 = 15_000;

/// This broker's side of the cluster (module docs).
#[derive(Debug)]
pub struct Kraft {
    /// `node.id`.
    node_id: i32,
    /// The quorum node; taken by [`Kraft::shutdown`].
    handle: RwLock<Option<ClusterHandle>>,
    /// The latest applied image.
    image: watch::Receiver<Arc<MetadataImage>>,
    /// The index of the last image the publisher applied to the topic registry.
    published: watch::Receiver<u64>,
    /// The publisher task.
    publisher: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Partitions of `__consumer_offsets` and `__transaction_state` when this broker
    /// creates them.
    internal_partitions: (i32, i32),
    /// Tells the publisher to stop.
    stop: watch::Sender<bool>,
    /// Connections to the other brokers (`peers.rs`).
    peers: peers::Pool,
    /// The listener other brokers are reached on (`inter.broker.listener.name`).
    inter_broker_listener: String,
    /// Plugin versions installed here whose record is not in the image yet (`plugins.rs`).
    uncommitted_plugins: plugins::Uncommitted,
    /// This broker's partition replicas (`replicas.rs`).
    replicas: Arc<replicas::ReplicaManager>,
    /// This process's broker epoch, once an image held its registration.
    broker_epoch: std::sync::OnceLock<i64>,
}

impl Kraft {
    /// Starts this node of the quorum on the bound `controller` listener and the publisher
    /// into `topics`; `listeners` are the client listeners as advertised (registered with
    /// the controller).
    pub async fn start(
        config: &BrokerConfig,
        cluster_id: &str,
        listeners: Vec<sluice_cluster::records::Listener>,
        controller: TcpListener,
        topics: Arc<TopicRegistry>,
        security: Arc<Security>,
        plugins: Arc<sluice_plugin_host::Registry>,
    ) -> Result<Arc<Self>, ServerError> {
        let local = migrate::Local::read(&security, &plugins);
        // TLS to the other brokers' SSL inter-broker listeners, when this broker has the
        // files for it.
        let peer_tls = match (
            &config.ssl_keystore_location,
            &config.ssl_truststore_location,
        ) {
            (Some(_), Some(_)) => Some(crate::tls::PeerTls::open(config)?.client),
            _ => None,
        };
        let quorum = quorum_config(config, cluster_id, listeners)?;
        let marker = migrate::marker(&quorum.data_dir);
        let handle = ClusterService::start_on(quorum, controller)
            .await
            .map_err(|e| ServerError::Internal(format!("starting the metadata quorum: {e}")))?;
        let image = handle.image();
        let (published_tx, published) = watch::channel(0);
        let (stop, stopped) = watch::channel(false);
        let replicas = replicas::ReplicaManager::new(
            replicas::ReplicaSettings::from_config(config),
            Arc::clone(&topics),
        );
        let publisher = tokio::spawn(publisher::run(
            image.clone(),
            (Arc::clone(&topics), Arc::clone(&replicas)),
            Arc::clone(&security),
            config.node_id,
            published_tx,
            stopped,
            marker.clone(),
        ));
        tracing::info!(node = config.node_id, voters = %crate::config::print_voters(&config.controller_quorum_voters), "metadata quorum started");
        let kraft = Arc::new(Self {
            node_id: config.node_id,
            handle: RwLock::new(Some(handle)),
            image,
            published,
            publisher: std::sync::Mutex::new(Some(publisher)),
            internal_partitions: (
                config.offsets_topic_num_partitions,
                config.transaction_state_log_num_partitions,
            ),
            stop,
            peers: peers::Pool::new(peer_tls, peer_login(config)),
            inter_broker_listener: config
                .inter_broker_listener()
                .unwrap_or("PLAINTEXT")
                .to_owned(),
            uncommitted_plugins: plugins::Uncommitted::default(),
            replicas,
            broker_epoch: std::sync::OnceLock::new(),
        });
        kraft.replicas.start(&kraft);
        remotes(&kraft, &topics, &security);
        tokio::spawn(plugins::run(Arc::clone(&kraft), plugins, marker.clone()));
        tokio::spawn(migrate::run(Arc::clone(&kraft), topics, local, marker));
        Ok(kraft)
    }

    /// This broker's node id.
    pub const fn node_id(&self) -> i32 {
        self.node_id
    }

    /// This broker's partition replicas.
    pub fn replicas(&self) -> &Arc<replicas::ReplicaManager> {
        &self.replicas
    }

    /// This process's broker epoch in `image`: `None` until the image holds the
    /// registration of this incarnation (KIP-903: what the image says of this node before
    /// was its previous incarnation's).
    pub fn broker_epoch(&self, image: &MetadataImage) -> Option<i64> {
        if let Some(&epoch) = self.broker_epoch.get() {
            return Some(epoch);
        }
        let incarnation = self.handle.try_read().ok()?.as_ref()?.incarnation()?;
        let broker = image.broker(self.node_id)?;
        if broker.registration.incarnation_id.0 != incarnation {
            return None;
        }
        Some(*self.broker_epoch.get_or_init(|| broker.broker_epoch))
    }

    /// The latest applied image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Runs `op` on the active controller; answers once this broker applied it to its
    /// registry too (a topic it created is listed by Metadata here at once).
    ///
    /// # Errors
    /// The controller's refusal, a timeout, an unknown outcome, or shutdown
    /// ([`ClusterError`]).
    pub async fn submit(&self, op: ControllerOp) -> Result<ControllerReply, ClusterError> {
        let reply = {
            let handle = self.handle.read().await;
            let Some(handle) = handle.as_ref() else {
                return Err(ClusterError::Shutdown);
            };
            handle.submit(op).await?
        };
        let index = self.image.borrow().last_applied_index();
        let mut published = self.published.clone();
        let wait = published.wait_for(|p| *p >= index);
        match tokio::time::timeout(Duration::from_millis(PUBLISH_WAIT_MS), wait).await {
            Ok(Ok(_)) => Ok(reply),
            Ok(Err(_)) => Err(ClusterError::Shutdown),
            Err(_) => Err(ClusterError::Timeout {
                what: "the change did not apply to this broker's topics (PUBLISH_WAIT_MS)",
            }),
        }
    }

    /// From now on other brokers' messages go to `handler` (set once the coordinators run).
    pub async fn serve_messages(&self, handler: crate::cluster::BrokerMessages) {
        if let Some(handle) = self.handle.read().await.as_ref() {
            handle.serve_broker_messages(handler);
        }
    }

    /// Sends `message` to broker `node`'s services: its answer (a Kafka error code, 0 done).
    ///
    /// # Errors
    /// The broker is unknown, unreachable or did not answer in time; or it could not handle
    /// the message.
    pub async fn message(
        &self,
        node: i32,
        message: &crate::cluster::BrokerMessage,
    ) -> Result<i16, String> {
        let handle = self.handle.read().await;
        let Some(handle) = handle.as_ref() else {
            return Err("the cluster side is shut down".to_owned());
        };
        let node = u64::try_from(node).map_err(|_| format!("no broker {node}"))?;
        match handle
            .message(node, message)
            .await
            .map_err(|e| e.to_string())??
        {
            crate::cluster::BrokerReply::Code(code) => Ok(code),
            _ => Err(format!(
                "broker {node} answered with a document where a code was expected"
            )),
        }
    }

    /// Sends `message` to broker `node`'s services and returns its whole answer.
    ///
    /// # Errors
    /// As [`Kraft::message`].
    pub async fn ask(
        &self,
        node: i32,
        message: &crate::cluster::BrokerMessage,
    ) -> Result<crate::cluster::BrokerReply, String> {
        let handle = self.handle.read().await;
        let Some(handle) = handle.as_ref() else {
            return Err("the cluster side is shut down".to_owned());
        };
        let peer = u64::try_from(node).map_err(|_| format!("no broker {node}"))?;
        handle
            .message(peer, message)
            .await
            .map_err(|e| format!("broker {node}: {e}"))?
            .map_err(|e| format!("broker {node}: {e}"))
    }

    /// The index of each image the publisher has applied to the topic registry (partition
    /// placements included), as it changes.
    pub fn published(&self) -> watch::Receiver<u64> {
        self.published.clone()
    }

    /// Plugin `name`'s bytes at `sha256` from broker `node` (checked against the digest here).
    ///
    /// # Errors
    /// The broker is unreachable, does not have that version, or sent other bytes.
    pub async fn fetch_plugin(
        &self,
        node: i32,
        name: &str,
        sha256: &str,
    ) -> Result<Vec<u8>, String> {
        let handle = self.handle.read().await;
        let Some(handle) = handle.as_ref() else {
            return Err("the cluster side is shut down".to_owned());
        };
        let peer = u64::try_from(node).map_err(|_| format!("no broker {node}"))?;
        let message = crate::cluster::BrokerMessage::FetchPlugin {
            name: name.to_owned(),
            sha256: sha256.to_owned(),
        };
        let bytes = match handle
            .message(peer, &message)
            .await
            .map_err(|e| e.to_string())??
        {
            crate::cluster::BrokerReply::Plugin(bytes) => bytes,
            crate::cluster::BrokerReply::Code(code) => {
                return Err(format!("broker {node} answered error {code}"));
            }
            _ => return Err(format!("broker {node} answered without plugin bytes")),
        };
        let got = sluice_plugin_host::sha256_hex(&bytes);
        if got != sha256 {
            return Err(format!(
                "broker {node} sent bytes hashing to {got}, not {sha256}"
            ));
        }
        Ok(bytes)
    }

    /// The quorum as this node sees it (DescribeQuorum); `None` once shut down.
    pub async fn status(&self) -> Option<QuorumStatus> {
        self.handle.read().await.as_ref().map(ClusterHandle::status)
    }

    /// The controller's partition count for a new `__consumer_offsets` /
    /// `__transaction_state`.
    const fn internal_partitions(&self, kind: CoordinatorKind) -> i32 {
        match kind {
            CoordinatorKind::Group => self.internal_partitions.0,
            CoordinatorKind::Transaction => self.internal_partitions.1,
        }
    }

    /// A controlled shutdown (the controller moves this broker's leaderships away), then
    /// the quorum node and the publisher stop.
    pub async fn shutdown(&self) {
        let handle = self.handle.write().await.take();
        if let Some(handle) = handle {
            handle.shutdown().await;
        }
        self.stop.send_replace(true);
        let publisher = self
            .publisher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(publisher) = publisher {
            let _ = publisher.await;
        }
    }
}

/// Sends the registry's config changes and the security store's records to the controller
/// from now on (both decide on this broker and commit through the metadata log).
fn remotes(kraft: &Arc<Kraft>, topics: &TopicRegistry, security: &Security) {
    let weak = Arc::downgrade(kraft);
    let default_rf = topics.config().default_replication_factor;
    topics.set_remote(crate::topics::RemoteChange(Box::new(move |change| {
        let kraft = weak
            .upgrade()
            .ok_or_else(|| kafka_error(&ClusterError::Shutdown))?;
        let op = controller_op(change, default_rf)?;
        let reply = block_on_submit(&kraft, op).map_err(|e| kafka_error(&e))?;
        refusal_in(reply).map_or(Ok(()), Err)
    })));
    let weak = Arc::downgrade(kraft);
    security
        .store
        .set_remote(crate::security::RemoteAppend(Box::new(move |records| {
            let kraft = weak.upgrade().ok_or("the cluster side is shut down")?;
            block_on_submit(&kraft, ControllerOp::Security(records.to_vec()))
                .map(|_| ())
                .map_err(|e| e.to_string())
        })));
}

/// The SASL login to other brokers' SASL inter-broker listeners, when configured
/// (`sasl.mechanism.inter.broker.protocol`, default SCRAM-SHA-512, and `sasl.jaas.config`,
/// checked at start).
fn peer_login(config: &BrokerConfig) -> Option<peers::Login> {
    let jaas = config.sasl_jaas_config.as_deref()?;
    let (user, password) = crate::config::jaas_credentials(jaas).ok()?;
    Some(peers::Login {
        mechanism: config.sasl_mechanism_inter_broker_protocol.unwrap_or(
            crate::config::SaslMechanism::Scram(sluice_security::scram::ScramMechanism::Sha512),
        ),
        user,
        password,
    })
}

/// The controller operation that records a registry change.
/// A topic created without a replication factor (-1) gets `default_rf`
/// (`default.replication.factor`).
fn controller_op(
    change: TopicChange,
    default_rf: i16,
) -> Result<ControllerOp, crate::error::KafkaError> {
    Ok(match change {
        TopicChange::TopicCreated {
            name,
            id,
            partitions,
            configs,
            assignments,
            replication_factor,
        } => ControllerOp::CreateTopics(vec![crate::cluster::TopicSpec {
            name,
            num_partitions: partitions,
            replication_factor: match replication_factor {
                -1 => assignments
                    .as_ref()
                    .and_then(|a| a.first())
                    .map_or(default_rf, |r| i16::try_from(r.len()).unwrap_or(i16::MAX)),
                rf => rf,
            },
            configs: configs.into_iter().collect(),
            topic_id: Some(*id.as_bytes()),
            assignments,
        }]),
        TopicChange::TopicDeleted { name } => ControllerOp::DeleteTopics(vec![name]),
        TopicChange::ConfigAltered { name, configs } => ControllerOp::AlterConfigs {
            broker: false,
            name,
            changes: configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            replace: true,
        },
        TopicChange::PartitionsAdded { name, partitions } => ControllerOp::CreatePartitions {
            name,
            count: partitions,
        },
        TopicChange::ViewCreated { spec } => ControllerOp::PutView {
            name: spec.name.clone(),
            spec: serde_json::to_vec(&spec).map_err(|e| {
                crate::error::KafkaError::new(
                    kafka_protocol::ResponseError::InvalidRequest,
                    format!("encoding the view: {e}"),
                )
            })?,
        },
        TopicChange::ViewDeleted { name } => ControllerOp::RemoveView { name },
    })
}

/// A refusal the controller put inside a reply (one topic's, of a batch).
fn refusal_in(reply: ControllerReply) -> Option<crate::error::KafkaError> {
    let refused = |e: crate::cluster::OpError| {
        crate::error::KafkaError::new(
            kafka_protocol::ResponseError::try_from_code(e.code)
                .unwrap_or(kafka_protocol::ResponseError::UnknownServerError),
            e.message,
        )
    };
    match reply {
        ControllerReply::Topics(answers) => answers
            .into_iter()
            .find_map(|(_, outcome)| outcome.err())
            .map(refused),
        ControllerReply::Deleted(answers) => answers
            .into_iter()
            .find_map(|(_, outcome)| outcome.err())
            .map(refused),
        _ => None,
    }
}

/// [`Kraft::submit`] from synchronous code (a handler's or the blocking pool's thread):
/// the thread waits, the runtime's other tasks go on.
fn block_on_submit(kraft: &Kraft, op: ControllerOp) -> Result<ControllerReply, ClusterError> {
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| handle.block_on(kraft.submit(op)))
}

/// A controller refusal or failure as Kafka's error for the client.
pub fn kafka_error(e: &ClusterError) -> crate::error::KafkaError {
    use kafka_protocol::ResponseError;
    let code = match e {
        ClusterError::Refused(op) => {
            ResponseError::try_from_code(op.code).unwrap_or(ResponseError::UnknownServerError)
        }
        ClusterError::Timeout { .. } | ClusterError::OutcomeUnknown(_) => {
            ResponseError::RequestTimedOut
        }
        ClusterError::Shutdown => ResponseError::NotController,
        ClusterError::Config(_) | ClusterError::Storage(_) | ClusterError::Raft(_) => {
            ResponseError::UnknownServerError
        }
    };
    let message = match e {
        ClusterError::Refused(op) => op.message.clone(),
        other => other.to_string(),
    };
    crate::error::KafkaError::new(code, message)
}
