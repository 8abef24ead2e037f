//! Fuzz entry point for the checks the host applies to what a guest returns (the
//! `guest_columns` target in `tests/fuzz/`, replayed by the server's `tests/fuzz_corpus.rs`).
//! Not an API: hidden from the docs, for the fuzz targets and their corpus replay only.
//!
//! An input is a guest's answer in a compact form ([`encode_columns`] writes it): a selector
//! byte (the input batch's record count and a partition count), then the eleven columns of
//! a WIT `record-batch`, each as a one-byte element count and the elements (little-endian).
//! A column cut short is empty. The same columns are then checked as a transform's output
//! (`check_shape`, then read back with `records()` and `select`, placed against an input
//! batch as a view does, and routed to outputs as a materialized transform does), a filter's keep bitmap, and a partitioner's answer: whatever the bytes, every
//! check returns an error value or columns that read back without a panic.

use sluice_kafka::bytes::Reader;

use crate::batch::ColumnarBatch;
use crate::bindings::RecordBatch;

/// Elements of one column in an input (one count byte).
const COLUMN_ELEMENTS_MAX: usize = u8::MAX as usize;

/// Runs every check on guest columns decoded from `data`; never panics.
pub fn guest_columns(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let columns = decode_columns(rest);
    let input_records = usize::from(selector & 0x0f);
    let partition_count = u32::from(selector >> 4);
    let input = input_batch(input_records);
    let _ = crate::filter::keep_mask(&columns.key_nulls, input_records);
    validator_answer(&columns, input_records);
    let _ = crate::partitioner::check_partitions(&columns.key_ends, input_records, partition_count);
    if let Ok(batch) = ColumnarBatch::from_guest(columns.clone()) {
        read_back(&batch);
    }
    routed(&input, &columns, partition_count);
    if let Ok(placed) = crate::transform::place(&input, columns) {
        read_back(&placed);
        assert_eq!(
            placed
                .offsets()
                .iter()
                .filter(|o| !input.offsets().contains(o))
                .count(),
            0,
            "a placed record has an offset its input does not"
        );
    }
}

/// The columns routed as a materialized transform's output to `outputs` outputs (named
/// `o0`, `o1`, ...): every record gets an output that exists, an offset its input has, in
/// input order, and no routing header.
fn routed(input: &ColumnarBatch, columns: &RecordBatch, outputs: u32) {
    let names: Vec<String> = (0..outputs).map(|i| format!("o{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let Ok(routed) = crate::transform::route_for_fuzz(input, columns.clone(), &names) else {
        return;
    };
    read_back(&routed.batch);
    assert_eq!(
        routed.outputs.len(),
        routed.batch.len(),
        "one output per record"
    );
    assert!(
        routed.outputs.iter().all(|&o| o < outputs),
        "an output that exists"
    );
    assert!(
        routed.batch.offsets().windows(2).all(|w| w[0] <= w[1])
            && routed
                .batch
                .offsets()
                .iter()
                .all(|o| input.offsets().contains(o)),
        "input offsets, in input order"
    );
    assert!(
        routed
            .batch
            .records()
            .all(|r| r.header(sluice_columns::output::OUTPUT_HEADER).is_none()),
        "no routing header left"
    );
}

/// The columns read as a validator's refusals (indexes from `key_ends`, reasons cut from
/// `value_bytes`): a checked answer names records of the batch, in increasing order.
fn validator_answer(columns: &RecordBatch, records: usize) {
    let rejections = columns
        .key_ends
        .iter()
        .zip(
            columns
                .value_bytes
                .chunks(3)
                .chain(std::iter::repeat(&[][..])),
        )
        .map(|(&index, reason)| crate::bindings::Rejection {
            index,
            reason: String::from_utf8_lossy(reason).into_owned(),
        })
        .collect();
    if let Ok(refusals) = crate::validator::check_rejections(rejections, records) {
        assert!(
            refusals.windows(2).all(|w| w[0].index < w[1].index)
                && refusals.iter().all(|r| (r.index as usize) < records),
            "a checked answer names records of the batch, in order"
        );
    }
}

/// An uploaded plugin's bytes through the install-time checks that read them before
/// anything is compiled (`check.rs`: the shape against the limits, and the import names;
/// `wasi.rs`: the imports against what the host links); never panics.
pub fn plugin_component(data: &[u8]) {
    if let Ok(imports) = crate::check::check_component(data) {
        assert!(
            imports.len() <= crate::limits::PLUGIN_IMPORTS_PER_COMPONENT_MAX as usize,
            "the import list is bounded"
        );
        let _ = crate::wasi::check_imports(&imports);
    }
}

/// Components for the `plugin_component` corpus: one instantiating an empty core module
/// `instances` times, and one importing `import` (an empty instance type).
#[must_use]
pub fn component_seeds(instances: u8, import: &str) -> Vec<(String, Vec<u8>)> {
    const HEADER: &[u8] = b"\0asm\x0d\0\x01\0";
    let section = |id: u8, content: &[u8]| {
        let mut out = vec![id, content.len() as u8];
        out.extend_from_slice(content);
        out
    };
    let module = b"\0asm\x01\0\0\0";
    let mut modules = vec![1, module.len() as u8];
    modules.extend_from_slice(module);
    let mut instantiations = vec![instances];
    for _ in 0..instances {
        instantiations.extend_from_slice(&[0, 0, 0]);
    }
    let instantiating = [HEADER, &modules, &section(2, &instantiations)].concat();
    // An instance type with no declarations (type section: 0x42, 0 decls), imported as
    // `import` (import section: 0x00 plain name, the name, extern desc 0x05 instance of
    // type 0).
    let mut imports = vec![1, 0x00, import.len() as u8];
    imports.extend_from_slice(import.as_bytes());
    imports.extend_from_slice(&[0x05, 0x00]);
    let importing = [
        HEADER,
        &section(7, &[1, 0x42, 0x00]),
        &section(10, &imports),
    ]
    .concat();
    vec![
        (format!("instantiates-{instances}"), instantiating),
        (
            format!("imports-{}", import.replace([':', '/', '@'], "-")),
            importing,
        ),
    ]
}

/// Reads every record and header of checked columns, and selects every other record.
fn read_back(batch: &ColumnarBatch) {
    let mut records = 0;
    for record in batch.records() {
        records += 1;
        let bytes: usize = record
            .headers()
            .iter()
            .map(|(n, v)| n.len() + v.len())
            .sum();
        std::hint::black_box((record.key(), record.value(), bytes));
    }
    assert_eq!(records, batch.len(), "records() yields one view per record");
    let keep: Vec<bool> = (0..batch.len()).map(|i| i % 2 == 0).collect();
    let kept = batch.select(&keep);
    assert_eq!(
        kept.len(),
        batch.len().div_ceil(2),
        "select keeps the marked records"
    );
}

/// An input batch of `records` records, as the host would send one.
fn input_batch(records: usize) -> ColumnarBatch {
    let mut batch = ColumnarBatch::new();
    for i in 0..records as i64 {
        batch.push(
            100 + i,
            1_700_000_000_000 + i,
            Some(b"key"),
            Some(b"value"),
            &[(b"h", b"v")],
        );
    }
    batch
}

/// Reads the eleven columns of a `record-batch` from `data` (see the module doc).
fn decode_columns(data: &[u8]) -> RecordBatch {
    let r = &mut Reader::new(data);
    RecordBatch {
        offsets: list(r, i64::from_le_bytes),
        timestamps: list(r, i64::from_le_bytes),
        key_bytes: list(r, |[b]| b),
        key_ends: list(r, u32::from_le_bytes),
        key_nulls: list(r, |[b]| b),
        value_bytes: list(r, |[b]| b),
        value_ends: list(r, u32::from_le_bytes),
        value_nulls: list(r, |[b]| b),
        header_counts: list(r, u32::from_le_bytes),
        header_bytes: list(r, |[b]| b),
        header_ends: list(r, u32::from_le_bytes),
    }
}

/// One column: a count byte, then up to that many `N`-byte elements; a column cut short
/// keeps the elements that are whole (the bytes of a partial one are left for the next).
fn list<const N: usize, T>(r: &mut Reader<'_>, element: impl Fn([u8; N]) -> T) -> Vec<T> {
    let Ok(count) = r.u8("element count") else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let Ok(bytes) = r.array::<N>("element") else {
            break;
        };
        out.push(element(bytes));
    }
    out
}

/// Writes `batch`'s columns in the input form, after `selector` (for seeding the corpus
/// with real batches). Columns longer than the form allows are cut.
#[must_use]
pub fn encode_columns(selector: u8, batch: &ColumnarBatch) -> Vec<u8> {
    fn list<T: Copy, const N: usize>(out: &mut Vec<u8>, items: &[T], bytes: impl Fn(T) -> [u8; N]) {
        let items = &items[..items.len().min(COLUMN_ELEMENTS_MAX)];
        out.push(items.len() as u8);
        for &item in items {
            out.extend_from_slice(&bytes(item));
        }
    }
    let c = &batch.columns;
    let mut out = vec![selector];
    list(&mut out, &c.offsets, i64::to_le_bytes);
    list(&mut out, &c.timestamps, i64::to_le_bytes);
    list(&mut out, &c.key_bytes, |b| [b]);
    list(&mut out, &c.key_ends, u32::to_le_bytes);
    list(&mut out, &c.key_nulls, |b| [b]);
    list(&mut out, &c.value_bytes, |b| [b]);
    list(&mut out, &c.value_ends, u32::to_le_bytes);
    list(&mut out, &c.value_nulls, |b| [b]);
    list(&mut out, &c.header_counts, u32::to_le_bytes);
    list(&mut out, &c.header_bytes, |b| [b]);
    list(&mut out, &c.header_ends, u32::to_le_bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_batch_survives_the_input_form() {
        let mut batch = ColumnarBatch::new();
        batch.push(0, 5, Some(b"k"), None, &[(b"a", b"b")]);
        batch.push(1, 6, None, Some(b"v"), &[]);
        let encoded = encode_columns(0x32, &batch);
        let decoded = decode_columns(&encoded[1..]);
        assert!(crate::columns::check_shape(&decoded).is_ok());
        assert_eq!(decoded.offsets, batch.columns.offsets);
        assert_eq!(decoded.header_ends, batch.columns.header_ends);
        guest_columns(&encoded);
    }

    /// The corpus seed `seed-routed-output`: records routed by index and by name to two of
    /// three outputs (selector 0x33: an input of 3 records, 3 outputs).
    #[test]
    fn a_routed_output_is_checked_and_loses_its_header() {
        let mut batch = ColumnarBatch::new();
        let h = sluice_columns::output::OUTPUT_HEADER.as_bytes();
        batch.push(0, 5, Some(b"k"), None, &[(h, b"2")]);
        batch.push(0, 6, None, Some(b"v"), &[(b"a", b"b"), (h, b"o1")]);
        batch.push(2, -1, None, Some(b"w"), &[]);
        let encoded = encode_columns(0x33, &batch);
        let decoded = decode_columns(&encoded[1..]);
        let routed =
            crate::transform::route_for_fuzz(&input_batch(3), decoded, &["o0", "o1", "o2"])
                .unwrap();
        assert_eq!(routed.outputs, [2, 1, 0]);
        guest_columns(&encoded);
        let seed = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fuzz/corpus/guest_columns/seed-routed-output"
        );
        if std::env::var_os("SLUICE_WRITE_SEEDS").is_some() {
            std::fs::write(seed, &encoded).unwrap();
        }
        assert_eq!(
            std::fs::read(seed).ok().as_deref(),
            Some(&encoded[..]),
            "{seed} is current"
        );
    }
}
