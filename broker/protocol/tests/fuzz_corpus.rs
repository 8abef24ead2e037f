//! Replays the committed corpus of the protocol's fuzz targets (`tests/fuzz/corpus/request/`)
//! through the functions the cargo-fuzz targets call (`sluice_protocol::fuzz`), under plain
//! `cargo test`: every input the fuzzer kept, and every input that once crashed a target,
//! must run without a panic. The request seeds must decode at every version the broker
//! advertises and be committed, so the corpus keeps up with the version table.

use std::path::PathBuf;

use kafka_protocol::messages::ApiKey;

use sluice_protocol::fuzz;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus")
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    for (target, run) in fuzz::TARGETS {
        let dir = corpus_dir().join(target);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut replayed = 0;
        for entry in entries {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| run(&bytes));
            assert!(outcome.is_ok(), "{target}: {} panicked", path.display());
            replayed += 1;
        }
        assert!(
            replayed > 0,
            "{target}: no corpus files in {}",
            dir.display()
        );
    }
}

#[test]
fn the_request_seeds_decode_at_every_advertised_version() {
    let seeds = fuzz::seeds::all();
    for support in sluice_protocol::versions::SUPPORTED {
        for version in support.advertised_min..=support.max {
            let name = format!("{:?}-v{version}", support.key);
            let (_, _, frame) = seeds
                .iter()
                .find(|(target, n, _)| *target == "request" && *n == name)
                .unwrap_or_else(|| panic!("no request seed {name}"));
            let decoded = fuzz::decode_request(frame.clone().into());
            // Advertised but not served: refused before decoding; except Produce v0-v2, decoded
            // to answer UNSUPPORTED_VERSION.
            let served = support.serves(version) || support.key == ApiKey::Produce;
            assert_eq!(
                decoded.map_err(|e| e.to_string()),
                Ok(served.then_some((support.key, version))),
                "{name}"
            );
        }
    }
}

#[test]
fn every_seed_is_in_the_committed_corpus() {
    for (target, name, bytes) in fuzz::seeds::all() {
        let path = corpus_dir().join(target).join(format!("seed-{name}"));
        let committed = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus",
                path.display()
            )
        });
        assert_eq!(
            committed,
            bytes,
            "{} is not the seed it was",
            path.display()
        );
    }
}
