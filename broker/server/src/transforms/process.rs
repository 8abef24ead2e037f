//! The blocking steps of a runner, on the blocking pool: reading the source read_committed
//! (control batches and batches of aborted transactions skipped unseen, as a read_committed
//! fetch would), and calling the plugin on a range of what was read.

use std::cell::RefCell;
use std::sync::Arc;

use sluice_plugin_host::{
    CallError as HostError, ColumnarBatch, Filter, Partitioner, Transform, Validator,
};
use sluice_storage::batch::iter_batches;
use sluice_storage::{AbortedTxn, Compression, Offset, ReadError};
use sluice_transform::{CallError, CallErrorKind, ReadResult, StepError, StepErrorKind, limits};

use crate::records::{self, DecompressLimit};
use crate::topics::Partition;
use crate::views::apply::Aborted;

use super::record::{Rec, to_batch};

/// How far a source batch may decompress before the plugin sees it.
const DECOMPRESS_LIMIT: DecompressLimit = DecompressLimit {
    bytes: limits::TRANSFORM_DECOMPRESSED_BYTES_MAX,
    name: "TRANSFORM_DECOMPRESSED_BYTES_MAX",
};

/// [`limits::TRANSFORM_READ_BYTES_MAX`] as the storage engine's read budget.
const READ_BYTES_MAX: u32 = limits::TRANSFORM_READ_BYTES_MAX as u32;
const _: () = assert!(limits::TRANSFORM_READ_BYTES_MAX <= u32::MAX as usize);

/// The plugin of a transform: a transform (routes to its outputs) or a filter (kept records
/// to the first output, dropped ones to the second when there is one). Pooled handles,
/// shared with the blocking task of each call.
#[derive(Debug, Clone)]
pub enum Plugin {
    Transform(Arc<Transform>),
    Filter(Arc<Filter>),
}

/// Reads the source partition from `from`: whole batches, at most `TRANSFORM_READ_BYTES_MAX`
/// (at least one batch), below its last stable offset (and a replicated partition's high
/// watermark); with nothing there, `Held` when an
/// open transaction at the last stable offset holds records back. Blocking (positional
/// reads).
///
/// # Errors
/// The partition is offline or a read failed (retriable: the fence prober reopens it), or a
/// stored batch does not decode or decompresses past `TRANSFORM_DECOMPRESSED_BYTES_MAX`
/// (fatal: the partition fails, naming the batch, until resumed).
pub fn read(
    partition: &Partition,
    from: i64,
) -> Result<(ReadResult<Rec>, Option<Compression>), StepError> {
    // A replicated source is read below its high watermark too: a record a failover could
    // take back never reaches an output.
    let hw = partition.high_watermark();
    let read = partition
        .with_log(|log| {
            let lso = hw.map_or(log.last_stable_offset(), |hw| {
                log.last_stable_offset().min(Offset(hw))
            });
            let start = log.log_start_offset().value();
            if from < start {
                return Err(start);
            }
            let slice = log.read_below(Offset(from), READ_BYTES_MAX, lso);
            let aborted = log.aborted_transactions(Offset(from), lso);
            // An open transaction at the LSO with records after it holds the reader back.
            let held = log
                .first_open_transaction()
                .filter(|&(first, _)| first == lso && first.value() <= from)
                .filter(|_| lso < log.log_end_offset())
                .map(|(first, producer_id)| ReadResult::Held {
                    producer_id,
                    first_offset: first.value(),
                });
            Ok((slice, aborted, held))
        })
        .map_err(|e| retriable(e.message))?;
    let (slice, aborted, held) = match read {
        Ok(read) => read,
        Err(log_start_offset) => {
            return Ok((ReadResult::OutOfRange { log_start_offset }, None));
        }
    };
    let slice = match slice {
        Ok(slice) if slice.is_empty() => {
            return Ok((held.unwrap_or(ReadResult::Nothing), None));
        }
        Ok(slice) => slice,
        Err(ReadError::OffsetOutOfRange { log_start, .. }) if Offset(from) < log_start => {
            let log_start_offset = log_start.value();
            return Ok((ReadResult::OutOfRange { log_start_offset }, None));
        }
        Err(ReadError::OffsetOutOfRange { .. }) => return Ok((ReadResult::Nothing, None)),
        Err(e) => {
            return Err(retriable(format!(
                "reading {}-{}: {e}",
                partition.topic, partition.index
            )));
        }
    };
    let mut bytes = READ_BUFFER.with(RefCell::take);
    bytes.clear();
    slice.read_into(&mut bytes).map_err(|e| {
        retriable(format!(
            "reading {}-{}: {e}",
            partition.topic, partition.index
        ))
    })?;
    let decoded = decode_read(partition, &bytes, from, &aborted);
    if bytes.capacity() <= READ_BUFFER_KEPT_BYTES_MAX {
        READ_BUFFER.with(|kept| kept.replace(bytes));
    }
    decoded
}

/// Most bytes of read buffer a blocking-pool thread keeps for its next read: a fresh
/// megabyte per read was paged in anew every time.
const READ_BUFFER_KEPT_BYTES_MAX: usize = 2 * limits::TRANSFORM_READ_BYTES_MAX;

thread_local! {
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The records of the batches `bytes` holds from `from` on, as one set of columns.
fn decode_read(
    partition: &Partition,
    bytes: &[u8],
    from: i64,
    aborted: &[AbortedTxn],
) -> Result<(ReadResult<Rec>, Option<Compression>), StepError> {
    let aborted = Aborted::new(aborted);
    let mut next_offset = from;
    // One set of columns for the whole read: the records are indices into it.
    let mut columns = ColumnarBatch::with_capacity(0, bytes.len());
    let mut codec = None;
    for item in iter_batches(bytes) {
        let (header, batch) = item.map_err(|e| {
            fatal(format!(
                "{}-{}: a stored batch does not decode: {e}",
                partition.topic, partition.index
            ))
        })?;
        next_offset = header.last_offset() + 1;
        if header.is_control() || aborted.contains(&header) {
            continue;
        }
        codec = Some(header.compression());
        records::decode(batch, &mut columns, DECOMPRESS_LIMIT).map_err(|e| {
            fatal(format!(
                "{}-{} batch at offset {}: {e}",
                partition.topic, partition.index, header.base_offset
            ))
        })?;
    }
    // A compacted batch may start below `from` (its first records cleaned away is fine;
    // records before `from` were read before): keep only what is new.
    let records = Rec::all(columns, |_| 0, from);
    let read = ReadResult::Records {
        records,
        next_offset,
    };
    Ok((read, codec))
}

fn retriable(message: String) -> StepError {
    StepError {
        kind: StepErrorKind::Retriable,
        message,
    }
}

fn fatal(message: String) -> StepError {
    StepError {
        kind: StepErrorKind::Fatal,
        message,
    }
}

/// Calls the plugin on `inputs`, routed to `outputs` (the spec's output topics in order).
pub fn call(plugin: &Plugin, inputs: &[Rec], outputs: &[String]) -> Result<Vec<Rec>, CallError> {
    let batch = to_batch(inputs);
    match plugin {
        Plugin::Transform(t) => {
            let names: Vec<&str> = outputs.iter().map(String::as_str).collect();
            let routed = t.transform_routed(&batch, &names).map_err(call_error)?;
            let targets = routed.outputs;
            Ok(Rec::all(routed.batch, |i| targets[i], i64::MIN))
        }
        Plugin::Filter(f) => {
            let keep = f.filter(&batch).map_err(call_error)?;
            let two_way = outputs.len() > 1;
            Ok(inputs
                .iter()
                .zip(keep)
                .filter(|(_, kept)| *kept || two_way)
                .map(|(r, kept)| r.routed_to(u32::from(!kept)))
                .collect())
        }
    }
}

/// Places the records of each output that has a partitioner plugin (`placements`, per
/// output; `counts`, the outputs' partition counts): one call per such output, its answer
/// recorded on the records for the machine. A failed call fails the plugin call as a whole.
pub fn place(
    records: &mut [Rec],
    placements: &[Option<Arc<Partitioner>>],
    counts: &[u32],
) -> Result<(), CallError> {
    for (output, partitioner) in placements.iter().enumerate() {
        let Some(partitioner) = partitioner else {
            continue;
        };
        let (mine, mine_records) = routed_to(records, output);
        if mine.is_empty() {
            continue;
        }
        let batch = to_batch(&mine_records);
        let count = counts.get(output).copied().unwrap_or(1).max(1);
        let chosen = partitioner.partition(&batch, count).map_err(call_error)?;
        for (&i, partition) in mine.iter().zip(chosen) {
            records[i].partition = Some(partition);
        }
    }
    Ok(())
}

/// The records routed to `output`: their indices in `records`, and the records (sharing
/// their columns), for one plugin call on that output's records.
fn routed_to(records: &[Rec], output: usize) -> (Vec<usize>, Vec<Rec>) {
    let index = u32::try_from(output).unwrap_or(u32::MAX);
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.output == index)
        .map(|(i, r)| (i, r.clone()))
        .unzip()
}

/// An output topic's validator: its topic, its plugin's name, the handle.
#[derive(Debug, Clone)]
pub struct OutputValidator {
    pub topic: String,
    pub plugin: String,
    pub handle: Arc<Validator>,
}

/// Runs each output's validator (`validators`, per output) on the records routed to it, as
/// the produce path runs a topic's validator on a produced batch. Returns the source
/// records refused (indices into `inputs`, increasing), each with an error of kind
/// `validator` naming the topic, the plugin, the source offset and the plugin's reason, and
/// removes every output of those records from `records` (a source record's outputs are
/// written all or none): the machine applies the failure policy to exactly those records
/// (`Runner::on_called_in_part`). A failed validator call fails the whole call, as the
/// transform's own would.
pub fn validate(
    inputs: &[Rec],
    records: &mut Vec<Rec>,
    validators: &[Option<OutputValidator>],
) -> Result<Vec<(usize, CallError)>, CallError> {
    let mut refused: std::collections::BTreeMap<i64, CallError> = std::collections::BTreeMap::new();
    for (output, validator) in validators.iter().enumerate() {
        let Some(validator) = validator else {
            continue;
        };
        let (_, mine) = routed_to(records, output);
        if mine.is_empty() {
            continue;
        }
        let batch = to_batch(&mine);
        let answer = validator.handle.validate(&batch).map_err(|e| CallError {
            message: format!(
                "output topic {:?}'s validator `{}`: {e}",
                validator.topic, validator.plugin
            ),
            ..call_error(e)
        })?;
        for refusal in answer {
            let Some(record) = mine.get(refusal.index as usize) else {
                continue; // the host checked the indices; nothing to refuse past the batch
            };
            refused.entry(record.offset).or_insert_with(|| CallError {
                kind: CallErrorKind::Validator,
                message: format!(
                    "output topic {:?}'s validator `{}` refused the output of the record at source offset {}: {}",
                    validator.topic, validator.plugin, record.offset, refusal.reason
                ),
            });
        }
    }
    if refused.is_empty() {
        return Ok(Vec::new());
    }
    records.retain(|r| !refused.contains_key(&r.offset));
    Ok(refused
        .into_iter()
        .filter_map(|(offset, error)| {
            let index = inputs.binary_search_by_key(&offset, |r| r.offset).ok()?;
            Some((index, error))
        })
        .collect())
}

/// The runner's view of a plugin host failure.
fn call_error(e: HostError) -> CallError {
    let kind = match &e {
        // Not the records' fault: no instance free, or a new version that cannot start
        // (it refuses the parameters): call again after a backoff, the error in the status.
        HostError::Busy { .. }
        | HostError::PoolFull { .. }
        | HostError::InvalidParams { .. }
        | HostError::Instantiate { .. } => CallErrorKind::Busy,
        HostError::Timeout { .. } => CallErrorKind::Timeout,
        HostError::MemoryExceeded { .. } => CallErrorKind::Memory,
        HostError::Trap { .. } => CallErrorKind::Trap,
        HostError::Contract { .. } => CallErrorKind::Contract,
        _ => CallErrorKind::Guest,
    };
    CallError {
        kind,
        message: e.to_string(),
    }
}
