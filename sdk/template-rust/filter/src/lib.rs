//! A Sluice filter. `cargo test` tests it natively; `sluice plugin build .` builds the
//! `.wasm`; deploy it with `sluice plugin deploy` and use it in a view
//! (`sluice view create NAME --from TOPIC --filter {{name}}`).

use sluice_sdk::{Record, filter};

/// Keeps records that have a key.
#[filter]
pub fn {{module}}(record: &Record<'_>) -> bool {
    record.key().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    #[test]
    fn keeps_keyed_records_only() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(b"k"), Some(b"v"), &[]);
        b.push(1, 0, None, Some(b"v"), &[]);
        let kept: Vec<bool> = b.batch().iter().map(|r| {{module}}(&r)).collect();
        assert_eq!(kept, [true, false]);
    }
}
