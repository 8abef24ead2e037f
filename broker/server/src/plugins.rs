//! Plugins in the broker: the plugin registry (opened at start with its directory watcher,
//! so a `.wasm` dropped in `plugin.dir` is live within a second) and the binding of a topic
//! to its partitioner plugin (`sluice.partitioner`, `sluice.partitioner.params`) and its
//! validator plugin (`sluice.validator`, `sluice.validator.params`), one mechanism for both
//! ([`Role`]).
//!
//! A topic names each plugin by name; the handle follows the registry's slot, so
//! a new version of the plugin (upload, file replaced) reaches the topic without
//! reconfiguring it. Parameters are checked by the plugin's `init` when the topic is
//! configured; a topic loaded at start whose plugin is missing or failing is kept, and its
//! produces fail with POLICY_VIOLATION until the plugin is deployed.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use kafka_protocol::ResponseError;
use sluice_plugin_host::{CallError, Partitioner, Registry, RegistryError, Validator, Watcher};

use crate::config::BrokerConfig;
use crate::error::{KafkaError, ServerError};
use crate::topic_config::TopicOverrides;
pub use crate::topic_config::{
    PARTITIONER_KEY, PARTITIONER_PARAMS_KEY, VALIDATOR_KEY, VALIDATOR_PARAMS_KEY, parse_params,
};

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

/// What a topic binds a plugin for: the keys that name it and its parameters, and how
/// to get a handle of its kind from the registry.
pub trait Role: 'static {
    type Handle: std::fmt::Debug + Send + Sync;
    /// The topic key naming the plugin, e.g. `sluice.partitioner`.
    const KEY: &'static str;
    /// The topic key with its parameters, `k=v,k2=v2`.
    const PARAMS_KEY: &'static str;
    /// What the plugin is to the topic, for messages ("partitioner").
    const NAME: &'static str;
    fn handle(
        registry: &Registry,
        plugin: &str,
        params: &[(String, String)],
    ) -> Result<Self::Handle, RegistryError>;
}

/// `sluice.partitioner`: decides the partition of every produced record.
#[derive(Debug)]
pub struct PartitionerRole;

impl Role for PartitionerRole {
    type Handle = Partitioner;
    const KEY: &'static str = PARTITIONER_KEY;
    const PARAMS_KEY: &'static str = PARTITIONER_PARAMS_KEY;
    const NAME: &'static str = "partitioner";
    fn handle(
        registry: &Registry,
        plugin: &str,
        params: &[(String, String)],
    ) -> Result<Partitioner, RegistryError> {
        registry.partitioner(plugin, params)
    }
}

/// `sluice.validator`: refuses produced records before they are appended.
#[derive(Debug)]
pub struct ValidatorRole;

impl Role for ValidatorRole {
    type Handle = Validator;
    const KEY: &'static str = VALIDATOR_KEY;
    const PARAMS_KEY: &'static str = VALIDATOR_PARAMS_KEY;
    const NAME: &'static str = "validator";
    fn handle(
        registry: &Registry,
        plugin: &str,
        params: &[(String, String)],
    ) -> Result<Validator, RegistryError> {
        registry.validator(plugin, params)
    }
}

/// A topic's partitioner.
pub type TopicPartitioner = TopicPlugin<PartitionerRole>;
/// A topic's validator.
pub type TopicValidator = TopicPlugin<ValidatorRole>;

/// A plugin a topic names for role `R`: the plugin name, its parameters, and the handle
/// (made at configuration, or on first use if the plugin was missing when the topic was
/// loaded).
#[derive(Debug)]
pub struct TopicPlugin<R: Role> {
    plugin: String,
    params: Vec<(String, String)>,
    handle: RwLock<Option<Arc<R::Handle>>>,
    /// This topic's calls of the plugin (the plugin's own stats count every topic).
    pub stats: TopicPluginStats,
}

/// One topic's use of one plugin, since the binding was made (relaxed counters, rendered on
/// `/metrics` as `sluice_topic_plugin_*{topic,role,plugin}`).
#[derive(Debug, Default)]
pub struct TopicPluginStats {
    /// Batches handed to the plugin.
    pub batches: AtomicU64,
    /// Records in those batches, and the records the plugin let through (a partitioner
    /// places every record; a validator passes the ones it did not refuse).
    pub records_in: AtomicU64,
    pub records_out: AtomicU64,
    /// Calls that failed (trap, timeout, memory, broken answer, no instance).
    pub failures: AtomicU64,
}

impl TopicPluginStats {
    /// One call's outcome: `Some(records out)` for a successful one.
    pub fn record(&self, records_in: usize, records_out: Option<usize>) {
        self.batches.fetch_add(1, Relaxed);
        self.records_in.fetch_add(records_in as u64, Relaxed);
        match records_out {
            Some(n) => self.records_out.fetch_add(n as u64, Relaxed),
            None => self.failures.fetch_add(1, Relaxed),
        };
    }

    /// `[batches, records_in, records_out, failures]`, each read once.
    pub fn snapshot(&self) -> [u64; 4] {
        [
            self.batches.load(Relaxed),
            self.records_in.load(Relaxed),
            self.records_out.load(Relaxed),
            self.failures.load(Relaxed),
        ]
    }
}

impl<R: Role> TopicPlugin<R> {
    /// The plugin a topic's overrides name, with its parameters.
    fn configured(overrides: &TopicOverrides) -> Option<(String, Vec<(String, String)>)> {
        let plugin = overrides.get(R::KEY)?.trim().to_owned();
        let params = overrides
            .get(R::PARAMS_KEY)
            .map(|p| parse_params(p).unwrap_or_default())
            .unwrap_or_default();
        Some((plugin, params))
    }

    /// Binds a topic being configured: INVALID_CONFIG naming the key if the plugin is
    /// unknown, not of the role's kind, or rejects the parameters. `None`: none named.
    pub fn bind(
        registry: &Registry,
        overrides: &TopicOverrides,
    ) -> Result<Option<Self>, KafkaError> {
        if overrides.contains_key(R::PARAMS_KEY) && !overrides.contains_key(R::KEY) {
            return Err(KafkaError::new(
                ResponseError::InvalidConfig,
                format!("{} is set without {}", R::PARAMS_KEY, R::KEY),
            ));
        }
        let Some((plugin, params)) = Self::configured(overrides) else {
            return Ok(None);
        };
        let handle =
            R::handle(registry, &plugin, &params).map_err(|e| config_error::<R>(&plugin, e))?;
        Ok(Some(Self {
            plugin,
            params,
            handle: RwLock::new(Some(Arc::new(handle))),
            stats: TopicPluginStats::default(),
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
        let handle = match R::handle(registry, &plugin, &params) {
            Ok(handle) => Some(Arc::new(handle)),
            Err(e) => {
                tracing::warn!(topic, plugin = %plugin, role = R::NAME, "plugin not bound; produces to this topic fail until it is: {e}");
                None
            }
        };
        Some(Self {
            plugin,
            params,
            handle: RwLock::new(handle),
            stats: TopicPluginStats::default(),
        })
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// What the plugin is to the topic: `partitioner` or `validator`.
    pub fn role(&self) -> &'static str {
        R::NAME
    }

    /// The handle to call, binding it now if the topic was loaded without it.
    pub fn handle(&self, registry: &Registry) -> Result<Arc<R::Handle>, KafkaError> {
        if let Some(handle) = self
            .handle
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            return Ok(Arc::clone(handle));
        }
        let handle = R::handle(registry, &self.plugin, &self.params)
            .map(Arc::new)
            .map_err(|e| {
                KafkaError::new(
                    ResponseError::PolicyViolation,
                    format!("{} plugin `{}` is not usable: {e}", R::NAME, self.plugin),
                )
            })?;
        *self
            .handle
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&handle));
        Ok(handle)
    }
}

/// The plugins a topic binds.
#[derive(Debug, Clone, Default)]
pub struct TopicPlugins {
    /// `sluice.partitioner`: the plugin that decides the partition of every produced record.
    pub partitioner: Option<Arc<TopicPartitioner>>,
    /// `sluice.validator`: the plugin that refuses produced records before the append.
    pub validator: Option<Arc<TopicValidator>>,
}

impl TopicPlugins {
    /// Binds a topic being configured (INVALID_CONFIG naming the key at fault).
    pub fn bind(registry: &Registry, overrides: &TopicOverrides) -> Result<Self, KafkaError> {
        Ok(Self {
            partitioner: TopicPartitioner::bind(registry, overrides)?.map(Arc::new),
            validator: TopicValidator::bind(registry, overrides)?.map(Arc::new),
        })
    }

    /// Binds a topic loaded at start; a plugin that does not bind is retried on produce.
    pub fn bind_loaded(registry: &Registry, topic: &str, overrides: &TopicOverrides) -> Self {
        Self {
            partitioner: TopicPartitioner::bind_loaded(registry, topic, overrides).map(Arc::new),
            validator: TopicValidator::bind_loaded(registry, topic, overrides).map(Arc::new),
        }
    }

    /// The bindings for changed overrides: a role whose keys did not change keeps its
    /// binding (produces running finish on it), the others are bound anew.
    pub fn rebind(
        &self,
        registry: &Registry,
        old: &TopicOverrides,
        new: &TopicOverrides,
    ) -> Result<Self, KafkaError> {
        fn same<R: Role>(old: &TopicOverrides, new: &TopicOverrides) -> bool {
            [R::KEY, R::PARAMS_KEY]
                .iter()
                .all(|k| old.get(*k) == new.get(*k))
        }
        Ok(Self {
            partitioner: if same::<PartitionerRole>(old, new) {
                self.partitioner.clone()
            } else {
                TopicPartitioner::bind(registry, new)?.map(Arc::new)
            },
            validator: if same::<ValidatorRole>(old, new) {
                self.validator.clone()
            } else {
                TopicValidator::bind(registry, new)?.map(Arc::new)
            },
        })
    }
}

/// A registry error at topic configuration, as INVALID_CONFIG naming the key at fault.
fn config_error<R: Role>(plugin: &str, e: RegistryError) -> KafkaError {
    let (key, params_key) = (R::KEY, R::PARAMS_KEY);
    let message = match &e {
        RegistryError::Call(CallError::InvalidParams { message, .. }) => {
            format!("{params_key}: plugin `{plugin}` rejected its parameters: {message}")
        }
        RegistryError::Call(call) => {
            format!("{key}={plugin}: the plugin failed to initialise: {call}")
        }
        RegistryError::NotFound(_) => format!(
            "{key}={plugin}: no plugin named `{plugin}` is deployed (sluice plugin deploy {plugin}.wasm)"
        ),
        other => format!("{key}={plugin}: {other}"),
    };
    KafkaError::new(ResponseError::InvalidConfig, message)
}

/// A failed plugin call on produce, as the partition's error: POLICY_VIOLATION
/// (non-retriable: the same batch would fail the same way) with the plugin's error, except
/// when no instance was to be had (the plugin's share of the pool was in calls):
/// REQUEST_TIMED_OUT, which clients retry. `role` is "partitioner" or "validator".
pub fn call_error(topic: &str, role: &str, e: &CallError) -> KafkaError {
    let code = match e {
        CallError::Busy { .. } | CallError::PoolFull { .. } => ResponseError::RequestTimedOut,
        _ => ResponseError::PolicyViolation,
    };
    KafkaError::new(code, format!("topic {topic}: {role} {e}"))
}

/// Applies another broker's plugin upload or deletion here (a cluster): the bytes are
/// installed only if their SHA-256 is the sender's, and compiled here. Blocking.
///
/// # Errors
/// The digest differs, or the registry refused (the message says which).
pub fn apply_remote(
    plugins: &Plugins,
    message: crate::cluster::BrokerMessage,
) -> Result<i16, String> {
    use crate::cluster::BrokerMessage;
    match message {
        BrokerMessage::InstallPlugin {
            name,
            sha256,
            bytes,
            replace,
        } => {
            let mode = if replace {
                sluice_plugin_host::Install::NewOrReplace
            } else {
                sluice_plugin_host::Install::NewOnly
            };
            let digest = sluice_plugin_host::sha256_hex(&bytes);
            if digest != sha256 {
                return Err(format!(
                    "plugin {name}: the bytes received hash to {digest}, not {sha256}: not installed"
                ));
            }
            let info = plugins
                .registry
                .install_as(&name, &bytes, mode)
                .map_err(|e| format!("plugin {name}: {e}"))?;
            tracing::info!(plugin = %name, sha256 = %info.sha256, "installed a plugin uploaded to another broker");
            Ok(0)
        }
        BrokerMessage::RemovePlugin { name, force } => {
            match plugins.registry.delete(&name, force) {
                Ok(()) => {
                    tracing::info!(plugin = %name, "deleted a plugin deleted on another broker");
                    Ok(0)
                }
                Err(e) => Err(format!("plugin {name}: {e}")),
            }
        }
        _ => Err("not a plugin message".to_owned()),
    }
}

/// Plugin `name`'s component bytes for another broker that lacks the version `sha256` the
/// metadata image names (`BrokerMessage::FetchPlugin`). Blocking.
///
/// # Errors
/// This broker runs another version (or none), or its file changed or cannot be read.
pub fn bytes_for_peer(plugins: &Plugins, name: &str, sha256: &str) -> Result<Vec<u8>, String> {
    let info = plugins
        .registry
        .describe(name)
        .ok_or_else(|| format!("plugin {name} is not installed here"))?;
    if info.sha256 != sha256 {
        return Err(format!(
            "plugin {name} is at {} here, not {sha256}",
            info.sha256
        ));
    }
    let path = plugins.registry.dir().join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if sluice_plugin_host::sha256_hex(&bytes) != sha256 {
        return Err(format!(
            "{} no longer holds version {sha256}",
            path.display()
        ));
    }
    Ok(bytes)
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
        let e = call_error("t", "partitioner", &busy);
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
        assert_eq!(
            call_error("t", "partitioner", &trap).code,
            ResponseError::PolicyViolation
        );
    }
}
