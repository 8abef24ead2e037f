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
/// example plugins are 40-200 KB; 16 MB leaves room for real dependencies
/// without letting an upload exhaust the compiler.
pub const PLUGIN_MODULE_BYTES_MAX_DEFAULT: u64 = 16 * 1024 * 1024;

/// Granularity of the wall-clock deadline: the epoch ticker's period. A
/// call is stopped between `timeout` and `timeout + 2 ticks`.
pub const EPOCH_TICK_MS: u64 = 5;

/// Plugin instances alive at once across all plugins (the pooling
/// allocator reserves address space for this many up front).
pub const PLUGIN_INSTANCES_MAX: u32 = 256;

/// Core instances per plugin instance: the plugin's module plus the shim and
/// fixup modules `wit-component` adds for imports that need its memory.
pub const CORE_INSTANCES_PER_PLUGIN: u32 = 4;

/// Idle instances kept per handle (partitioner, filter, transform) for
/// reuse (a fresh instance's first call is 1.5-2x slower than a warm
/// one's). Idle instances hold pool slots: 64 handles at 4 each fill the
/// pool.
pub const IDLE_INSTANCES_PER_HANDLE_MAX: usize = 4;

/// Log messages a plugin may emit per call; the rest are counted and
/// dropped, so a plugin cannot flood the broker's log.
pub const LOG_MESSAGES_PER_CALL_MAX: u32 = 16;

/// Longest log message kept from a plugin, in bytes; longer ones are cut.
pub const LOG_MESSAGE_BYTES_MAX: usize = 1024;

/// Longest plugin name: it is a file name and a URL path segment.
pub const PLUGIN_NAME_BYTES_MAX: usize = 64;

/// Most parameters a plugin may be given, and the longest key or value.
pub const PARAMS_MAX: usize = 64;
pub const PARAM_BYTES_MAX: usize = 4096;

const _: () = assert!(IDLE_INSTANCES_PER_HANDLE_MAX as u32 * 16 <= PLUGIN_INSTANCES_MAX);
const _: () = assert!(EPOCH_TICK_MS > 0 && EPOCH_TICK_MS <= PLUGIN_CALL_TIMEOUT_MS_DEFAULT);
const _: () = assert!(PLUGIN_MODULE_BYTES_MAX_DEFAULT <= PLUGIN_MEMORY_BYTES_MAX_DEFAULT * 4);
