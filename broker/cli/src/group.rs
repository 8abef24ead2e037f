//! `sluice group list | describe | reset-offsets | delete-offsets`: consumer groups seen
//! through the Kafka protocol (ListGroups, DescribeGroups, OffsetFetch, Metadata,
//! ListOffsets, OffsetCommit, OffsetDelete), like `kafka-consumer-groups.sh`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{Context, bail};
use bytes::Buf;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetFetchRequest, TopicName, metadata_request::MetadataRequestTopic,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde_json::{Value, json};

use crate::client::{Client, error_name};
use crate::common::Output;
use crate::datetime::parse_rfc3339_ms;

/// `sluice group ...`.
#[derive(Debug, clap::Args)]
pub struct GroupArgs {
    /// `--brokers`, `--output` and `--user`, as every command that talks to a broker.
    #[command(flatten)]
    common: crate::common::Common,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Debug, clap::Subcommand)]
enum GroupCommand {
    /// List consumer groups with their state.
    List,
    /// Members, assigned partitions, committed offsets, log end offsets and lag.
    Describe {
        /// Group id.
        group: String,
    },
    /// Move a group's committed offsets on one topic (the group must have no members).
    ResetOffsets(ResetArgs),
    /// Delete a group's committed offsets of a topic (OffsetDelete), like
    /// `kafka-consumer-groups --delete-offsets`; refused for topics the group's members read.
    DeleteOffsets {
        /// Group id.
        group: String,
        /// Topic whose offsets are deleted.
        #[arg(long)]
        topic: String,
        /// Only these partitions (repeatable); default: every partition of the topic.
        #[arg(long = "partition", value_name = "N")]
        partitions: Vec<i32>,
    },
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("to").required(true).multiple(false)))]
struct ResetArgs {
    /// Group id.
    group: String,
    /// Topic whose partitions are reset.
    #[arg(long)]
    topic: String,
    /// To each partition's log start offset.
    #[arg(long, group = "to")]
    to_earliest: bool,
    /// To each partition's log end offset.
    #[arg(long, group = "to")]
    to_latest: bool,
    /// To this offset (clamped to the partition's log start and end, as Kafka does).
    #[arg(long, group = "to", value_name = "OFFSET")]
    to_offset: Option<i64>,
    /// To the first offset with a timestamp at or after this time (ms since the epoch).
    #[arg(long, group = "to", value_name = "MS")]
    to_timestamp: Option<i64>,
    /// Same, as an RFC 3339 time, e.g. 2026-01-31T12:00:00Z.
    #[arg(long, group = "to", value_name = "DATETIME")]
    to_datetime: Option<String>,
    /// Show the new offsets without committing them.
    #[arg(long)]
    dry_run: bool,
}

/// Kafka's ListOffsets sentinels.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

/// Runs a `sluice group` command.
pub fn run(args: GroupArgs) -> anyhow::Result<()> {
    let mut client = args.common.connect()?;
    let doc = match args.command {
        GroupCommand::List => list_everywhere(&mut client)?,
        GroupCommand::Describe { group } => describe(coordinator(&mut client, &group)?, &group)?,
        GroupCommand::ResetOffsets(reset) => {
            let at = coordinator(&mut client, &reset.group)?;
            reset_offsets(at, &reset)?
        }
        GroupCommand::DeleteOffsets {
            group,
            topic,
            partitions,
        } => delete_offsets(
            coordinator(&mut client, &group)?,
            &group,
            &topic,
            partitions,
        )?,
    };
    let output = args.common.output;
    let mut out = match output {
        Output::Json => serde_json::to_string_pretty(&doc)?,
        Output::Text => String::new(),
    };
    if output == Output::Text {
        print_text(&mut out, &doc);
    } else {
        out.push('\n');
    }
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn delete_offsets(
    client: &mut Client,
    group: &str,
    topic: &str,
    mut partitions: Vec<i32>,
) -> anyhow::Result<Value> {
    use kafka_protocol::messages::OffsetDeleteRequest;
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    if partitions.is_empty() {
        partitions = topic_partitions(client, topic)?;
    }
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = partitions
        .iter()
        .map(|&index| {
            let mut p = OffsetDeleteRequestPartition::default();
            p.partition_index = index;
            p
        })
        .collect();
    let mut request = OffsetDeleteRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.topics = vec![t];
    let response = client.send(&request, 0)?;
    if response.error_code != 0 {
        bail!(
            "OffsetDelete of group {group:?}: {}",
            error_name(response.error_code)
        );
    }
    let results: Vec<Value> = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                json!({
                    "topic": t.name.0.as_str(),
                    "partition": p.partition_index,
                    "error": (p.error_code != 0).then(|| error_name(p.error_code)),
                })
            })
        })
        .collect();
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r["error"].is_null())
        .map(|r| {
            format!(
                "{}-{}: {}",
                r["topic"].as_str().unwrap_or("?"),
                r["partition"],
                r["error"].as_str().unwrap_or("?")
            )
        })
        .collect();
    if !failed.is_empty() {
        bail!("OffsetDelete of group {group:?}: {}", failed.join(", "));
    }
    Ok(json!({ "group": group, "deleted": results }))
}

/// ListGroups v5 (state and type, `classic` or `consumer`), with each group's member count
/// from DescribeGroups or, for consumer-protocol groups, ConsumerGroupDescribe.
/// The connection to `group`'s coordinator (on a cluster, another broker's maybe).
fn coordinator<'a>(client: &'a mut Client, group: &str) -> anyhow::Result<&'a mut Client> {
    let addr = crate::common::coordinator_of(client, group)?;
    client.at(addr.as_deref())
}

/// Every broker's groups (each coordinates its own, as Kafka's `listConsumerGroups` asks
/// every broker).
fn list_everywhere(client: &mut Client) -> anyhow::Result<Value> {
    let brokers = crate::common::metadata(client, Some(&[]), false)?.brokers;
    let mut groups = Vec::new();
    for b in brokers {
        let addr = format!("{}:{}", b.host, b.port);
        let at = client.at(Some(&addr))?;
        if let Some(Value::Array(listed)) = list(at)?.get_mut("groups").map(Value::take) {
            groups.extend(listed);
        }
    }
    groups.sort_by(|a, b| a["group"].as_str().cmp(&b["group"].as_str()));
    Ok(json!({ "groups": groups }))
}

fn list(client: &mut Client) -> anyhow::Result<Value> {
    let listed = client.send(&ListGroupsRequest::default(), 5)?;
    if listed.error_code != 0 {
        bail!("ListGroups failed: {}", error_name(listed.error_code));
    }
    let ids_of = |kind: &str| -> Vec<String> {
        listed
            .groups
            .iter()
            .filter(|g| g.group_type.as_str() == kind)
            .map(|g| g.group_id.0.to_string())
            .collect()
    };
    let mut members: BTreeMap<String, usize> = BTreeMap::new();
    for d in describe_groups(client, &ids_of("classic"))? {
        members.insert(d.group_id.0.to_string(), d.members.len());
    }
    for d in describe_consumer_groups(client, &ids_of("consumer"))? {
        members.insert(d.group_id.0.to_string(), d.members.len());
    }
    let groups: Vec<Value> = listed
        .groups
        .iter()
        .map(|g| {
            json!({
                "group": g.group_id.0.as_str(),
                "type": g.group_type.as_str(),
                "protocol_type": g.protocol_type.as_str(),
                "state": g.group_state.as_str(),
                "members": members.get(g.group_id.0.as_str()).copied().unwrap_or(0),
            })
        })
        .collect();
    Ok(json!({ "groups": groups }))
}

fn describe_consumer_groups(
    client: &mut Client,
    ids: &[String],
) -> anyhow::Result<Vec<kafka_protocol::messages::consumer_group_describe_response::DescribedGroup>>
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut request = ConsumerGroupDescribeRequest::default();
    request.group_ids = ids
        .iter()
        .map(|id| GroupId(StrBytes::from_string(id.clone())))
        .collect();
    Ok(client.send(&request, 0)?.groups)
}

/// A member id, its assigned partitions, and its JSON view without them.
type MemberRow = (String, Vec<(String, i32)>, Value);

/// A group as `describe` shows it, whichever protocol it uses.
struct Described {
    state: String,
    group_type: &'static str,
    protocol_type: String,
    protocol: String,
    members: Vec<MemberRow>,
}

/// A consumer-protocol (KIP-848) group through ConsumerGroupDescribe; `None` if it is not one.
fn describe_consumer_group(client: &mut Client, group: &str) -> anyhow::Result<Option<Described>> {
    let Some(d) = describe_consumer_groups(client, &[group.to_owned()])?.pop() else {
        return Ok(None);
    };
    if d.error_code != 0 {
        return Ok(None);
    }
    let members = d
        .members
        .iter()
        .map(|m| {
            let assigned: Vec<(String, i32)> = m
                .assignment
                .topic_partitions
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|&p| (t.topic_name.0.to_string(), p))
                })
                .collect();
            let view = json!({
                "member_id": m.member_id.as_str(),
                "group_instance_id": m.instance_id.as_ref().map(|s| s.as_str()),
                "client_id": m.client_id.as_str(),
                "client_host": m.client_host.as_str(),
                "member_epoch": m.member_epoch,
            });
            (m.member_id.to_string(), assigned, view)
        })
        .collect();
    Ok(Some(Described {
        state: d.group_state.to_string(),
        group_type: "consumer",
        protocol_type: "consumer".to_owned(),
        protocol: d.assignor_name.to_string(),
        members,
    }))
}

/// DescribeGroups; on GROUP_ID_NOT_FOUND (what Kafka answers for a consumer-protocol group)
/// ConsumerGroupDescribe.
fn describe_any(client: &mut Client, group: &str) -> anyhow::Result<Described> {
    let described = describe_groups(client, &[group.to_owned()])?
        .pop()
        .context("DescribeGroups returned no group")?;
    match described.error_code {
        0 => {}
        69 => {
            return describe_consumer_group(client, group)?
                .with_context(|| format!("DescribeGroups {group}: {}", error_name(69)));
        }
        code => bail!("DescribeGroups {group}: {}", error_name(code)),
    }
    let members = described
        .members
        .iter()
        .map(|m| {
            let view = json!({
                "member_id": m.member_id.as_str(),
                "group_instance_id": m.group_instance_id.as_ref().map(|s| s.as_str()),
                "client_id": m.client_id.as_str(),
                "client_host": m.client_host.as_str(),
            });
            (
                m.member_id.to_string(),
                decode_assignment(&m.member_assignment),
                view,
            )
        })
        .collect();
    Ok(Described {
        state: described.group_state.to_string(),
        group_type: "classic",
        protocol_type: described.protocol_type.to_string(),
        protocol: described.protocol_data.to_string(),
        members,
    })
}

fn describe_groups(
    client: &mut Client,
    ids: &[String],
) -> anyhow::Result<Vec<kafka_protocol::messages::describe_groups_response::DescribedGroup>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut request = DescribeGroupsRequest::default();
    request.groups = ids
        .iter()
        .map(|id| GroupId(StrBytes::from_string(id.clone())))
        .collect();
    Ok(client.send(&request, 4)?.groups)
}

/// Decodes consumer-protocol assignment bytes (a version prefix, then the struct).
pub(crate) fn decode_assignment(bytes: &bytes::Bytes) -> Vec<(String, i32)> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) else {
        return Vec::new();
    };
    assignment
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect()
}

fn describe(client: &mut Client, group: &str) -> anyhow::Result<Value> {
    let Described {
        state,
        group_type,
        protocol_type,
        protocol,
        members,
    } = describe_any(client, group)?;
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    let members: Vec<Value> = members
        .into_iter()
        .map(|(member_id, assigned, mut view)| {
            for tp in &assigned {
                owner.insert(tp.clone(), member_id.clone());
            }
            view["assignment"] = assigned
                .iter()
                .map(|(t, p)| json!({"topic": t, "partition": p}))
                .collect();
            view
        })
        .collect();
    let committed = fetch_committed(client, group)?;
    let mut partitions: BTreeMap<(String, i32), i64> = committed;
    for tp in owner.keys() {
        partitions.entry(tp.clone()).or_insert(-1);
    }
    let ends = list_offsets(
        client,
        &partitions.keys().cloned().collect::<Vec<_>>(),
        LATEST,
    )?;
    let offsets: Vec<Value> = partitions
        .iter()
        .map(|(tp, &committed)| {
            let end = ends.get(tp).copied().unwrap_or(-1);
            let lag = (committed >= 0 && end >= 0).then(|| (end - committed).max(0));
            json!({
                "topic": tp.0,
                "partition": tp.1,
                "committed_offset": committed,
                "log_end_offset": end,
                "lag": lag,
                "member_id": owner.get(tp),
            })
        })
        .collect();
    Ok(json!({
        "group": group,
        "state": state,
        "type": group_type,
        "protocol_type": protocol_type,
        "protocol": protocol,
        "members": members,
        "offsets": offsets,
    }))
}

/// Every committed offset of the group (OffsetFetch v5 with a null topic list).
pub(crate) fn fetch_committed(
    client: &mut Client,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.topics = None;
    let fetched = client.send(&request, 5)?;
    if fetched.error_code != 0 {
        bail!("OffsetFetch {group}: {}", error_name(fetched.error_code));
    }
    Ok(fetched
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    (t.name.0.to_string(), p.partition_index),
                    p.committed_offset,
                )
            })
        })
        .collect())
}

/// ListOffsets v1 for `timestamp` (-1 latest, -2 earliest, else a time) per partition.
fn list_offsets(
    client: &mut Client,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    // On a cluster each partition's offsets are its leader's to tell.
    let topics: Vec<String> = partitions
        .iter()
        .map(|(t, _)| t.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    crate::common::metadata(client, Some(&topics), false)?;
    let mut by_leader: BTreeMap<Option<String>, Vec<(String, i32)>> = BTreeMap::new();
    for (t, p) in partitions {
        by_leader
            .entry(client.leader(t, *p))
            .or_default()
            .push((t.clone(), *p));
    }
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let at = client.at(leader.as_deref())?;
        out.extend(list_offsets_at(at, &partitions, timestamp)?);
    }
    Ok(out)
}

/// ListOffsets of partitions this broker leads.
fn list_offsets_at(
    client: &mut Client,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut request = ListOffsetsRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            let mut topic = ListOffsetsTopic::default();
            topic.name = TopicName(StrBytes::from_string(t.to_owned()));
            topic.partitions = ps
                .into_iter()
                .map(|p| {
                    let mut partition = ListOffsetsPartition::default();
                    partition.partition_index = p;
                    partition.timestamp = timestamp;
                    partition
                })
                .collect();
            topic
        })
        .collect();
    let response = client.send(&request, 1)?;
    let mut out = BTreeMap::new();
    for topic in &response.topics {
        for p in &topic.partitions {
            if p.error_code == 0 {
                out.insert((topic.name.0.to_string(), p.partition_index), p.offset);
            }
        }
    }
    Ok(out)
}

fn topic_partitions(client: &mut Client, topic: &str) -> anyhow::Result<Vec<i32>> {
    let mut request = MetadataRequest::default();
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
    request.topics = Some(vec![wanted]);
    request.allow_auto_topic_creation = false;
    let metadata = client.send(&request, 4)?;
    crate::common::learn_leaders(client, &metadata);
    let found = metadata
        .topics
        .first()
        .context("Metadata returned no topic")?;
    if found.error_code != 0 {
        bail!("topic {topic}: {}", error_name(found.error_code));
    }
    let mut partitions: Vec<i32> = found.partitions.iter().map(|p| p.partition_index).collect();
    partitions.sort_unstable();
    Ok(partitions)
}

fn reset_offsets(client: &mut Client, args: &ResetArgs) -> anyhow::Result<Value> {
    let described = describe_groups(client, std::slice::from_ref(&args.group))?
        .pop()
        .context("DescribeGroups returned no group")?;
    if !described.members.is_empty() {
        bail!(
            "group {} has {} active member(s) (state {}): stop its consumers before resetting offsets",
            args.group,
            described.members.len(),
            described.group_state.as_str()
        );
    }
    let tps: Vec<(String, i32)> = topic_partitions(client, &args.topic)?
        .into_iter()
        .map(|p| (args.topic.clone(), p))
        .collect();
    let targets = reset_targets(client, args, &tps)?;
    if !args.dry_run {
        commit(client, &args.group, &targets)?;
    }
    let offsets: Vec<Value> = targets
        .iter()
        .map(|((t, p), o)| json!({"topic": t, "partition": p, "new_offset": o}))
        .collect();
    Ok(json!({
        "group": args.group,
        "dry_run": args.dry_run,
        "offsets": offsets,
    }))
}

/// The offset each partition is reset to.
fn reset_targets(
    client: &mut Client,
    args: &ResetArgs,
    tps: &[(String, i32)],
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let earliest = list_offsets(client, tps, EARLIEST)?;
    let latest = list_offsets(client, tps, LATEST)?;
    let timestamp = match (&args.to_timestamp, &args.to_datetime) {
        (Some(ms), _) => Some(*ms),
        (None, Some(text)) => Some(parse_rfc3339_ms(text)?),
        (None, None) => None,
    };
    let by_time = match timestamp {
        Some(ms) => Some(list_offsets(client, tps, ms)?),
        None => None,
    };
    let mut out = BTreeMap::new();
    for tp in tps {
        let (start, end) = (
            earliest.get(tp).copied().unwrap_or(0),
            latest.get(tp).copied().unwrap_or(0),
        );
        let target = if args.to_earliest {
            start
        } else if args.to_latest {
            end
        } else if let Some(offset) = args.to_offset {
            offset.clamp(start, end)
        } else {
            // No record at or after the time: the log end, as Kafka's tool does.
            by_time
                .as_ref()
                .and_then(|m| m.get(tp).copied())
                .filter(|&o| o >= 0)
                .unwrap_or(end)
        };
        out.insert(tp.clone(), target);
    }
    Ok(out)
}

/// Commits as a simple (memberless) consumer: generation -1, empty member id.
pub(crate) fn commit(
    client: &mut Client,
    group: &str,
    offsets: &BTreeMap<(String, i32), i64>,
) -> anyhow::Result<()> {
    match commit_as(client, group, -1, "", offsets)? {
        None => Ok(()),
        Some(((topic, partition), code)) => {
            bail!("committing {topic}-{partition}: {}", error_name(code))
        }
    }
}

/// OffsetCommit v7 as `member_id` of `generation_id` (-1 and "" for a simple consumer);
/// the first partition the broker refused, with its error code.
pub(crate) fn commit_as(
    client: &mut Client,
    group: &str,
    generation_id: i32,
    member_id: &str,
    offsets: &BTreeMap<(String, i32), i64>,
) -> anyhow::Result<Option<((String, i32), i16)>> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((t, p), o) in offsets {
        let mut partition = OffsetCommitRequestPartition::default();
        partition.partition_index = *p;
        partition.committed_offset = *o;
        partition.committed_leader_epoch = -1;
        partition.committed_metadata = Some(StrBytes::default());
        by_topic.entry(t).or_default().push(partition);
    }
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.generation_id_or_member_epoch = generation_id;
    request.member_id = StrBytes::from_string(member_id.to_owned());
    request.topics = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(StrBytes::from_string(t.to_owned()));
            topic.partitions = partitions;
            topic
        })
        .collect();
    let response = client.send(&request, 7)?;
    Ok(response.topics.iter().find_map(|topic| {
        topic
            .partitions
            .iter()
            .find(|p| p.error_code != 0)
            .map(|p| ((topic.name.0.to_string(), p.partition_index), p.error_code))
    }))
}

fn print_text(out: &mut String, doc: &Value) {
    if let Some(deleted) = doc.get("deleted").and_then(Value::as_array) {
        for d in deleted {
            let _ = writeln!(
                out,
                "deleted the committed offset of {}-{} for group {}",
                d["topic"].as_str().unwrap_or_default(),
                d["partition"],
                doc["group"].as_str().unwrap_or_default()
            );
        }
        return;
    }
    if let Some(groups) = doc.get("groups").and_then(Value::as_array) {
        let _ = writeln!(
            out,
            "{:<40} {:<22} {:<10} {:<10} MEMBERS",
            "GROUP", "STATE", "TYPE", "PROTOCOL"
        );
        for g in groups {
            let _ = writeln!(
                out,
                "{:<40} {:<22} {:<10} {:<10} {}",
                g["group"].as_str().unwrap_or_default(),
                g["state"].as_str().unwrap_or_default(),
                g["type"].as_str().unwrap_or_default(),
                g["protocol_type"].as_str().unwrap_or_default(),
                g["members"]
            );
        }
        return;
    }
    if let Some(new) = doc.get("offsets").filter(|_| doc.get("dry_run").is_some()) {
        let verb = if doc["dry_run"] == true {
            "would reset"
        } else {
            "reset"
        };
        for o in new.as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "{verb} {}-{} to {}",
                o["topic"].as_str().unwrap_or_default(),
                o["partition"],
                o["new_offset"]
            );
        }
        return;
    }
    print_description(out, doc);
}

fn print_description(out: &mut String, doc: &Value) {
    let _ = writeln!(
        out,
        "group {}  state {}  protocol {}/{}",
        doc["group"].as_str().unwrap_or_default(),
        doc["state"].as_str().unwrap_or_default(),
        doc["protocol_type"].as_str().unwrap_or_default(),
        doc["protocol"].as_str().unwrap_or_default()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<30} {:>9} {:>16} {:>16} {:>8}  MEMBER",
        "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG"
    );
    for o in doc["offsets"].as_array().into_iter().flatten() {
        let dash = |v: &Value| match v.as_i64() {
            Some(n) if n >= 0 => n.to_string(),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "{:<30} {:>9} {:>16} {:>16} {:>8}  {}",
            o["topic"].as_str().unwrap_or_default(),
            o["partition"],
            dash(&o["committed_offset"]),
            dash(&o["log_end_offset"]),
            dash(&o["lag"]),
            o["member_id"].as_str().unwrap_or("-")
        );
    }
    let members = doc["members"].as_array().map_or(0, Vec::len);
    let _ = writeln!(out);
    let _ = writeln!(out, "{members} member(s)");
    for m in doc["members"].as_array().into_iter().flatten() {
        let assigned: Vec<String> = m["assignment"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                format!(
                    "{}-{}",
                    a["topic"].as_str().unwrap_or_default(),
                    a["partition"]
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  {} ({} {}) {}",
            m["member_id"].as_str().unwrap_or_default(),
            m["client_id"].as_str().unwrap_or_default(),
            m["client_host"].as_str().unwrap_or_default(),
            assigned.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    //! Decoding of consumer-protocol assignment bytes.
    use super::*;
    use bytes::BufMut;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn assignment_bytes_decode_to_partitions() {
        let mut assignment = ConsumerProtocolAssignment::default();
        let mut tp = TopicPartition::default();
        tp.topic = TopicName(StrBytes::from_static_str("orders"));
        tp.partitions = vec![0, 2];
        assignment.assigned_partitions = vec![tp];
        let mut buf = bytes::BytesMut::new();
        buf.put_i16(1);
        assignment.encode(&mut buf, 1).unwrap();
        assert_eq!(
            decode_assignment(&buf.freeze()),
            vec![("orders".to_owned(), 0), ("orders".to_owned(), 2)]
        );
        assert!(decode_assignment(&bytes::Bytes::new()).is_empty());
    }
}
