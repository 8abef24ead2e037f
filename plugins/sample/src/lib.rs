//! Keep 1 record in N, chosen by a hash of the key: every record of a key
//! is kept or none is, so a sampled consumer sees whole entities (all the
//! events of 1 customer in N), and every consumer of the view sees the
//! same sample.
//!
//! Parameters: `n` (required, 1 or more). A keyed record is kept when
//! `toPositive(murmur2(key)) % n == 0` (the Java client's key hash);
//! a record without a key when `offset % n == 0`.

use sluice_sdk::hash::{murmur2, to_positive};
use sluice_sdk::{Error, Init, Params, Record, filter};

#[derive(Debug)]
pub struct OneIn {
    n: u32,
}

impl Init for OneIn {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["n"])?;
        params.require("n")?;
        let n: u32 = params.parse_or("n", 1)?;
        if n == 0 {
            return Err(Error::invalid_params(
                "parameter `n` = `0`: keep 1 record in n needs n >= 1",
            ));
        }
        Ok(Self { n })
    }
}

#[filter]
pub fn sample(one_in: &mut OneIn, record: &Record<'_>) -> bool {
    match record.key() {
        Some(key) => to_positive(murmur2(key)).is_multiple_of(one_in.n),
        None => record.offset.rem_euclid(i64::from(one_in.n)) == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn state(n: &str) -> OneIn {
        OneIn::init(&Params::new([("n", n)])).unwrap()
    }

    #[test]
    fn keeps_about_one_in_n_and_whole_keys() {
        let mut s = state("10");
        let mut b = BatchBuilder::new();
        for i in 0..10_000 {
            let key = format!("customer-{}", i % 2000);
            b.push(i, 0, Some(key.as_bytes()), Some(b"v"), &[]);
        }
        let kept: Vec<bool> = b.batch().iter().map(|r| sample(&mut s, &r)).collect();
        let count = kept.iter().filter(|&&k| k).count();
        assert!((800..1200).contains(&count), "{count} of 10000");
        // Record i and i + 2000 share a key: the same decision.
        assert!((0..8000).all(|i| kept[i] == kept[i + 2000]));
    }

    #[test]
    fn keyless_records_by_offset_and_n_1_keeps_all() {
        let mut b = BatchBuilder::new();
        for offset in 0..6 {
            b.push(offset, 0, None, Some(b"v"), &[]);
        }
        b.push(7, 0, Some(b"k"), None, &[]);
        let mut three = state("3");
        let kept: Vec<bool> = b.batch().iter().map(|r| sample(&mut three, &r)).collect();
        assert_eq!(&kept[..6], [true, false, false, true, false, false]);
        let mut one = state("1");
        assert!(b.batch().iter().all(|r| sample(&mut one, &r)));
    }

    #[test]
    fn bad_parameters_are_named() {
        for (n, needle) in [("0", "n >= 1"), ("-1", "`n` = `-1`"), ("x", "`n` = `x`")] {
            let e = OneIn::init(&Params::new([("n", n)])).unwrap_err();
            assert!(e.message.contains(needle), "{e}");
        }
        let e = OneIn::init(&Params::default()).unwrap_err();
        assert!(e.message.contains("`n`"), "{e}");
    }
}
