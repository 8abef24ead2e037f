//! Hostile: asks for 1 GiB in `init`, past any sane memory limit.

use sluice_sdk::{Error, Init, Params, Record, partitioner};

#[derive(Debug)]
pub struct Hoard(Vec<u8>);

impl Init for Hoard {
    fn init(_params: &Params) -> Result<Self, Error> {
        Ok(Self(vec![7u8; 1 << 30]))
    }
}

#[partitioner]
pub fn hoarder(hoard: &mut Hoard, _record: &Record<'_>, partition_count: u32) -> u32 {
    u32::from(hoard.0[0]) % partition_count
}
