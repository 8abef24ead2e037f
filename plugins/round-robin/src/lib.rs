//! Spread records over the partitions in turn, ignoring keys: for keyless
//! data where even spread matters more than locality.
//!
//! Parameter `start` (optional, default 0): the first partition.

use sluice_sdk::{Error, Init, Params, Record, partitioner};

#[derive(Debug)]
pub struct Cursor {
    next: u32,
}

impl Init for Cursor {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["start"])?;
        Ok(Self {
            next: params.parse_or("start", 0u32)?,
        })
    }
}

#[partitioner]
pub fn round_robin(cursor: &mut Cursor, _record: &Record<'_>, partition_count: u32) -> u32 {
    let p = cursor.next % partition_count;
    cursor.next = p.wrapping_add(1);
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    #[test]
    fn records_go_in_turn() {
        let mut cursor = Cursor::init(&Params::new([("start", "2")])).unwrap();
        let mut b = BatchBuilder::new();
        b.push(0, 0, Some(b"same key"), None, &[]);
        let record = b.batch().iter().next().unwrap();
        let got: Vec<u32> = (0..5)
            .map(|_| round_robin(&mut cursor, &record, 4))
            .collect();
        assert_eq!(got, [2, 3, 0, 1, 2]);
    }

    #[test]
    fn bad_start_is_rejected() {
        let err = Cursor::init(&Params::new([("start", "two")])).unwrap_err();
        assert!(err.message.contains("`start` = `two`"), "{err}");
    }
}
