//! Plugins in the broker: the plugin registry (opened at start with its directory watcher,
//! so a `.wasm` dropped in `plugin.dir` is live within a second) and the binding of a topic
//! to its partitioner plugin (`sluice.partitioner`, `sluice.partitioner.params`).
//!
//! A topic names its partitioner by plugin name; the handle follows the registry's slot, so
//! a new version of the plugin (upload, file replaced) reaches the topic without
//! reconfiguring it. Parameters are checked by the plugin's `init` when the topic is
//! configured; a topic loaded at start whose plugin is missing or failing is kept, and its
//! produces fail with POLICY_VIOLATION until the plugin is deployed.

use std::sync::{Arc, RwLock};

use kafka_protocol::ResponseError;
use sluice_plugin_host::{CallError, Partitioner, Registry, RegistryError, Watcher};

use crate::config::BrokerConfig;
use crate::error::{KafkaError, ServerError};
use crate::topic_config::TopicOverrides;
pub use crate::topic_config::{PARTITIONER_KEY, PARTITIONER_PARAMS_KEY, parse_params};

/// The registry and the watcher that keeps it in step with the directory.
pub struct Plugins {
    /// Installed plugins by name; shared with the admin API.
    pub registry: Arc<Registry>,
    /// Hot reload stops when this is dropped (with the broker).
    _watcher: Watcher,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("dir", &self.registry.dir())
            .finish_non_exhaustive()
    }
}

impl Plugins {
    /// Opens `plugin.dir` (creating it), loads every plugin in it and starts watching it.
    /// A plugin file that does not load is logged and skipped, not fatal.
    pub fn open(config: &BrokerConfig) -> Result<Self, ServerError> {
        let (registry, failures) = Registry::open(config.plugin_config())?;
        for (path, e) in failures {
            tracing::warn!(path = %path.display(), "plugin not loaded: {e}");
        }
        let watcher = registry.watch()?;
        tracing::info!(dir = %registry.dir().display(), plugins = registry.list().len(), "plugin registry open");
        Ok(Self {
            registry,
            _watcher: watcher,
        })
    }
}

/// A topic's partitioner: the plugin name, its parameters, and the handle (made at
/// configuration, or on first use if the plugin was missing when the topic was loaded).
#[derive(Debug)]
pub struct TopicPartitioner {
    plugin: String,
    params: Vec<(String, String)>,
    handle: RwLock<Option<Arc<Partitioner>>>,
}

impl TopicPartitioner {
    /// The plugin a topic's overrides name, with its parameters.
    fn configured(overrides: &TopicOverrides) -> Option<(String, Vec<(String, String)>)> {
        let plugin = overrides.get(PARTITIONER_KEY)?.trim().to_owned();
        let params = overrides
            .get(PARTITIONER_PARAMS_KEY)
            .map(|p| parse_params(p).unwrap_or_default())
            .unwrap_or_default();
        Some((plugin, params))
    }

    /// Binds a topic being configured: INVALID_CONFIG naming the key if the plugin is
    /// unknown, not a partitioner, or rejects the parameters. `None`: no partitioner.
    pub fn bind(
        registry: &Registry,
        overrides: &TopicOverrides,
    ) -> Result<Option<Self>, KafkaError> {
        if overrides.contains_key(PARTITIONER_PARAMS_KEY)
            && !overrides.contains_key(PARTITIONER_KEY)
        {
            return Err(KafkaError::new(
                ResponseError::InvalidConfig,
                format!("{PARTITIONER_PARAMS_KEY} is set without {PARTITIONER_KEY}"),
            ));
        }
        let Some((plugin, params)) = Self::configured(overrides) else {
            return Ok(None);
        };
        let handle = registry
            .partitioner(&plugin, &params)
            .map_err(|e| config_error(&plugin, e))?;
        Ok(Some(Self {
            plugin,
            params,
            handle: RwLock::new(Some(Arc::new(handle))),
        }))
    }

    /// Binds a topic loaded at start: a plugin that is missing or failing is logged, and
    /// binding is retried on the topic's next produce.
    pub fn bind_loaded(
        registry: &Registry,
        topic: &str,
        overrides: &TopicOverrides,
    ) -> Option<Self> {
        let (plugin, params) = Self::configured(overrides)?;
        let handle = match registry.partitioner(&plugin, &params) {
            Ok(handle) => Some(Arc::new(handle)),
            Err(e) => {
                tracing::warn!(topic, plugin = %plugin, "partitioner not bound; produces to this topic fail until it is: {e}");
                None
            }
        };
        Some(Self {
            plugin,
            params,
            handle: RwLock::new(handle),
        })
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The handle to call, binding it now if the topic was loaded without it.
    pub fn handle(&self, registry: &Registry) -> Result<Arc<Partitioner>, KafkaError> {
        if let Some(handle) = self
            .handle
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            return Ok(Arc::clone(handle));
        }
        let handle = registry
            .partitioner(&self.plugin, &self.params)
            .map(Arc::new)
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::PolicyViolation,
                    format!("partitioner plugin `{}` is not usable: {e}", self.plugin),
                )
            })?;
        *self
            .handle
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&handle));
        Ok(handle)
    }
}

/// A registry error at topic configuration, as INVALID_CONFIG naming the key at fault.
fn config_error(plugin: &str, e: RegistryError) -> KafkaError {
    let message = match &e {
        RegistryError::Call(CallError::InvalidParams { message, .. }) => {
            format!(
                "{PARTITIONER_PARAMS_KEY}: plugin `{plugin}` rejected its parameters: {message}"
            )
        }
        RegistryError::Call(call) => {
            format!("{PARTITIONER_KEY}={plugin}: the plugin failed to initialise: {call}")
        }
        RegistryError::NotFound(_) => format!(
            "{PARTITIONER_KEY}={plugin}: no plugin named `{plugin}` is deployed (sluice plugin deploy {plugin}.wasm)"
        ),
        other => format!("{PARTITIONER_KEY}={plugin}: {other}"),
    };
    KafkaError::new(ResponseError::InvalidConfig, message)
}

/// A failed partitioner call on produce, as the partition's error: POLICY_VIOLATION
/// (non-retriable: the same batch would fail the same way) with the plugin's error, except
/// when no instance was to be had (the plugin's share of the pool was in calls):
/// REQUEST_TIMED_OUT, which clients retry.
pub fn call_error(topic: &str, e: &CallError) -> KafkaError {
    let code = match e {
        CallError::Busy { .. } | CallError::PoolFull { .. } => ResponseError::RequestTimedOut,
        _ => ResponseError::PolicyViolation,
    };
    KafkaError::new(code, format!("topic {topic}: partitioner {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_parse_as_comma_separated_pairs() {
        assert_eq!(
            parse_params("field=$.customer_id, other=x=y").unwrap(),
            [
                ("field".to_owned(), "$.customer_id".to_owned()),
                ("other".to_owned(), "x=y".to_owned())
            ]
        );
        assert!(parse_params("").unwrap().is_empty());
        assert!(parse_params("novalue").is_err());
        assert!(parse_params("=v").is_err());
    }

    #[test]
    fn a_busy_partitioner_is_retriable_and_a_failing_one_is_not() {
        let busy = CallError::Busy {
            plugin: "murmur2".into(),
            max: 32,
            waited_ms: 50,
        };
        let e = call_error("t", &busy);
        assert_eq!(e.code, ResponseError::RequestTimedOut);
        assert!(
            e.message.contains("PLUGIN_INSTANCES_PER_PLUGIN_MAX = 32"),
            "{}",
            e.message
        );
        let trap = CallError::Trap {
            plugin: "murmur2".into(),
            message: "unreachable".into(),
        };
        assert_eq!(call_error("t", &trap).code, ResponseError::PolicyViolation);
    }
}
