//! `sluice cluster info`: the cluster id, brokers and controller (Metadata), topic and
//! partition counts, and the Kafka APIs the broker serves (ApiVersions).
//! `sluice cluster format`: prepares a data dir for a broker of a cluster, as Kafka's
//! `kafka-storage format` does (`meta.json`: the cluster id, the node id, the dir's id);
//! `sluice cluster random-id`: a new cluster id (`kafka-storage random-uuid`).

use std::fmt::Write as _;

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};

use crate::client::error_name;
use crate::common::{self, Common, emit};

/// `sluice cluster ...`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, clap::Subcommand)]
enum ClusterCommand {
    /// Cluster id, brokers, controller, topic counts and supported APIs.
    Info,
    /// Prepares a data dir for a broker of a cluster (Kafka's `kafka-storage format`):
    /// needed before a broker with `controller.quorum.voters` starts on it.
    Format {
        /// The broker's data dir (created if missing; refused if already formatted).
        #[arg(long)]
        data_dir: std::path::PathBuf,
        /// The cluster's id, the same on every broker (`sluice cluster random-id` makes
        /// one); a random one when omitted.
        #[arg(long)]
        cluster_id: Option<String>,
        /// The broker's `node.id`.
        #[arg(long, default_value_t = 0)]
        node_id: i32,
    },
    /// Prints a new random cluster id (Kafka's `kafka-storage random-uuid`).
    RandomId,
}

/// Runs `sluice cluster ...`.
pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    match args.command {
        ClusterCommand::Info => info(args.common),
        ClusterCommand::Format {
            data_dir,
            cluster_id,
            node_id,
        } => {
            let meta = sluice_server::data_dir::format(&data_dir, cluster_id.as_deref(), node_id)?;
            println!(
                "formatted {} for node {} of cluster {}",
                data_dir.display(),
                meta.node_id,
                meta.cluster_id
            );
            Ok(())
        }
        ClusterCommand::RandomId => {
            println!("{}", sluice_server::random::random_id());
            Ok(())
        }
    }
}

/// `sluice cluster info`.
fn info(common: Common) -> anyhow::Result<()> {
    let args_output = common.output;
    let mut client = common.connect()?;
    let metadata = common::metadata(&mut client, None, false)?;
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = StrBytes::from_static_str("sluice-cli");
    request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
    let versions = client.send(&request, 3)?;
    if versions.error_code != 0 {
        anyhow::bail!("ApiVersions: {}", error_name(versions.error_code));
    }
    let brokers: Vec<Value> = metadata
        .brokers
        .iter()
        .map(|b| json!({"node_id": b.node_id.0, "host": b.host.as_str(), "port": b.port}))
        .collect();
    let apis: Vec<Value> = versions
        .api_keys
        .iter()
        .map(|a| {
            let name = kafka_protocol::messages::ApiKey::try_from(a.api_key)
                .map_or_else(|()| a.api_key.to_string(), |k| format!("{k:?}"));
            json!({"api": name, "key": a.api_key, "min_version": a.min_version, "max_version": a.max_version})
        })
        .collect();
    let topics = metadata.topics.iter().filter(|t| t.error_code == 0).count();
    let partitions: usize = metadata.topics.iter().map(|t| t.partitions.len()).sum();
    let doc = json!({
        "cluster_id": metadata.cluster_id.as_ref().map(|c| c.to_string()),
        "controller_id": metadata.controller_id.0,
        "brokers": brokers,
        "topics": topics,
        "partitions": partitions,
        "apis": apis,
    });
    emit(args_output, &doc, text)
}

fn text(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cluster id   {}",
        doc["cluster_id"].as_str().unwrap_or("?")
    );
    let _ = writeln!(out, "controller   {}", doc["controller_id"]);
    let _ = writeln!(
        out,
        "topics       {} ({} partitions)",
        doc["topics"], doc["partitions"]
    );
    for b in doc["brokers"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "broker {}     {}:{}",
            b["node_id"],
            b["host"].as_str().unwrap_or("?"),
            b["port"]
        );
    }
    let _ = writeln!(out, "\n{:<20} VERSIONS", "API");
    for a in doc["apis"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<20} {}-{}",
            a["api"].as_str().unwrap_or("?"),
            a["min_version"],
            a["max_version"]
        );
    }
    out
}
