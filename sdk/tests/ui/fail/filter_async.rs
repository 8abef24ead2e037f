use sluice_sdk::{Record, filter};

#[filter]
async fn f(_record: &Record<'_>) -> bool {
    true
}

fn main() {}
