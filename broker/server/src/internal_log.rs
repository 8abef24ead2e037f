//! The broker's internal logs (committed offsets, security state) are storage `Log`s of
//! uncompressed RecordBatch v2 batches whose records the broker writes itself. This module
//! is their one codec: records to batches of bounded size, and the batches of one read back
//! to records, checked by the storage validator first, so a damaged file is an error rather
//! than an allocation from a count it claims.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use sluice_storage::{Log, Offset};

use crate::limits;

/// Encodes `(key, value)` records as batches of at most `OFFSETS_RECORDS_PER_BATCH_MAX`
/// records and about `OFFSETS_BATCH_BYTES_TARGET` bytes, stamped `now_ms`.
pub(crate) fn encode(records: &[(Bytes, Option<Bytes>)], now_ms: i64) -> Result<Vec<u8>, String> {
    let mut out = BytesMut::new();
    let mut batch: Vec<Record> = Vec::new();
    let mut batch_bytes = 0usize;
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let flush = |batch: &mut Vec<Record>, out: &mut BytesMut| -> Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        RecordBatchEncoder::encode(out, batch.iter(), &options).map_err(|e| e.to_string())?;
        batch.clear();
        Ok(())
    };
    for (key, value) in records {
        batch_bytes += key.len() + value.as_ref().map_or(0, Bytes::len);
        batch.push(record(
            i64::try_from(batch.len()).unwrap_or(0),
            now_ms,
            key.clone(),
            value.clone(),
        ));
        if batch.len() >= limits::OFFSETS_RECORDS_PER_BATCH_MAX
            || batch_bytes >= limits::OFFSETS_BATCH_BYTES_TARGET
        {
            flush(&mut batch, &mut out)?;
            batch_bytes = 0;
        }
    }
    flush(&mut batch, &mut out)?;
    Ok(out.to_vec())
}

fn record(offset: i64, timestamp: i64, key: Bytes, value: Option<Bytes>) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp,
        key: Some(key),
        value,
        headers: IndexMap::new(),
    }
}

/// The records of one read of an internal log (whole batches). Every batch is validated
/// (CRC, each record present and well formed) and must be uncompressed before
/// kafka-protocol decodes it (its decoder reserves from each batch's recordsCount).
pub(crate) fn decode(bytes: Vec<u8>) -> Result<Vec<Record>, String> {
    for item in sluice_storage::batch::iter_batches(&bytes) {
        let header = item
            .and_then(|(_, batch)| sluice_storage::batch::validate(batch))
            .map_err(|e| e.to_string())?;
        if header.compression() != sluice_storage::Compression::None {
            return Err(format!(
                "a {:?} batch at offset {} (internal logs write none)",
                header.compression(),
                header.base_offset
            ));
        }
    }
    let mut buf = Bytes::from(bytes);
    let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| e.to_string())?;
    Ok(sets.into_iter().flat_map(|s| s.records).collect())
}

/// Every record of `log`, in order, read in chunks of `OFFSETS_READ_CHUNK_BYTES`; `decode_chunk`
/// turns each chunk's bytes into records (the offsets log's fuzz entry is its decoder).
pub(crate) fn read_all<T>(
    log: &Log,
    mut decode_chunk: impl FnMut(Vec<u8>, &mut Vec<T>) -> Result<Option<i64>, String>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    let mut from = log.log_start_offset();
    let end = log.log_end_offset();
    while from < end {
        let slice = log
            .read(from, limits::OFFSETS_READ_CHUNK_BYTES)
            .map_err(|e| e.to_string())?;
        if slice.is_empty() {
            break;
        }
        let bytes = slice.read_to_vec().map_err(|e| e.to_string())?;
        let Some(last) = decode_chunk(bytes, &mut out)? else {
            break;
        };
        let next = Offset(last.saturating_add(1));
        if next <= from {
            break;
        }
        from = next;
    }
    Ok(out)
}
