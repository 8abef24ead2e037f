use sluice_sdk::{Error, Init, Params, Record, partitioner};

struct Modulo {
    offset: u32,
}

impl Init for Modulo {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["offset"])?;
        Ok(Self { offset: params.parse_or("offset", 0)? })
    }
}

#[partitioner]
fn shifted(state: &mut Modulo, record: &Record<'_>, partition_count: u32) -> u32 {
    (record.offset as u32 + state.offset) % partition_count
}

fn main() {}
