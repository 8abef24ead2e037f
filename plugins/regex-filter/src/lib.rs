//! Keep records whose value matches a regular expression.
//!
//! Parameters: `pattern` (required), in the syntax of the `regex` crate
//! (no look-around or backreferences, so matching is linear in the value's
//! length). It is matched against the value's bytes, unanchored: use `^`
//! and `$` to match the whole value. Tombstones are dropped.
//!
//! The compiled program is capped at [`PATTERN_BYTES_MAX`] so a pattern
//! cannot exhaust the instance's memory; a larger one is rejected at `init`.

use regex::bytes::{Regex, RegexBuilder};
use sluice_sdk::{Error, Init, Params, Record, filter};

/// Most memory the compiled pattern may take (the `regex` crate's
/// `size_limit`), well under the host's per-instance memory limit.
pub const PATTERN_BYTES_MAX: usize = 1 << 20;

#[derive(Debug)]
pub struct Pattern {
    regex: Regex,
}

impl Init for Pattern {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["pattern"])?;
        let pattern = params.require("pattern")?;
        let regex = RegexBuilder::new(pattern)
            .size_limit(PATTERN_BYTES_MAX)
            .build()
            .map_err(|e| Error::invalid_params(format!("parameter `pattern`: {e}")))?;
        Ok(Self { regex })
    }
}

#[filter]
pub fn regex_filter(pattern: &mut Pattern, record: &Record<'_>) -> bool {
    record.value().is_some_and(|v| pattern.regex.is_match(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn kept(pattern: &str, values: &[Option<&[u8]>]) -> Vec<bool> {
        let mut state = Pattern::init(&Params::new([("pattern", pattern)])).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(i as i64, 0, None, *v, &[]);
        }
        b.batch()
            .iter()
            .map(|r| regex_filter(&mut state, &r))
            .collect()
    }

    #[test]
    fn matches_values_unanchored_unless_anchored() {
        let values: [Option<&[u8]>; 5] = [
            Some(b"error: disk full"),
            Some(b"ok"),
            Some(b"ERROR 500"),
            Some(&[0xff, 0xfe, b'e', b'r', b'r', b'o', b'r']),
            None,
        ];
        assert_eq!(kept("error", &values), [true, false, false, true, false]);
        assert_eq!(
            kept("(?i)^error", &values),
            [true, false, true, false, false]
        );
        assert_eq!(kept(r"\d{3}$", &values), [false, false, true, false, false]);
    }

    #[test]
    fn bad_patterns_are_rejected_with_the_reason() {
        let e = Pattern::init(&Params::new([("pattern", "(unclosed")])).unwrap_err();
        assert!(e.message.contains("parameter `pattern`"), "{e}");
        let e = Pattern::init(&Params::new([("pattern", r"\w{1000}{1000}")])).unwrap_err();
        assert!(e.message.contains("parameter `pattern`"), "{e}");
        let e = Pattern::init(&Params::default()).unwrap_err();
        assert!(e.message.contains("`pattern`"), "{e}");
    }
}
