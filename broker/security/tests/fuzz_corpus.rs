//! Replays the committed corpus of the security fuzz targets
//! (`tests/fuzz/corpus/{security_records,sasl_messages}/`) through the same entry points
//! the fuzzers call, and checks every seed `fuzz::seeds()` makes is committed unchanged.

use std::path::PathBuf;

use sluice_security::fuzz;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fuzz/corpus")
}

#[test]
fn every_corpus_file_replays_without_a_panic() {
    for (target, run) in [
        ("security_records", fuzz::security_records as fn(&[u8])),
        ("sasl_messages", fuzz::sasl_messages),
    ] {
        let dir = corpus_dir().join(target);
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            run(&bytes);
            count += 1;
        }
        assert!(count > 0, "{target}: no corpus files in {}", dir.display());
    }
}

#[test]
fn every_seed_is_in_the_committed_corpus() {
    for (target, name, bytes) in fuzz::seeds() {
        let path = corpus_dir().join(target).join(format!("seed-{name}"));
        let committed = std::fs::read(&path).unwrap_or_else(|_| {
            panic!("{} is missing: cargo run -p sluice-security --example security_fuzz_seeds -- tests/fuzz/corpus", path.display())
        });
        assert_eq!(
            committed,
            bytes,
            "{} is stale: rerun the fuzz_seeds example",
            path.display()
        );
    }
}

#[test]
fn hostile_inputs_do_not_panic() {
    let inputs: [&[u8]; 8] = [
        &[],
        &[0xFF, 0xFF, 0, 0],
        &[0, 2, 0, 9],
        &[0, 1, 0],
        &[3, b'n', b',', b',', 0],
        &[3, 0],
        &[2, 0, 0],
        &[1, b'c', b'=', b',', b'p', b'='],
    ];
    for input in inputs {
        fuzz::security_records(input);
        fuzz::sasl_messages(input);
    }
}
