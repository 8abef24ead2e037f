//! `sluice plugin test`: run a partitioner on sample records with the broker's own plugin
//! host (same validation, limits and ABI), in a throwaway plugin directory, and print where
//! each record goes. Nothing talks to a broker.

use std::path::Path;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sluice_server::plugin_host::{ColumnarBatch, PluginConfig, Registry};

use crate::common::{Output, emit};

/// Most sample records read from the file (one call, as one produced batch).
const SAMPLE_RECORDS_MAX: usize = 100_000;

/// One sample record.
struct Sample {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

pub fn run(
    file: &Path,
    records: &Path,
    raw_params: &[String],
    partitions: u32,
    output: Output,
) -> anyhow::Result<()> {
    if partitions == 0 {
        bail!("--partitions must be at least 1");
    }
    let params = crate::plugin::params(raw_params)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let samples = read_samples(records)?;
    let dir = tempdir()?;
    let (registry, _) = Registry::open(PluginConfig::new(&dir))?;
    let info = registry.install("under-test", &bytes)?;
    let partitioner = registry.partitioner("under-test", &params)?;
    let mut batch = ColumnarBatch::new();
    for (i, s) in samples.iter().enumerate() {
        batch.push(i as i64, 0, s.key.as_deref(), s.value.as_deref(), &[]);
    }
    let result = partitioner.partition(&batch, partitions);
    let _ = std::fs::remove_dir_all(&dir);
    let targets = result?;
    let rows: Vec<Value> = samples
        .iter()
        .zip(&targets)
        .map(|(s, p)| {
            json!({
                "key": s.key.as_deref().map(String::from_utf8_lossy),
                "partition": p,
            })
        })
        .collect();
    let doc = json!({"plugin": file.display().to_string(), "kind": info.kind.as_str(), "partitions": partitions, "records": rows});
    emit(output, &doc, |_| {
        samples
            .iter()
            .zip(&targets)
            .map(|(s, p)| {
                let key = s
                    .key
                    .as_deref()
                    .map_or_else(|| "(no key)".into(), String::from_utf8_lossy);
                format!("{key}\t-> partition {p}\n")
            })
            .collect()
    })
}

fn read_samples(path: &Path) -> anyhow::Result<Vec<Sample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let samples: Vec<Sample> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(SAMPLE_RECORDS_MAX + 1)
        .map(|line| match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => Sample {
                key: o.get("key").and_then(field),
                value: o.get("value").and_then(field),
            },
            _ => Sample {
                key: None,
                value: Some(line.as_bytes().to_vec()),
            },
        })
        .collect();
    if samples.len() > SAMPLE_RECORDS_MAX {
        bail!(
            "{} has more than {SAMPLE_RECORDS_MAX} records",
            path.display()
        );
    }
    Ok(samples)
}

/// A JSON field as record bytes: strings as their text, anything else as its JSON.
fn field(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.as_bytes().to_vec()),
        other => Some(other.to_string().into_bytes()),
    }
}

fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("sluice-plugin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
