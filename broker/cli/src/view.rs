//! `sluice view`: create, list, describe and delete views through the broker's admin HTTP API
//! (`/v1/views`, docs/views.md). A view is created from an ordered chain of stages:
//! `--filter NAME` and `--transform NAME`, each followed by its own `--param KEY=VALUE`s:
//!
//! ```text
//! sluice view create orders-eu --from orders \
//!     --filter json-filter --param field=$.region --param op== --param value=eu \
//!     --transform redact --param fields=card_number
//! ```

use std::collections::BTreeMap;

use anyhow::bail;
use clap::ArgMatches;
use serde_json::{Value, json};

use crate::common::{Output, emit};
use crate::plugin::http_json;

#[derive(Debug, clap::Args)]
pub struct ViewArgs {
    #[command(subcommand)]
    command: ViewCommand,
    #[command(flatten)]
    admin: crate::common::Admin,
    #[arg(long, global = true, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Debug, clap::Subcommand)]
enum ViewCommand {
    /// Create a view of a topic: a read-only topic whose fetches run the source's records
    /// through the given filters and transforms, in order.
    Create {
        /// The view's name (a topic name no topic has).
        name: String,
        /// The topic it reads.
        #[arg(long = "from", value_name = "TOPIC")]
        source: String,
        #[command(flatten)]
        stages: StageArgs,
        /// When a plugin fails: `fail` the fetch (the consumer retries) or `skip` the batch.
        #[arg(long, value_parser = ["fail", "skip"], default_value = "fail")]
        on_error: String,
    },
    /// List views.
    List,
    /// Source, stages, policy and counters of one view.
    Describe { name: String },
    /// Delete a view (the source topic and its records are untouched).
    Delete { name: String },
}

/// The plugin chain of a view, on `view create` and `consume`: stages in command-line order.
/// The order is read from the `ArgMatches` ([`stages`]); these fields only declare the flags.
#[derive(Debug, Clone, clap::Args)]
pub struct StageArgs {
    /// A filter plugin stage (repeatable; stages run in command-line order).
    #[arg(long = "filter", value_name = "PLUGIN")]
    pub filters: Vec<String>,
    /// A transform plugin stage (repeatable).
    #[arg(long = "transform", value_name = "PLUGIN")]
    pub transforms: Vec<String>,
    /// A parameter of the --filter or --transform before it (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
}

impl StageArgs {
    /// Whether any stage was given.
    pub fn any(&self) -> bool {
        !self.filters.is_empty() || !self.transforms.is_empty()
    }
}

/// Runs `sluice view ...`; `matches` are the `create` subcommand's (for the stage order).
pub fn run(args: ViewArgs, create: Option<&ArgMatches>) -> anyhow::Result<()> {
    let (admin, output) = (&args.admin, args.output);
    match args.command {
        ViewCommand::Create {
            name,
            source,
            on_error,
            ..
        } => {
            let Some(matches) = create else {
                bail!("view create: no arguments");
            };
            let body = json!({
                "name": name,
                "source": source,
                "stages": stages(matches)?,
                "on_error": on_error,
            });
            let view = http_json(admin, "POST", "/v1/views", &body)?;
            emit(output, &view, |v| format!("created view {}\n", row(v)))
        }
        ViewCommand::List => {
            let list = http_json(admin, "GET", "/v1/views", &Value::Null)?;
            emit(output, &list, |v| {
                v["views"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| format!("{}\n", row(v)))
                    .collect()
            })
        }
        ViewCommand::Describe { name } => {
            let view = http_json(admin, "GET", &format!("/v1/views/{name}"), &Value::Null)?;
            emit(output, &view, describe_text)
        }
        ViewCommand::Delete { name } => {
            http_json(admin, "DELETE", &format!("/v1/views/{name}"), &Value::Null)?;
            emit(output, &json!({"deleted": name}), |_| {
                format!("deleted view {name}\n")
            })
        }
    }
}

/// The stages in command-line order, each with the `--param`s that follow it.
pub fn stages(matches: &ArgMatches) -> anyhow::Result<Vec<Value>> {
    let mut stages: Vec<(usize, &str, String, BTreeMap<String, String>)> = Vec::new();
    for (id, kind) in [("filters", "filter"), ("transforms", "transform")] {
        if let (Some(values), Some(indices)) =
            (matches.get_many::<String>(id), matches.indices_of(id))
        {
            for (plugin, index) in values.zip(indices) {
                stages.push((index, kind, plugin.clone(), BTreeMap::new()));
            }
        }
    }
    stages.sort_by_key(|s| s.0);
    if stages.is_empty() {
        bail!("a view needs at least one stage: --filter PLUGIN or --transform PLUGIN");
    }
    if let (Some(values), Some(indices)) = (
        matches.get_many::<String>("params"),
        matches.indices_of("params"),
    ) {
        for (param, index) in values.zip(indices) {
            let Some(stage) = stages.iter_mut().rev().find(|s| s.0 < index) else {
                bail!("--param {param}: give it after the --filter or --transform it belongs to");
            };
            let Some((key, value)) = param.split_once('=') else {
                bail!("--param {param:?}: expected KEY=VALUE");
            };
            stage.3.insert(key.trim().to_owned(), value.to_owned());
        }
    }
    Ok(stages
        .into_iter()
        .map(|(_, kind, plugin, params)| json!({"plugin": plugin, "kind": kind, "params": params}))
        .collect())
}

/// `name <- source: stage | stage (on_error)`.
fn row(v: &Value) -> String {
    let stages: Vec<String> = v["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let params: Vec<String> = s["params"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            let plugin = s["plugin"].as_str().unwrap_or("?");
            if params.is_empty() {
                plugin.to_owned()
            } else {
                format!("{plugin}({})", params.join(","))
            }
        })
        .collect();
    format!(
        "{} <- {}: {} (on_error={})",
        v["name"].as_str().unwrap_or("?"),
        v["source"].as_str().unwrap_or("?"),
        stages.join(" | "),
        v["on_error"].as_str().unwrap_or("?")
    )
}

fn describe_text(v: &Value) -> String {
    let s = &v["stats"];
    let owner = v["owner"]
        .as_str()
        .unwrap_or("(not recorded: each reader needs READ on the source)");
    let mut out = format!(
        "{}\nowner: {owner}\npartitions: {}\nbound: {}\nbatches: {}  records in: {}  records out: {}  batches failed: {}  records skipped: {}\n",
        row(v),
        v["partition_count"],
        v["bound"],
        s["batches"],
        s["records_in"],
        s["records_out"],
        s["batches_failed"],
        s["records_skipped"]
    );
    if let Some(why) = v["refused"].as_str() {
        out.push_str(&format!("fetches refused: {why}\n"));
    }
    out
}
