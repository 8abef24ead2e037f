//! The broker: its config, its cluster id, the addresses it advertises, its clock and its
//! data dir's lock, and (until they are handed out one by one) the services it opened: the
//! topic registry (`crate::topics`), security, plugins and metrics.
//!
//! On-disk layout under `data.dir` (the topics' and views' own: `crate::topics`):
//! ```text
//! .lock                          flock'd while a broker has the data dir open
//! meta.json                      {"version", "cluster_id", "node_id", "directory_id"}
//!                                (`crate::data_dir`: `sluice cluster format`, or the first
//!                                start of a cluster of one; single-node Sluice's
//!                                cluster.json is migrated to it)
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use sluice_storage::Fs;
use sluice_storage::io::{self as storage_io, RealFs};

use crate::clock::SharedClock;
use crate::config::{BrokerConfig, HostPort};
use crate::error::ServerError;
use crate::files::remove_stale_temps;
use crate::kraft::Kraft;
use crate::plugins::Plugins;
use crate::security::Security;
use crate::telemetry::{Telemetry, TelemetryConfig};
use crate::topics::TopicRegistry;

/// The broker's shared state.
#[derive(Debug)]
pub struct Broker {
    /// Validated config.
    pub config: Arc<BrokerConfig>,
    /// What Metadata advertises (set once the listener has bound).
    advertised: RwLock<BTreeMap<String, HostPort>>,
    /// Persisted at first start, stable across restarts.
    pub cluster_id: String,
    /// Topics, partitions and views (`crate::topics`).
    pub topics: Arc<TopicRegistry>,
    /// The clock everything this broker stamps or ages reads (`crate::clock`).
    clock: SharedClock,
    /// The data dir's lock file, held (flock) while the broker runs so a second broker cannot
    /// open the same data dir; released by `close_all` or by the kernel when the process dies.
    dir_lock: Mutex<Option<std::fs::File>>,
    /// The plugin registry (`plugin.dir`) and its hot-reload watcher.
    pub plugins: Plugins,
    /// Users, ACLs, quotas, the login limiter and the quota windows (`crate::security`).
    pub security: Arc<Security>,
    /// Request, connection and error counters (the admin API renders them).
    pub metrics: crate::metrics::Metrics,
    /// The metrics clients push about themselves (KIP-714).
    pub telemetry: Arc<Telemetry>,
    /// This broker's side of the cluster, when `controller.quorum.voters` is set (set once
    /// the listeners are bound: it registers their advertised addresses).
    kraft: OnceLock<Arc<Kraft>>,
}

/// What a broker reads the world through: the filesystem its partition logs live on and
/// the clock. Production uses the real ones ([`Seams::default`]); tests substitute either.
#[derive(Debug, Clone)]
pub struct Seams {
    /// Where partition logs live (topic metadata stays on the real filesystem).
    pub fs: Arc<dyn Fs>,
    /// What "now" is.
    pub clock: SharedClock,
}

impl Default for Seams {
    fn default() -> Self {
        Self {
            fs: Arc::new(RealFs),
            clock: crate::clock::system(),
        }
    }
}

impl Broker {
    /// Opens the data dir: creates it, loads every topic and opens its partitions.
    pub fn open(config: BrokerConfig) -> Result<Self, ServerError> {
        Self::open_with(config, Arc::new(RealFs))
    }

    /// Same, with partition logs on `fs` (topic metadata stays on the real filesystem).
    pub fn open_with(config: BrokerConfig, fs: Arc<dyn Fs>) -> Result<Self, ServerError> {
        Self::open_seams(
            config,
            Seams {
                fs,
                ..Seams::default()
            },
        )
    }

    /// Same, reading the world through `seams` (a fault-injecting filesystem, a manual clock).
    pub fn open_seams(config: BrokerConfig, seams: Seams) -> Result<Self, ServerError> {
        let Seams { fs, clock } = seams;
        let dir = config.data_dir.clone();
        storage_io::create_dir_durable(&RealFs, &dir).map_err(ServerError::io(format!(
            "creating data dir {}",
            dir.display()
        )))?;
        let dir_lock = crate::data_dir::lock(&dir)?;
        remove_stale_temps(&dir);
        let meta = crate::data_dir::load_or_init(&dir, config.node_id, config.needs_format())?;
        let cluster_id = meta.cluster_id;
        let plugins = Plugins::open(&config)?;
        let security = Arc::new(Security::open(&config)?);
        let advertised = config
            .listeners
            .iter()
            .map(|l| {
                let addr = config.advertised_for(&l.name).unwrap_or(&l.addr);
                (l.name.clone(), addr.clone())
            })
            .collect();
        let telemetry = Arc::new(Telemetry::new(telemetry_config(&config)));
        let config = Arc::new(config);
        let topics =
            TopicRegistry::open(config.clone(), plugins.registry.clone(), fs, clock.clone())?;
        let broker = Self {
            config,
            advertised: RwLock::new(advertised),
            cluster_id,
            topics: Arc::new(topics),
            clock,
            security,
            dir_lock: Mutex::new(Some(dir_lock)),
            plugins,
            metrics: crate::metrics::Metrics::default(),
            telemetry,
            kraft: OnceLock::new(),
        };
        Ok(broker)
    }

    /// Records the address listener `name` actually bound (used unless
    /// `advertised.listeners` names the listener).
    pub fn set_bound_address(&self, name: &str, bound: HostPort) {
        if self.config.advertised_for(name).is_none() {
            self.advertised
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(name.to_owned(), bound);
        }
    }

    /// The host and port Metadata advertises to a client of listener `name` (as Kafka does:
    /// each listener advertises its own address).
    pub fn advertised(&self, name: &str) -> HostPort {
        let advertised = self
            .advertised
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        advertised
            .get(name)
            .or_else(|| advertised.values().next())
            .cloned()
            .expect("a broker has at least one listener")
    }

    /// This broker's side of the cluster; `None` on a single node (no voters).
    pub fn kraft(&self) -> Option<&Arc<Kraft>> {
        self.kraft.get()
    }

    /// Records the started cluster side (once).
    pub(crate) fn set_kraft(&self, kraft: Arc<Kraft>) {
        if self.kraft.set(kraft).is_err() {
            tracing::error!("the cluster side was started twice; keeping the first");
        }
    }

    /// The broker's clock (`crate::clock`): the system's, or a test's.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Now, by the broker's clock, in Unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Closes every partition (flush + clean-shutdown marker) and the security log, and
    /// releases the data dir. Used at shutdown.
    pub fn close_all(&self) -> Result<(), ServerError> {
        let mut first_error = self.topics.close_all().err();
        if let Err(e) = self.security.store.close() {
            tracing::error!(error = %e, "closing the security log failed");
            first_error.get_or_insert(e);
        }
        self.dir_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        first_error.map_or(Ok(()), Err)
    }
}

/// What every client is subscribed to (`client.telemetry.*`, `telemetry.max.bytes`).
fn telemetry_config(config: &BrokerConfig) -> TelemetryConfig {
    let all = config.client_telemetry_metrics.iter().any(|m| m == "*");
    TelemetryConfig {
        // The wire's form: [""] is every metric, [] none.
        requested_metrics: if all {
            vec![String::new()]
        } else {
            config.client_telemetry_metrics.clone()
        },
        push_interval_ms: i32::try_from(config.client_telemetry_push_interval_ms)
            .unwrap_or(i32::MAX),
        max_bytes: i32::try_from(config.telemetry_max_bytes).unwrap_or(i32::MAX),
    }
}
