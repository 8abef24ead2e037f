//! Test support: builds valid uncompressed RecordBatch v2 bytes. Used by this crate's tests
//! and benchmarks and by the server's tests; not part of the stable API.

use crate::batch::{self, HEADER_BYTES, LOG_OVERHEAD_BYTES, MAGIC_V2, pos};
use crate::record::write_varlong;

/// One record to put in a test batch.
#[derive(Debug, Clone, Default)]
pub struct TestRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Added to the batch's base timestamp.
    pub timestamp_delta: i64,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

impl<'a> TestRecord<'a> {
    /// A record with just a value.
    #[must_use]
    pub fn value(value: &'a [u8]) -> Self {
        TestRecord {
            value: Some(value),
            ..TestRecord::default()
        }
    }
}

fn write_field(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => write_varlong(out, -1),
        Some(bytes) => {
            write_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

fn encode_record(out: &mut Vec<u8>, record: &TestRecord<'_>, offset_delta: i64) {
    let mut body = vec![0u8]; // attributes
    write_varlong(&mut body, record.timestamp_delta);
    write_varlong(&mut body, offset_delta);
    write_field(&mut body, record.key);
    write_field(&mut body, record.value);
    write_varlong(&mut body, record.headers.len() as i64);
    for (key, value) in &record.headers {
        write_field(&mut body, Some(key));
        write_field(&mut body, *value);
    }
    write_varlong(out, body.len() as i64);
    out.extend_from_slice(&body);
}

/// Builds one uncompressed batch (CreateTime, no producer id) with a valid CRC.
#[must_use]
pub fn build_batch(
    base_offset: i64,
    base_timestamp_ms: i64,
    records: &[TestRecord<'_>],
) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_BYTES];
    for (i, record) in records.iter().enumerate() {
        encode_record(&mut out, record, i as i64);
    }
    let max_delta = records.iter().map(|r| r.timestamp_delta).max().unwrap_or(0);
    let put = |out: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        out[at..at + bytes.len()].copy_from_slice(bytes)
    };
    let batch_length = (out.len() - LOG_OVERHEAD_BYTES) as i32;
    put(&mut out, pos::BASE_OFFSET, &base_offset.to_be_bytes());
    put(&mut out, pos::BATCH_LENGTH, &batch_length.to_be_bytes());
    put(
        &mut out,
        pos::PARTITION_LEADER_EPOCH,
        &(-1i32).to_be_bytes(),
    );
    out[pos::MAGIC] = MAGIC_V2 as u8;
    put(
        &mut out,
        pos::LAST_OFFSET_DELTA,
        &(records.len() as i32 - 1).to_be_bytes(),
    );
    put(
        &mut out,
        pos::BASE_TIMESTAMP,
        &base_timestamp_ms.to_be_bytes(),
    );
    put(
        &mut out,
        pos::MAX_TIMESTAMP,
        &(base_timestamp_ms + max_delta).to_be_bytes(),
    );
    put(&mut out, pos::PRODUCER_ID, &(-1i64).to_be_bytes());
    put(&mut out, pos::PRODUCER_EPOCH, &(-1i16).to_be_bytes());
    put(&mut out, pos::BASE_SEQUENCE, &(-1i32).to_be_bytes());
    put(
        &mut out,
        pos::RECORDS_COUNT,
        &(records.len() as i32).to_be_bytes(),
    );
    let crc = batch::compute_crc(&out);
    put(&mut out, pos::CRC, &crc.to_be_bytes());
    out
}

/// A batch of `count` records, each with a value of `value_bytes` bytes filled with `fill`.
#[must_use]
pub fn build_value_batch(
    count: usize,
    value_bytes: usize,
    fill: u8,
    base_timestamp_ms: i64,
) -> Vec<u8> {
    let value = vec![fill; value_bytes];
    let records: Vec<TestRecord<'_>> = (0..count).map(|_| TestRecord::value(&value)).collect();
    build_batch(0, base_timestamp_ms, &records)
}

/// Sets a batch's producer fields (id, epoch, base sequence, transactional bit) and
/// recomputes its CRC: an idempotent or transactional producer's batch.
pub fn set_producer(
    batch: &mut [u8],
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    transactional: bool,
) {
    batch[pos::PRODUCER_ID..pos::PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[pos::PRODUCER_EPOCH..pos::PRODUCER_EPOCH + 2].copy_from_slice(&epoch.to_be_bytes());
    batch[pos::BASE_SEQUENCE..pos::BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let mut attributes = i16::from_be_bytes([batch[pos::ATTRIBUTES], batch[pos::ATTRIBUTES + 1]]);
    if transactional {
        attributes |= batch::attr::TRANSACTIONAL;
    } else {
        attributes &= !batch::attr::TRANSACTIONAL;
    }
    batch[pos::ATTRIBUTES..pos::ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = batch::compute_crc(batch);
    batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A batch of `count` small records from `producer_id` at `epoch`, starting at `base_sequence`.
#[must_use]
pub fn producer_batch(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    count: usize,
    transactional: bool,
) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("v{base_sequence}-{i}").into_bytes())
        .collect();
    let records: Vec<TestRecord<'_>> = values.iter().map(|v| TestRecord::value(v)).collect();
    let mut out = build_batch(0, 1_000, &records);
    set_producer(&mut out, producer_id, epoch, base_sequence, transactional);
    out
}
