//! A Sluice validator (produce time). `cargo test` tests it natively; `sluice plugin build
//! .` builds the `.wasm`; deploy it with `sluice plugin deploy`, then set the topic config
//! `sluice.validator` to its name: a produced batch with a refused record is answered
//! INVALID_RECORD with the reason, and nothing of it is appended.

use sluice_sdk::{Record, validator};

/// Refuses records without a value.
#[validator]
pub fn {{module}}(record: &Record<'_>) -> Result<(), String> {
    match record.value() {
        Some(_) => Ok(()),
        None => Err("a record needs a value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    #[test]
    fn refuses_records_without_a_value() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, None, Some(b"v"), &[]);
        b.push(1, 0, Some(b"k"), None, &[]);
        let verdicts: Vec<_> = b.batch().iter().map(|r| {{module}}(&r)).collect();
        assert_eq!(verdicts, [Ok(()), Err("a record needs a value".to_owned())]);
    }
}
