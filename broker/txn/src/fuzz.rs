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

#[cfg(test)]
mod seeds {
    use crate::*;

    /// `SLUICE_WRITE_SEEDS=<dir> cargo test -p sluice-txn write_fuzz_seeds` writes the
    /// `txn_records` seed corpus: every record kind a transaction's life appends.
    #[test]
    fn write_fuzz_seeds() {
        let mut c = Coordinator::new(TxnConfig::default());
        let InitOutcome::Done {
            producer_id,
            producer_epoch,
            records: mut all,
        } = c.init_producer_id(0, Some("t"), 60_000, None)
        else {
            panic!("a new transactional id gets a producer id");
        };
        c.apply(&all);
        let tp = TopicPartition {
            topic: "orders".into(),
            partition: 0,
        };
        let records = c
            .add_partitions(1, "t", producer_id, producer_epoch, &[tp])
            .unwrap();
        c.apply(&records);
        all.extend(records);
        let records = c
            .add_offsets(2, "t", producer_id, producer_epoch, "g")
            .unwrap();
        c.apply(&records);
        all.extend(records);
        all.push(TxnRecord::Tombstone {
            transactional_id: "gone".into(),
        });
        for record in &all {
            super::decode_record(&framed(record));
        }
        let Ok(dir) = std::env::var("SLUICE_WRITE_SEEDS") else {
            return;
        };
        for (i, record) in all.iter().enumerate() {
            std::fs::write(format!("{dir}/seed-record-{i}"), framed(record)).unwrap();
        }
    }

    fn framed(record: &TxnRecord) -> Vec<u8> {
        let key = record.encode_key();
        let mut out = (key.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(&key);
        match record.encode_value() {
            None => out.push(0),
            Some(value) => {
                out.push(1);
                out.extend_from_slice(&value);
            }
        }
        out
    }
}
