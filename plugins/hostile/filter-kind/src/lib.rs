//! Not hostile, just the wrong kind: a filter (keep records whose value
//! contains `"region":"eu"`), which must not be accepted as a partitioner.

use sluice_sdk::{Record, filter};

#[filter]
pub fn eu_only(record: &Record<'_>) -> bool {
    record
        .value()
        .is_some_and(|v| v.windows(13).any(|w| w == br#""region":"eu""#))
}
