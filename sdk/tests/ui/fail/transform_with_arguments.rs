use sluice_sdk::{Output, Record, transform};

#[transform(fast)]
fn t(_record: &Record<'_>, _out: &mut Output) {}

fn main() {}
