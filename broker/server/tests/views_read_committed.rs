//! A view under `isolation.level=read_committed`: over a source partition holding a
//! committed transaction, an aborted one (interleaved with the committed one) and an open
//! one, written straight into the log with `Log::append` and `Log::append_marker` (no
//! transaction coordinator serves yet), a Fetch of a view with a real plugin (json-filter,
//! built from `plugins/` by `sdk/build-plugins.sh`, or taken from `SLUICE_PLUGIN_WASM_DIR`)
//! checks that read_committed never shows aborted records (the view drops them before its
//! plugin; the batch goes out as an empty range), withholds everything at or after the
//! source's last stable offset, returns the source's LSO and aborted list, keeps producer
//! id, epoch, base sequence and the transactional flag on re-encoded batches and passes the
//! markers through; read_uncommitted shows every matching record.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use bytes::Bytes;
use common::{TestBroker, create_topic, name};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use kafka_protocol::records::RecordBatchDecoder;
use sluice_server::views::{StageSpec, ViewSpec};
use sluice_storage::batch::iter_batches;
use sluice_storage::testing::{TestRecord, build_batch, set_producer};
use sluice_storage::{Durability, Marker};

const SOURCE: &str = "orders";
const VIEW: &str = "orders-eu";
/// The producers of the committed, aborted and open transactions.
const COMMITTED: i64 = 100;
const ABORTED: i64 = 200;
const OPEN: i64 = 300;
const EPOCH: i16 = 2;

/// Where the built plugins are: `SLUICE_PLUGIN_WASM_DIR` if set, else json-filter built
/// now, once per test binary (incremental: seconds when nothing changed).
fn wasm_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SLUICE_PLUGIN_WASM_DIR") {
            return PathBuf::from(dir);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let status = Command::new("bash")
            .arg(root.join("sdk/build-plugins.sh"))
            .args(["-p", "sluice-plugin-json-filter"])
            .status()
            .expect("running sdk/build-plugins.sh");
        assert!(status.success(), "sdk/build-plugins.sh failed");
        root.join("plugins/target/wasm")
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn order(n: i64, region: &str) -> String {
    format!(r#"{{"n":{n},"region":"{region}"}}"#)
}

/// A batch of `orders` (offset, region) as `producer` (id, base sequence, transactional)
/// sends it, or without producer fields.
fn batch(orders: &[(i64, &str)], producer: Option<(i64, i32)>) -> Vec<u8> {
    let values: Vec<String> = orders.iter().map(|&(n, r)| order(n, r)).collect();
    let records: Vec<TestRecord<'_>> = values
        .iter()
        .map(|v| TestRecord::value(v.as_bytes()))
        .collect();
    let mut bytes = build_batch(0, now_ms(), &records);
    if let Some((id, sequence)) = producer {
        set_producer(&mut bytes, id, EPOCH, sequence, true);
    }
    bytes
}

/// The source partition, offset by offset (`n` in each value is its offset):
/// ```text
///  0-1  plain        eu us
///  2-4  txn 100      eu us eu      committed
///  5-6  txn 200      eu eu         aborted
///  7-8  txn 100      us eu         committed
///  9    COMMIT 100
/// 10    ABORT 200
/// 11    plain        eu
/// 12-13 txn 300      eu eu         open: the LSO is 12
/// 14    plain        eu            withheld under read_committed (after the LSO)
/// ```
fn write_source(log: &mut sluice_storage::Log) {
    let now = now_ms();
    let mut append = |orders: &[(i64, &str)], producer| {
        let mut bytes = batch(orders, producer);
        log.append(&mut bytes, Durability::OsCache, now).unwrap();
    };
    append(&[(0, "eu"), (1, "us")], None);
    append(&[(2, "eu"), (3, "us"), (4, "eu")], Some((COMMITTED, 0)));
    append(&[(5, "eu"), (6, "eu")], Some((ABORTED, 0)));
    append(&[(7, "us"), (8, "eu")], Some((COMMITTED, 3)));
    let mut marker = |producer, marker| {
        log.append_marker(producer, EPOCH, marker, 0, Durability::OsCache, now)
            .unwrap();
    };
    marker(COMMITTED, Marker::Commit);
    marker(ABORTED, Marker::Abort);
    let mut append = |orders: &[(i64, &str)], producer| {
        let mut bytes = batch(orders, producer);
        log.append(&mut bytes, Durability::OsCache, now).unwrap();
    };
    append(&[(11, "eu")], None);
    append(&[(12, "eu"), (13, "eu")], Some((OPEN, 0)));
    append(&[(14, "eu")], None);
    assert_eq!(log.last_stable_offset().value(), 12);
}

/// A broker with json-filter deployed, the source written and the view `region == eu`.
async fn start() -> TestBroker {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        wasm_dir().join("json-filter.wasm"),
        plugins.join("json-filter.wasm"),
    )
    .unwrap();
    let broker = TestBroker::start_in(dir, &[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, SOURCE, 1).await;
    let partition = broker.broker.topics.partition(SOURCE, 0).unwrap();
    partition.with_log(write_source).unwrap();
    let params = [("field", "$.region"), ("op", "=="), ("value", "eu")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    broker
        .broker
        .topics
        .create_view(ViewSpec {
            name: VIEW.into(),
            source: SOURCE.into(),
            stages: vec![StageSpec {
                plugin: "json-filter".into(),
                params,
                kind: None,
            }],
            on_error: "fail".into(),
            ephemeral: false,
            owner: Some("User:ANONYMOUS".into()),
            owner_host: Some("127.0.0.1".into()),
        })
        .unwrap();
    broker
}

/// What one Fetch v11 of `topic` partition 0 from offset 0 answered.
struct Fetched {
    high_watermark: i64,
    last_stable_offset: i64,
    aborted: Option<Vec<(i64, i64)>>,
    records: Bytes,
}

async fn fetch(broker: &TestBroker, topic: &str, isolation_level: i8) -> Fetched {
    let mut p = FetchPartition::default();
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions = vec![p];
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_bytes = 1 << 20;
    request.isolation_level = isolation_level;
    request.topics = vec![t];
    let mut client = broker.client().await;
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &request).await;
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    Fetched {
        high_watermark: partition.high_watermark,
        last_stable_offset: partition.last_stable_offset,
        aborted: partition.aborted_transactions.as_ref().map(|list| {
            list.iter()
                .map(|t| (t.producer_id.0, t.first_offset))
                .collect()
        }),
        records: partition.records.clone().unwrap_or_default(),
    }
}

/// The offsets of the data records (markers left out), each checked to be an eu order at
/// its own offset.
fn data_offsets(records: &Bytes) -> Vec<i64> {
    let sets = RecordBatchDecoder::decode_all(&mut records.clone()).unwrap();
    let mut offsets = Vec::new();
    for record in sets.iter().flat_map(|s| &s.records) {
        if record.control {
            continue;
        }
        let value = record.value.as_ref().unwrap();
        assert_eq!(value.as_ref(), order(record.offset, "eu").as_bytes());
        offsets.push(record.offset);
    }
    offsets
}

#[tokio::test]
async fn read_committed_through_a_view_shows_only_committed_records() {
    let broker = start().await;
    let view = fetch(&broker, VIEW, 1).await;
    let topic = fetch(&broker, SOURCE, 1).await;
    assert_eq!(
        data_offsets(&view.records),
        [0, 2, 4, 8, 11],
        "aborted (5, 6) and past the LSO (12-14) absent"
    );
    assert_eq!(
        (view.high_watermark, view.last_stable_offset),
        (15, 12),
        "the source's"
    );
    assert_eq!(view.aborted, Some(vec![(ABORTED, 5)]));
    assert_eq!(
        (topic.last_stable_offset, &topic.aborted),
        (view.last_stable_offset, &view.aborted),
        "as the plain path answers"
    );
    // Batch by batch: (base offset, last offset, records, producer id, epoch, base
    // sequence, transactional, control).
    let batches: Vec<_> = iter_batches(&view.records)
        .map(|b| {
            let (h, _) = b.unwrap();
            let fields = (h.producer_id, h.producer_epoch, h.base_sequence);
            let flags = (h.is_transactional(), h.is_control());
            (
                h.base_offset,
                h.last_offset(),
                h.records_count,
                fields,
                flags,
            )
        })
        .collect();
    let committed = (COMMITTED, EPOCH, 0);
    assert_eq!(
        batches,
        [
            (0, 1, 1, (-1, -1, -1), (false, false)),
            (2, 4, 2, committed, (true, false)),
            (5, 6, 0, (ABORTED, EPOCH, 0), (true, false)), // dropped before the plugin
            (7, 8, 1, (COMMITTED, EPOCH, 3), (true, false)),
            (9, 9, 1, (COMMITTED, EPOCH, -1), (true, true)),
            (10, 10, 1, (ABORTED, EPOCH, -1), (true, true)),
            (11, 11, 1, (-1, -1, -1), (false, false)),
        ]
    );
    let source = iter_batches(&topic.records).map(|b| b.unwrap().1.to_vec());
    let markers: Vec<Vec<u8>> = source.skip(4).take(2).collect();
    let view_markers: Vec<Vec<u8>> = iter_batches(&view.records)
        .skip(4)
        .take(2)
        .map(|b| b.unwrap().1.to_vec())
        .collect();
    assert_eq!(view_markers, markers, "markers byte for byte");
}

#[tokio::test]
async fn read_uncommitted_through_a_view_shows_every_matching_record() {
    let broker = start().await;
    let view = fetch(&broker, VIEW, 0).await;
    assert_eq!(
        data_offsets(&view.records),
        [0, 2, 4, 5, 6, 8, 11, 12, 13, 14]
    );
    assert_eq!(view.high_watermark, 15);
    assert_eq!(view.aborted, None);
}
