//! Fuzz entry points: one plain function per cargo-fuzz target in `tests/fuzz/` (each target
//! is a one-line wrapper), replayed over the committed corpus by `tests/fuzz_corpus.rs` under
//! plain `cargo test`. Not an API: hidden from the docs, for the fuzz targets only. The
//! request frame's target is the protocol crate's (`sluice_protocol::fuzz::request`).
//!
//! Every function takes untrusted bytes and must not panic, abort or allocate from a count
//! it has not checked, whatever the bytes (the fuzz runs cap memory: `-malloc_limit_mb=512`).
//! Each runs the broker's own code for its input, not a copy of it; where an input names
//! one of several decoders, its first byte picks it (documented per function). `seeds`
//! builds the corpus from real encodings (`cargo run -p sluice-server --example fuzz_seeds`).
//! docs/security.md ("Fuzzing") lists the targets and their runs.

use sluice_storage::batch;
use sluice_storage::{Compression, batch::pos};

use crate::config::BrokerConfig;
use crate::records::{self, DecompressLimit};
use crate::{limits, topic_config};

pub mod seeds;

pub use sluice_plugin_host::fuzz::{guest_columns, plugin_component};

/// A fuzz target's entry: untrusted bytes in, no panic out.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name: the corpus directories under `tests/fuzz/corpus/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("record_batch", record_batch),
    ("decompress", decompress),
    ("offsets_log", offsets_log),
    ("topic_metadata", topic_metadata),
    ("guest_columns", guest_columns),
    ("plugin_component", plugin_component),
    ("admin_json", admin_json),
    ("tls_principal", tls_principal),
    ("telemetry_otlp", telemetry_otlp),
    ("cluster_frames", cluster_frames),
];

/// The metadata quorum's decoders: controller-listener frame bodies, the Raft entry codec,
/// the `quorum-state` file (`cluster/fuzz.rs`).
pub fn cluster_frames(data: &[u8]) {
    crate::cluster::fuzz::frames(data);
}

/// A client's pushed metrics (KIP-714), OTLP protobuf after decompression, through the
/// bounded reader the telemetry store keeps them with (`telemetry/otlp.rs`).
pub fn telemetry_otlp(data: &[u8]) {
    if let Ok(metrics) = crate::telemetry::otlp::decode(data) {
        assert!(metrics.points.len() <= crate::limits::TELEMETRY_POINTS_PER_PUSH_MAX);
    }
}

/// A client certificate (DER), through the reader that takes the mTLS principal from its
/// subject (`tls/principal.rs`). rustls verifies a certificate before the broker reads it,
/// but the reader must not trust its lengths either.
pub fn tls_principal(der: &[u8]) {
    let _ = crate::tls::principal::from_certificate(der);
}

/// Record batches as a produce request or a segment carries them: the storage engine's
/// `parse_header`, `validate` and `iter_batches`, then the server's `records::decode` (what
/// `reroute/` and `views/` run) and its re-encoders, whose output must validate. Each input
/// runs twice: as it is, and with its CRC set right, so mutations get past the checksum.
pub fn record_batch(data: &[u8]) {
    batches(data);
    if data.len() >= batch::HEADER_BYTES {
        let mut fixed = data.to_vec();
        let end = batch::parse_header(data).map_or(data.len(), |h| h.total_bytes().min(data.len()));
        let crc = batch::compute_crc(&fixed[..end]);
        fixed[pos::CRC..pos::CRC + 4].copy_from_slice(&crc.to_be_bytes());
        batches(&fixed);
    }
}

fn batches(data: &[u8]) {
    let _ = batch::parse_header(data);
    let _ = batch::validate(data);
    for (_, one) in batch::iter_batches(data).map_while(Result::ok) {
        let _ = batch::validate(one);
        open_records(one);
    }
}

/// `records::decode` and, when it succeeds, both re-encoders, checked in pairs: what they
/// write must pass `validate` with the records it was given.
fn open_records(one: &[u8]) {
    let limit = DecompressLimit {
        bytes: limits::VIEW_DECOMPRESSED_BYTES_MAX,
        name: "VIEW_DECOMPRESSED_BYTES_MAX",
    };
    records::with_columns(|columns| {
        let Ok(decoded) = records::decode(one, columns, limit) else {
            return;
        };
        assert_eq!(decoded.len(), columns.len(), "one column entry per record");
        let every: Vec<u32> = (0..decoded.len() as u32).collect();
        if let Ok(renumbered) = records::encode_renumbered(&decoded, &every) {
            let header = batch::validate(&renumbered).expect("a renumbered batch validates");
            assert_eq!(header.records_count as usize, decoded.len());
        }
        if let Ok(kept) = records::encode_kept(&decoded.header, columns) {
            let header = batch::validate(&kept).expect("a kept batch validates");
            assert_eq!(header.records_count as usize, decoded.len());
        }
    });
}

/// A compressed payload through `codec::decompress` under the broker's limit; the first
/// byte picks the codec (0 gzip, 1 snappy, 2 lz4, 3 zstd, modulo 4).
pub fn decompress(data: &[u8]) {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let codec = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ][usize::from(selector % 4)];
    let limit = limits::TIMESTAMP_LOOKUP_DECOMPRESSED_BYTES_MAX;
    if let Ok(Some(out)) = crate::codec::decompress(codec, input, limit) {
        assert!(out.len() <= limit, "{codec:?} output past its limit");
    }
}

/// The offsets log: an even first byte is one committed-offset record (`sluice_group`'s
/// `OffsetRecord::decode`: a big-endian u16 key length, the key, then the value; no bytes
/// after the key is a tombstone); an odd one is a read of the log, batches and all, as
/// replay decodes it at start (`group/offsets_log.rs`), and the same bytes as a read of the
/// transaction log (`txn/log.rs`, the same compacted-log reader with `sluice_txn`'s
/// records, which the `txn_records` target fuzzes alone).
pub fn offsets_log(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector % 2 == 1 {
        let _ = crate::group::offsets_log::decode_chunk(rest.to_vec(), &mut Vec::new());
        let _ = crate::txn::decode_chunk(rest.to_vec(), &mut Vec::new());
        return;
    }
    let Some((len, rest)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let (key, value) = rest.split_at(usize::from(u16::from_be_bytes(*len)).min(rest.len()));
    if let Ok(record) =
        sluice_group::OffsetRecord::decode(key, (!value.is_empty()).then_some(value))
    {
        let again = sluice_group::OffsetRecord::decode(
            &record.encode_key(),
            record.encode_value().as_deref(),
        );
        assert_eq!(again.as_ref(), Ok(&record), "a decoded record re-encodes");
    }
}

/// The JSON files of the data dir, as the broker reads them at start; the first byte picks
/// the file: 0 `topic.json` (with its overrides mapped onto the broker config), 1 a view's
/// spec in `views/`, 2 `meta.json` (modulo 3). Not UTF-8 is refused as
/// `read_to_string` refuses it.
pub fn topic_metadata(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match selector % 5 {
        0 => {
            if let Ok(meta) = crate::topics::TopicFile::parse(text) {
                let config = BrokerConfig::default();
                let _ = topic_config::log_config(&config, &meta.configs);
                let _ = topic_config::describe(&config, &meta.configs);
            }
        }
        1 => {
            if let Ok(spec) = serde_json::from_str::<crate::views::ViewSpec>(text) {
                let _ = crate::views::check(&spec);
            }
        }
        _ => {
            let _ = crate::data_dir::parse_meta(text.as_bytes());
        }
    }
}

/// The admin API's JSON bodies and the checks their handlers run before calling the
/// broker; the first byte picks the body: 0 `POST /v1/topics`, 1 `PATCH /v1/topics/{name}`,
/// 2 `POST /v1/views`, 3 `POST /v1/transforms`, 4 a transform spec file (modulo 5).
pub fn admin_json(data: &[u8]) {
    use crate::admin::topics::{AlterTopic, CreateTopic};
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let config = BrokerConfig::default();
    match selector % 3 {
        0 => {
            if let Ok(create) = serde_json::from_slice::<CreateTopic>(body) {
                let _ = crate::topic_name::validate(&create.name);
                let _ = topic_config::validate_all(&config, &create.configs);
            }
        }
        1 => {
            if let Ok(alter) = serde_json::from_slice::<AlterTopic>(body) {
                for (key, value) in &alter.set {
                    let _ = topic_config::validate(key, value);
                }
                for key in &alter.delete {
                    let _ = topic_config::broker_key(key);
                }
            }
        }
        2 => {
            if let Ok(spec) = serde_json::from_slice::<crate::views::ViewSpec>(body) {
                let _ = crate::topic_name::validate(&spec.name);
                let _ = crate::views::check(&spec);
            }
        }
        // A transform deploy body, and a spec file as `<data.dir>/transforms/` holds it:
        // whatever parses is checked without a panic, and a spec that passes its checks
        // writes back to the same value.
        3 => {
            if let Ok(request) = serde_json::from_slice::<crate::transforms::DeployRequest>(body) {
                let _ = sluice_transform::spec::check_name(
                    "transform name",
                    &request.name,
                    sluice_transform::limits::TRANSFORM_NAME_BYTES_MAX,
                );
            }
        }
        _ => {
            if let Ok(spec) = serde_json::from_slice::<sluice_transform::TransformSpec>(body)
                && spec.check().is_ok()
            {
                let text = serde_json::to_string(&spec).expect("a spec serializes");
                let again: sluice_transform::TransformSpec =
                    serde_json::from_str(&text).expect("a written spec reads back");
                assert_eq!(again, spec, "a spec file round-trips");
            }
        }
    }
}
