//! Sluice's WebAssembly plugin host: the only crate that depends on
//! wasmtime. Plugins are components of the `sluice:plugin` WIT package
//! (`wit/sluice-plugin.wit`, version 0.2.0; 0.1.0 plugins still load, from
//! `wit/released/`); see `docs/plugins.md`.
//!
//! # Layout
//! In reading order:
//! - [`limits`]: every limit, named, with its unit; [`config`]:
//!   [`PluginConfig`], the `plugin.*` broker keys (`plugin.dir`,
//!   `plugin.call.timeout.ms`, `plugin.memory.bytes.max`,
//!   `plugin.module.bytes.max`).
//! - [`error`]: [`CallError`] (a call failed: timeout, memory, trap, guest
//!   error, broken contract, no instance to be had; the instance is discarded) and
//!   [`RegistryError`] (managing plugins failed).
//! - `bindings`: `component::bindgen!` on the WIT, one module per supported
//!   version and world, and per kind an enum over the versions
//!   ([`WitVersion`]).
//! - `wasi`: deny-by-default WASI for guests that import it (componentize-py,
//!   componentize-js): clocks, random, an empty environment, stdout/stderr
//!   into the plugin log, a filesystem with no preopened directory; any
//!   other import ([`WASI_ALLOWED`]) refused at deploy, named.
//! - `engine`: [`PluginEngine`], one wasmtime `Engine` (Cranelift,
//!   component model, pooling allocator, epoch interruption with a ticker
//!   thread) and a `Linker` with the `log` import of every version and WASI.
//! - `state`: each `Store`'s data: the `ResourceLimiter` that traps a
//!   memory growth past `plugin.memory.bytes.max`, the rate-limited log, and
//!   the WASI context of a guest that uses it (made on first use).
//! - `check`: the install-time shape check of a component against the
//!   per-component limits (core instances, memories, tables, table
//!   elements) and the compile limits (functions, body bytes, locals,
//!   segments), before anything is compiled.
//! - `compile`: bytes -> [`PluginVersion`]: size check, core module ->
//!   component with `wit-component`, the shape check, compile on its own
//!   thread under a timeout and a bound on concurrent compiles, or load
//!   from the disk cache, tell the [`PluginKind`] from the exported
//!   interface, link once (`*Pre`).
//! - `cache`: the compiled-plugin cache (`PluginConfig::cache_dir`, outside
//!   `plugin.dir`): `<source sha256>.cwasm`, loaded only when the `.digest`
//!   beside it records its SHA-256, this source and this engine.
//! - `batch`: [`ColumnarBatch`], the WIT `record-batch` built from records;
//!   `columns`: reading one back ([`RecordView`]s), selecting records, and
//!   the shape check on batches a plugin returns.
//! - `call`: what every kind's instance shares: `Kind` (a kind's bindings, name,
//!   linked `*Pre` and `init`) and one generic `Instance<K>`: its own `Store` under
//!   the limits, instantiation and `init`, the deadline armed per call, errors typed
//!   into [`CallError`]s, retirement when its memory has grown large.
//! - `partitioner`: the partitioner kind, [`PartitionerInstance`]'s call and the
//!   check of its answer (a partition per record, in range).
//! - `filter`, `transform`: the fetch-time kinds, [`FilterInstance`] and
//!   [`TransformInstance`]; a transform's output is checked and given its input
//!   records' offsets and timestamps.
//! - `validator`: the validator kind, [`ValidatorInstance`] (produce time): the
//!   refusals a guest returns, checked (in range, in order, reasons cut).
//! - `share`: the instance pool's accounting: at most `PLUGIN_INSTANCES_MAX`
//!   instances of all plugins, each plugin's share of them (live + idle,
//!   across all its handles), its idle instances (bounded, dropped under
//!   pressure), and [`CallError::Busy`] for a caller whose plugin's share
//!   is all in calls.
//! - `pool`: the shareable [`Partitioner`], [`Filter`], [`Transform`] and
//!   [`Validator`] handles, one mechanism for every kind: a call checks an instance out
//!   of the plugin's share, hot reload followed.
//! - `view`: [`View`], a chain of [`Stage`]s with a [`FailurePolicy`]
//!   (`fail` or `skip`): what a consumer's fetch runs through.
//! - `registry`: [`Registry`], owner of the plugin directory: install,
//!   list, describe, delete (refused while in use unless forced), atomic
//!   swap of new versions (`ArcSwap`): calls in flight finish on the old
//!   version, new calls use the new one.
//! - `slot`: [`PluginSlot`], one plugin's current version (swapped atomically), its
//!   share of the instance budget, its statistics and its log; what every handle holds.
//! - `plugin_log`: a plugin's own log (the WIT `log` import and WASI stdout/stderr), a
//!   bounded ring of lines per plugin ([`LogPage`]).
//! - `stats`: per-plugin call counters (calls, [`CallErrorKind`]s, a latency
//!   histogram) kept in each `PluginSlot`, so they cover every handle and
//!   survive hot reloads; [`Registry::stats`] snapshots them as
//!   [`PluginStats`].
//! - `watcher`: [`Registry::watch`], hot reload of files dropped in the
//!   directory.
//! - `fuzz` (feature `fuzz`, test scaffolding: never in the broker binary): the entry
//!   points of the `guest_columns` and `plugin_component` fuzz targets.
//!
//! # For the server
//! ```text
//! let (registry, failures) = Registry::open(PluginConfig::new(data_dir.join("plugins")))?;
//! for (path, e) in failures { tracing::warn!(?path, "plugin not loaded: {e}") }
//! let _watch = registry.watch()?;                       // keep alive
//! // admin API: PUT /v1/plugins/{name} -> registry.install(name, &body)
//! //            GET /v1/plugins -> registry.list(); GET /v1/plugins/{name} -> describe
//! //            DELETE /v1/plugins/{name}?force=true -> registry.delete(name, force)
//! // /metrics: registry.stats() (calls, errors by kind, latency per plugin)
//! // topic config sluice.partitioner = name, sluice.partitioner.params = k=v,...
//! let partitioner = Arc::new(registry.partitioner(name, &params)?); // per topic
//! // produce: build one ColumnarBatch per produced batch, then
//! let partitions: Vec<u32> = partitioner.partition(&batch, partition_count)?;
//! ```
//! Views (fetch time), per configured view:
//! ```text
//! let stages = view_config.plugins.iter()
//!     .map(|(name, params)| registry.stage(name, params))
//!     .collect::<Result<Vec<_>, _>>()?;             // bad params fail here
//! let view = Arc::new(View::new(stages, "skip".parse()?));
//! // fetch: per record batch, decompress, build a ColumnarBatch with the
//! // records' real offsets, then
//! let out = view.apply(&batch)?;                    // Err only under `fail`
//! for r in out.kept(&batch).records() { /* re-encode r.offset, r.timestamp, r.key(), r.value(), r.headers() */ }
//! if let Some(e) = out.skipped_because { tracing::warn!("view skipped {} records: {e}", out.skipped_records) }
//! ```
//! `Partitioner::partition` and `View::apply` are blocking and CPU-bound (bounded by
//! `plugin.call.timeout.ms`): call it from `spawn_blocking` or a dedicated
//! pool. Map [`CallError`] to the produce response (e.g. Kafka's
//! `POLICY_VIOLATION` or `UNKNOWN_SERVER_ERROR`) and keep serving.
//!
//! Architecture Invariant: a plugin gets no capability but `log` and the
//! WASI that reaches nothing of the broker's (clocks, random, stdio into its
//! log; no preopened directory, no sockets, no environment); every call runs
//! under a wall-clock deadline and a memory limit.

pub mod config;
pub mod error;
pub mod limits;

mod batch;
mod bindings;
mod cache;
mod call;
mod check;
mod columns;
mod compile;
mod engine;
mod filter;
#[cfg(any(test, feature = "fuzz"))]
#[doc(hidden)]
pub mod fuzz;
mod partitioner;
mod plugin_log;
mod pool;
mod registry;
mod share;
mod slot;
mod state;
mod stats;
mod transform;
mod validator;
mod view;
mod wasi;
mod watcher;

pub use batch::{ColumnarBatch, Header};
pub use bindings::WitVersion;
pub use columns::{RecordView, RecordViews};
pub use compile::{PluginKind, PluginVersion, to_component};
pub use config::PluginConfig;
pub use engine::PluginEngine;
pub use error::{CallError, RegistryError};
pub use filter::FilterInstance;
pub use partitioner::PartitionerInstance;
pub use plugin_log::{LogLine, LogPage};
pub use pool::{Filter, Partitioner, Transform, Validator};
pub use registry::{Install, LoadFailures, PluginInfo, Registry, sha256_hex};
pub use share::InstanceCounts;
pub use slot::PluginSlot;
pub use stats::{CALL_LATENCY_BUCKETS_US, CallErrorKind, PluginStats};
pub use transform::{Routed, TransformInstance};
pub use validator::{Refusal, ValidatorInstance};
pub use view::{FailurePolicy, Stage, StageOutput, Step, View, ViewOutput, ViewStats, apply_with};
pub use wasi::WASI_ALLOWED;
pub use watcher::Watcher;
