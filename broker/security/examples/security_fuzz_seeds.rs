//! Writes the security fuzz targets' seed corpus from real encodings
//! (`sluice_security::fuzz::seeds`):
//!
//!     cargo run -p sluice-security --example security_fuzz_seeds -- tests/fuzz/corpus

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "tests/fuzz/corpus".into()),
    );
    for (target, name, bytes) in sluice_security::fuzz::seeds() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    Ok(())
}
