//! The broker config from every source (defaults < `--config` file < `SLUICE_*` env <
//! flags), remembering which source set each key, for `sluice serve --print-config`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use sluice_server::BrokerConfig;
use sluice_server::config::{BROKER_KEYS, env_name, is_sensitive};

/// Key -> where its value came from ("default", "file PATH", "env NAME", "flag").
pub type Sources = BTreeMap<&'static str, String>;

/// Applies every source in order and validates the result once.
pub fn load(
    file: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
    sets: &[(String, String)],
) -> anyhow::Result<(BrokerConfig, Sources)> {
    let mut config = BrokerConfig::default();
    let mut sources: Sources = BROKER_KEYS
        .iter()
        .map(|&k| (k, "default".to_owned()))
        .collect();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        let before = config.clone();
        config.apply_toml(path, &text)?;
        mark_changed(
            &before,
            &config,
            &mut sources,
            &format!("file {}", path.display()),
        );
    }
    let env: Vec<(String, String)> = env.into_iter().collect();
    config.apply_env(env.iter().cloned())?;
    for &key in BROKER_KEYS {
        let name = env_name(key);
        if env.iter().any(|(n, _)| *n == name) {
            sources.insert(key, format!("env {name}"));
        }
    }
    for (key, value) in sets {
        config.set(key, value)?;
        if let Some(&known) = BROKER_KEYS.iter().find(|k| *k == key) {
            sources.insert(known, "flag".to_owned());
        }
    }
    config.validate()?;
    Ok((config, sources))
}

/// A file never says which keys it set when they equal the default; the keys whose value
/// it changed are the ones worth pointing at.
fn mark_changed(before: &BrokerConfig, after: &BrokerConfig, sources: &mut Sources, source: &str) {
    for &key in BROKER_KEYS {
        if before.get(key) != after.get(key) {
            sources.insert(key, source.to_owned());
        }
    }
}

/// The effective config as a TOML document (usable as a `--config` file), each key with its
/// source as a comment. Secrets are shown as `<redacted>`.
pub fn render(config: &BrokerConfig, sources: &Sources) -> String {
    let mut out =
        String::from("# sluice effective configuration (defaults < file < env < flags)\n");
    for &key in BROKER_KEYS {
        let value = config.get(key).unwrap_or_default();
        let value = if is_sensitive(key) && !value.is_empty() {
            "<redacted>".to_owned()
        } else {
            value
        };
        let source = sources.get(key).map_or("default", String::as_str);
        let _ = writeln!(out, "{:<50} # {source}", format!("\"{key}\" = {value:?}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_is_named_and_later_sources_win() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sluice.toml");
        std::fs::write(
            &file,
            "\"num.partitions\" = 3\n\"log.retention.ms\" = \"1h\"\n",
        )
        .unwrap();
        let env = vec![("SLUICE_LOG_RETENTION_MS".to_owned(), "7200000".to_owned())];
        let sets = vec![("admin.token".to_owned(), "s3cret".to_owned())];
        let (config, sources) = load(Some(&file), env, &sets).unwrap();
        assert_eq!(config.num_partitions, 3);
        assert_eq!(config.log_retention_ms, 7_200_000);
        assert!(sources["num.partitions"].starts_with("file "));
        assert_eq!(sources["log.retention.ms"], "env SLUICE_LOG_RETENTION_MS");
        assert_eq!(sources["admin.token"], "flag");
        assert_eq!(sources["listeners"], "default");
        let text = render(&config, &sources);
        assert!(text.contains("\"num.partitions\" = \"3\""), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }
}
