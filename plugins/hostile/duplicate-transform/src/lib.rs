//! A transform that breaks the contract: two outputs for every input
//! record (a fetch cannot return two records at one offset), so the host
//! must reject its output with `CallError::Contract`.

use sluice_sdk::{Output, Record, transform};

#[transform]
pub fn duplicate(record: &Record<'_>, out: &mut Output) {
    out.keep(record);
    out.keep(record);
}
