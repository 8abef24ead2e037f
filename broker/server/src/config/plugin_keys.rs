//! The `plugin.*` broker keys: where plugins live and the limits every call into one runs
//! under. They map onto the plugin host's `PluginConfig`, which checks their ranges. And
//! `transform.calls.concurrent.max`, the plugin calls materialized transforms may run at once.
//! The keys themselves are in `keys.rs`.

use std::path::PathBuf;

use sluice_plugin_host::PluginConfig;

use super::BrokerConfig;

/// Subdirectory of `data.dir` holding plugins when `plugin.dir` is not set.
pub const PLUGIN_SUBDIR: &str = "plugins";

/// Subdirectory of `data.dir` holding compiled plugins and their digests: broker state, so
/// beside the logs, and never inside `plugin.dir` (docs/plugins.md, "The compile cache").
pub const PLUGIN_CACHE_SUBDIR: &str = "plugin-cache";

impl BrokerConfig {
    /// The plugin directory: `plugin.dir`, or `<data.dir>/plugins`.
    pub fn plugin_dir(&self) -> PathBuf {
        self.plugin_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join(PLUGIN_SUBDIR))
    }

    /// The plugin host's settings (`plugin.*`).
    pub fn plugin_config(&self) -> PluginConfig {
        let mut config = PluginConfig::new(self.plugin_dir());
        config.cache_dir = Some(self.data_dir.join(PLUGIN_CACHE_SUBDIR));
        config.call_timeout_ms = self.plugin_call_timeout_ms;
        config.memory_bytes_max = self.plugin_memory_bytes_max;
        config.module_bytes_max = self.plugin_module_bytes_max;
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_keys_take_units_and_reach_the_host_config() {
        let mut c = BrokerConfig::default();
        c.set("plugin.call.timeout.ms", "250ms").unwrap();
        c.set("plugin.memory.bytes.max", "32 MiB").unwrap();
        c.set("plugin.module.bytes.max", "4 MiB").unwrap();
        let p = c.plugin_config();
        assert_eq!(p.call_timeout_ms, 250);
        assert_eq!(p.memory_bytes_max, 32 << 20);
        assert_eq!(p.module_bytes_max, 4 << 20);
        assert_eq!(p.dir, c.data_dir.join(PLUGIN_SUBDIR));
        assert_eq!(p.cache_dir, Some(c.data_dir.join(PLUGIN_CACHE_SUBDIR)));
        assert!(!c.data_dir.join(PLUGIN_CACHE_SUBDIR).starts_with(&p.dir));
        c.set("plugin.dir", "/tmp/p").unwrap();
        assert_eq!(c.get("plugin.dir").unwrap(), "/tmp/p");
    }

    #[test]
    fn out_of_range_plugin_limits_are_refused_naming_the_key() {
        let mut c = BrokerConfig::default();
        c.set("plugin.call.timeout.ms", "1").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("plugin.call.timeout.ms"), "{err}");
        assert!(c.set("plugin.memory.bytes.max", "0").is_err());
    }

    #[test]
    fn transform_calls_concurrent_max_is_a_bounded_count() {
        let mut c = BrokerConfig::default();
        assert_eq!(
            c.get("transform.calls.concurrent.max").as_deref(),
            Some("2")
        );
        c.set("transform.calls.concurrent.max", "4").unwrap();
        assert_eq!(c.transform_calls_concurrent_max, 4);
        for bad in ["0", "65", "-1", "many"] {
            let err = c.set("transform.calls.concurrent.max", bad).unwrap_err();
            assert!(
                err.to_string().contains("transform.calls.concurrent.max"),
                "{bad}: {err}"
            );
        }
    }
}
