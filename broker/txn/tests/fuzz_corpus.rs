//! Replays the committed `txn_records` fuzz corpus (`tests/fuzz/corpus/`) through the fuzz
//! entry under plain `cargo test`, so the corpus keeps passing without libFuzzer.

#[test]
fn every_txn_records_corpus_file_replays_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/corpus/txn_records");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        sluice_txn::fuzz::decode_record(&bytes);
        replayed += 1;
    }
    assert!(replayed >= 4, "seeds in {}", dir.display());
}
