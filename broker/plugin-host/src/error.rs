//! Plugin errors: what went wrong in a call (callers branch on it: discard
//! the instance, answer the client) and what went wrong managing plugins.

use std::path::PathBuf;

/// A failed call into a plugin. After any of these the instance is
/// discarded; the next call gets a fresh one.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("plugin `{plugin}` ran past plugin.call.timeout.ms = {timeout_ms} ms and was stopped")]
    Timeout { plugin: String, timeout_ms: u64 },
    #[error(
        "plugin `{plugin}` tried to grow its memory to {desired_bytes} bytes, past plugin.memory.bytes.max = {max_bytes}"
    )]
    MemoryExceeded {
        plugin: String,
        desired_bytes: u64,
        max_bytes: u64,
    },
    #[error("plugin `{plugin}` trapped: {message}")]
    Trap { plugin: String, message: String },
    #[error("plugin `{plugin}` rejected its parameters: {message}")]
    InvalidParams { plugin: String, message: String },
    #[error("plugin `{plugin}` failed: {message}")]
    Guest { plugin: String, message: String },
    /// The plugin returned something that breaks the contract (wrong
    /// number of partitions, a partition out of range).
    #[error("plugin `{plugin}` broke the contract: {message}")]
    Contract { plugin: String, message: String },
    #[error("cannot instantiate plugin `{plugin}`: {message}")]
    Instantiate { plugin: String, message: String },
    /// Every instance of the plugin's share of the pool is in a call; the caller waited
    /// `waited_ms` for one. Other plugins are not affected; retry later.
    #[error(
        "plugin `{plugin}` is busy: all of its PLUGIN_INSTANCES_PER_PLUGIN_MAX = {max} instances are in calls (waited {waited_ms} ms for one)"
    )]
    Busy {
        plugin: String,
        max: u32,
        waited_ms: u64,
    },
    /// Every instance of the whole pool is in a call (no idle one left to drop).
    #[error(
        "no instance for plugin `{plugin}`: all PLUGIN_INSTANCES_MAX = {max} plugin instances are in calls"
    )]
    PoolFull { plugin: String, max: u32 },
}

/// A failed registry operation (install, delete, look-up, load).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("invalid plugin name `{0}`: use 1-64 characters of a-z, 0-9, `-` and `_`")]
    InvalidName(String),
    #[error("plugin is {size_bytes} bytes, over plugin.module.bytes.max = {max_bytes}")]
    TooLarge { size_bytes: u64, max_bytes: u64 },
    #[error("not a wasm module or component: {0}")]
    NotWasm(String),
    #[error("cannot turn the core module into a component (was it built with sluice-sdk?): {0}")]
    Componentize(String),
    #[error("invalid component: {0}")]
    Invalid(String),
    /// The component is over one of the per-component or compile limits of `limits.rs`;
    /// the message names the limit and its value.
    #[error("plugin refused: {0}")]
    OverLimit(String),
    #[error(
        "compiling the plugin took longer than plugin compile timeout = {timeout_ms} ms (PLUGIN_COMPILE_TIMEOUT_MS); the install is abandoned"
    )]
    CompileTimeout { timeout_ms: u64 },
    #[error(
        "PLUGIN_COMPILES_CONCURRENT_MAX = {max} plugin compiles are already running; none finished within {timeout_ms} ms, retry later"
    )]
    CompileBusy { max: u32, timeout_ms: u64 },
    #[error(
        "the component exports none of {expected}: it is not a sluice:plugin plugin of a version this broker loads"
    )]
    UnknownKind { expected: String },
    #[error("the component needs imports Sluice does not provide: {0}")]
    Imports(String),
    #[error("no plugin named `{0}`")]
    NotFound(String),
    #[error("plugin `{name}` is a {actual}, not a {expected}")]
    WrongKind {
        name: String,
        expected: &'static str,
        actual: &'static str,
    },
    #[error(
        "plugin `{name}` is in use by {users} handle(s); delete with force to remove it anyway"
    )]
    InUse { name: String, users: usize },
    /// A new version of another kind than the one its users were bound to
    /// (`PLUGIN_KIND_CHANGE`): the working version stays.
    #[error(
        "plugin `{name}` is a {current} in use by {users} handle(s); a {new} cannot replace it (delete it with force, or use another name)"
    )]
    KindChange {
        name: String,
        current: &'static str,
        new: &'static str,
        users: usize,
    },
    #[error(
        "plugin `{0}` exists: replacing it needs ALTER on it (CREATE on the cluster only makes new plugins)"
    )]
    Exists(String),
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot watch the plugin directory: {0}")]
    Watch(String),
    #[error("cannot set up the wasm engine: {0}")]
    Engine(String),
}

impl RegistryError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
