//! The host's configuration: the `plugin.*` keys, validated once.

use std::path::PathBuf;

use crate::limits;

/// Named after the broker config keys the server maps onto it.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    /// `plugin.dir`: where plugins live (default `<data-dir>/plugins`).
    pub dir: PathBuf,
    /// Where compiled plugins are cached, with their digests (`cache.rs`); `None`: no
    /// disk cache, every load compiles. Must lie outside `dir`. The broker sets
    /// `<data.dir>/plugin-cache`.
    pub cache_dir: Option<PathBuf>,
    /// `plugin.call.timeout.ms`
    pub call_timeout_ms: u64,
    /// `plugin.memory.bytes.max`
    pub memory_bytes_max: u64,
    /// `plugin.module.bytes.max`
    pub module_bytes_max: u64,
    /// Wall-clock budget of one compile (not a broker key: the default is
    /// `PLUGIN_COMPILE_TIMEOUT_MS_DEFAULT`; tests lower it).
    pub compile_timeout_ms: u64,
    /// One plugin's share of the instance pool (not a broker key: the
    /// default is `PLUGIN_INSTANCES_PER_PLUGIN_MAX`, also the most it may be;
    /// tests lower it).
    pub instances_per_plugin_max: u32,
}

impl PluginConfig {
    /// Defaults from `limits.rs` for a plugin directory.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            cache_dir: None,
            call_timeout_ms: limits::PLUGIN_CALL_TIMEOUT_MS_DEFAULT,
            memory_bytes_max: limits::PLUGIN_MEMORY_BYTES_MAX_DEFAULT,
            module_bytes_max: limits::PLUGIN_MODULE_BYTES_MAX_DEFAULT,
            compile_timeout_ms: limits::PLUGIN_COMPILE_TIMEOUT_MS_DEFAULT,
            instances_per_plugin_max: limits::PLUGIN_INSTANCES_PER_PLUGIN_MAX,
        }
    }

    /// # Errors
    /// A message naming the key and the bad value; nothing is clamped.
    pub fn validate(&self) -> Result<(), String> {
        if self.call_timeout_ms < limits::EPOCH_TICK_MS {
            return Err(format!(
                "plugin.call.timeout.ms = {} is below the deadline granularity of {} ms",
                self.call_timeout_ms,
                limits::EPOCH_TICK_MS
            ));
        }
        if self.memory_bytes_max < 64 * 1024 || self.memory_bytes_max > 4 * 1024 * 1024 * 1024 {
            return Err(format!(
                "plugin.memory.bytes.max = {} must be between one wasm page (65536) and 4 GiB",
                self.memory_bytes_max
            ));
        }
        if let Some(cache) = self.cache_dir.as_ref().filter(|c| c.starts_with(&self.dir)) {
            return Err(format!(
                "the compiled-plugin cache {} must lie outside plugin.dir = {}: it holds native \
                 code, trusted only by digests kept apart from the files deployers write",
                cache.display(),
                self.dir.display()
            ));
        }
        if self.module_bytes_max == 0 {
            return Err("plugin.module.bytes.max must be above 0".into());
        }
        if self.compile_timeout_ms == 0 {
            return Err("the plugin compile timeout must be above 0 ms".into());
        }
        if self.instances_per_plugin_max == 0
            || self.instances_per_plugin_max > limits::PLUGIN_INSTANCES_PER_PLUGIN_MAX
        {
            return Err(format!(
                "instances per plugin = {} must be between 1 and PLUGIN_INSTANCES_PER_PLUGIN_MAX = {}",
                self.instances_per_plugin_max,
                limits::PLUGIN_INSTANCES_PER_PLUGIN_MAX
            ));
        }
        Ok(())
    }

    /// Deadline in epoch ticks: the timeout rounded up, plus one tick since
    /// the call may start just before a tick.
    pub(crate) fn deadline_ticks(&self) -> u64 {
        self.call_timeout_ms.div_ceil(limits::EPOCH_TICK_MS) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        let ok = PluginConfig::new("/tmp/p");
        assert!(ok.validate().is_ok());
        assert_eq!(ok.deadline_ticks(), 100 / limits::EPOCH_TICK_MS + 1);
        let mut c = ok.clone();
        c.call_timeout_ms = 1;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("plugin.call.timeout.ms = 1")
        );
        let mut c = ok.clone();
        c.memory_bytes_max = 1000;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("plugin.memory.bytes.max = 1000")
        );
        let mut c = ok.clone();
        c.cache_dir = Some("/tmp/p/.cache".into());
        assert!(c.validate().unwrap_err().contains("outside plugin.dir"));
        c.cache_dir = Some("/tmp/plugin-cache".into());
        assert!(c.validate().is_ok());
        let mut c = ok;
        c.module_bytes_max = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .contains("plugin.module.bytes.max")
        );
    }
}
