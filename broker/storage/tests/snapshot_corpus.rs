//! Replays the committed `producer_snapshot` fuzz corpus (`tests/fuzz/corpus/`) through the
//! fuzz entry under plain `cargo test`, so the corpus keeps passing without libFuzzer.

#[test]
fn every_producer_snapshot_corpus_file_replays_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/corpus/producer_snapshot");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        sluice_storage::fuzz::producer_snapshot(&bytes);
        replayed += 1;
    }
    assert!(replayed >= 2, "seeds in {}", dir.display());
}
