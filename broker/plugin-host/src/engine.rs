//! The wasmtime engine: one per registry, configured once. Cranelift,
//! component model, epoch interruption driven by a ticker thread, the
//! pooling allocator, and a linker that provides nothing but `log`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::bindings::partitioner::Partitioner;
use crate::config::PluginConfig;
use crate::error::RegistryError;
use crate::limits;
use crate::state::HostState;

/// The engine, its linker, and the epoch ticker that makes deadlines work.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<HostState>>,
    pub(crate) config: Arc<PluginConfig>,
    /// Stops the ticker thread when the last clone is dropped.
    _ticker: Arc<Ticker>,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// # Errors
    /// An invalid config, or wasmtime refusing it.
    pub fn new(config: PluginConfig) -> Result<Self, RegistryError> {
        config.validate().map_err(RegistryError::Engine)?;
        let engine = Engine::new(&wasmtime_config(&config))
            .map_err(|e| RegistryError::Engine(e.to_string()))?;
        let mut linker = Linker::new(&engine);
        Partitioner::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|e| RegistryError::Engine(e.to_string()))?;
        let ticker = Ticker::start(&engine);
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            config: Arc::new(config),
            _ticker: ticker,
        })
    }

    pub fn config(&self) -> &PluginConfig {
        &self.config
    }
}

fn wasmtime_config(config: &PluginConfig) -> Config {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(limits::PLUGIN_INSTANCES_MAX)
        .total_core_instances(limits::PLUGIN_INSTANCES_MAX * limits::CORE_INSTANCES_PER_PLUGIN)
        .total_memories(limits::PLUGIN_INSTANCES_MAX)
        .total_tables(limits::PLUGIN_INSTANCES_MAX * 2)
        .max_memory_size(config.memory_bytes_max as usize);
    let mut c = Config::new();
    c.wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    c
}

/// Bumps the engine's epoch every `EPOCH_TICK_MS`; a call's deadline is a
/// number of ticks.
struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Ticker {
    fn start(engine: &Engine) -> Arc<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = Arc::clone(&stop);
        thread::Builder::new()
            .name("plugin-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_millis(limits::EPOCH_TICK_MS));
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => return,
                    }
                }
            })
            .expect("spawning the epoch ticker thread");
        Arc::new(Self { stop })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
