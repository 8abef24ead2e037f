//! Replays the committed fuzz corpus (`tests/fuzz/corpus/<target>/`) through the same
//! functions the cargo-fuzz targets call (`sluice_server::fuzz`), under plain `cargo test`:
//! every input the fuzzer kept, and every input that once crashed a target, must run
//! without a panic. Each target's directory must hold inputs, and every seed (the protocol
//! crate's request seeds too) must be committed. The `request` target's corpus replays in
//! `broker/protocol/tests/fuzz_corpus.rs`.

use std::path::PathBuf;

use sluice_server::fuzz;

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
fn every_seed_is_in_the_committed_corpus() {
    for (target, name, _) in fuzz::seeds::all() {
        let path = corpus_dir().join(target).join(format!("seed-{name}"));
        assert!(
            path.is_file(),
            "{} is missing: cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus",
            path.display()
        );
    }
}
