//! `sluice topic create | list | describe | alter-config | add-partitions | delete` over
//! CreateTopics, Metadata, ListOffsets, DescribeConfigs, IncrementalAlterConfigs,
//! CreatePartitions and DeleteTopics, like `kafka-topics.sh`/`kafka-configs.sh` and
//! `rpk topic`.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};

use crate::client::{Client, error_name};
use crate::common::{self, Common, EARLIEST, LATEST, emit};

/// How long the broker may take to create or delete a topic, in milliseconds.
const ADMIN_TIMEOUT_MS: i32 = 30_000;
/// DescribeConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;
/// Kafka's KAFKA_STORAGE_ERROR: a quarantined topic or offline partition (its reason in
/// DescribeConfigs' error message).
const KAFKA_STORAGE_ERROR: i16 = sluice_kafka::ErrorCode::KafkaStorageError.code();
/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// `sluice topic ...`.
#[derive(Debug, clap::Args)]
pub struct TopicArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TopicCommand {
    /// Create topics.
    Create {
        /// Topic names.
        #[arg(required = true)]
        topics: Vec<String>,
        /// Partitions per topic (default: the broker's num.partitions).
        #[arg(short, long)]
        partitions: Option<i32>,
        /// Topic config, e.g. -c retention.ms=3600000 (repeatable).
        #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
        configs: Vec<String>,
    },
    /// List topics with their partition counts.
    List,
    /// Partitions (log start and end offsets) and configs of a topic.
    Describe {
        /// Topic name.
        topic: String,
    },
    /// Set or drop topic config overrides on a live topic (IncrementalAlterConfigs).
    AlterConfig {
        /// Topic name.
        topic: String,
        /// Override a key, e.g. --set retention.ms=3600000 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Drop an override, back to the broker's value (repeatable).
        #[arg(long = "delete", value_name = "KEY")]
        deletes: Vec<String>,
        /// Only check that the change is valid.
        #[arg(long)]
        dry_run: bool,
    },
    /// Grow topics by N partitions (CreatePartitions), like `rpk topic add-partitions`.
    AddPartitions {
        /// Topic names.
        #[arg(required = true)]
        topics: Vec<String>,
        /// Partitions to add to each topic.
        #[arg(short, long)]
        num: i32,
        /// Only check that the change is valid.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete topics and their data.
    Delete {
        /// Topic names.
        #[arg(required = true)]
        topics: Vec<String>,
    },
}

/// Runs a `sluice topic` command.
pub fn run(args: TopicArgs) -> anyhow::Result<()> {
    let mut client = args.common.connect()?;
    let output = args.common.output;
    match args.command {
        TopicCommand::Create {
            topics,
            partitions,
            configs,
        } => emit(
            output,
            &create(&mut client, &topics, partitions, &configs)?,
            results_text,
        ),
        TopicCommand::List => emit(output, &list(&mut client)?, list_text),
        TopicCommand::Describe { topic } => {
            emit(output, &describe(&mut client, &topic)?, describe_text)
        }
        TopicCommand::AlterConfig {
            topic,
            sets,
            deletes,
            dry_run,
        } => {
            let doc = alter_config(&mut client, &topic, &sets, &deletes, dry_run)?;
            emit(output, &doc, |d| {
                format!(
                    "{} {}\n",
                    if d["dry_run"] == true {
                        "would alter"
                    } else {
                        "altered"
                    },
                    d["topic"].as_str().unwrap_or("?")
                )
            })
        }
        TopicCommand::AddPartitions {
            topics,
            num,
            dry_run,
        } => emit(
            output,
            &add_partitions(&mut client, &topics, num, dry_run)?,
            results_text,
        ),
        TopicCommand::Delete { topics } => {
            emit(output, &delete(&mut client, &topics)?, results_text)
        }
    }
}

fn create(
    client: &mut Client,
    topics: &[String],
    partitions: Option<i32>,
    configs: &[String],
) -> anyhow::Result<Value> {
    let mut parsed = Vec::new();
    for c in configs {
        let (k, v) = c.split_once('=').with_context(|| {
            format!("--config {c:?}: expected KEY=VALUE, e.g. retention.ms=3600000")
        })?;
        let mut config = CreatableTopicConfig::default();
        config.name = StrBytes::from_string(k.trim().to_owned());
        config.value = Some(StrBytes::from_string(v.trim().to_owned()));
        parsed.push(config);
    }
    let mut request = CreateTopicsRequest::default();
    request.timeout_ms = ADMIN_TIMEOUT_MS;
    request.topics = topics
        .iter()
        .map(|name| {
            let mut t = CreatableTopic::default();
            t.name = TopicName(StrBytes::from_string(name.clone()));
            t.num_partitions = partitions.unwrap_or(-1);
            t.replication_factor = -1;
            t.configs.clone_from(&parsed);
            t
        })
        .collect();
    let response = client.send(&request, 4)?;
    let results: Vec<Value> = response
        .topics
        .iter()
        .map(|t| {
            json!({
                "topic": t.name.0.as_str(),
                "partitions": t.num_partitions,
                "error": (t.error_code != 0).then(|| error_name(t.error_code)),
                "message": t.error_message.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    check_results(json!({ "created": results }), "created")
}

/// Grows each topic by `num` partitions: its current count from Metadata, then one
/// CreatePartitions for all of them.
fn add_partitions(
    client: &mut Client,
    topics: &[String],
    num: i32,
    dry_run: bool,
) -> anyhow::Result<Value> {
    if num < 1 {
        bail!("--num {num}: add at least one partition");
    }
    let listed = list(client)?;
    let mut request = CreatePartitionsRequest::default();
    request.timeout_ms = ADMIN_TIMEOUT_MS;
    request.validate_only = dry_run;
    for name in topics {
        let current = listed["topics"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["topic"].as_str() == Some(name.as_str()))
            .and_then(|t| t["partitions"].as_i64())
            .with_context(|| format!("unknown topic {name:?} (sluice topic list)"))?;
        let mut t = CreatePartitionsTopic::default();
        t.name = TopicName(StrBytes::from_string(name.clone()));
        t.count = i32::try_from(current)
            .unwrap_or(i32::MAX)
            .saturating_add(num);
        t.assignments = None;
        request.topics.push(t);
    }
    let response = client.send(&request, 3)?;
    let results: Vec<Value> = response
        .results
        .iter()
        .zip(&request.topics)
        .map(|(r, asked)| {
            json!({
                "topic": r.name.0.as_str(),
                "partitions": asked.count,
                "dry_run": dry_run,
                "error": (r.error_code != 0).then(|| error_name(r.error_code)),
                "message": r.error_message.as_ref().map(|m| m.to_string()),
            })
        })
        .collect();
    check_results(json!({ "grown": results }), "grown")
}

fn alter_config(
    client: &mut Client,
    topic: &str,
    sets: &[String],
    deletes: &[String],
    dry_run: bool,
) -> anyhow::Result<Value> {
    if sets.is_empty() && deletes.is_empty() {
        bail!("nothing to change: pass --set KEY=VALUE or --delete KEY");
    }
    let mut configs = Vec::new();
    for set in sets {
        let (k, v) = set.split_once('=').with_context(|| {
            format!("--set {set:?}: expected KEY=VALUE, e.g. retention.ms=3600000")
        })?;
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(k.trim().to_owned());
        c.config_operation = OP_SET;
        c.value = Some(StrBytes::from_string(v.trim().to_owned()));
        configs.push(c);
    }
    for key in deletes {
        let mut c = AlterableConfig::default();
        c.name = StrBytes::from_string(key.trim().to_owned());
        c.config_operation = OP_DELETE;
        configs.push(c);
    }
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = StrBytes::from_string(topic.to_owned());
    resource.configs = configs;
    let mut request = IncrementalAlterConfigsRequest::default();
    request.resources = vec![resource];
    request.validate_only = dry_run;
    let response = client.send(&request, 0)?;
    for r in &response.responses {
        if r.error_code != 0 {
            let detail = r
                .error_message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            bail!("altering {topic}: {}{detail}", error_name(r.error_code));
        }
    }
    Ok(json!({ "topic": topic, "set": sets, "deleted": deletes, "dry_run": dry_run }))
}

fn delete(client: &mut Client, topics: &[String]) -> anyhow::Result<Value> {
    let mut request = DeleteTopicsRequest::default();
    request.timeout_ms = ADMIN_TIMEOUT_MS;
    request.topic_names = topics
        .iter()
        .map(|n| TopicName(StrBytes::from_string(n.clone())))
        .collect();
    let response = client.send(&request, 3)?;
    let results: Vec<Value> = response
        .responses
        .iter()
        .map(|t| {
            json!({
                "topic": t.name.as_ref().map(|n| n.0.to_string()),
                "error": (t.error_code != 0).then(|| error_name(t.error_code)),
            })
        })
        .collect();
    check_results(json!({ "deleted": results }), "deleted")
}

/// Fails the command, naming each topic and its Kafka error, if any topic failed.
fn check_results(doc: Value, key: &str) -> anyhow::Result<Value> {
    let failed: Vec<String> = doc[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| !r["error"].is_null())
        .map(|r| {
            let detail = r["message"]
                .as_str()
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            format!(
                "{}: {}{detail}",
                r["topic"].as_str().unwrap_or("?"),
                r["error"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if failed.is_empty() {
        return Ok(doc);
    }
    bail!("{}", failed.join("; "))
}

fn list(client: &mut Client) -> anyhow::Result<Value> {
    let response = common::metadata(client, None, false)?;
    let mut topics: Vec<Value> = response
        .topics
        .iter()
        .filter(|t| t.error_code == 0 || t.error_code == KAFKA_STORAGE_ERROR)
        .map(|t| {
            let offline = t.error_code != 0 || t.partitions.iter().any(|p| p.error_code != 0);
            let mut row = json!({
                "topic": t.name.as_ref().map(|n| n.0.to_string()),
                "partitions": t.partitions.len(),
            });
            // Only offline topics carry `online` (and `error`), so the rows of healthy
            // topics stay what scripts already parse.
            if offline {
                row["online"] = json!(false);
            }
            row
        })
        .collect();
    topics.sort_by(|a, b| a["topic"].as_str().cmp(&b["topic"].as_str()));
    let offline: Vec<String> = topics
        .iter()
        .filter(|t| t["online"] == false)
        .filter_map(|t| t["topic"].as_str().map(str::to_owned))
        .collect();
    if !offline.is_empty() {
        let errors = offline_errors(client, &offline)?;
        for t in &mut topics {
            if let Some(error) = t["topic"].as_str().and_then(|n| errors.get(n)) {
                t["error"] = json!(error);
            }
        }
    }
    Ok(json!({ "topics": topics }))
}

/// Why each of `topics` is offline: DescribeConfigs answers KAFKA_STORAGE_ERROR for them
/// with the broker's reason (Metadata's partition errors carry no message).
fn offline_errors(
    client: &mut Client,
    topics: &[String],
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut request = DescribeConfigsRequest::default();
    request.resources = topics
        .iter()
        .map(|topic| {
            let mut resource = DescribeConfigsResource::default();
            resource.resource_type = RESOURCE_TOPIC;
            resource.resource_name = StrBytes::from_string(topic.clone());
            resource.configuration_keys = Some(Vec::new());
            resource
        })
        .collect();
    let described = client.send(&request, 3)?;
    Ok(described
        .results
        .iter()
        .filter(|r| r.error_code != 0)
        .map(|r| {
            let message = r.error_message.as_ref().map(|m| m.to_string());
            (
                r.resource_name.to_string(),
                message.unwrap_or_else(|| error_name(r.error_code)),
            )
        })
        .collect())
}

fn describe(client: &mut Client, topic: &str) -> anyhow::Result<Value> {
    let (partitions, offline) = partition_states(client, topic)?;
    let online: Vec<i32> = partitions
        .iter()
        .copied()
        .filter(|p| !offline.contains_key(p))
        .collect();
    let (starts, ends) = if online.is_empty() {
        Default::default()
    } else {
        (
            common::list_offsets(client, topic, &online, EARLIEST)?,
            common::list_offsets(client, topic, &online, LATEST)?,
        )
    };
    let rows: Vec<Value> = partitions
        .iter()
        .map(|p| {
            json!({
                "partition": p,
                "log_start_offset": starts.get(p),
                "log_end_offset": ends.get(p),
                "error": offline.get(p),
            })
        })
        .collect();
    let mut request = DescribeConfigsRequest::default();
    let mut resource = DescribeConfigsResource::default();
    resource.resource_type = RESOURCE_TOPIC;
    resource.resource_name = StrBytes::from_string(topic.to_owned());
    resource.configuration_keys = None;
    request.resources = vec![resource];
    let described = client.send(&request, 3)?;
    let mut configs = serde_json::Map::new();
    let mut error = None;
    for result in &described.results {
        if result.error_code == KAFKA_STORAGE_ERROR {
            error = result.error_message.as_ref().map(|m| m.to_string());
            continue;
        }
        if result.error_code != 0 {
            bail!("DescribeConfigs {topic}: {}", error_name(result.error_code));
        }
        for c in &result.configs {
            configs.insert(
                c.name.to_string(),
                json!({
                    "value": c.value.as_ref().map(|v| v.to_string()),
                    "default": c.config_source != 1,
                }),
            );
        }
    }
    let online = offline.is_empty() && error.is_none();
    Ok(json!({
        "topic": topic,
        "online": online,
        "error": error,
        "partitions": rows,
        "configs": configs,
    }))
}

/// A topic's partitions from Metadata, and the error name of each offline one. A topic
/// quarantined with no partition left (KAFKA_STORAGE_ERROR) has none.
fn partition_states(
    client: &mut Client,
    topic: &str,
) -> anyhow::Result<(Vec<i32>, std::collections::BTreeMap<i32, String>)> {
    let response = common::metadata(client, Some(&[topic.to_owned()]), false)?;
    let Some(found) = response.topics.first() else {
        bail!("the broker returned no metadata for topic {topic:?}");
    };
    if found.error_code == 3 {
        bail!("topic {topic:?} does not exist: create it with `sluice topic create {topic}`");
    }
    if found.error_code != 0 && found.error_code != KAFKA_STORAGE_ERROR {
        bail!("topic {topic:?}: {}", error_name(found.error_code));
    }
    let mut partitions: Vec<i32> = found.partitions.iter().map(|p| p.partition_index).collect();
    partitions.sort_unstable();
    let offline = found
        .partitions
        .iter()
        .filter(|p| p.error_code != 0)
        .map(|p| (p.partition_index, error_name(p.error_code)))
        .collect();
    Ok((partitions, offline))
}

fn results_text(doc: &Value) -> String {
    let mut out = String::new();
    for (verb, key) in [("created", "created"), ("deleted", "deleted")] {
        for r in doc[key].as_array().into_iter().flatten() {
            let _ = writeln!(out, "{verb} {}", r["topic"].as_str().unwrap_or("?"));
        }
    }
    for r in doc["grown"].as_array().into_iter().flatten() {
        let verb = if r["dry_run"] == true {
            "would grow"
        } else {
            "grew"
        };
        let topic = r["topic"].as_str().unwrap_or("?");
        let _ = writeln!(out, "{verb} {topic} to {} partitions", r["partitions"]);
    }
    out
}

fn list_text(doc: &Value) -> String {
    let mut out = format!("{:<50} {:<10} STATUS\n", "TOPIC", "PARTITIONS");
    for t in doc["topics"].as_array().into_iter().flatten() {
        let status = match t["error"].as_str() {
            Some(error) => format!("offline: {error}"),
            None if t["online"] == false => "offline".to_owned(),
            None => "online".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<50} {:<10} {status}",
            t["topic"].as_str().unwrap_or("?"),
            t["partitions"].to_string()
        );
    }
    out
}

fn describe_text(doc: &Value) -> String {
    let mut out = format!("topic {}\n\n", doc["topic"].as_str().unwrap_or("?"));
    if let Some(error) = doc["error"].as_str() {
        let _ = writeln!(out, "OFFLINE: {error}\n");
    }
    let _ = writeln!(
        out,
        "{:<10} {:>18} {:>18}",
        "PARTITION", "LOG-START-OFFSET", "LOG-END-OFFSET"
    );
    for p in doc["partitions"].as_array().into_iter().flatten() {
        let _ = write!(
            out,
            "{:<10} {:>18} {:>18}",
            p["partition"].to_string(),
            p["log_start_offset"].to_string(),
            p["log_end_offset"].to_string()
        );
        match p["error"].as_str() {
            Some(error) => {
                let _ = writeln!(out, "  offline ({error})");
            }
            None => out.push('\n'),
        }
    }
    let _ = writeln!(out, "\n{:<40} {:<30} SOURCE", "CONFIG", "VALUE");
    for (k, v) in doc["configs"].as_object().into_iter().flatten() {
        let source = if v["default"] == true {
            "default"
        } else {
            "topic"
        };
        let _ = writeln!(
            out,
            "{k:<40} {:<30} {source}",
            v["value"].as_str().unwrap_or("")
        );
    }
    out
}
