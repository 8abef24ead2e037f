//! What the attribute macros expand to. Not an API: names here may change
//! in any release.

use std::cell::RefCell;
use std::thread::LocalKey;

use crate::batch::{Batch, BatchBuilder, Columns, Record};
use crate::params::{Error, Init, Params};
use crate::transform::Output;

/// Lends the generated `record-batch` as columns, in the code the attribute macros write.
pub use sluice_columns::columns;

/// Where a plugin instance keeps its state between calls. A wasm instance
/// is single-threaded, so a thread-local is one slot per instance.
pub type StateSlot<S> = LocalKey<RefCell<Option<S>>>;

/// `init`: build the state from the parameters and keep it.
///
/// # Errors
/// Whatever `S::init` rejects.
pub fn init<S: Init + 'static>(
    slot: &'static StateSlot<S>,
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<(), Error> {
    let state = S::init(&Params::new(pairs))?;
    slot.with(|cell| *cell.borrow_mut() = Some(state));
    Ok(())
}

fn with_state<S: 'static, T>(
    slot: &'static StateSlot<S>,
    f: impl FnOnce(&mut S) -> Result<T, Error>,
) -> Result<T, Error> {
    slot.with(|cell| {
        let mut cell = cell.borrow_mut();
        let state = cell
            .as_mut()
            .ok_or_else(|| Error::failed("called before init"))?;
        f(state)
    })
}

/// `partition`: one partition per record, each checked against the count.
///
/// # Errors
/// A malformed batch, a zero partition count, or a partition out of range.
pub fn partition<S: 'static>(
    slot: &'static StateSlot<S>,
    columns: Columns<'_>,
    partition_count: u32,
    f: impl Fn(&mut S, &Record<'_>, u32) -> u32,
) -> Result<Vec<u32>, Error> {
    if partition_count == 0 {
        return Err(Error::failed("partition count is 0"));
    }
    let batch = Batch::new(columns)?;
    with_state(slot, |state| {
        let mut partitions = Vec::with_capacity(batch.len());
        for (i, record) in batch.iter().enumerate() {
            let p = f(state, &record, partition_count);
            if p >= partition_count {
                return Err(Error::failed(format!(
                    "partitioner returned partition {p} for record {i}, but there are {partition_count} partitions"
                )));
            }
            partitions.push(p);
        }
        Ok(partitions)
    })
}

/// `filter`: a keep bitmap.
///
/// # Errors
/// A malformed batch.
pub fn filter<S: 'static>(
    slot: &'static StateSlot<S>,
    columns: Columns<'_>,
    f: impl Fn(&mut S, &Record<'_>) -> bool,
) -> Result<Vec<u8>, Error> {
    let batch = Batch::new(columns)?;
    with_state(slot, |state| {
        let mut keep = vec![0u8; batch.len().div_ceil(8)];
        for (i, record) in batch.iter().enumerate() {
            if f(state, &record) {
                keep[i / 8] |= 1 << (i % 8);
            }
        }
        Ok(keep)
    })
}

/// `transform`: the output batch.
///
/// # Errors
/// A malformed batch.
pub fn transform<S: 'static>(
    slot: &'static StateSlot<S>,
    columns: Columns<'_>,
    f: impl Fn(&mut S, &Record<'_>, &mut Output),
) -> Result<BatchBuilder, Error> {
    let batch = Batch::new(columns)?;
    with_state(slot, |state| {
        let mut out = Output::new();
        for (i, record) in batch.iter().enumerate() {
            out.begin(i);
            f(state, &record, &mut out);
        }
        Ok(out.into_builder())
    })
}

/// `validate`: the refused records, in order, each with its reason.
///
/// # Errors
/// A malformed batch.
pub fn validate<S: 'static>(
    slot: &'static StateSlot<S>,
    columns: Columns<'_>,
    f: impl Fn(&mut S, &Record<'_>) -> Result<(), String>,
) -> Result<Vec<(u32, String)>, Error> {
    let batch = Batch::new(columns)?;
    with_state(slot, |state| {
        Ok(batch
            .iter()
            .enumerate()
            .filter_map(|(i, record)| f(state, &record).err().map(|reason| (i as u32, reason)))
            .collect())
    })
}
