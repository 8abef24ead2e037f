//! What each plugin instance's `Store` holds: its memory limiter, its log budget, the
//! plugin's log and, for a guest that imports WASI, its WASI context (`wasi.rs`, made on
//! first use).

use std::sync::Arc;

use wasmtime::ResourceLimiter;

use crate::bindings::LogLevel;
use crate::bindings::{v0_1, v0_2};
use crate::limits;
use crate::plugin_log::PluginLog;
use crate::wasi::{WasiParts, stderr, stdout};

/// A memory growth past the limit: the error an instantiation fails with, and what a call
/// that failed after the host refused a growth is reported as.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("memory growth to {desired_bytes} bytes is past the limit of {max_bytes}")]
pub(crate) struct MemoryLimitHit {
    pub desired_bytes: u64,
    pub max_bytes: u64,
}

// `pub` in this private module: `call::Kind`, a public trait, names it in its signatures.
#[derive(Debug)]
pub struct HostState {
    plugin: String,
    /// sha256 of the version this instance runs (log lines carry it).
    version: String,
    memory_bytes_max: u64,
    logs_left: u32,
    logs_dropped: u32,
    /// The plugin's own log (`plugin_log.rs`), shared by its instances.
    log: Arc<PluginLog>,
    /// WASI, for a guest that calls it; `None` until then (the fast path never makes it).
    wasi: Option<Box<WasiParts>>,
    /// A growth refused during the current call: the call's failure, if it fails, is
    /// reported as the memory limit.
    memory_refused: Option<MemoryLimitHit>,
    /// The instance's linear memory, in bytes, as last grown (what the pool reads to retire
    /// an instance whose memory has grown large: `PLUGIN_RETIRE_MEMORY_PERCENT`).
    memory_bytes: u64,
}

impl HostState {
    pub fn new(plugin: &str, version: &str, memory_bytes_max: u64, log: Arc<PluginLog>) -> Self {
        Self {
            plugin: plugin.to_owned(),
            version: version.to_owned(),
            memory_bytes_max,
            logs_left: 0,
            logs_dropped: 0,
            log,
            wasi: None,
            memory_refused: None,
            memory_bytes: 0,
        }
    }

    /// The instance's linear memory now, in bytes.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// The growth the host refused during the call that just ended, if any.
    pub(crate) fn take_memory_refused(&mut self) -> Option<MemoryLimitHit> {
        self.memory_refused.take()
    }

    /// The WASI context, made on the guest's first WASI call.
    pub(crate) fn wasi(&mut self) -> &mut WasiParts {
        self.wasi.get_or_insert_with(|| Box::new(WasiParts::new()))
    }

    /// Called before each call into the guest.
    pub fn begin_call(&mut self) {
        self.memory_refused = None;
        self.logs_left = limits::LOG_MESSAGES_PER_CALL_MAX;
        self.logs_dropped = 0;
    }

    /// Called after each call: what the guest wrote to stdout and stderr goes to its log
    /// under the same budget as its `log` calls; report what the budget cut.
    pub fn end_call(&mut self) {
        if let Some(wasi) = &self.wasi {
            let (lines, cut) = wasi.stdio.take();
            self.logs_dropped += cut;
            for (level, line) in lines {
                self.log_line(level, line);
            }
        }
        if self.logs_dropped > 0 {
            self.log.count_dropped(u64::from(self.logs_dropped));
            tracing::warn!(plugin = %self.plugin, dropped = self.logs_dropped, "plugin log messages dropped");
        }
    }
}

impl ResourceLimiter for HostState {
    /// A growth past the limit fails in the guest (`memory.grow` answers -1) rather than
    /// trapping, so a runtime that collects garbage when memory runs short (SpiderMonkey,
    /// CPython's MemoryError) gets its chance; if the call then fails, it is reported as
    /// the limit ([`HostState::take_memory_refused`]). At instantiation (the initial
    /// memory) it is an error at once.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 <= self.memory_bytes_max {
            self.memory_bytes = self.memory_bytes.max(desired as u64);
            return Ok(true);
        }
        let hit = MemoryLimitHit {
            desired_bytes: desired as u64,
            max_bytes: self.memory_bytes_max,
        };
        if current == 0 {
            return Err(wasmtime::Error::new(hit));
        }
        self.memory_refused = Some(hit);
        Ok(false)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; ours have a handful.
        Ok(desired <= 100_000)
    }
}

impl v0_1::partitioner::sluice::plugin::types::Host for HostState {}

impl v0_1::partitioner::sluice::plugin::host::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.log_line(level, message);
    }
}

impl v0_2::partitioner::sluice::plugin::host::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) {
        self.log_line(level, message);
    }
}

impl HostState {
    /// One line for the plugin's log (and the broker's), under the per-call budget.
    fn log_line(&mut self, level: LogLevel, mut message: String) {
        if self.logs_left == 0 {
            self.logs_dropped += 1;
            return;
        }
        self.logs_left -= 1;
        if message.len() > limits::LOG_MESSAGE_BYTES_MAX {
            let mut cut = limits::LOG_MESSAGE_BYTES_MAX;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        if !self.log.push(level, &self.version, message.clone()) {
            return;
        }
        let plugin = &self.plugin;
        match level {
            LogLevel::Debug => tracing::debug!(%plugin, "{message}"),
            LogLevel::Info => tracing::info!(%plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(%plugin, "{message}"),
            LogLevel::Error => tracing::error!(%plugin, "{message}"),
        }
    }
}

impl wasmtime_wasi::WasiView for HostState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        self.wasi().view()
    }
}

impl stdout::Host for HostState {
    fn get_stdout(
        &mut self,
    ) -> wasmtime::Result<wasmtime::component::Resource<wasmtime_wasi::p2::DynOutputStream>> {
        self.wasi().stdio_stream(LogLevel::Info)
    }
}

impl stderr::Host for HostState {
    fn get_stderr(
        &mut self,
    ) -> wasmtime::Result<wasmtime::component::Resource<wasmtime_wasi::p2::DynOutputStream>> {
        self.wasi().stdio_stream(LogLevel::Warn)
    }
}
