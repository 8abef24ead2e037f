//! `sluice transform`: deploy, list, describe, pause, resume, restart and delete materialized
//! transforms through the broker's admin HTTP API (`/v1/transforms`, docs/transforms.md):
//!
//! ```text
//! sluice transform deploy orders-split --from orders --plugin split-transform \
//!     --to orders-eu --to orders-us --param 'field=$.region' --param value=eu
//! sluice transform describe orders-split          # per partition: state, position, lag
//! sluice transform restart orders-split --from-offset 2026-12-01T00:00:00Z
//! ```

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use crate::common::{Output, emit};
use crate::plugin::http_json;

#[derive(Debug, clap::Args)]
pub struct TransformArgs {
    #[command(subcommand)]
    command: TransformCommand,
    #[command(flatten)]
    admin: crate::common::Admin,
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, clap::Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per command line; boxing buys nothing"
)]
enum TransformCommand {
    /// Deploy a transform: every record of SOURCE through PLUGIN (a transform or a filter),
    /// the output to the --to topics exactly once (read them with
    /// isolation.level=read_committed).
    Deploy {
        /// The transform's name.
        name: String,
        /// The source topic.
        #[arg(long = "from", value_name = "SOURCE")]
        source: String,
        /// The transform (or filter) plugin.
        #[arg(long)]
        plugin: String,
        /// An output topic (repeatable, 1 to 8, in order: the plugin routes by index or name).
        #[arg(long = "to", value_name = "OUTPUT", required = true)]
        outputs: Vec<String>,
        /// A plugin parameter (repeatable).
        #[arg(long = "param", value_name = "KEY=VALUE")]
        params: Vec<String>,
        /// Where to start: earliest, latest, an offset, an RFC 3339 time, or epoch ms with
        /// an `ms` suffix.
        #[arg(long, default_value = "earliest")]
        from_offset: String,
        /// When a plugin call fails on records: stop the partition, skip them, or write them
        /// to --dead-letter-topic.
        #[arg(long, value_parser = ["stop", "skip", "dead-letter"], default_value = "stop")]
        on_error: String,
        /// Where failed records go under --on-error dead-letter.
        #[arg(long)]
        dead_letter_topic: Option<String>,
        /// Output partitions: by key (murmur2, as the Java client) or by source partition.
        #[arg(long, value_parser = ["key", "source"], default_value = "key")]
        partitioning: String,
        /// A partitioner plugin placing every output record instead (an output topic's own
        /// sluice.partitioner is used without it).
        #[arg(long)]
        partitioner: Option<String>,
        /// A parameter of --partitioner (repeatable).
        #[arg(long = "partitioner-param", value_name = "KEY=VALUE")]
        partitioner_params: Vec<String>,
        /// The longest a transaction stays open while records flow (10 to 5000 ms).
        #[arg(long)]
        commit_interval_ms: Option<i64>,
        /// Deploy paused.
        #[arg(long)]
        paused: bool,
    },
    /// List transforms.
    List,
    /// Spec and per-partition state, position, lag and counters of one transform.
    Describe { name: String },
    /// Pause a transform after committing (kept across restarts).
    Pause { name: String },
    /// Resume a paused or failed transform.
    Resume { name: String },
    /// Start again from an offset: the output already written stays.
    Restart {
        name: String,
        /// earliest, latest, an offset, an RFC 3339 time, or epoch ms with an `ms` suffix.
        #[arg(long)]
        from_offset: String,
    },
    /// Delete a transform (its output topics stay).
    Delete { name: String },
}

pub fn run(args: TransformArgs) -> anyhow::Result<()> {
    let (admin, output) = (&args.admin, args.output);
    match args.command {
        TransformCommand::Deploy {
            name,
            source,
            plugin,
            outputs,
            params,
            from_offset,
            on_error,
            dead_letter_topic,
            partitioning,
            partitioner,
            partitioner_params,
            commit_interval_ms,
            paused,
        } => {
            let mut body = json!({
                "name": name,
                "source": source,
                "plugin": plugin,
                "outputs": outputs,
                "params": params_object(&params)?,
                "from_offset": from_offset_text(&from_offset)?,
                "on_error": on_error,
                "partitioning": partitioning,
                "paused": paused,
            });
            if let Some(topic) = dead_letter_topic {
                body["dead_letter_topic"] = json!(topic);
            }
            if let Some(plugin) = partitioner {
                body["partitioner"] = json!(plugin);
                body["partitioner_params"] = json!(params_object(&partitioner_params)?);
            }
            if let Some(ms) = commit_interval_ms {
                body["commit_interval_ms"] = json!(ms);
            }
            let t = http_json(admin, "POST", "/v1/transforms", &body)?;
            emit(output, &t, |t| format!("deployed transform {}\n", row(t)))
        }
        TransformCommand::List => {
            let list = http_json(admin, "GET", "/v1/transforms", &Value::Null)?;
            emit(output, &list, |v| {
                v["transforms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| format!("{}\n", row(t)))
                    .collect()
            })
        }
        TransformCommand::Describe { name } => {
            let t = http_json(
                admin,
                "GET",
                &format!("/v1/transforms/{name}"),
                &Value::Null,
            )?;
            emit(output, &t, describe_text)
        }
        TransformCommand::Pause { name } => command(admin, output, &name, "pause", &Value::Null),
        TransformCommand::Resume { name } => command(admin, output, &name, "resume", &Value::Null),
        TransformCommand::Restart { name, from_offset } => {
            let body = json!({"from_offset": from_offset_text(&from_offset)?});
            command(admin, output, &name, "restart", &body)
        }
        TransformCommand::Delete { name } => {
            http_json(
                admin,
                "DELETE",
                &format!("/v1/transforms/{name}"),
                &Value::Null,
            )?;
            emit(output, &json!({"deleted": name}), |_| {
                format!("deleted transform {name}\n")
            })
        }
    }
}

fn command(
    admin: &crate::common::Admin,
    output: Output,
    name: &str,
    verb: &str,
    body: &Value,
) -> anyhow::Result<()> {
    let t = http_json(
        admin,
        "POST",
        &format!("/v1/transforms/{name}/{verb}"),
        body,
    )?;
    emit(output, &t, |t| format!("{verb}: {}\n", row(t)))
}

/// `--param K=V`s as a JSON object.
fn params_object(params: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for param in params {
        let Some((key, value)) = param.split_once('=') else {
            bail!("--param {param:?}: expected KEY=VALUE");
        };
        if out.insert(key.trim().to_owned(), json!(value)).is_some() {
            bail!("--param {key}: given twice");
        }
    }
    Ok(out)
}

/// `--from-offset` as the API takes it: an RFC 3339 time becomes epoch ms (`...ms`).
fn from_offset_text(text: &str) -> anyhow::Result<String> {
    let plain = matches!(text, "earliest" | "latest")
        || text.bytes().all(|b| b.is_ascii_digit())
        || text
            .strip_suffix("ms")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    if plain {
        return Ok(text.to_owned());
    }
    let ms = crate::datetime::parse_rfc3339_ms(text).with_context(|| {
        format!("--from-offset {text:?}: expected earliest, latest, an offset, an RFC 3339 time (2026-12-01T00:00:00Z) or epoch ms with an ms suffix")
    })?;
    Ok(format!("{ms}ms"))
}

/// `name: source -> plugin -> outputs (state, lag N)`, and `, waiting on an open
/// transaction` when a partition's runner is held back by one.
fn row(t: &Value) -> String {
    let outputs: Vec<&str> = t["outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let waiting = waits(t).next().is_some();
    format!(
        "{}: {} -> {} -> {} ({}, lag {}{})",
        t["name"].as_str().unwrap_or("?"),
        t["source"].as_str().unwrap_or("?"),
        t["plugin"].as_str().unwrap_or("?"),
        outputs.join(", "),
        t["state"].as_str().unwrap_or("?"),
        t["lag"],
        if waiting {
            ", waiting on an open transaction"
        } else {
            ""
        }
    )
}

/// The partitions whose runner waits on an open transaction: (partition, the wait).
fn waits(t: &Value) -> impl Iterator<Item = (&Value, &Value)> {
    t["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["waiting_on_transaction"].is_object())
        .map(|p| (&p["partition"], &p["waiting_on_transaction"]))
}

/// "partition P: waiting on an open transaction of producer ... (N records held)".
fn wait_line(partition: &Value, wait: &Value) -> String {
    format!(
        "partition {}: waiting on an open transaction of producer {} since offset {}, for {} ms ({} records held)\n",
        text(partition),
        text(&wait["producer_id"]),
        text(&wait["since_offset"]),
        text(&wait["waiting_ms"]),
        text(&wait["records_held"]),
    )
}

fn describe_text(t: &Value) -> String {
    let mut out = format!(
        "{}\non_error: {}  partitioning: {}  commit_interval_ms: {}  from: {}  generation: {}  group: {}\n",
        row(t),
        t["on_error"].as_str().unwrap_or("?"),
        t["partitioning"].as_str().unwrap_or("?"),
        t["commit_interval_ms"],
        t["from_offset"].as_str().unwrap_or("?"),
        t["generation"],
        t["group"].as_str().unwrap_or("?"),
    );
    out.push_str(&format!(
        "owner: {}\n",
        t["principal"].as_str().unwrap_or("?")
    ));
    if let Some(why) = t["reason"].as_str() {
        out.push_str(&format!("reason: {why}\n"));
    }
    // In a cluster each partition names the broker running it.
    let partitions = t["partitions"].as_array().map_or(&[][..], Vec::as_slice);
    let cluster = partitions.iter().any(|p| p.get("broker").is_some());
    out.push_str(if cluster {
        "PARTITION  BROKER  STATE        POSITION  LSO       LAG       IN        OUT       TXNS   ERROR\n"
    } else {
        "PARTITION  STATE        POSITION  LSO       LAG       IN        OUT       TXNS   ERROR\n"
    });
    for p in partitions {
        let out_records: u64 = p["records_out"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, n)| n.as_u64())
            .sum();
        let error = p["last_error"]["message"].as_str().unwrap_or("");
        let broker = if cluster {
            format!(
                "{:<7} ",
                p.get("broker").map_or_else(|| "-".to_owned(), text)
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "{:<10} {broker}{:<12} {:<9} {:<9} {:<9} {:<9} {:<9} {:<6} {}\n",
            text(&p["partition"]),
            text(&p["state"]),
            text(&p["position"]),
            text(&p["last_stable_offset"]),
            text(&p["lag"]),
            text(&p["records_in"]),
            out_records,
            text(&p["transactions"]),
            error
        ));
    }
    for (partition, wait) in waits(t) {
        out.push_str(&wait_line(partition, wait));
    }
    out
}

/// A JSON scalar as plain text (strings without quotes).
fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_names_the_broker_running_each_partition() {
        let partition = |index: u32, broker: Option<i32>, state: &str| {
            let mut p = serde_json::json!({
                "partition": index, "state": state, "position": 12,
                "last_stable_offset": 12, "lag": 0, "records_in": 3, "records_out": {},
                "transactions": 1, "last_error": null, "waiting_on_transaction": null,
            });
            if let Some(broker) = broker {
                p["broker"] = serde_json::json!(broker);
            }
            p
        };
        let t = |partitions: Vec<Value>| serde_json::json!({"name": "t", "partitions": partitions});
        let text = describe_text(&t(vec![
            partition(0, Some(3), "running"),
            partition(1, None, "unavailable"),
        ]));
        assert!(text.contains("PARTITION  BROKER  STATE"), "{text}");
        assert!(text.contains("\n0          3       running"), "{text}");
        assert!(text.contains("\n1          -       unavailable"), "{text}");
        let single = describe_text(&t(vec![partition(0, None, "running")]));
        assert!(single.contains("PARTITION  STATE"), "{single}");
        assert!(single.contains("\n0          running"), "{single}");
    }

    #[test]
    fn a_partition_waiting_on_an_open_transaction_says_so() {
        let partition = |index: u32, waiting: Value| {
            serde_json::json!({
                "partition": index, "state": "running", "position": 12,
                "last_stable_offset": 12, "lag": 0, "records_in": 3, "records_out": {},
                "transactions": 1, "last_error": null, "waiting_on_transaction": waiting,
            })
        };
        let wait = serde_json::json!({
            "producer_id": 7, "since_offset": 12, "since_ms": 1, "waiting_ms": 65000,
            "records_held": 3,
        });
        let mut t = serde_json::json!({
            "name": "t", "source": "s", "plugin": "p", "outputs": ["o"], "state": "running",
            "lag": 0, "partitions": [partition(0, Value::Null), partition(1, wait)],
        });
        assert_eq!(
            row(&t),
            "t: s -> p -> o (running, lag 0, waiting on an open transaction)"
        );
        let text = describe_text(&t);
        assert!(
            text.contains("partition 1: waiting on an open transaction of producer 7 since offset 12, for 65000 ms (3 records held)\n"),
            "{text}"
        );
        assert!(!text.contains("partition 0: waiting"));
        t["partitions"][1]["waiting_on_transaction"] = Value::Null;
        assert_eq!(row(&t), "t: s -> p -> o (running, lag 0)");
    }
}
