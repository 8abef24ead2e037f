//! The quorum's settings from the broker's keys: `node.id`, `controller.quorum.voters`, the
//! controller listener of `listeners` (`controller.listener.names`), `broker.rack`,
//! `broker.session.timeout.ms`, `broker.heartbeat.interval.ms`, and the cluster id of
//! `meta.json`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use sluice_cluster::ControllerConfig;
use sluice_cluster::records::Listener;

use crate::cluster::{BrokerConfig as BrokerRole, QuorumConfig};
use crate::config::BrokerConfig;
use crate::error::{ConfigError, ServerError};

/// The quorum's directory under `data.dir` (Kafka's name): `raft/` and `state-machine/`.
pub const METADATA_DIR: &str = "__cluster_metadata";

/// Where this node's controller listener binds: the listener of `listeners` named in
/// `controller.listener.names`.
///
/// # Errors
/// No such listener, or its host is not an IP address to bind.
pub fn controller_listener(config: &BrokerConfig) -> Result<SocketAddr, ServerError> {
    let listener = config
        .listeners
        .iter()
        .find(|l| config.is_controller_listener(&l.name))
        .ok_or_else(|| {
            ConfigError::Inconsistent(format!(
                "node {} is in a cluster, so listeners needs a controller listener (one of \
                 controller.listener.names: {}; a broker-only node's takes the metadata log \
                 the controller sends it)",
                config.node_id,
                config.controller_listener_names.join(",")
            ))
        })?;
    Ok(listener.bind_addr()?)
}

/// The [`QuorumConfig`] of this node, registering `listeners` (its client listeners as
/// advertised).
///
/// # Errors
/// The controller listener cannot be read ([`controller_listener`]).
pub fn quorum_config(
    config: &BrokerConfig,
    cluster_id: &str,
    listeners: Vec<Listener>,
) -> Result<QuorumConfig, ServerError> {
    let voters: BTreeMap<u64, String> = config
        .controller_quorum_voters
        .iter()
        .map(|v| (u64::from(v.node_id.unsigned_abs()), v.addr.to_string()))
        .collect();
    let listen = controller_listener(config)?;
    let node_id = u64::from(config.node_id.unsigned_abs());
    let controller_addr = match voters.get(&node_id) {
        Some(addr) => addr.clone(),
        None => learner_addr(config, listen)?,
    };
    let tls = controller_tls(config)?;
    Ok(QuorumConfig {
        tls,
        node_id,
        cluster_id: cluster_id.to_owned(),
        voters,
        listen,
        controller_addr,
        data_dir: config.data_dir.join(METADATA_DIR),
        controller: ControllerConfig {
            broker_session_timeout_ms: config.broker_session_timeout_ms,
            leader_imbalance_check_interval_ms: config.auto_leader_rebalance_enable.then(|| {
                config
                    .leader_imbalance_check_interval_seconds
                    .saturating_mul(1_000)
            }),
            leader_imbalance_per_broker_percentage: config.leader_imbalance_per_broker_percentage,
            unclean_leader_election: config.unclean_leader_election_enable,
        },
        // A dedicated controller (`process.roles=controller`) never registers as a broker.
        broker: config.process_roles.broker.then(|| BrokerRole {
            listeners,
            rack: config.broker_rack.clone(),
            heartbeat_interval_ms: u64::try_from(config.broker_heartbeat_interval_ms)
                .unwrap_or(u64::MAX),
        }),
        snapshot_after_entries: config.metadata_snapshot_entries,
    })
}

/// TLS between the nodes when the controller listener is SSL (`crate::tls::PeerTls`).
fn controller_tls(config: &BrokerConfig) -> Result<Option<crate::cluster::PeerTls>, ServerError> {
    let listener = config
        .listeners
        .iter()
        .find(|l| config.is_controller_listener(&l.name));
    let Some(listener) = listener else {
        return Ok(None);
    };
    if config.listener_protocol(&listener.name)? != crate::config::SecurityProtocol::Ssl {
        return Ok(None);
    }
    let tls = crate::tls::PeerTls::open(config)?;
    Ok(Some(crate::cluster::PeerTls {
        server: tls.server,
        client: tls.client,
    }))
}

/// Where the voters reach a broker-only node's controller listener: its advertised
/// controller listener, else the one it binds, which must then name a host (not 0.0.0.0).
fn learner_addr(config: &BrokerConfig, listen: SocketAddr) -> Result<String, ServerError> {
    let advertised = config
        .advertised_listeners
        .iter()
        .find(|l| config.is_controller_listener(&l.name));
    if let Some(a) = advertised {
        return Ok(a.addr.to_string());
    }
    if listen.ip().is_unspecified() {
        return Err(ConfigError::Inconsistent(format!(
            "node {} is a broker-only node (process.roles=broker): the voters send it the metadata \
             log at its controller listener, which binds {listen}: give it a host they can reach \
             (in listeners, or in advertised.listeners)",
            config.node_id
        ))
        .into());
    }
    Ok(listen.to_string())
}

impl From<crate::config::SecurityProtocol> for sluice_cluster::records::SecurityProtocol {
    fn from(p: crate::config::SecurityProtocol) -> Self {
        use crate::config::SecurityProtocol as Config;
        match p {
            Config::Plaintext => Self::Plaintext,
            Config::Ssl => Self::Ssl,
            Config::SaslPlaintext => Self::SaslPlaintext,
            Config::SaslSsl => Self::SaslSsl,
        }
    }
}
