//! Hostile: a filter that misbehaves on cue, for the view tests. A record whose value is
//! `loop` never returns, `bomb` allocates until the memory limit stops it, `panic` traps;
//! every other record is kept (so the same plugin proves a view recovers afterwards).

use sluice_sdk::{Record, filter};

#[filter]
pub fn misbehave(record: &Record<'_>) -> bool {
    match record.value() {
        Some(b"loop") => {
            let mut n: u64 = 0;
            while std::hint::black_box(record.value()) == Some(b"loop") {
                n = std::hint::black_box(n.wrapping_add(1));
            }
            n == 0
        }
        Some(b"bomb") => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        Some(b"panic") => panic!("the value was `panic`"),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use sluice_sdk::BatchBuilder;

    #[test]
    fn ordinary_records_are_kept() {
        let mut b = BatchBuilder::new();
        b.push(0, 0, None, Some(b"fine"), &[]);
        b.push(1, 0, None, None, &[]);
        assert!(b.batch().iter().all(|r| misbehave(&r)));
    }
}
