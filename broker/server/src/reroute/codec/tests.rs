//! The re-routing codec against kafka-protocol's own batch encoder and decoder: a batch
//! split into subsets decodes to the same records, for every codec.

use bytes::BytesMut;
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression as KCompression, Record, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use sluice_plugin_host::ColumnarBatch;

use super::{decode, encode};

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
        let bytes = bytes::Bytes::from(batch(compression));
        let mut columns = ColumnarBatch::new();
        let decoded = decode(&bytes, &mut columns).unwrap();
        assert_eq!(decoded.len(), 300);
        assert_eq!(columns.len(), 300);
        let odd: Vec<u32> = (0..300).filter(|i| i % 2 == 1).collect();
        let out = encode(&decoded, &odd).unwrap();
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
    let err = decode(&bytes::Bytes::from(bytes), &mut ColumnarBatch::new()).unwrap_err();
    assert!(
        err.to_string().contains("CRC") || err.to_string().contains("crc"),
        "{err}"
    );
}
