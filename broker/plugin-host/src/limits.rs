//! Every limit of the plugin host, with its unit and why.

/// `plugin.call.timeout.ms` default: wall-clock budget of one call into a
/// plugin (init or one batch). A partitioner on the produce path must not
/// hold a request much longer than a disk write would.
pub const PLUGIN_CALL_TIMEOUT_MS_DEFAULT: u64 = 100;

/// `plugin.memory.bytes.max` default: the most linear memory one plugin
/// instance may grow to. A batch is copied into the guest, so this bounds
/// the batch size a plugin can see too.
pub const PLUGIN_MEMORY_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// `plugin.module.bytes.max` default: the largest upload accepted. Our
/// Rust plugins are 40-200 KB; a componentize-py guest carries CPython and
/// is about 19 MB (plugins/python-json-filter: 18.8 MB), a componentize-js
/// one about 12.5 MB; 32 MiB takes those with room, without letting an
/// upload exhaust the compiler.
pub const PLUGIN_MODULE_BYTES_MAX_DEFAULT: u64 = 32 * 1024 * 1024;

/// Granularity of the wall-clock deadline: the epoch ticker's period. A
/// call is stopped between `timeout` and `timeout + 2 ticks`.
pub const EPOCH_TICK_MS: u64 = 5;

/// Plugin instances alive at once across all plugins, live (in a call) or
/// idle (kept for reuse). The pooling allocator reserves address space for
/// this many up front.
pub const PLUGIN_INSTANCES_MAX: u32 = 256;

/// One plugin's share of the pool: its live + idle instances, across every
/// handle (topic, view) of it. An eighth of the pool, so seven other
/// plugins at their share still leave room; what one plugin's callers do
/// (300 topics naming it, a flood of produces) never takes more.
pub const PLUGIN_INSTANCES_PER_PLUGIN_MAX: u32 = 32;

/// Idle instances kept per plugin, across its handles, for reuse (a fresh
/// instance's first call is 1.5-2x slower than a warm one's). Past it the
/// least recently used is dropped; idle instances of any plugin are also
/// dropped when the whole pool is full and a call needs a slot.
pub const PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX: u32 = 8;

/// How long a call waits for an instance when its plugin's share is all in
/// calls, in ms; then it fails with `CallError::Busy`. Calls last at most
/// `plugin.call.timeout.ms`, so a short burst is absorbed, a flood is not.
pub const PLUGIN_INSTANCE_WAIT_MS: u64 = 50;

// Per component (one plugin instance), applied by the pooling allocator and
// checked at install, so an oversized plugin is refused when it is
// deployed, not when it is first called. Our Rust plugins (plugins/, built
// by sdk/build-plugins.sh) need at most 3 core instances (the module, the
// shim and fixup modules wit-component adds for an import that needs
// memory), 1 memory, 2 tables and 208 table elements (regex-filter). A
// componentize-py guest links CPython, libc and its runtime as 14 core
// instances with a 5,672-element table; a componentize-js guest (StarlingMonkey)
// has 4 instances and a 7,688-element table (sdk/guest-report.py measures them).

/// Core module instances per component: a Python guest's 14, with room.
pub const PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX: u32 = 16;
/// Linear memories defined per component, and per core module.
pub const PLUGIN_MEMORIES_PER_COMPONENT_MAX: u32 = 1;
pub const PLUGIN_MEMORIES_PER_MODULE_MAX: u32 = 1;
/// Tables defined per component, and per core module.
pub const PLUGIN_TABLES_PER_COMPONENT_MAX: u32 = 2;
pub const PLUGIN_TABLES_PER_MODULE_MAX: u32 = 1;
/// Elements of one table (its initial size must fit; growth stops here): a JS
/// guest's 7,688, with room.
pub const PLUGIN_TABLE_ELEMENTS_MAX: u32 = 16_384;
/// Runtime bookkeeping (`VMContext`) of one core instance, in bytes; it
/// grows with a module's functions, globals and imports.
pub const PLUGIN_CORE_INSTANCE_BYTES_MAX: usize = 256 * 1024;
/// Runtime bookkeeping of one component instance and its core instances,
/// in bytes.
pub const PLUGIN_COMPONENT_INSTANCE_BYTES_MAX: usize = 512 * 1024;

// Compilation: Cranelift's time and memory grow with the number of
// functions and, worse than linearly, with the size of one function and its
// locals. These are checked (wasmparser, no compiling) before compiling.

/// Functions defined per core module. regex-filter, the largest of our Rust
/// plugins, has 646; CPython's module 10,625, SpiderMonkey's 12,648.
pub const PLUGIN_FUNCTIONS_PER_MODULE_MAX: u32 = 20_000;
/// Bytes of one function body. The largest in our Rust plugins is 21 KB;
/// CPython's interpreter loop is 427 KB.
pub const PLUGIN_FUNCTION_BODY_BYTES_MAX: u32 = 512 * 1024;
/// Locals of one function (ours: at most 49; wasmparser's own cap is 50,000).
pub const PLUGIN_LOCALS_PER_FUNCTION_MAX: u32 = 1024;
/// Data and element segments per core module (our Rust plugins: at most 2 and
/// 1; a Python guest's memory snapshot 1,833 data segments, a JS guest's
/// 10,000).
pub const PLUGIN_DATA_SEGMENTS_PER_MODULE_MAX: u32 = 16_384;
pub const PLUGIN_ELEMENT_SEGMENTS_PER_MODULE_MAX: u32 = 256;
/// Top-level imports of one component (a Python guest: 31, the whole wasi:cli world and
/// ours).
pub const PLUGIN_IMPORTS_PER_COMPONENT_MAX: u32 = 256;

/// Core modules and nested components in one component (a Python guest: 14
/// modules and 2 components).
pub const PLUGIN_MODULES_PER_COMPONENT_MAX: u32 = 32;

/// Wall-clock budget of compiling one plugin, in ms. The compile runs on
/// its own thread; past this the install fails, and the thread finishes
/// in the background (Cranelift cannot be interrupted), still holding its
/// compile slot. regex-filter (535 KB) took 31 s in a debug build on a
/// loaded 2-core machine, murmur2 3 s; an optimized broker is ~10x faster.
pub const PLUGIN_COMPILE_TIMEOUT_MS_DEFAULT: u64 = 120_000;

/// Compiles running at once (installs, reloads, start-up loads); each can
/// use a core and hundreds of MB. An install waits for a slot within its
/// compile timeout.
pub const PLUGIN_COMPILES_CONCURRENT_MAX: u32 = 2;

/// An instance whose linear memory has grown past this share of `plugin.memory.bytes.max`
/// (percent) is dropped after its call rather than kept for the next: garbage-collected
/// guests (componentize-js's SpiderMonkey) grow their heap call after call and would reach
/// the limit mid-call; a fresh instance starts from its snapshot (a JS guest: 9 MiB).
pub const PLUGIN_RETIRE_MEMORY_PERCENT: u32 = 50;

/// Log messages a plugin may emit per call; the rest are counted and
/// dropped, so a plugin cannot flood the broker's log.
pub const LOG_MESSAGES_PER_CALL_MAX: u32 = 16;

/// Longest log message kept from a plugin, in bytes; longer ones are cut.
pub const LOG_MESSAGE_BYTES_MAX: usize = 1024;

/// Log lines a plugin may emit per second, over all its instances (a token bucket holding a
/// second's worth); the rest are counted and dropped (`plugin_log.rs`).
pub const LOG_LINES_PER_SECOND_MAX: u32 = 100;

/// Lines kept per plugin for `sluice plugin logs` (a ring: the oldest go first). At
/// `LOG_MESSAGE_BYTES_MAX` each, at most 1 MiB per plugin.
pub const LOG_LINES_KEPT_MAX: usize = 1024;

/// Lines a WASI guest may write to stdout and stderr in one call before they reach its log
/// (where `LOG_MESSAGES_PER_CALL_MAX` and the rate apply): past it they are counted and
/// dropped, so a guest printing in a loop holds at most this many lines of memory.
pub const STDIO_LINES_PENDING_MAX: usize = 256;

/// Bytes a WASI guest may hand to one stdout/stderr write (`check-write`'s answer): the
/// largest write a guest's libc makes at once; lines are cut at `LOG_MESSAGE_BYTES_MAX`.
pub const STDIO_WRITE_BYTES_MAX: usize = 64 * 1024;

/// Longest reason kept from a validator's refusal of one record, in bytes (it goes back to
/// the producer in the Produce response's record errors); longer ones are cut.
pub const VALIDATOR_REASON_BYTES_MAX: usize = 512;

/// Longest plugin name: it is a file name and a URL path segment (`sluice_kafka::limits`,
/// which a transform spec is checked against too).
pub use sluice_kafka::limits::PLUGIN_NAME_BYTES_MAX;

/// Most parameters a plugin may be given, and the longest key or value
/// (`sluice_kafka::limits`, as [`PLUGIN_NAME_BYTES_MAX`]).
pub use sluice_kafka::limits::{
    PLUGIN_PARAM_BYTES_MAX as PARAM_BYTES_MAX, PLUGIN_PARAMS_MAX as PARAMS_MAX,
};

const _: () = assert!(PLUGIN_INSTANCES_PER_PLUGIN_MAX * 8 <= PLUGIN_INSTANCES_MAX);
const _: () = assert!(PLUGIN_IDLE_INSTANCES_PER_PLUGIN_MAX < PLUGIN_INSTANCES_PER_PLUGIN_MAX);
const _: () = assert!(PLUGIN_INSTANCE_WAIT_MS <= PLUGIN_CALL_TIMEOUT_MS_DEFAULT);
const _: () = assert!(PLUGIN_MEMORIES_PER_MODULE_MAX <= PLUGIN_MEMORIES_PER_COMPONENT_MAX);
const _: () = assert!(PLUGIN_TABLES_PER_MODULE_MAX <= PLUGIN_TABLES_PER_COMPONENT_MAX);
const _: () = assert!(PLUGIN_CORE_INSTANCE_BYTES_MAX <= PLUGIN_COMPONENT_INSTANCE_BYTES_MAX);
const _: () = assert!(PLUGIN_COMPILES_CONCURRENT_MAX >= 1);
const _: () = assert!(PLUGIN_RETIRE_MEMORY_PERCENT > 0 && PLUGIN_RETIRE_MEMORY_PERCENT < 100);
const _: () = assert!(STDIO_LINES_PENDING_MAX as u32 >= LOG_MESSAGES_PER_CALL_MAX);
const _: () = assert!(EPOCH_TICK_MS > 0 && EPOCH_TICK_MS <= PLUGIN_CALL_TIMEOUT_MS_DEFAULT);
const _: () = assert!(PLUGIN_MODULE_BYTES_MAX_DEFAULT <= PLUGIN_MEMORY_BYTES_MAX_DEFAULT * 4);
