//! Hostile: a validator that misbehaves on demand, by the record's value: `panic` traps,
//! `loop` never returns, `bomb` grows its memory without bound, `bad` is refused with the
//! reason `bad on purpose`; anything else passes. For the broker's tests of the validator
//! failure policy (`sluice.validator.on.failure`).

use sluice_sdk::{Record, validator};

#[validator]
pub fn hostile(record: &Record<'_>) -> Result<(), String> {
    match record.value() {
        Some(b"panic") => panic!("the value was `panic`"),
        Some(b"loop") => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        Some(b"bomb") => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        Some(b"bad") => Err("bad on purpose".into()),
        _ => Ok(()),
    }
}
