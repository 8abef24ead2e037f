//! Writes the `metadata_records` fuzz target's seed corpus from real encodings
//! (`sluice_cluster::fuzz::seeds`): one file per record type, a batch of them all, and the
//! snapshot of the image they build.
//!
//!     cargo run -p sluice-cluster --example metadata_fuzz_seeds -- tests/fuzz/corpus

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "tests/fuzz/corpus".into()),
    );
    for (target, name, bytes) in sluice_cluster::fuzz::seeds() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    Ok(())
}
