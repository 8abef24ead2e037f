//! `sluice produce <topic>`: records from stdin lines or `--file`, one per line, with an
//! optional key separator and headers, batched per partition into RecordBatch v2 (optionally
//! compressed) and sent with Produce v8. Keyed records go to `murmur2(key) % partitions`
//! (the Java client's default partitioner, so keys land where Java producers put them);
//! unkeyed records go round robin, one batch at a time.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use bytes::{Bytes, BytesMut};
use indicatif::{ProgressBar, ProgressStyle};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, Record,
    RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use serde_json::json;

use sluice_server::clock::now_ms;

use crate::client::{Client, error_name};
use crate::common::{self, Common, Output, emit};
use sluice_hash::murmur2;

/// Records per batch (one batch per partition per request).
const BATCH_RECORDS_MAX: usize = 1_000;
/// Uncompressed bytes per batch before it is sent (below the broker's default
/// message.max.bytes of ~1 MiB).
const BATCH_BYTES_MAX: usize = 512 * 1024;
/// Longest input line accepted, in bytes (a record above message.max.bytes fails anyway).
const LINE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// How long the broker may wait for acks, in milliseconds.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// `sluice produce`.
#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// Topic to produce to (created if the broker auto-creates topics).
    topic: String,
    /// Read records from this file instead of stdin (shows progress and throughput).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Split each line into key and value at the first occurrence of this separator.
    #[arg(short = 'K', long, value_name = "SEP")]
    key_separator: Option<String>,
    /// A header added to every record, e.g. -H source=cli (repeatable).
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// Send every record to this partition.
    #[arg(short, long)]
    partition: Option<i32>,
    /// Batch compression.
    #[arg(short = 'z', long, value_enum, default_value_t = Codec::None)]
    compression: Codec,
    /// Acknowledgements: 0 (none), 1 (leader), -1 / all (fsynced under sluice.acks.all.fsync).
    #[arg(long, default_value = "all", value_parser = parse_acks, allow_hyphen_values = true)]
    acks: i16,
}

/// Batch compression codecs (Kafka's four).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

fn parse_acks(text: &str) -> Result<i16, String> {
    match text {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        _ => Err(format!("{text:?}: acks is 0, 1, -1 or all")),
    }
}

/// What was sent, for the summary.
#[derive(Debug, Default)]
struct Totals {
    records: u64,
    bytes: u64,
}

/// Runs `sluice produce`.
pub fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let mut client = args.common.connect()?;
    let partitions = common::partitions_of(&mut client, &args.topic, true)?;
    if let Some(p) = args.partition.filter(|p| !partitions.contains(p)) {
        bail!(
            "topic {} has no partition {p} (it has {})",
            args.topic,
            partitions.len()
        );
    }
    let headers = parse_headers(&args.headers)?;
    let (input, progress): (Box<dyn Read>, ProgressBar) = match &args.file {
        Some(path) => {
            let file =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            (Box::new(file), progress_bar(len))
        }
        None => (Box::new(std::io::stdin()), ProgressBar::hidden()),
    };
    let started = Instant::now();
    let mut producer = Producer {
        args: &args,
        client: &mut client,
        partition_count: partitions.len(),
        pending: vec![Vec::new(); partitions.len()],
        pending_bytes: 0,
        next_round_robin: 0,
        totals: Totals::default(),
    };
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = read_line(&mut reader, &mut line)?;
        if n == 0 {
            break;
        }
        progress.inc(n as u64);
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        producer.add(record(text, args.key_separator.as_deref(), &headers))?;
    }
    producer.flush()?;
    progress.finish_and_clear();
    summary(&args, &producer.totals, started.elapsed().as_secs_f64())
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> anyhow::Result<usize> {
    let n = reader
        .by_ref()
        .take(LINE_BYTES_MAX as u64 + 1)
        .read_until(b'\n', line)
        .context("reading input")?;
    if line.len() > LINE_BYTES_MAX {
        bail!("an input line is longer than {LINE_BYTES_MAX} bytes (LINE_BYTES_MAX)");
    }
    Ok(n)
}

fn summary(args: &ProduceArgs, totals: &Totals, seconds: f64) -> anyhow::Result<()> {
    let rate = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    let doc = json!({
        "topic": args.topic,
        "records": totals.records,
        "bytes": totals.bytes,
        "seconds": seconds,
        "records_per_second": rate(totals.records),
        "mb_per_second": rate(totals.bytes) / 1e6,
    });
    if args.common.output == Output::Json {
        return emit(Output::Json, &doc, |_| String::new());
    }
    if args.file.is_some() || std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!(
            "produced {} records ({} bytes) to {} in {seconds:.2} s: {:.0} records/s, {:.2} MB/s",
            totals.records,
            totals.bytes,
            args.topic,
            rate(totals.records),
            rate(totals.bytes) / 1e6
        );
    }
    Ok(())
}

fn parse_headers(headers: &[String]) -> anyhow::Result<IndexMap<StrBytes, Option<Bytes>>> {
    let mut out = IndexMap::new();
    for h in headers {
        let (k, v) = h
            .split_once('=')
            .with_context(|| format!("--header {h:?}: expected KEY=VALUE"))?;
        out.insert(
            StrBytes::from_string(k.to_owned()),
            Some(Bytes::copy_from_slice(v.as_bytes())),
        );
    }
    Ok(out)
}

fn record(
    line: &[u8],
    separator: Option<&str>,
    headers: &IndexMap<StrBytes, Option<Bytes>>,
) -> Record {
    let (key, value) = match separator.and_then(|sep| split_once(line, sep.as_bytes())) {
        Some((k, v)) => (Some(Bytes::copy_from_slice(k)), v),
        None => (None, line),
    };
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: NO_SEQUENCE,
        timestamp: now_ms(),
        key,
        value: Some(Bytes::copy_from_slice(value)),
        headers: headers.clone(),
    }
}

fn split_once<'a>(line: &'a [u8], sep: &[u8]) -> Option<(&'a [u8], &'a [u8])> {
    if sep.is_empty() {
        return None;
    }
    let at = line.windows(sep.len()).position(|w| w == sep)?;
    Some((&line[..at], &line[at + sep.len()..]))
}

/// Records waiting per partition, sent when a batch is full.
struct Producer<'a> {
    args: &'a ProduceArgs,
    client: &'a mut Client,
    partition_count: usize,
    /// Records per partition index.
    pending: Vec<Vec<Record>>,
    /// Approximate uncompressed bytes pending.
    pending_bytes: usize,
    /// Partition for the next unkeyed batch.
    next_round_robin: usize,
    totals: Totals,
}

impl Producer<'_> {
    fn add(&mut self, record: Record) -> anyhow::Result<()> {
        let size =
            record.key.as_ref().map_or(0, Bytes::len) + record.value.as_ref().map_or(0, Bytes::len);
        let partition = match (self.args.partition, &record.key) {
            (Some(p), _) => p as usize,
            (None, Some(key)) => (murmur2(key) & 0x7fff_ffff) as usize % self.partition_count,
            (None, None) => self.next_round_robin,
        };
        self.pending[partition].push(record);
        self.pending_bytes += size;
        let full = self.pending[partition].len() >= BATCH_RECORDS_MAX;
        if full || self.pending_bytes >= BATCH_BYTES_MAX {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        let compression = match self.args.compression {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        };
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        let mut partition_data = Vec::new();
        for (index, records) in self.pending.iter_mut().enumerate() {
            if records.is_empty() {
                continue;
            }
            // Offsets are deltas within the batch; the broker assigns the base offset.
            for (delta, record) in records.iter_mut().enumerate() {
                record.offset = delta as i64;
            }
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
                .context("encoding a record batch")?;
            self.totals.records += records.len() as u64;
            self.totals.bytes += records
                .iter()
                .map(|r| r.value.as_ref().map_or(0, Bytes::len) as u64)
                .sum::<u64>();
            records.clear();
            let mut data = PartitionProduceData::default();
            data.index = index as i32;
            data.records = Some(buf.freeze());
            partition_data.push(data);
        }
        self.pending_bytes = 0;
        self.next_round_robin = (self.next_round_robin + 1) % self.partition_count;
        if partition_data.is_empty() {
            return Ok(());
        }
        self.send(partition_data)
    }

    /// Sends the batches, one Produce to each partition's leader.
    fn send(&mut self, partition_data: Vec<PartitionProduceData>) -> anyhow::Result<()> {
        let mut by_leader: std::collections::BTreeMap<Option<String>, Vec<PartitionProduceData>> =
            std::collections::BTreeMap::new();
        for data in partition_data {
            let leader = self.client.leader(&self.args.topic, data.index);
            by_leader.entry(leader).or_default().push(data);
        }
        for (leader, partition_data) in by_leader {
            self.send_to(leader.as_deref(), partition_data)?;
        }
        Ok(())
    }

    fn send_to(
        &mut self,
        leader: Option<&str>,
        partition_data: Vec<PartitionProduceData>,
    ) -> anyhow::Result<()> {
        let client = self.client.at(leader)?;
        let mut topic = TopicProduceData::default();
        topic.name = TopicName(StrBytes::from_string(self.args.topic.clone()));
        topic.partition_data = partition_data;
        let mut request = ProduceRequest::default();
        request.acks = self.args.acks;
        request.timeout_ms = PRODUCE_TIMEOUT_MS;
        request.topic_data = vec![topic];
        if self.args.acks == 0 {
            return client.send_without_response(&request, 8);
        }
        let response = client.send(&request, 8)?;
        for p in response
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
        {
            if p.error_code != 0 {
                let detail = p
                    .error_message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                bail!(
                    "producing to {}-{} failed: {}{detail}",
                    self.args.topic,
                    p.index,
                    error_name(p.error_code)
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_separator_splits_at_the_first_occurrence() {
        assert_eq!(split_once(b"k:v:w", b":"), Some((&b"k"[..], &b"v:w"[..])));
        assert_eq!(split_once(b"kv", b":"), None);
        assert_eq!(split_once(b"k::v", b"::"), Some((&b"k"[..], &b"v"[..])));
    }
}
