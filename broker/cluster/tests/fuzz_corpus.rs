//! Replays the committed corpus of the `metadata_records` fuzz target
//! (`tests/fuzz/corpus/metadata_records/`) through the entry point the fuzzer calls, and
//! checks every seed `fuzz::seeds()` makes is committed unchanged.

use std::path::PathBuf;

use sluice_cluster::fuzz;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus/metadata_records")
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    let dir = corpus_dir();
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        fuzz::metadata_records(&bytes);
        count += 1;
    }
    assert!(count > 20, "only {count} corpus files in {}", dir.display());
}

#[test]
fn every_seed_is_in_the_committed_corpus() {
    for (_, name, bytes) in fuzz::seeds() {
        let path = corpus_dir().join(format!("seed-{name}"));
        let committed = std::fs::read(&path).unwrap_or_else(|_| {
            panic!(
                "{} is missing: cargo run -p sluice-cluster --example metadata_fuzz_seeds -- \
                 tests/fuzz/corpus",
                path.display()
            )
        });
        assert_eq!(
            committed,
            bytes,
            "{} is stale: rerun the example",
            path.display()
        );
    }
}

#[test]
fn every_damaged_seed_is_refused_or_round_trips() {
    // Each seed with one byte flipped at each position: decoding must refuse it or accept
    // something that round-trips (the entry point asserts that); never panic.
    for (_, _, bytes) in fuzz::seeds()
        .into_iter()
        .filter(|(_, n, _)| n.starts_with("record"))
    {
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x5a;
            fuzz::metadata_records(&damaged);
        }
    }
}
