//! What Produce checks of every batch before it is appended, as Kafka's LogValidator does.
//!
//! The storage engine checks each batch's header, CRC-32C, record count and, for an
//! uncompressed batch, every record (fused with the CRC, see `sluice_storage::batch`). What
//! it cannot do without a codec is done here, before the append:
//! - a control batch (COMMIT/ABORT markers) is written by the broker only: a client's is
//!   INVALID_RECORD;
//! - a compressed batch is checked (CRC first, so garbage is not decompressed), inflated
//!   into a per-thread buffer under [`PRODUCE_DECOMPRESSED_BYTES_MAX`], and every record in
//!   it walked by the same `validate_records` as an uncompressed batch's: `recordsCount`
//!   and `lastOffsetDelta` must match the records actually present, so a small batch cannot
//!   move a partition's next offset past the records it holds.
//!
//! - a batch for a compacted topic (`cleanup.policy` compact) must key every record
//!   (INVALID_RECORD, Kafka's "Compacted topic cannot accept message without key").
//!
//! Nothing is re-encoded: the stored bytes stay the client's, so uncompressed fetches keep
//! going out with sendfile. A refused batch fails its partition only (the rest of the
//! request goes on), with `record_errors` naming the record where one is to blame.

use std::cell::RefCell;

use sluice_storage::batch::{self, HEADER_BYTES, iter_batches};
use sluice_storage::{BatchError, Compression};

use crate::error::KafkaError;
use crate::limits::{PRODUCE_DECOMPRESSED_BYTES_MAX, PRODUCE_SCRATCH_KEPT_BYTES_MAX};
use kafka_protocol::ResponseError;

thread_local! {
    /// Decompressed records of the batch being checked. Kept between batches (one per
    /// blocking thread), shrunk after a batch larger than `PRODUCE_SCRATCH_KEPT_BYTES_MAX`.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Kafka's words for a keyless record sent to a compacted topic.
const KEYLESS: &str = "Compacted topic cannot accept message without key";

fn keyless(index: i32) -> KafkaError {
    KafkaError::new(ResponseError::InvalidRecord, KEYLESS).with_record_error(index, KEYLESS)
}

/// Checks the record batches of one partition of a Produce request; `compacted`: the
/// topic's `cleanup.policy` compacts, so every record needs a key.
pub fn produced(records: &[u8], compacted: bool) -> Result<(), KafkaError> {
    for item in iter_batches(records) {
        let (header, bytes) = item.map_err(|e| KafkaError::from_batch("record batch", &e))?;
        if header.is_control() {
            return Err(KafkaError::new(
                ResponseError::InvalidRecord,
                "control batches (transaction markers) are written by the broker, not by clients",
            ));
        }
        match header.compression() {
            // The storage engine walks these fused with the CRC, at append.
            Compression::None | Compression::Unknown(_) => {
                let keyless_at = compacted
                    .then(|| {
                        let body = &bytes[HEADER_BYTES.min(bytes.len())..];
                        sluice_storage::record::first_keyless_record(body, header.records_count)
                    })
                    .flatten();
                if let Some(index) = keyless_at {
                    return Err(keyless(index));
                }
            }
            codec => compressed(codec, bytes, compacted).map_err(|e| match e {
                Refused::Batch(e) => KafkaError::from_batch("compressed record batch", &e),
                Refused::Kafka(e) => e,
            })?,
        }
    }
    Ok(())
}

enum Refused {
    Batch(BatchError),
    Kafka(KafkaError),
}

impl From<BatchError> for Refused {
    fn from(e: BatchError) -> Self {
        Self::Batch(e)
    }
}

fn compressed(codec: Compression, bytes: &[u8], compacted: bool) -> Result<(), Refused> {
    let header = batch::validate(bytes)?; // length, CRC, recordsCount vs lastOffsetDelta
    SCRATCH.with_borrow_mut(|scratch| {
        let limit = PRODUCE_DECOMPRESSED_BYTES_MAX;
        let inflated = crate::codec::decompress_into(codec, &bytes[HEADER_BYTES..], limit, scratch);
        let result = match inflated {
            Ok(true) => sluice_storage::validate_records(scratch, header.records_count)
                .map_err(Refused::Batch)
                .and_then(|()| {
                    let at = compacted
                        .then(|| {
                            sluice_storage::record::first_keyless_record(
                                scratch,
                                header.records_count,
                            )
                        })
                        .flatten();
                    at.map_or(Ok(()), |index| Err(Refused::Kafka(keyless(index))))
                }),
            Ok(false) => Err(Refused::Kafka(KafkaError::new(
                ResponseError::InvalidRecord,
                format!(
                    "{codec:?} batch decompresses to more than PRODUCE_DECOMPRESSED_BYTES_MAX \
                     ({limit} bytes)"
                ),
            ))),
            Err(e) => Err(Refused::Kafka(KafkaError::new(
                ResponseError::CorruptMessage,
                format!("{codec:?} batch payload does not decompress: {e}"),
            ))),
        };
        if scratch.capacity() > PRODUCE_SCRATCH_KEPT_BYTES_MAX {
            *scratch = Vec::new();
        }
        result
    })
}

#[cfg(test)]
mod tests {
    //! The validator against kafka-protocol's own batch encoder, for every codec, and the
    //! hostile batches the issue lists: counts that lie, garbage payloads, control batches,
    //! decompression bombs.
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression as KCompression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    use sluice_storage::batch::pos;

    const CODECS: [KCompression; 5] = [
        KCompression::None,
        KCompression::Gzip,
        KCompression::Snappy,
        KCompression::Lz4,
        KCompression::Zstd,
    ];

    fn record(i: i64, value: Vec<u8>) -> Record {
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: -1,
            timestamp: 1_700_000_000_000 + i,
            key: Some(bytes::Bytes::from(format!("key-{i}"))),
            value: Some(value.into()),
            headers: Default::default(),
            delete_horizon: false,
        }
    }

    fn encode(records: &[Record], compression: KCompression) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
        // The first batch only: the encoder may leave more after it.
        let total = batch::parse_header(&buf).unwrap().total_bytes();
        buf[..total].to_vec()
    }

    fn batch(compression: KCompression) -> Vec<u8> {
        let records: Vec<Record> = (0..3).map(|i| record(i, vec![b'v'; 50])).collect();
        encode(&records, compression)
    }

    #[test]
    fn a_compacted_topic_refuses_keyless_records_of_every_codec() {
        for codec in CODECS {
            assert!(produced(&batch(codec), true).is_ok(), "{codec:?}");
            let mut records: Vec<Record> = (0..3).map(|i| record(i, vec![b'v'; 50])).collect();
            records[0].key = None; // (the encoder may put each record in its own batch)
            let keyless = encode(&records, codec);
            assert!(produced(&keyless, false).is_ok(), "{codec:?}");
            let e = produced(&keyless, true).expect_err(&format!("{codec:?}"));
            assert_eq!(e.code, ResponseError::InvalidRecord, "{codec:?}");
            assert!(e.message.contains("without key"), "{}", e.message);
            assert_eq!(e.record_errors[0].0, 0, "{codec:?}");
        }
    }

    fn set_i32(batch: &mut [u8], at: usize, v: i32) {
        batch[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }

    fn recrc(batch: &mut [u8]) {
        let crc = batch::compute_crc(batch);
        batch[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }

    #[test]
    fn real_batches_of_every_codec_pass() {
        for codec in CODECS {
            assert!(produced(&batch(codec), false).is_ok(), "{codec:?}");
        }
        let two = [batch(KCompression::Gzip), batch(KCompression::Zstd)].concat();
        assert!(produced(&two, false).is_ok());
    }

    #[test]
    fn a_compressed_count_that_lies_is_refused() {
        for codec in &CODECS[1..] {
            for claimed in [2, 4, i32::MAX] {
                let mut lying = batch(*codec);
                set_i32(&mut lying, pos::RECORDS_COUNT, claimed);
                set_i32(&mut lying, pos::LAST_OFFSET_DELTA, claimed - 1);
                recrc(&mut lying);
                let e = produced(&lying, false).unwrap_err();
                assert_eq!(
                    e.code,
                    ResponseError::InvalidRecord,
                    "{codec:?} {claimed} {}",
                    e.message
                );
                assert!(e.message.contains("claims"), "{}", e.message);
            }
        }
    }

    #[test]
    fn a_garbage_payload_is_corrupt() {
        let mut garbage = batch(KCompression::Gzip);
        garbage.truncate(HEADER_BYTES);
        garbage.extend((0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        let batch_length = (garbage.len() - 12) as i32;
        set_i32(&mut garbage, pos::BATCH_LENGTH, batch_length);
        recrc(&mut garbage);
        let e = produced(&garbage, false).unwrap_err();
        assert_eq!(e.code, ResponseError::CorruptMessage, "{}", e.message);
        // The same bytes with a stale CRC are refused before any decompression.
        let mut stale = garbage.clone();
        stale[pos::CRC] ^= 1;
        assert!(produced(&stale, false).unwrap_err().message.contains("CRC"));
    }

    #[test]
    fn a_malformed_record_inside_a_compressed_batch_is_named() {
        let mut raw = batch(KCompression::None);
        // Record 0's body starts after its 1-byte length at 61: attributes, timestampDelta
        // (1 byte), offsetDelta (1 byte), then the key length; make the key run past it.
        raw[65] = 0x7e;
        let section = &raw[HEADER_BYTES..];
        let mut inflated = Vec::new();
        std::io::Write::write_all(
            &mut flate2::write::GzEncoder::new(&mut inflated, flate2::Compression::fast()),
            section,
        )
        .unwrap();
        let mut gz = batch(KCompression::Gzip);
        gz.truncate(HEADER_BYTES);
        gz.extend_from_slice(&inflated);
        let batch_length = (gz.len() - 12) as i32;
        set_i32(&mut gz, pos::BATCH_LENGTH, batch_length);
        recrc(&mut gz);
        let e = produced(&gz, false).unwrap_err();
        assert_eq!(e.code, ResponseError::InvalidRecord, "{}", e.message);
        assert_eq!(e.record_errors, vec![(0, "key".to_string())]);
    }

    #[test]
    fn a_client_control_batch_is_refused() {
        for codec in [KCompression::None, KCompression::Gzip] {
            let mut control = batch(codec);
            control[pos::ATTRIBUTES + 1] |= 0x20;
            recrc(&mut control);
            let e = produced(&control, false).unwrap_err();
            assert_eq!(e.code, ResponseError::InvalidRecord);
            assert!(e.message.contains("control"), "{}", e.message);
        }
    }

    #[test]
    fn a_decompression_bomb_names_the_limit() {
        let big = vec![0u8; PRODUCE_DECOMPRESSED_BYTES_MAX + 1024];
        let bomb = encode(&[record(0, big)], KCompression::Zstd);
        assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
        let e = produced(&bomb, false).unwrap_err();
        assert_eq!(e.code, ResponseError::InvalidRecord);
        assert!(
            e.message.contains("PRODUCE_DECOMPRESSED_BYTES_MAX"),
            "{}",
            e.message
        );
        SCRATCH.with_borrow(|s| assert!(s.capacity() <= PRODUCE_SCRATCH_KEPT_BYTES_MAX));
    }
}
