//! `sluice plugin test`: run a plugin on sample records with the broker's own plugin host
//! (same validation, limits and ABI), in a throwaway plugin directory, and print the result:
//! where each record goes (partitioner), which records are kept (filter), the records a
//! transform returns, or which records a validator refuses and why. Nothing talks to a broker.
//!
//! Samples: one per line, a JSON object `{"key": .., "value": .., "headers": {"k": "v"}}`
//! (strings as their text, other JSON as its text, so `"value": {"a": 1}` is the bytes
//! `{"a":1}`) or any other line as a value. Offsets are the line numbers, from 0.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use sluice_server::plugin_host::{ColumnarBatch, PluginConfig, PluginKind, Registry};

use crate::common::{Output, emit};

/// Most sample records read from the file (one call, as one produced or fetched batch).
const SAMPLE_RECORDS_MAX: usize = 100_000;

/// One sample record.
struct Sample {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The plugin under test in its throwaway registry.
const NAME: &str = "under-test";

pub fn run(
    file: &Path,
    records: &Path,
    raw_params: &[String],
    partitions: u32,
    outputs: &[String],
    output: Output,
) -> anyhow::Result<()> {
    if partitions == 0 {
        bail!("--partitions must be at least 1");
    }
    let params = super::params(raw_params)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let samples = read_samples(records)?;
    let dir = tempdir()?;
    let result = Registry::open(PluginConfig::new(&dir))
        .map_err(anyhow::Error::from)
        .and_then(|(registry, _)| {
            let kind = registry.install(NAME, &bytes)?.kind;
            let batch = to_batch(&samples);
            let mut doc = match kind {
                PluginKind::Partitioner => {
                    let partitioner = registry.partitioner(NAME, &params)?;
                    let targets = partitioner.partition(&batch, partitions)?;
                    partitioned(&samples, &targets, partitions)
                }
                PluginKind::Filter => {
                    filtered(&batch, &registry.filter(NAME, &params)?.filter(&batch)?)
                }
                PluginKind::Transform if outputs.is_empty() => transformed(
                    &batch,
                    &registry.transform(NAME, &params)?.transform(&batch)?,
                    None,
                ),
                PluginKind::Transform => {
                    let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
                    let routed = registry
                        .transform(NAME, &params)?
                        .transform_routed(&batch, &names)?;
                    transformed(&batch, &routed.batch, Some((&names, &routed.outputs)))
                }
                PluginKind::Validator => validated(
                    &batch,
                    &registry.validator(NAME, &params)?.validate(&batch)?,
                ),
            };
            doc["plugin"] = json!(file.display().to_string());
            doc["kind"] = json!(kind.as_str());
            Ok(doc)
        });
    let _ = std::fs::remove_dir_all(&dir);
    let doc = result?;
    emit(output, &doc, text)
}

fn to_batch(samples: &[Sample]) -> ColumnarBatch {
    let mut batch = ColumnarBatch::new();
    for (i, s) in samples.iter().enumerate() {
        let headers: Vec<(&[u8], &[u8])> = s
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect();
        batch.push(i as i64, 0, s.key.as_deref(), s.value.as_deref(), &headers);
    }
    batch
}

fn partitioned(samples: &[Sample], targets: &[u32], partitions: u32) -> Value {
    let rows: Vec<Value> = samples
        .iter()
        .zip(targets)
        .map(|(s, p)| {
            json!({
                "key": s.key.as_deref().map(String::from_utf8_lossy),
                "partition": p,
            })
        })
        .collect();
    json!({"partitions": partitions, "records": rows})
}

/// Every input record with `kept`, and the counts.
fn filtered(batch: &ColumnarBatch, keep: &[bool]) -> Value {
    let rows: Vec<Value> = batch
        .records()
        .zip(keep)
        .map(|(r, &kept)| {
            let mut row = record_json(&r);
            row["kept"] = json!(kept);
            row
        })
        .collect();
    let kept = keep.iter().filter(|&&k| k).count();
    json!({"records": rows, "kept": kept, "total": batch.len()})
}

/// Every input record with `refused` (the validator's reason, or null), and the counts.
fn validated(batch: &ColumnarBatch, refusals: &[sluice_server::plugin_host::Refusal]) -> Value {
    let reasons: BTreeMap<usize, &str> = refusals
        .iter()
        .map(|f| (f.index as usize, f.reason.as_str()))
        .collect();
    let rows: Vec<Value> = batch
        .records()
        .enumerate()
        .map(|(i, r)| {
            let mut row = record_json(&r);
            row["refused"] = json!(reasons.get(&i));
            row
        })
        .collect();
    json!({"records": rows, "refused": refusals.len(), "total": batch.len()})
}

/// The records the transform returned (each with its input record's offset) and, with
/// `--to`, the output each is routed to.
fn transformed(
    input: &ColumnarBatch,
    output: &ColumnarBatch,
    routed: Option<(&[&str], &[u32])>,
) -> Value {
    let rows: Vec<Value> = output
        .records()
        .enumerate()
        .map(|(i, r)| {
            let mut row = record_json(&r);
            if let Some((names, outputs)) = routed {
                row["output"] = json!(names[outputs[i] as usize]);
            }
            row
        })
        .collect();
    json!({"records": rows, "input_records": input.len(), "output_records": output.len()})
}

fn record_json(r: &sluice_server::plugin_host::RecordView<'_>) -> Value {
    let lossy = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
    let headers: Map<String, Value> = r
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(k).into_owned(),
                json!(String::from_utf8_lossy(v)),
            )
        })
        .collect();
    json!({
        "offset": r.offset,
        "key": lossy(r.key()),
        "value": lossy(r.value()),
        "headers": headers,
    })
}

/// The text rendering: one line per record, then a summary for filters and transforms.
fn text(doc: &Value) -> String {
    let records = doc["records"].as_array().map_or(&[][..], Vec::as_slice);
    let key = |r: &Value| r["key"].as_str().unwrap_or("(no key)").to_owned();
    let value = |r: &Value| r["value"].as_str().unwrap_or("(null)").to_owned();
    match doc["kind"].as_str() {
        Some("partitioner") => records
            .iter()
            .map(|r| format!("{}\t-> partition {}\n", key(r), r["partition"]))
            .collect(),
        Some("filter") => {
            let mut out: String = records
                .iter()
                .filter(|r| r["kept"] == json!(true))
                .map(|r| format!("{}\t{}\t{}\n", r["offset"], key(r), value(r)))
                .collect();
            out.push_str(&format!(
                "kept {} of {} records\n",
                doc["kept"], doc["total"]
            ));
            out
        }
        Some("validator") => {
            let mut out: String = records
                .iter()
                .filter_map(|r| {
                    let reason = r["refused"].as_str()?;
                    Some(format!("{}\t{}\trefused: {reason}\n", r["offset"], key(r)))
                })
                .collect();
            out.push_str(&format!(
                "refused {} of {} records\n",
                doc["refused"], doc["total"]
            ));
            out
        }
        _ => {
            let mut out: String = records
                .iter()
                .map(|r| match r["output"].as_str() {
                    Some(to) => format!("{}\t{}\t{}\t-> {to}\n", r["offset"], key(r), value(r)),
                    None => format!("{}\t{}\t{}\n", r["offset"], key(r), value(r)),
                })
                .collect();
            out.push_str(&format!(
                "{} records in, {} out\n",
                doc["input_records"], doc["output_records"]
            ));
            out
        }
    }
}

fn read_samples(path: &Path) -> anyhow::Result<Vec<Sample>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let samples: Vec<Sample> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(SAMPLE_RECORDS_MAX + 1)
        .map(sample)
        .collect();
    if samples.len() > SAMPLE_RECORDS_MAX {
        bail!(
            "{} has more than {SAMPLE_RECORDS_MAX} records",
            path.display()
        );
    }
    Ok(samples)
}

/// One line: a JSON object with `key`/`value`/`headers`, else the whole line as a value.
fn sample(line: &str) -> Sample {
    type Fields<'a> = BTreeMap<&'a str, &'a RawValue>;
    let Ok(fields) = serde_json::from_str::<Fields<'_>>(line) else {
        return Sample {
            key: None,
            value: Some(line.as_bytes().to_vec()),
            headers: Vec::new(),
        };
    };
    let headers = fields
        .get("headers")
        .and_then(|raw| serde_json::from_str::<BTreeMap<&str, &RawValue>>(raw.get()).ok())
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_bytes().to_vec(), field(v).unwrap_or_default()))
        .collect();
    Sample {
        key: fields.get("key").and_then(|v| field(v)),
        value: fields.get("value").and_then(|v| field(v)),
        headers,
    }
}

/// A JSON field as record bytes: a string as its text, `null` as none, anything else as
/// written in the file (so a JSON value keeps its member order and spacing).
fn field(raw: &RawValue) -> Option<Vec<u8>> {
    let text = raw.get();
    match serde_json::from_str::<Option<String>>(text) {
        Ok(None) => None,
        Ok(Some(s)) => Some(s.into_bytes()),
        Err(_) => Some(text.as_bytes().to_vec()),
    }
}

fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("sluice-plugin-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
