//! The seed corpus of the fuzz targets, built from real encodings: the protocol crate's
//! request seeds (`sluice_protocol::fuzz::seeds`), record batches from the
//! client encoder in every codec and from the storage crate's builder, each codec's own
//! output, offsets records and log batches from the group crate and the offsets-log writer,
//! the JSON files the broker itself writes, admin API bodies as the CLI sends them, and
//! columns the host builds from a decoded batch.
//!
//! `cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus` writes them.

use std::collections::BTreeMap;
use std::io::Write;

use bytes::BytesMut;
use kafka_protocol::records::{Compression as Codec, RecordBatchEncoder, RecordEncodeOptions};
use sluice_group::api::TopicPartition;
use sluice_group::offsets::{CommittedOffset, OffsetRecord, RecordKey};
use sluice_plugin_host::ColumnarBatch;
use sluice_storage::testing::{TestRecord, build_batch};

/// One seed: the target it is for, a file name, the bytes (the protocol crate's type).
pub use sluice_protocol::fuzz::seeds::Seed;

/// Every seed of every target (the protocol crate's too, so one command writes the corpus).
#[must_use]
pub fn all() -> Vec<Seed> {
    let mut out = sluice_protocol::fuzz::seeds::all();
    out.extend(record_batches());
    out.extend(compressed());
    out.extend(offsets());
    out.extend(metadata_files());
    out.extend(admin_bodies());
    for (name, bytes) in crate::cluster::fuzz::seeds() {
        out.push(("cluster_frames", name, bytes));
    }
    out.push((
        "telemetry_otlp",
        "gauge-and-sum".to_owned(),
        crate::telemetry::otlp::sample(),
    ));
    out.extend(replicated());
    out.extend(guest_columns());
    out.extend(plugin_components());
    out
}

/// The protocol seeds' client records as kafka-protocol's producer side writes them, in
/// `codec`.
fn client_batch(codec: Codec) -> Vec<u8> {
    let records = sluice_protocol::fuzz::seeds::client_records();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: codec,
    };
    match RecordBatchEncoder::encode(&mut buf, records.iter(), &options) {
        Ok(()) => buf.to_vec(),
        Err(_) => Vec::new(),
    }
}

fn record_batches() -> Vec<Seed> {
    let mut out = Vec::new();
    for (name, codec) in [
        ("none", Codec::None),
        ("gzip", Codec::Gzip),
        ("snappy", Codec::Snappy),
        ("lz4", Codec::Lz4),
        ("zstd", Codec::Zstd),
    ] {
        out.push((
            "record_batch",
            format!("client-{name}"),
            client_batch(codec),
        ));
    }
    let records = [
        TestRecord::value(b"one"),
        TestRecord {
            key: Some(&b"k"[..]),
            value: None,
            timestamp_delta: 5,
            headers: vec![(&b"h"[..], Some(&b"v"[..])), (&b"n"[..], None)],
        },
    ];
    let stored = build_batch(1000, 1_700_000_000_000, &records);
    let mut two = stored.clone();
    two.extend_from_slice(&build_batch(1002, 1_700_000_000_010, &records[..1]));
    out.push(("record_batch", "storage-builder".into(), stored));
    out.push(("record_batch", "storage-two-batches".into(), two));
    out
}

/// Each codec's own output, behind the selector byte `decompress` reads.
fn compressed() -> Vec<Seed> {
    let data = b"records records records {\"id\":1} {\"id\":2} {\"id\":3} records records";
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gzip.write_all(data);
    let gzip = gzip.finish().unwrap_or_default();
    let raw_snappy = snap::raw::Encoder::new()
        .compress_vec(data)
        .unwrap_or_default();
    let mut xerial = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    xerial.extend_from_slice(&(raw_snappy.len() as u32).to_be_bytes());
    xerial.extend_from_slice(&raw_snappy);
    let lz4 = lz4::EncoderBuilder::new()
        .build(Vec::new())
        .and_then(|mut e| {
            e.write_all(data)?;
            let (out, result) = e.finish();
            result.map(|()| out)
        });
    let zstd = zstd::bulk::compress(data, 3).unwrap_or_default();
    [
        ("gzip", 0u8, gzip),
        ("snappy-raw", 1, raw_snappy),
        ("snappy-xerial", 1, xerial),
        ("lz4-frame", 2, lz4.unwrap_or_default()),
        ("zstd", 3, zstd),
    ]
    .into_iter()
    .map(|(name, selector, bytes)| {
        let mut input = vec![selector];
        input.extend_from_slice(&bytes);
        ("decompress", name.to_owned(), input)
    })
    .collect()
}

fn offsets() -> Vec<Seed> {
    let tp = TopicPartition {
        topic: "orders".into(),
        partition: 3,
    };
    let committed = OffsetRecord {
        key: RecordKey::Offset {
            group: "group-1".into(),
            tp: tp.clone(),
        },
        value: Some(CommittedOffset {
            offset: 42,
            leader_epoch: -1,
            metadata: "consumer meta".into(),
            commit_timestamp_ms: 1_700_000_000_000,
        }),
    };
    let tombstone = OffsetRecord::offset_tombstone("group-1", tp);
    let group_gone = OffsetRecord {
        key: RecordKey::Group {
            group: "group-2".into(),
        },
        value: None,
    };
    let mut out = Vec::new();
    for (name, record) in [
        ("commit", &committed),
        ("tombstone", &tombstone),
        ("group-tombstone", &group_gone),
    ] {
        let key = record.encode_key();
        let mut input = vec![0];
        input.extend_from_slice(&(key.len() as u16).to_be_bytes());
        input.extend_from_slice(&key);
        input.extend_from_slice(&record.encode_value().unwrap_or_default());
        out.push(("offsets_log", format!("record-{name}"), input));
    }
    let all = [&committed, &tombstone, &group_gone];
    if let Ok(log) = crate::group::offsets_log::encode_batches(&all, 1_700_000_000_000) {
        let mut input = vec![1];
        input.extend_from_slice(&log);
        out.push(("offsets_log", "log-batches".into(), input));
    }
    out
}

fn metadata_files() -> Vec<Seed> {
    let topic = crate::topics::TopicFile {
        name: "orders".into(),
        partitions: 3,
        configs: BTreeMap::from([
            ("retention.ms".to_owned(), "3600000".to_owned()),
            ("segment.bytes".to_owned(), "1048576".to_owned()),
            ("cleanup.policy".to_owned(), "delete".to_owned()),
        ]),
        topic_id: Some("5f0c3e7a-2b1d-4c8e-9a6f-0d4b7e2c1a93".into()),
    };
    let view = view_spec();
    let cluster = crate::data_dir::MetaFile {
        version: 1,
        cluster_id: "kS2yX1mZQ3ubWvE0n7pA9g".into(),
        node_id: 1,
        directory_id: "Qm9vTmV3RGlyZWN0b3J5SQ".into(),
    };
    let file = |selector: u8, text: String| {
        let mut input = vec![selector];
        input.extend_from_slice(text.as_bytes());
        input
    };
    vec![
        (
            "topic_metadata",
            "topic.json".into(),
            file(0, pretty(&topic)),
        ),
        ("topic_metadata", "view.json".into(), file(1, pretty(&view))),
        (
            "topic_metadata",
            "meta.json".into(),
            file(2, pretty(&cluster)),
        ),
    ]
}

fn view_spec() -> crate::views::ViewSpec {
    crate::views::ViewSpec {
        name: "orders-eu".into(),
        source: "orders".into(),
        stages: vec![crate::views::StageSpec {
            plugin: "json-field".into(),
            params: BTreeMap::from([("field".to_owned(), "region".to_owned())]),
            kind: Some("filter".into()),
        }],
        on_error: "skip".into(),
        ephemeral: false,
        owner: None,
        owner_host: None,
    }
}

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn admin_bodies() -> Vec<Seed> {
    let bodies = [
        ("create-topic", 0u8, r#"{"name": "orders", "partitions": 3, "configs": {"retention.ms": "3600000", "sluice.partitioner": "murmur2"}}"#.to_owned()),
        ("alter-topic", 1, r#"{"set": {"retention.ms": "7d", "segment.bytes": "100 MiB"}, "delete": ["segment.ms"]}"#.to_owned()),
        ("create-view", 2, serde_json::to_string(&view_spec()).unwrap_or_default()),
        ("deploy-transform", 3, r#"{"name": "orders-split", "source": "orders", "plugin": "split-transform", "outputs": ["orders-eu", "orders-us"], "params": {"field": "$.region", "value": "eu"}, "from_offset": "1764547200000ms", "on_error": "dead-letter", "dead_letter_topic": "orders-dlq"}"#.to_owned()),
        ("transform-spec", 4, r#"{"name": "orders-split", "source": "orders", "plugin": "split-transform", "params": [["field", "$.region"], ["value", "eu"]], "outputs": ["orders-eu", "orders-us"], "dead_letter_topic": null, "on_error": "stop", "partitioning": "key", "commit_interval_ms": 100, "from_offset": "earliest", "start_offsets": [0, 0, 0], "paused": false, "generation": 0, "principal": "User:ANONYMOUS", "created_ms": 1764547200000}"#.to_owned()),
    ];
    bodies
        .into_iter()
        .map(|(name, selector, body)| {
            let mut input = vec![selector];
            input.extend_from_slice(body.as_bytes());
            ("admin_json", name.to_owned(), input)
        })
        .collect()
}

/// Uploaded plugins, as the install-time checks read them before compiling: a component over
/// the core-instance limit, one within it, and ones importing what the host links and what
/// it refuses.
fn plugin_components() -> Vec<Seed> {
    use sluice_plugin_host::fuzz::component_seeds;
    use sluice_plugin_host::limits::PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX;
    let over = PLUGIN_CORE_INSTANCES_PER_COMPONENT_MAX as u8 + 1;
    [
        component_seeds(2, "wasi:cli/environment@0.2.9"),
        component_seeds(over, "wasi:http/outgoing-handler@0.2.0"),
    ]
    .into_iter()
    .flatten()
    .map(|(name, bytes)| ("plugin_component", name, bytes))
    .collect()
}

/// Columns as the host builds them from a real batch, in `guest_columns`' input form: as a
/// transform would echo them, and naming input records by index as a transform's output does.
fn guest_columns() -> Vec<Seed> {
    // kafka-protocol's encoder writes one batch per record here (their sequences are -1, so
    // not contiguous): the first batch is one real batch.
    let batches = client_batch(Codec::None);
    let first = batches.get(8..12).map_or(0, |l| {
        12 + i32::from_be_bytes([l[0], l[1], l[2], l[3]]).max(0) as usize
    });
    let batch = &batches[..first.min(batches.len())];
    let limit = crate::records::DecompressLimit {
        bytes: 1 << 20,
        name: "seed",
    };
    let mut columns = ColumnarBatch::new();
    if let Err(e) = crate::records::decode(batch, &mut columns, limit) {
        panic!("guest_columns seed: {e} ({} bytes)", batch.len());
    }
    let mut output = ColumnarBatch::new();
    for (index, record) in columns.records().enumerate() {
        let headers: Vec<_> = record.headers().iter().collect();
        output.push(
            index as i64,
            -1,
            record.key(),
            Some(b"{\"masked\":true}"),
            &headers,
        );
    }
    let encode = sluice_plugin_host::fuzz::encode_columns;
    vec![
        (
            "guest_columns",
            "decoded-batch".into(),
            encode(0x23, &columns),
        ),
        (
            "guest_columns",
            "transform-output".into(),
            encode(0x33, &output),
        ),
    ]
}

/// A leader's fetch answers as a follower appends them: contiguous batches from offset 0
/// (plain, an idempotent producer's, a transaction's with its commit marker).
fn replicated() -> Vec<Seed> {
    use sluice_storage::batch;
    use sluice_storage::testing::{build_value_batch, producer_batch};
    let at = |mut b: Vec<u8>, base: i64| {
        b[batch::pos::BASE_OFFSET..batch::pos::BASE_OFFSET + 8]
            .copy_from_slice(&base.to_be_bytes());
        b
    };
    let plain = build_value_batch(2, 16, 7, 1_000);
    let idempotent = at(producer_batch(7, 0, 0, 3, false), 2);
    let txn = at(producer_batch(9, 1, 0, 2, true), 5);
    let marker = at(batch::build_control_batch(9, 1, 1, 4, 2_000), 7);
    vec![
        ("replicated_append", "plain".to_owned(), plain.clone()),
        (
            "replicated_append",
            "plain-idempotent-transaction".to_owned(),
            [plain, idempotent, txn, marker].concat(),
        ),
    ]
}
