//! `sluice debug`: looking at a data dir's files directly, as Kafka's `kafka-dump-log` does.
//!
//! `dump-log PATH` prints every record batch of a segment file (`<base offset>.log`), or of
//! every segment of a partition directory in offset order: its position and size, base and
//! last offset, record count, partition leader epoch, producer id, epoch and sequences,
//! transactional and control bits, codec, timestamps and CRC, and whether the CRC is valid.
//! Two replicas' dumps below their high watermark are identical when their bytes are. Files
//! are only read (a running broker's too); a batch is read whole only up to
//! `BATCH_BYTES_MAX`, and a torn or corrupt tail ends the file's dump with a line saying where.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Serialize;
use sluice_storage::batch;
use sluice_storage::limits::BATCH_BYTES_MAX;

#[derive(Debug, clap::Args)]
pub struct DebugArgs {
    #[command(subcommand)]
    command: DebugCommand,
}

#[derive(Debug, clap::Subcommand)]
enum DebugCommand {
    /// Every record batch of a segment file or of a partition directory's segments.
    DumpLog {
        /// A segment (`00000000000000000000.log`) or a partition directory
        /// (`<data.dir>/topics/<topic>/<partition>`).
        path: PathBuf,
        /// `text` (one line per batch) or `json` (one object per line).
        #[arg(long, default_value = "text")]
        output: Output,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// One batch as the dump prints it.
#[derive(Debug, Serialize)]
struct Dumped {
    segment: String,
    position: u64,
    size: u64,
    base_offset: i64,
    last_offset: i64,
    count: i32,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    is_control: bool,
    codec: String,
    base_timestamp: i64,
    max_timestamp: i64,
    crc: u32,
    crc_valid: bool,
}

pub fn run(args: DebugArgs) -> anyhow::Result<()> {
    match args.command {
        DebugCommand::DumpLog { path, output } => dump_log(&path, output),
    }
}

fn dump_log(path: &Path, output: Output) -> anyhow::Result<()> {
    let segments = segments(path)?;
    let mut out = std::io::stdout().lock();
    for segment in segments {
        dump_segment(&segment, output, &mut out)?;
    }
    Ok(())
}

/// The segment files at `path`: the file itself, or a directory's `*.log` in base-offset
/// order (their names are their base offsets, zero-padded).
fn segments(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    if !path.is_dir() {
        bail!(
            "{}: no such segment file or partition directory",
            path.display()
        );
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    found.sort();
    if found.is_empty() {
        bail!("{}: no segment files (*.log) in it", path.display());
    }
    Ok(found)
}

fn dump_segment(path: &Path, output: Output, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let length = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::new(file);
    let name = path.display().to_string();
    let mut position = 0u64;
    let mut head = [0u8; batch::LOG_OVERHEAD_BYTES];
    while position < length {
        if let Err(e) = reader.read_exact(&mut head) {
            writeln!(out, "# {name}: torn tail at position {position}: {e}")?;
            break;
        }
        let batch_length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        let total = u32::try_from(batch_length)
            .ok()
            .map(|l| l as usize + batch::LOG_OVERHEAD_BYTES)
            .filter(|&t| t >= batch::HEADER_BYTES && t <= BATCH_BYTES_MAX as usize);
        let Some(total) = total else {
            writeln!(
                out,
                "# {name}: corrupt batch length {batch_length} at position {position} (a batch is {} to BATCH_BYTES_MAX = {BATCH_BYTES_MAX} bytes): the dump of this file ends here",
                batch::HEADER_BYTES
            )?;
            break;
        };
        let mut bytes = vec![0u8; total];
        bytes[..batch::LOG_OVERHEAD_BYTES].copy_from_slice(&head);
        if let Err(e) = reader.read_exact(&mut bytes[batch::LOG_OVERHEAD_BYTES..]) {
            writeln!(out, "# {name}: torn tail at position {position}: {e}")?;
            break;
        }
        let header = match batch::parse_header(&bytes) {
            Ok(header) => header,
            Err(e) => {
                writeln!(
                    out,
                    "# {name}: unreadable batch header at position {position}: {e}"
                )?;
                break;
            }
        };
        let dumped = Dumped {
            segment: name.clone(),
            position,
            size: total as u64,
            base_offset: header.base_offset,
            last_offset: header.base_offset + i64::from(header.last_offset_delta),
            count: header.records_count,
            partition_leader_epoch: header.partition_leader_epoch,
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            is_transactional: header.is_transactional(),
            is_control: header.is_control(),
            codec: format!("{:?}", header.compression()).to_lowercase(),
            base_timestamp: header.base_timestamp,
            max_timestamp: header.max_timestamp,
            crc: header.crc,
            crc_valid: batch::validate(&bytes).is_ok(),
        };
        print(&dumped, output, out)?;
        position += total as u64;
    }
    Ok(())
}

/// One batch's line.
fn print(dumped: &Dumped, output: Output, out: &mut impl std::io::Write) -> anyhow::Result<()> {
    match output {
        Output::Json => writeln!(out, "{}", serde_json::to_string(&dumped)?)?,
        Output::Text => writeln!(
            out,
            "baseOffset: {} lastOffset: {} count: {} partitionLeaderEpoch: {} producerId: {} producerEpoch: {} \
             baseSequence: {} isTransactional: {} isControl: {} position: {} size: {} compresscodec: {} crc: {} isvalid: {}",
            dumped.base_offset,
            dumped.last_offset,
            dumped.count,
            dumped.partition_leader_epoch,
            dumped.producer_id,
            dumped.producer_epoch,
            dumped.base_sequence,
            dumped.is_transactional,
            dumped.is_control,
            dumped.position,
            dumped.size,
            dumped.codec,
            dumped.crc,
            dumped.crc_valid
        )?,
    }
    Ok(())
}
