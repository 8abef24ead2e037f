//! `sluice quota set | remove | list`: client byte-rate quotas over the wire
//! (AlterClientQuotas, DescribeClientQuotas v0), on a user, a client id or both, named or
//! the default. Changing quotas needs ALTER_CONFIGS on the cluster (a super user: log in with
//! `--user`), listing them DESCRIBE_CONFIGS.
//!
//! ```text
//! SLUICE_PASSWORD=admin-secret sluice quota set --user admin --client-id loader --producer-byte-rate 1048576
//! sluice quota list --output json
//! sluice quota remove --client-id loader --producer-byte-rate
//! ```

use anyhow::bail;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};

use crate::client::error_name;
use crate::common::{Common, emit};

#[derive(Debug, clap::Args)]
pub struct QuotaArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: QuotaCommand,
}

/// The entity a quota is on.
#[derive(Debug, Clone, clap::Args)]
struct Entity {
    /// The user the quota is on (the SASL user; `ANONYMOUS` without SASL).
    #[arg(long = "for-user", value_name = "USER")]
    for_user: Option<String>,
    /// The quota is on every user without one of its own (`<default>`).
    #[arg(long, conflicts_with = "for_user")]
    default_user: bool,
    /// The client id the quota is on.
    #[arg(long)]
    client_id: Option<String>,
    /// The quota is on every client id without one of its own.
    #[arg(long, conflicts_with = "client_id")]
    default_client_id: bool,
}

#[derive(Debug, clap::Subcommand)]
enum QuotaCommand {
    /// Set byte-rate quotas (bytes per second) on an entity.
    Set {
        #[command(flatten)]
        entity: Entity,
        /// Produce request bytes per second.
        #[arg(long)]
        producer_byte_rate: Option<u64>,
        /// Fetch response bytes per second.
        #[arg(long)]
        consumer_byte_rate: Option<u64>,
    },
    /// Remove quotas from an entity.
    Remove {
        #[command(flatten)]
        entity: Entity,
        /// Remove its producer_byte_rate.
        #[arg(long)]
        producer_byte_rate: bool,
        /// Remove its consumer_byte_rate.
        #[arg(long)]
        consumer_byte_rate: bool,
    },
    /// List every quota.
    List,
}

impl Entity {
    fn wire(&self) -> anyhow::Result<Vec<EntityData>> {
        let mut out = Vec::new();
        let mut part = |entity_type: &'static str, name: Option<&String>| {
            let mut d = EntityData::default();
            d.entity_type = StrBytes::from_static_str(entity_type);
            d.entity_name = name.map(|n| StrBytes::from_string(n.clone()));
            out.push(d);
        };
        if self.for_user.is_some() || self.default_user {
            part("user", self.for_user.as_ref());
        }
        if self.client_id.is_some() || self.default_client_id {
            part("client-id", self.client_id.as_ref());
        }
        if out.is_empty() {
            bail!(
                "name the entity: --for-user, --default-user, --client-id or --default-client-id"
            );
        }
        Ok(out)
    }
}

fn op(key: &'static str, value: Option<u64>) -> OpData {
    let mut o = OpData::default();
    o.key = StrBytes::from_static_str(key);
    o.value = value.map_or(0.0, |v| v as f64);
    o.remove = value.is_none();
    o
}

pub fn run(args: QuotaArgs) -> anyhow::Result<()> {
    let mut client = args.common.connect()?;
    let output = args.common.output;
    let (entity, ops) = match args.command {
        QuotaCommand::List => return list(&mut client, output),
        QuotaCommand::Set {
            entity,
            producer_byte_rate,
            consumer_byte_rate,
        } => {
            let mut ops = Vec::new();
            if let Some(v) = producer_byte_rate {
                ops.push(op("producer_byte_rate", Some(v)));
            }
            if let Some(v) = consumer_byte_rate {
                ops.push(op("consumer_byte_rate", Some(v)));
            }
            (entity, ops)
        }
        QuotaCommand::Remove {
            entity,
            producer_byte_rate,
            consumer_byte_rate,
        } => {
            let mut ops = Vec::new();
            if producer_byte_rate {
                ops.push(op("producer_byte_rate", None));
            }
            if consumer_byte_rate {
                ops.push(op("consumer_byte_rate", None));
            }
            (entity, ops)
        }
    };
    if ops.is_empty() {
        bail!("name a quota: --producer-byte-rate or --consumer-byte-rate");
    }
    let mut entry = EntryData::default();
    entry.entity = entity.wire()?;
    entry.ops = ops;
    let mut request = AlterClientQuotasRequest::default();
    request.entries = vec![entry];
    let response = client.send(&request, 0)?;
    for e in &response.entries {
        if e.error_code != 0 {
            bail!(
                "{}: {}",
                error_name(e.error_code),
                e.error_message.as_deref().unwrap_or_default()
            );
        }
    }
    list(&mut client, output)
}

fn list(client: &mut crate::client::Client, output: crate::common::Output) -> anyhow::Result<()> {
    let mut request = DescribeClientQuotasRequest::default();
    // Every entity with a user or a client id: two filters of "specified", merged.
    let mut quotas: Vec<Value> = Vec::new();
    for entity_type in ["user", "client-id"] {
        let mut component = ComponentData::default();
        component.entity_type = StrBytes::from_static_str(entity_type);
        component.match_type = 2;
        request.components = vec![component];
        let response = client.send(&request, 0)?;
        if response.error_code != 0 {
            bail!(
                "listing quotas: {}: {}",
                error_name(response.error_code),
                response.error_message.as_deref().unwrap_or_default()
            );
        }
        for entry in response.entries.unwrap_or_default() {
            let mut entity = serde_json::Map::new();
            for e in &entry.entity {
                let name = e.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                entity.insert(e.entity_type.to_string(), json!(name));
            }
            let values: serde_json::Map<String, Value> = entry
                .values
                .iter()
                .map(|v| (v.key.to_string(), json!(v.value)))
                .collect();
            let doc = json!({"entity": entity, "quotas": values});
            if !quotas.contains(&doc) {
                quotas.push(doc);
            }
        }
    }
    emit(output, &json!({ "quotas": quotas }), |d| {
        let mut out = String::from("ENTITY\tQUOTAS\n");
        for q in d["quotas"].as_array().into_iter().flatten() {
            let entity: Vec<String> = q["entity"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            let values: Vec<String> = q["quotas"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push_str(&format!("{}\t{}\n", entity.join(","), values.join(",")));
        }
        out
    })
}
