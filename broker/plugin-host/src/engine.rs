//! The wasmtime engine: one per registry, configured once. Cranelift,
//! component model, epoch interruption driven by a ticker thread, the
//! pooling allocator, and a linker that provides the `log` import of every
//! supported WIT version and deny-by-default WASI (`wasi.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::config::PluginConfig;
use crate::error::RegistryError;
use crate::limits;
use crate::plugin_log::PluginLogs;
use crate::state::HostState;

/// The engine, its linker, and the epoch ticker that makes deadlines work.
#[derive(Clone)]
pub struct PluginEngine {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<HostState>>,
    pub(crate) config: Arc<PluginConfig>,
    /// Compiles running now, at most `PLUGIN_COMPILES_CONCURRENT_MAX`.
    pub(crate) compiles: Arc<CompileSlots>,
    /// Every plugin's own log (`plugin_log.rs`).
    pub(crate) logs: Arc<PluginLogs>,
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
        crate::bindings::add_host_to_linker(&mut linker)
            .and_then(|()| crate::wasi::add_to_linker(&mut linker))
            .map_err(|e| RegistryError::Engine(e.to_string()))?;
        let ticker = Ticker::start(&engine);
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            compiles: Arc::default(),
            logs: Arc::default(),
            config: Arc::new(config),
            _ticker: ticker,
        })
    }

    pub fn config(&self) -> &PluginConfig {
        &self.config
    }
}

fn wasmtime_config(config: &PluginConfig) -> Config {
    use limits::{
        PLUGIN_COMPONENT_INSTANCE_BYTES_MAX, PLUGIN_CORE_INSTANCE_BYTES_MAX,
        PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX, PLUGIN_INSTANCES_MAX,
        PLUGIN_MEMORIES_PER_COMPONENT_MAX, PLUGIN_MEMORIES_PER_MODULE_MAX,
        PLUGIN_TABLE_ELEMENTS_MAX, PLUGIN_TABLES_PER_COMPONENT_MAX, PLUGIN_TABLES_PER_MODULE_MAX,
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(PLUGIN_INSTANCES_MAX)
        .total_core_instances(PLUGIN_INSTANCES_MAX * PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX)
        .total_memories(PLUGIN_INSTANCES_MAX * PLUGIN_MEMORIES_PER_COMPONENT_MAX)
        .total_tables(PLUGIN_INSTANCES_MAX * PLUGIN_TABLES_PER_COMPONENT_MAX)
        .max_core_instances_per_component(PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX)
        .max_memories_per_component(PLUGIN_MEMORIES_PER_COMPONENT_MAX)
        .max_tables_per_component(PLUGIN_TABLES_PER_COMPONENT_MAX)
        .max_memories_per_module(PLUGIN_MEMORIES_PER_MODULE_MAX)
        .max_tables_per_module(PLUGIN_TABLES_PER_MODULE_MAX)
        .table_elements(PLUGIN_TABLE_ELEMENTS_MAX as usize)
        .max_core_instance_size(PLUGIN_CORE_INSTANCE_BYTES_MAX)
        .max_component_instance_size(PLUGIN_COMPONENT_INSTANCE_BYTES_MAX)
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

/// Compiles running now; at most `PLUGIN_COMPILES_CONCURRENT_MAX`. A compile past its
/// timeout keeps its slot until its thread finishes.
#[derive(Debug, Default)]
pub(crate) struct CompileSlots {
    running: Mutex<u32>,
    freed: Condvar,
}

/// One running compile; frees its slot when dropped (by the compile thread, at its end).
pub(crate) struct CompileSlot(Arc<CompileSlots>);

impl CompileSlots {
    pub(crate) fn acquire(self: &Arc<Self>, deadline: Instant) -> Option<CompileSlot> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        while *running >= limits::PLUGIN_COMPILES_CONCURRENT_MAX {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            running = self
                .freed
                .wait_timeout(running, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *running += 1;
        Some(CompileSlot(Arc::clone(self)))
    }
}

impl Drop for CompileSlot {
    fn drop(&mut self) {
        *self
            .0
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.freed.notify_one();
    }
}
