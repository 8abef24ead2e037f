//! The record codec against kafka-protocol's own batch encoder and decoder: a batch split
//! into subsets (re-routing) or thinned out at its original offsets (views) decodes to the
//! same records, for every codec.

use bytes::BytesMut;
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression as KCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use sluice_plugin_host::ColumnarBatch;

use super::{
    DecompressLimit, ProducerFields, decode, empty_batch, encode_kept, encode_produced,
    encode_renumbered,
};

const LIMIT: DecompressLimit = DecompressLimit {
    bytes: 1 << 26,
    name: "TEST_LIMIT",
};

fn record(i: i64) -> Record {
    let mut headers = IndexMap::new();
    headers.insert("h".into(), Some(bytes::Bytes::from(format!("hv{i}"))));
    Record {
        transactional: false,
        control: false,
        partition_leader_epoch: 0,
        producer_id: 7,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: i,
        sequence: i as i32,
        timestamp: 1_700_000_000_000 + i * 1000,
        key: (i % 3 != 0).then(|| bytes::Bytes::from(format!("key-{i}"))),
        value: Some(bytes::Bytes::from(vec![b'v'; 200 + i as usize])),
        headers,
        delete_horizon: false,
    }
}

fn batch(compression: KCompression) -> Vec<u8> {
    let records: Vec<Record> = (0..300).map(record).collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.to_vec()
}

#[test]
fn a_split_batch_keeps_every_record_for_every_codec() {
    for compression in [
        KCompression::None,
        KCompression::Gzip,
        KCompression::Snappy,
        KCompression::Lz4,
        KCompression::Zstd,
    ] {
        let bytes = batch(compression);
        let mut columns = ColumnarBatch::new();
        let decoded = decode(&bytes, &mut columns, LIMIT).unwrap();
        assert_eq!(decoded.len(), 300);
        assert_eq!(columns.len(), 300);
        let odd: Vec<u32> = (0..300).filter(|i| i % 2 == 1).collect();
        let out = encode_renumbered(&decoded, &odd).unwrap();
        let set = RecordBatchDecoder::decode(&mut bytes::Bytes::from(out)).unwrap();
        assert_eq!(set.compression, compression, "codec kept");
        assert_eq!(set.records.len(), odd.len());
        for (n, (got, &i)) in set.records.iter().zip(&odd).enumerate() {
            let want = record(i64::from(i));
            assert_eq!(got.offset, n as i64, "offsets renumbered");
            assert_eq!(got.key, want.key);
            assert_eq!(got.value, want.value);
            assert_eq!(got.timestamp, want.timestamp);
            assert_eq!(got.headers, want.headers);
            assert_eq!(got.producer_id, -1, "written non-idempotent");
        }
    }
}

#[test]
fn a_damaged_batch_is_refused() {
    let mut bytes = batch(KCompression::None);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let err = decode(&bytes, &mut ColumnarBatch::new(), LIMIT).unwrap_err();
    assert!(
        err.to_string().contains("CRC") || err.to_string().contains("crc"),
        "{err}"
    );
}

/// The batch as stored at `base_offset` (the storage engine assigns it on append).
fn stored(compression: KCompression, base_offset: i64) -> Vec<u8> {
    let mut bytes = batch(compression);
    sluice_storage::batch::set_base_offset(&mut bytes, base_offset);
    bytes
}

#[test]
fn kept_records_keep_their_offsets_and_the_batch_its_range() {
    for compression in [KCompression::None, KCompression::Gzip, KCompression::Zstd] {
        let bytes = stored(compression, 1000);
        let mut columns = ColumnarBatch::new();
        let decoded = decode(&bytes, &mut columns, LIMIT).unwrap();
        assert_eq!(columns.offsets()[0], 1000, "absolute offsets");
        let keep: Vec<bool> = (0..300).map(|i| i % 10 == 3).collect();
        let out = encode_kept(&decoded.header, &columns.select(&keep)).unwrap();
        let header = sluice_storage::batch::parse_header(&out).unwrap();
        assert_eq!(header.base_offset, 1000);
        assert_eq!(
            header.last_offset(),
            1299,
            "range kept, so consumers move past it"
        );
        assert_eq!(header.records_count, 30);
        assert_eq!(header.producer_id, 7, "producer fields kept");
        sluice_storage::batch::verify_crc(&out).unwrap();
        let set = RecordBatchDecoder::decode(&mut bytes::Bytes::from(out)).unwrap();
        assert_eq!(set.compression, compression, "codec kept");
        for (got, i) in set.records.iter().zip((0..300).filter(|i| i % 10 == 3)) {
            let want = record(i);
            assert_eq!(got.offset, 1000 + i, "original offset");
            assert_eq!(
                (got.timestamp, &got.key, &got.value, &got.headers),
                (want.timestamp, &want.key, &want.value, &want.headers)
            );
        }
    }
}

#[test]
fn nothing_kept_is_an_uncompressed_empty_batch_over_the_range() {
    let bytes = stored(KCompression::Lz4, 50);
    let mut columns = ColumnarBatch::new();
    let decoded = decode(&bytes, &mut columns, LIMIT).unwrap();
    let out = encode_kept(&decoded.header, &ColumnarBatch::new()).unwrap();
    let header = sluice_storage::batch::parse_header(&out).unwrap();
    assert_eq!(
        (
            header.base_offset,
            header.last_offset(),
            header.records_count
        ),
        (50, 349, 0)
    );
    assert_eq!(header.compression(), sluice_storage::Compression::None);
    assert_eq!(out.len(), sluice_storage::batch::HEADER_BYTES);
    sluice_storage::batch::verify_crc(&out).unwrap();
    let wider = empty_batch(&decoded.header, 999);
    assert_eq!(
        sluice_storage::batch::parse_header(&wider)
            .unwrap()
            .last_offset(),
        999
    );
}

#[test]
fn a_decompression_bomb_names_the_limit() {
    let bytes = batch(KCompression::Gzip);
    let small = DecompressLimit {
        bytes: 1000,
        name: "SMALL_LIMIT",
    };
    let err = decode(&bytes, &mut ColumnarBatch::new(), small).unwrap_err();
    assert!(
        err.to_string().contains("SMALL_LIMIT (1000 bytes)"),
        "{err}"
    );
}

#[test]
fn a_produced_batch_carries_the_producer_and_the_chosen_codec() {
    let source = stored(KCompression::Snappy, 4000);
    let mut columns = ColumnarBatch::new();
    decode(&source, &mut columns, LIMIT).unwrap();
    let producer = ProducerFields {
        producer_id: 42,
        producer_epoch: 3,
        base_sequence: 17,
        transactional: true,
    };
    let indices = [5usize, 6, 90, 299];
    let all: Vec<_> = columns.records().collect();
    let picked: Vec<_> = indices.iter().map(|&i| all[i]).collect();
    for (codec, kcodec) in [
        (sluice_storage::Compression::None, KCompression::None),
        (sluice_storage::Compression::Gzip, KCompression::Gzip),
        (sluice_storage::Compression::Lz4, KCompression::Lz4),
        (sluice_storage::Compression::Zstd, KCompression::Zstd),
    ] {
        let out = encode_produced(&picked, producer, codec).unwrap();
        let header = sluice_storage::batch::validate(&out).unwrap();
        assert_eq!(
            (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence
            ),
            (42, 3, 17)
        );
        assert!(header.is_transactional() && !header.is_control());
        assert_eq!((header.base_offset, header.last_offset_delta), (0, 3));
        let set = RecordBatchDecoder::decode(&mut bytes::Bytes::from(out)).unwrap();
        assert_eq!(set.compression, kcodec);
        for (n, (got, &i)) in set.records.iter().zip(&indices).enumerate() {
            let want = record(i as i64);
            assert_eq!(got.offset, n as i64);
            assert!(got.transactional);
            assert_eq!(got.sequence, 17 + n as i32);
            assert_eq!(
                (got.timestamp, &got.key, &got.value, &got.headers),
                (want.timestamp, &want.key, &want.value, &want.headers)
            );
        }
    }
}
