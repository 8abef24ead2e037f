//! `sluice consume <topic>`: Fetch v11 from one or all partitions, from the beginning, the
//! end, an offset or a timestamp; stops after `-n` records or at the end (`-e`), else follows
//! the log. `-f` formats each record like kcat's `-f`; `--output json` prints one JSON object
//! per record. `--group` joins the consumer group as a member (`consume/group.rs`): it reads
//! the partitions the group assigns, from the committed offsets, and commits what it read.
//!
//! `--filter PLUGIN` / `--transform PLUGIN` (each followed by its `--param`s) run plugins on
//! the broker for this consumer only: an ephemeral view of the topic is created through the
//! admin API, read, and deleted at exit (the broker drops it anyway once unused). A fetch
//! may answer a batch whose records were all filtered out (a gap over its offsets); the
//! position moves past it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, bail};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};
use serde_json::json;

use crate::client::{Client, error_name};
use crate::common::{self, Common, EARLIEST, LATEST, Output, write_stdout};
use crate::datetime::parse_rfc3339_ms;

mod group;

/// How long one fetch waits for new records, in milliseconds.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Bytes per fetch response and per partition.
const FETCH_MAX_BYTES: i32 = 8 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;

/// `sluice consume`.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Topic to read.
    pub(crate) topic: String,
    /// Read only this partition (default: all; with --group, the group assigns them).
    #[arg(short, long, conflicts_with = "group")]
    partition: Option<i32>,
    /// Where to start: beginning, end, or an offset (for every partition read).
    #[arg(short, long, default_value = "beginning", conflicts_with_all = ["from_timestamp", "from_datetime"])]
    offset: String,
    /// Start at the first record at or after this time (ms since the epoch).
    #[arg(long, value_name = "MS")]
    from_timestamp: Option<i64>,
    /// Same, as an RFC 3339 time, e.g. 2026-01-31T12:00:00Z.
    #[arg(long, value_name = "DATETIME")]
    from_datetime: Option<String>,
    /// Stop after this many records.
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// Stop at the end of every partition instead of waiting for more.
    #[arg(short = 'e', long)]
    exit_at_end: bool,
    /// Join this consumer group: read the partitions it assigns, from its committed offsets
    /// (else --offset/--from-*), commit what was read, leave on exit (-n, -e, Ctrl-C).
    #[arg(short, long)]
    pub(crate) group: Option<String>,
    /// Format per record (kcat's -f): %t topic, %p partition, %o offset, %k key, %s value,
    /// %T timestamp (ms), %h headers (k=v,...), %K key bytes, %S value bytes, \n, \t, %%.
    #[arg(short, long, default_value = "%s\\n")]
    format: String,
    /// Print only records whose key or value contains this text (client side).
    #[arg(long, value_name = "TEXT")]
    grep: Option<String>,
    /// Plugins to run on the broker for this consumer only (an ephemeral view).
    #[command(flatten)]
    stages: crate::view::StageArgs,
    /// The broker's admin API, for --filter and --transform (with the client properties of
    /// `common`).
    #[command(flatten)]
    admin: crate::common::AdminArgs,
}

/// Where each partition is.
#[derive(Clone)]
pub(crate) struct Position {
    pub(crate) next: i64,
    pub(crate) end: i64,
}

/// Runs `sluice consume`; `matches` (this subcommand's) give the order of the plugin stages.
pub fn run(mut args: ConsumeArgs, matches: Option<&clap::ArgMatches>) -> anyhow::Result<()> {
    let adhoc = match matches {
        Some(m) if args.stages.any() => Some(AdhocView::create(&args, m)?),
        _ => None,
    };
    if let Some(view) = &adhoc {
        args.topic.clone_from(&view.name);
    }
    let result = consume(&args);
    drop(adhoc);
    result
}

/// An ephemeral view for `--filter`/`--transform`, deleted when dropped.
struct AdhocView {
    admin: crate::common::Admin,
    name: String,
}

impl AdhocView {
    fn create(args: &ConsumeArgs, matches: &clap::ArgMatches) -> anyhow::Result<Self> {
        if args.group.is_some() {
            bail!(
                "--group with --filter/--transform would commit offsets under a temporary view; \
                 create a view (sluice view create) and consume it with --group"
            );
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = format!("{}.adhoc-{}-{now_ms}", args.topic, std::process::id());
        let body = json!({
            "name": name,
            "source": args.topic,
            "stages": crate::view::stages(matches)?,
            "ephemeral": true,
        });
        // Read the properties once, so the admin client's copy and `common` share them.
        args.common.properties.load()?;
        let admin = crate::common::Admin::with_properties(
            args.admin.clone(),
            args.common.properties.clone(),
        );
        crate::plugin::http_json(&admin, "POST", "/v1/views", &body)?;
        Ok(Self { admin, name })
    }
}

impl Drop for AdhocView {
    fn drop(&mut self) {
        let path = format!("/v1/views/{}", self.name);
        if let Err(e) =
            crate::plugin::http_json(&self.admin, "DELETE", &path, &serde_json::Value::Null)
        {
            eprintln!(
                "warning: deleting the ad hoc view {}: {e:#} (the broker drops it when idle)",
                self.name
            );
        }
    }
}

fn consume(args: &ConsumeArgs) -> anyhow::Result<()> {
    // Everything a consumer sends is safe to repeat on a new connection.
    let mut client = args.common.connect()?.reconnecting();
    let mut partitions = common::partitions_of(&mut client, &args.topic, false)?;
    if let Some(group) = &args.group {
        // The member talks to the group's coordinator, and fetches from the leaders.
        return match common::coordinator_of(&mut client, group)? {
            None => group::run(&mut client, args, group),
            Some(addr) => {
                let mut coordinator = client.at(Some(&addr))?.another()?.reconnecting();
                common::partitions_of(&mut coordinator, &args.topic, false)?;
                group::run(&mut coordinator, args, group)
            }
        };
    }
    if let Some(p) = args.partition {
        if !partitions.contains(&p) {
            bail!(
                "topic {} has no partition {p} (it has {})",
                args.topic,
                partitions.len()
            );
        }
        partitions = vec![p];
    }
    let mut positions = start_positions(&mut client, args, &partitions, None)?;
    let mut printed = 0u64;
    while !done(args, printed, &positions) {
        poll(&mut client, args, &mut positions, &mut printed)?;
    }
    Ok(())
}

/// True when `-n` records were printed, or with `-e` every partition is at its end.
pub(crate) fn done(args: &ConsumeArgs, printed: u64, positions: &BTreeMap<i32, Position>) -> bool {
    args.count.is_some_and(|n| printed >= n)
        || (args.exit_at_end && positions.values().all(|p| p.next >= p.end))
}

/// One fetch: prints the records (up to `-n` in all) and advances `positions` past every
/// record handled. Returns how many records were handled (printed or filtered out).
pub(crate) fn poll(
    client: &mut Client,
    args: &ConsumeArgs,
    positions: &mut BTreeMap<i32, Position>,
    printed: &mut u64,
) -> anyhow::Result<usize> {
    let (records, out_of_range) = fetch(client, &args.topic, positions)?;
    if !out_of_range.is_empty() {
        reset_out_of_range(client, args, positions, &out_of_range)?;
    }
    let mut out = String::new();
    let mut handled = 0;
    for (partition, record) in records {
        if args.count.is_some_and(|n| *printed >= n) {
            break;
        }
        handled += 1;
        if let Some(p) = positions.get_mut(&partition) {
            p.next = p.next.max(record.offset + 1);
        }
        if !matches(&record, args.grep.as_deref()) {
            continue;
        }
        *printed += 1;
        format_record(&mut out, args, partition, &record);
    }
    write_stdout(out.as_bytes())?;
    Ok(handled)
}

/// Where to start on each partition: the group's committed offset when there is one,
/// else `--offset`/`--from-*`.
pub(crate) fn start_positions(
    client: &mut Client,
    args: &ConsumeArgs,
    partitions: &[i32],
    group: Option<&str>,
) -> anyhow::Result<BTreeMap<i32, Position>> {
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let ends = common::list_offsets(client, &args.topic, partitions, LATEST)?;
    let starts = match (&args.from_timestamp, &args.from_datetime) {
        (Some(ms), _) => common::list_offsets(client, &args.topic, partitions, *ms)?,
        (None, Some(dt)) => {
            let ms = parse_rfc3339_ms(dt)?;
            common::list_offsets(client, &args.topic, partitions, ms)?
        }
        (None, None) => match args.offset.as_str() {
            "beginning" | "earliest" | "start" => {
                common::list_offsets(client, &args.topic, partitions, EARLIEST)?
            }
            "end" | "latest" => ends.clone(),
            n => {
                let offset: i64 = n.parse().with_context(|| {
                    format!("--offset {n:?}: expected beginning, end or an offset")
                })?;
                partitions.iter().map(|&p| (p, offset)).collect()
            }
        },
    };
    let committed = match group {
        Some(group) => crate::group::fetch_committed(client, group)?,
        None => BTreeMap::new(),
    };
    Ok(partitions
        .iter()
        .map(|&p| {
            let end = ends.get(&p).copied().unwrap_or(0);
            // A timestamp after the last record answers -1: start at the end.
            let from = starts.get(&p).copied().filter(|&o| o >= 0).unwrap_or(end);
            let from = match committed.get(&(args.topic.clone(), p)).copied() {
                // Past the log end (the log was truncated or recreated): reset, as
                // Kafka's auto.offset.reset does. Before the log start, Fetch tells.
                Some(o) if o > end => {
                    eprintln!(
                        "warning: committed offset {o} of {}-{p} is out of range (log end {end}); resetting to {from}",
                        args.topic
                    );
                    from
                }
                Some(o) if o >= 0 => o,
                _ => from,
            };
            (p, Position { next: from, end })
        })
        .collect())
}

/// Kafka's OFFSET_OUT_OF_RANGE: the position is before the log start or after its end.
const OFFSET_OUT_OF_RANGE: i16 = sluice_kafka::ErrorCode::OffsetOutOfRange.code();

/// A group member whose committed offset fell out of the log (retention deleted it) starts
/// over from `--offset end` or else the log start, as Kafka's `auto.offset.reset` does; an
/// explicit `--offset` out of range is an error.
fn reset_out_of_range(
    client: &mut Client,
    args: &ConsumeArgs,
    positions: &mut BTreeMap<i32, Position>,
    partitions: &[i32],
) -> anyhow::Result<()> {
    let topic = &args.topic;
    if args.group.is_none() {
        bail!(
            "offset {} of {topic}-{} is out of range: start from --offset beginning or end",
            positions.get(&partitions[0]).map_or(-1, |p| p.next),
            partitions[0]
        );
    }
    let to_end = matches!(args.offset.as_str(), "end" | "latest");
    let reset = common::list_offsets(
        client,
        topic,
        partitions,
        if to_end { LATEST } else { EARLIEST },
    )?;
    for (p, offset) in reset {
        if let Some(pos) = positions.get_mut(&p) {
            eprintln!(
                "warning: offset {} of {topic}-{p} is out of range; resetting to {offset}",
                pos.next
            );
            pos.next = offset;
        }
    }
    Ok(())
}

/// What one Fetch returned: (partition, record) past each position, and the partitions
/// whose position is out of range.
type Fetched = (Vec<(i32, Record)>, Vec<i32>);

/// One Fetch from each partition's leader.
fn fetch(
    client: &mut Client,
    topic: &str,
    positions: &mut BTreeMap<i32, Position>,
) -> anyhow::Result<Fetched> {
    let partitions: Vec<i32> = positions.keys().copied().collect();
    let groups = common::by_leader(client, topic, &partitions);
    if groups.len() <= 1 {
        let leader = groups.into_keys().next().flatten();
        return fetch_at(client.at(leader.as_deref())?, topic, positions);
    }
    let (mut records, mut out_of_range) = (Vec::new(), Vec::new());
    for (leader, partitions) in groups {
        let mut some: BTreeMap<i32, Position> = partitions
            .iter()
            .filter_map(|p| positions.get(p).map(|pos| (*p, pos.clone())))
            .collect();
        let (r, o) = fetch_at(client.at(leader.as_deref())?, topic, &mut some)?;
        records.extend(r);
        out_of_range.extend(o);
        positions.extend(some);
    }
    Ok((records, out_of_range))
}

/// One Fetch of `positions`' partitions from the broker `client` is connected to.
fn fetch_at(
    client: &mut Client,
    topic: &str,
    positions: &mut BTreeMap<i32, Position>,
) -> anyhow::Result<Fetched> {
    let mut t = FetchTopic::default();
    t.topic = TopicName(StrBytes::from_string(topic.to_owned()));
    t.partitions = positions
        .iter()
        .map(|(&p, pos)| {
            let mut fp = FetchPartition::default();
            fp.partition = p;
            fp.fetch_offset = pos.next;
            fp.partition_max_bytes = PARTITION_MAX_BYTES;
            fp
        })
        .collect();
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = FETCH_MAX_WAIT_MS;
    request.min_bytes = 1;
    request.max_bytes = FETCH_MAX_BYTES;
    request.topics = vec![t];
    let response = client.send(&request, 11)?;
    if response.error_code != 0 {
        bail!("Fetch: {}", error_name(response.error_code));
    }
    let mut records = Vec::new();
    let mut out_of_range = Vec::new();
    for p in response.responses.iter().flat_map(|t| &t.partitions) {
        if p.error_code == OFFSET_OUT_OF_RANGE {
            out_of_range.push(p.partition_index);
            continue;
        }
        if p.error_code != 0 {
            bail!(
                "fetching {topic}-{}: {}",
                p.partition_index,
                error_name(p.error_code)
            );
        }
        if let Some(pos) = positions.get_mut(&p.partition_index) {
            pos.end = p.high_watermark;
        }
        let Some(bytes) = &p.records else { continue };
        for (after, mut batch) in batches(bytes) {
            let set = RecordBatchDecoder::decode(&mut batch)
                .with_context(|| format!("decoding records of {topic}-{}", p.partition_index))?;
            let Some(pos) = positions.get_mut(&p.partition_index) else {
                continue;
            };
            let next = pos.next;
            let before = records.len();
            records.extend(
                set.records
                    .into_iter()
                    .filter(|r| r.offset >= next && !r.control)
                    .map(|r| (p.partition_index, r)),
            );
            if records.len() == before {
                // Nothing to print in this batch (all filtered, or control): move past it.
                pos.next = pos.next.max(after);
            }
        }
    }
    Ok((records, out_of_range))
}

/// The whole record batches in `bytes`, each with the offset after it (base offset + last
/// offset delta + 1); a batch cut short at the end is left out.
fn batches(bytes: &Bytes) -> Vec<(i64, Bytes)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 27) {
        let base = i64::from_be_bytes(head[0..8].try_into().unwrap_or_default());
        let len = i32::from_be_bytes(head[8..12].try_into().unwrap_or_default());
        let last_delta = i32::from_be_bytes(head[23..27].try_into().unwrap_or_default());
        let Some(end) = usize::try_from(len)
            .ok()
            .and_then(|l| (at + 12).checked_add(l))
            .filter(|&e| e <= bytes.len())
        else {
            break;
        };
        out.push((base + i64::from(last_delta) + 1, bytes.slice(at..end)));
        at = end;
    }
    out
}

fn matches(record: &Record, filter: Option<&str>) -> bool {
    let Some(needle) = filter.map(str::as_bytes) else {
        return true;
    };
    let contains = |b: &Option<Bytes>| {
        b.as_ref()
            .is_some_and(|b| b.windows(needle.len().max(1)).any(|w| w == needle))
    };
    needle.is_empty() || contains(&record.key) || contains(&record.value)
}

fn text(bytes: &Option<Bytes>) -> String {
    bytes
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

fn headers_text(record: &Record) -> String {
    record
        .headers
        .iter()
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect::<Vec<_>>()
        .join(",")
}

fn format_record(out: &mut String, args: &ConsumeArgs, partition: i32, record: &Record) {
    if args.common.output == Output::Json {
        let headers: serde_json::Map<String, serde_json::Value> = record
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    json!(v.as_ref().map(|v| String::from_utf8_lossy(v).into_owned())),
                )
            })
            .collect();
        let doc = json!({
            "topic": args.topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": record.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()),
            "value": record.value.as_ref().map(|v| String::from_utf8_lossy(v).into_owned()),
            "headers": headers,
        });
        let _ = writeln!(out, "{doc}");
        return;
    }
    let mut chars = args.format.chars();
    while let Some(c) = chars.next() {
        match (c, c == '%' || c == '\\') {
            (_, false) => out.push(c),
            ('%', true) => match chars.next() {
                Some('%') => out.push('%'),
                Some('t') => out.push_str(&args.topic),
                Some('p') => {
                    let _ = write!(out, "{partition}");
                }
                Some('o') => {
                    let _ = write!(out, "{}", record.offset);
                }
                Some('k') => out.push_str(&text(&record.key)),
                Some('s') => out.push_str(&text(&record.value)),
                Some('T') => {
                    let _ = write!(out, "{}", record.timestamp);
                }
                Some('h') => out.push_str(&headers_text(record)),
                Some('K') => {
                    let _ = write!(
                        out,
                        "{}",
                        record.key.as_ref().map_or(-1, |k| k.len() as i64)
                    );
                }
                Some('S') => {
                    let _ = write!(
                        out,
                        "{}",
                        record.value.as_ref().map_or(-1, |v| v.len() as i64)
                    );
                }
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            },
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
        }
    }
}
