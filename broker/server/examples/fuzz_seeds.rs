//! Writes the fuzz targets' seed corpus (`sluice_server::fuzz::seeds`) under a directory,
//! one file per seed in `<dir>/<target>/<name>`:
//!
//!     cargo run -p sluice-server --example fuzz_seeds -- tests/fuzz/corpus
//!
//! Existing files are kept (the corpus also holds inputs the fuzzer found); a seed is
//! rewritten in place.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "tests/fuzz/corpus".into()),
    );
    let seeds = sluice_server::fuzz::seeds::all();
    for (target, name, bytes) in &seeds {
        let target_dir = dir.join(target);
        std::fs::create_dir_all(&target_dir)?;
        std::fs::write(target_dir.join(format!("seed-{name}")), bytes)?;
    }
    println!("{} seeds written under {}", seeds.len(), dir.display());
    Ok(())
}
