//! Entry points for cargo-fuzz targets (`tests/fuzz/`): each takes arbitrary bytes and
//! must never panic.

use crate::records::{TxnRecord, decode};

/// Decodes `data` as one transaction-log record. Layout of `data`: `u16` key length
/// (big-endian), the key, then one byte `0` = tombstone or anything else = the rest is the
/// value. A record that decodes must re-encode to the same bytes (the codec is canonical);
/// a breach panics, which the fuzzer reports.
pub fn decode_record(data: &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let key_len = usize::from(u16::from_be_bytes(*len)).min(rest.len());
    let (key, rest) = rest.split_at(key_len);
    let value = match rest.split_first() {
        None | Some((0, _)) => None,
        Some((_, value)) => Some(value),
    };
    if let Ok(record) = decode(key, value) {
        check_canonical(&record, key, value);
    }
}

fn check_canonical(record: &TxnRecord, key: &[u8], value: Option<&[u8]>) {
    assert_eq!(
        record.encode_key(),
        key,
        "decoded key re-encodes differently"
    );
    assert_eq!(
        record.encode_value().as_deref(),
        value,
        "decoded value re-encodes differently"
    );
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
            decode_record(&data);
        }
    }

    #[test]
    fn short_and_odd_inputs_do_not_panic() {
        for data in [
            &[][..],
            &[0],
            &[0, 4, 0, 0, 0, 0],
            &[0, 4, 0, 0, 0, 1, 1, 0],
        ] {
            decode_record(data);
        }
    }

    #[test]
    fn a_block_record_decodes_through_the_entry() {
        let mut data = vec![0, 4, 0, 0, 0, 0, 1];
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(&1000i64.to_be_bytes());
        decode_record(&data);
    }
}
