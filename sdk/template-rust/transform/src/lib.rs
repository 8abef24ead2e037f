//! A Sluice transform. `cargo test` tests it natively; `sluice plugin build .` builds
//! the `.wasm`; deploy it with `sluice plugin deploy` and use it in a view
//! (`sluice view create NAME --from TOPIC --transform {{name}}`).

use sluice_sdk::{Output, Record, transform};

/// Upper-cases every value (bytes outside ASCII are kept as they are).
#[transform]
pub fn {{module}}(record: &Record<'_>, out: &mut Output) {
    let value = record.value().map(<[u8]>::to_ascii_uppercase);
    let headers: Vec<_> = record.headers().iter().collect();
    out.push_at(record.timestamp, record.key(), value.as_deref(), &headers);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    #[test]
    fn values_are_upper_cased() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(b"k"), Some(b"hello"), &[]);
        let mut out = Output::new();
        for (i, r) in b.batch().iter().enumerate() {
            out.begin(i);
            {{module}}(&r, &mut out);
        }
        let built = out.into_builder();
        let values: Vec<_> = built.batch().iter().map(|r| r.value().map(<[u8]>::to_vec)).collect();
        assert_eq!(values, [Some(b"HELLO".to_vec())]);
    }
}
