//! The cluster's keys, with Kafka's names (KRaft): `node.id`, `process.roles`,
//! `controller.quorum.voters` (`id@host:port,...`), `controller.listener.names`,
//! `inter.broker.listener.name`, `broker.rack`, and the broker session's timings: their
//! value types, text forms and the checks across them (the keys themselves are in `keys.rs`).
//!
//! With no voters configured the broker is a cluster of one (its own only voter), formatted
//! on first start: zero-config `sluice serve` stays what it was. With voters, the data dir
//! must be formatted (`sluice cluster format`) and the checks below are Kafka's
//! (`KafkaConfig.validateValues` for KRaft).

use super::{BrokerConfig, HostPort};
use crate::error::ConfigError;
use crate::limits;

/// `process.roles`: what this node does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves clients and hosts partitions.
    pub broker: bool,
    /// Is a voter of the metadata quorum.
    pub controller: bool,
}

impl ProcessRoles {
    /// Both roles in one process (Kafka's combined mode).
    pub const COMBINED: ProcessRoles = ProcessRoles {
        broker: true,
        controller: true,
    };

    /// Parses Kafka's comma-separated list (`broker`, `controller`, both).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut roles = ProcessRoles {
            broker: false,
            controller: false,
        };
        for role in text.split(',').map(str::trim) {
            let seen = match role {
                "broker" => std::mem::replace(&mut roles.broker, true),
                "controller" => std::mem::replace(&mut roles.controller, true),
                other => {
                    return Err(format!("{other:?} is not broker or controller"));
                }
            };
            if seen {
                return Err(format!("{role} is listed twice"));
            }
        }
        Ok(roles)
    }

    /// Kafka's spelling.
    pub fn print(&self) -> String {
        match (self.broker, self.controller) {
            (true, true) => "broker,controller".into(),
            (true, false) => "broker".into(),
            (false, true) => "controller".into(),
            (false, false) => String::new(),
        }
    }
}

/// One voter of `controller.quorum.voters`: its node id and controller listener address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    /// The voter's `node.id`.
    pub node_id: i32,
    /// Where its controller listener is.
    pub addr: HostPort,
}

/// Parses `id@host:port,...` (empty: no voters).
pub fn parse_voters(text: &str) -> Result<Vec<QuorumVoter>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut voters: Vec<QuorumVoter> = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let (id, addr) = entry
            .split_once('@')
            .ok_or_else(|| format!("{entry:?} is not id@host:port"))?;
        let node_id: i32 = id
            .parse()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("{id:?} in {entry:?} is not a node id (0 or more)"))?;
        let addr = HostPort::parse(addr).map_err(|e| format!("{entry:?}: {e}"))?;
        if addr.port == 0 {
            return Err(format!("{entry:?}: a voter needs its port"));
        }
        if voters.iter().any(|v| v.node_id == node_id) {
            return Err(format!("node id {node_id} is listed twice"));
        }
        if voters.iter().any(|v| v.addr == addr) {
            return Err(format!("{addr} is listed twice"));
        }
        voters.push(QuorumVoter { node_id, addr });
    }
    if voters.len() > limits::QUORUM_VOTERS_MAX {
        return Err(format!(
            "{} voters: at most QUORUM_VOTERS_MAX ({}) (each voter is in every commit's \
             majority; Kafka clusters run 3 or 5)",
            voters.len(),
            limits::QUORUM_VOTERS_MAX
        ));
    }
    Ok(voters)
}

/// Kafka's spelling of a voter list.
pub fn print_voters(voters: &[QuorumVoter]) -> String {
    let entries: Vec<String> = voters
        .iter()
        .map(|v| format!("{}@{}", v.node_id, v.addr))
        .collect();
    entries.join(",")
}

/// Parses a comma-separated list of listener names.
pub fn parse_names(text: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err("no listener name".into());
    }
    Ok(names)
}

impl BrokerConfig {
    /// Whether `name` is a controller listener (`controller.listener.names`): the quorum's,
    /// never bound for Kafka clients.
    pub fn is_controller_listener(&self, name: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == name)
    }

    /// Whether the data dir must have been formatted by `sluice cluster format` before the
    /// broker starts (voters configured); else a cluster of one formats it on first start.
    pub fn needs_format(&self) -> bool {
        !self.controller_quorum_voters.is_empty()
    }

    /// The listener brokers talk to each other on: `inter.broker.listener.name`, or the
    /// first listener that is not a controller listener.
    pub fn inter_broker_listener(&self) -> Option<&str> {
        match &self.inter_broker_listener_name {
            Some(name) => Some(name.as_str()),
            None => self
                .listeners
                .iter()
                .map(|l| l.name.as_str())
                .find(|n| !self.is_controller_listener(n)),
        }
    }

    /// Cross-key checks of these keys (Kafka's, for KRaft).
    pub(super) fn validate_cluster_keys(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, reason: String| ConfigError::BadValue {
            key: key.into(),
            value,
            reason,
        };
        if !self.process_roles.broker && self.controller_quorum_voters.is_empty() {
            return Err(bad(
                "process.roles",
                self.process_roles.print(),
                "a dedicated controller is a voter of a cluster: set controller.quorum.voters"
                    .into(),
            ));
        }
        if self.broker_heartbeat_interval_ms >= self.broker_session_timeout_ms {
            return Err(ConfigError::Inconsistent(format!(
                "broker.heartbeat.interval.ms ({}) must be below broker.session.timeout.ms ({})",
                self.broker_heartbeat_interval_ms, self.broker_session_timeout_ms
            )));
        }
        let client_listeners = self
            .listeners
            .iter()
            .filter(|l| !self.is_controller_listener(&l.name))
            .count();
        if !self.process_roles.broker {
            if client_listeners > 0 {
                return Err(ConfigError::Inconsistent(format!(
                    "process.roles=controller: listeners must hold only controller listeners \
                     (controller.listener.names: {}), as a dedicated controller serves no clients",
                    self.controller_listener_names.join(",")
                )));
            }
        } else if client_listeners == 0 {
            return Err(ConfigError::Inconsistent(
                "listeners has only controller listeners (controller.listener.names): a broker \
                 needs one for clients"
                    .into(),
            ));
        }
        if let Some(name) = &self.inter_broker_listener_name
            && (self.is_controller_listener(name)
                || !self.listeners.iter().any(|l| &l.name == name))
        {
            return Err(bad(
                "inter.broker.listener.name",
                name.clone(),
                "must name a listener of listeners that is not a controller listener".into(),
            ));
        }
        self.validate_voters()?;
        if let Some(secured) = self.listeners.iter().find(|l| {
            self.is_controller_listener(&l.name)
                && self.listener_protocol(&l.name).is_ok_and(|p| {
                    !matches!(
                        p,
                        super::SecurityProtocol::Plaintext | super::SecurityProtocol::Ssl
                    )
                })
        }) {
            return Err(ConfigError::Inconsistent(format!(
                "controller listener {secured} uses SASL: the quorum's nodes authenticate each \
                 other with TLS client certificates; map it to SSL (with ssl.keystore.location \
                 and ssl.truststore.location) or PLAINTEXT"
            )));
        }
        if !self.controller_quorum_voters.is_empty()
            && !self.process_roles.controller
            && !self
                .listeners
                .iter()
                .any(|l| self.is_controller_listener(&l.name))
        {
            return Err(ConfigError::Inconsistent(format!(
                "node.id {} is a broker-only node (process.roles=broker): it follows the metadata \
                 log as a learner, which the controller sends to its controller listener: add one \
                 to listeners (e.g. CONTROLLER://host:port, named in controller.listener.names)",
                self.node_id
            )));
        }
        Ok(())
    }

    /// Kafka's voter checks: a controller is a voter and a broker alone is not; a voter
    /// has a controller listener on its voter port.
    fn validate_voters(&self) -> Result<(), ConfigError> {
        let voters = &self.controller_quorum_voters;
        if voters.is_empty() {
            return Ok(());
        }
        let listed = voters.iter().find(|v| v.node_id == self.node_id);
        match (self.process_roles.controller, listed) {
            (true, None) => {
                return Err(ConfigError::Inconsistent(format!(
                    "process.roles has controller, so node.id {} must be in \
                     controller.quorum.voters ({})",
                    self.node_id,
                    print_voters(voters)
                )));
            }
            (false, Some(_)) => {
                return Err(ConfigError::Inconsistent(format!(
                    "node.id {} is in controller.quorum.voters but process.roles has no \
                     controller",
                    self.node_id
                )));
            }
            _ => {}
        }
        if let Some(voter) = listed {
            let controller = self
                .listeners
                .iter()
                .find(|l| self.is_controller_listener(&l.name));
            let Some(controller) = controller else {
                return Err(ConfigError::Inconsistent(format!(
                    "node {} is a voter, so listeners needs a controller listener (one of \
                     controller.listener.names: {})",
                    self.node_id,
                    self.controller_listener_names.join(",")
                )));
            };
            if controller.addr.port != voter.addr.port {
                return Err(ConfigError::Inconsistent(format!(
                    "controller listener {controller} and this node's voter entry {}@{} \
                     disagree on the port",
                    voter.node_id, voter.addr
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_as_kafka_spells_them() {
        assert_eq!(
            ProcessRoles::parse("broker,controller"),
            Ok(ProcessRoles::COMBINED)
        );
        assert_eq!(
            ProcessRoles::parse(" controller , broker"),
            Ok(ProcessRoles::COMBINED)
        );
        let broker = ProcessRoles::parse("broker").unwrap();
        assert!(broker.broker && !broker.controller);
        assert!(ProcessRoles::parse("broker,broker").is_err());
        assert!(ProcessRoles::parse("zookeeper").is_err());
        assert_eq!(ProcessRoles::COMBINED.print(), "broker,controller");
    }

    #[test]
    fn voters_parse_strictly() {
        let voters = parse_voters("1@127.0.0.1:9093,2@127.0.0.2:9093").unwrap();
        assert_eq!(voters.len(), 2);
        assert_eq!(voters[1].node_id, 2);
        assert_eq!(print_voters(&voters), "1@127.0.0.1:9093,2@127.0.0.2:9093");
        assert_eq!(parse_voters(" "), Ok(Vec::new()));
        for bad in [
            "1@127.0.0.1:9093,1@127.0.0.2:9093",
            "1@127.0.0.1:9093,2@127.0.0.1:9093",
            "127.0.0.1:9093",
            "-1@127.0.0.1:9093",
            "x@127.0.0.1:9093",
            "1@127.0.0.1",
            "1@127.0.0.1:0",
        ] {
            assert!(parse_voters(bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..=limits::QUORUM_VOTERS_MAX)
            .map(|i| format!("{i}@127.0.0.{}:9093", i + 1))
            .collect();
        let refused = parse_voters(&many.join(",")).unwrap_err();
        assert!(refused.contains("QUORUM_VOTERS_MAX"), "{refused}");
    }
}
