//! Which output a transform's record goes to: the reserved header `sluice.output`, read the
//! same way by the broker's host and the guest SDK.
//!
//! A transform's output record carrying `sluice.output` goes to the output it names; a
//! record without it goes to the first output. The value is either
//! - an **index**: ASCII digits, the output's 0-based position (`0`, `1`, `2`; leading
//!   zeros are accepted, the value must fit a `u32`), or
//! - a **name**: an output's name as configured (a topic name: 1 to
//!   [`OUTPUT_NAME_BYTES_MAX`] bytes of `a-z A-Z 0-9 . _ -`, not all digits, which would
//!   read as an index).
//!
//! A view has one output, itself; a materialized transform has one per `--to` topic, in
//! the order given. The host removes the header before it writes or sends the record, so
//! consumers never see it. Anything else (two such headers on one record, an empty or
//! malformed value, an output the transform does not have) breaks the transform contract.
//!
//! The SDK writes the header (`sluice_sdk::Output::keep_to`); the broker's plugin host reads
//! it (`sluice_plugin_host::Transform::transform_routed`, and views, which show the first
//! output only). The materialized transforms that write the outputs are designed in
//! `docs/design/materialized-transforms.md`.

use std::fmt;

use crate::Headers;

/// The reserved header naming a transform output record's output.
pub const OUTPUT_HEADER: &str = "sluice.output";

/// Longest output name, in bytes: Kafka's longest topic name.
pub const OUTPUT_NAME_BYTES_MAX: usize = 249;

/// An output of a transform, by position or by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target<'a> {
    /// The output at this 0-based position.
    Index(u32),
    /// The output with this name (a topic name).
    Name(&'a str),
}

impl Target<'_> {
    /// The first output: where a record without [`OUTPUT_HEADER`] goes.
    pub const FIRST: Target<'static> = Target::Index(0);
}

impl From<u32> for Target<'_> {
    fn from(index: u32) -> Self {
        Self::Index(index)
    }
}

impl<'a> From<&'a str> for Target<'a> {
    fn from(name: &'a str) -> Self {
        Self::Name(name)
    }
}

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Index(i) => write!(f, "output {i}"),
            Self::Name(name) => write!(f, "output `{name}`"),
        }
    }
}

/// Why a record's [`OUTPUT_HEADER`] names no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetError {}

impl<'a> Target<'a> {
    /// Reads a header value: digits are an index, anything else must be an output name.
    ///
    /// # Errors
    /// An empty value, digits past `u32::MAX`, or a name with bytes a topic name cannot
    /// have or longer than [`OUTPUT_NAME_BYTES_MAX`].
    pub fn parse(value: &'a [u8]) -> Result<Self, TargetError> {
        let bad = |why: &str| {
            TargetError(format!(
                "header {OUTPUT_HEADER} = {:?} {why}",
                String::from_utf8_lossy(value)
            ))
        };
        if value.is_empty() {
            return Err(bad("is empty: expected an output index or name"));
        }
        if value.iter().all(u8::is_ascii_digit) {
            return value
                .iter()
                .try_fold(0u32, |n, &d| {
                    n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
                })
                .map(Self::Index)
                .ok_or_else(|| bad("is an index past u32::MAX"));
        }
        if value.len() > OUTPUT_NAME_BYTES_MAX {
            return Err(bad(&format!(
                "is longer than OUTPUT_NAME_BYTES_MAX ({OUTPUT_NAME_BYTES_MAX} bytes)"
            )));
        }
        if !value.iter().all(|&b| is_name_byte(b)) {
            return Err(bad(
                "is not an output name (a topic name: a-z, A-Z, 0-9, `.`, `_`, `-`)",
            ));
        }
        // Only ASCII got here.
        std::str::from_utf8(value)
            .map(Self::Name)
            .map_err(|_| bad("is not UTF-8"))
    }

    /// The output a record's headers name: [`Target::FIRST`] without [`OUTPUT_HEADER`].
    ///
    /// # Errors
    /// The header is there twice, or its value names no output ([`Target::parse`]).
    pub fn of_headers(headers: Headers<'a>) -> Result<Self, TargetError> {
        let mut found = headers
            .iter()
            .filter(|(name, _)| *name == OUTPUT_HEADER.as_bytes());
        let Some((_, value)) = found.next() else {
            return Ok(Target::FIRST);
        };
        if found.next().is_some() {
            return Err(TargetError(format!(
                "a record carries header {OUTPUT_HEADER} more than once"
            )));
        }
        Self::parse(value)
    }

    /// The header value that names this output, into `buf` (cleared first): an index as
    /// decimal digits, a name as it is. No allocation for an index.
    pub fn write_value(&self, buf: &mut Vec<u8>) {
        buf.clear();
        match *self {
            Self::Index(mut i) => {
                let mut digits = [0u8; 10];
                let mut at = digits.len();
                loop {
                    at -= 1;
                    digits[at] = b'0' + (i % 10) as u8;
                    i /= 10;
                    if i == 0 {
                        break;
                    }
                }
                buf.extend_from_slice(&digits[at..]);
            }
            Self::Name(name) => buf.extend_from_slice(name.as_bytes()),
        }
    }
}

/// A byte Kafka allows in a topic name.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<Target<'_>, TargetError> {
        Target::parse(value.as_bytes())
    }

    #[test]
    fn digits_are_indexes_and_anything_else_a_name() {
        assert_eq!(parse("0"), Ok(Target::Index(0)));
        assert_eq!(parse("7"), Ok(Target::Index(7)));
        assert_eq!(parse("007"), Ok(Target::Index(7)));
        assert_eq!(parse("4294967295"), Ok(Target::Index(u32::MAX)));
        assert_eq!(parse("orders-eu"), Ok(Target::Name("orders-eu")));
        assert_eq!(parse("a.b_c-1"), Ok(Target::Name("a.b_c-1")));
        assert_eq!(parse("1a"), Ok(Target::Name("1a")));
    }

    #[test]
    fn values_that_name_no_output_are_refused_saying_why() {
        let err = |v: &str| parse(v).unwrap_err().0;
        assert!(err("").contains("is empty"), "{}", err(""));
        assert!(err("4294967296").contains("past u32::MAX"));
        assert_eq!(
            parse("-1"),
            Ok(Target::Name("-1")),
            "a topic may be named so"
        );
        assert!(err("orders eu").contains("is not an output name"));
        assert!(err("ordres/eu").contains("is not an output name"));
        assert!(err("é").contains("is not an output name"));
        assert!(err(&"a".repeat(250)).contains("OUTPUT_NAME_BYTES_MAX (249 bytes)"));
        assert_eq!(parse(&"a".repeat(249)), Ok(Target::Name(&"a".repeat(249))));
        assert!(Target::parse(&[0xff]).is_err());
    }

    #[test]
    fn values_written_read_back_as_the_same_output() {
        let mut buf = Vec::new();
        for target in [
            Target::Index(0),
            Target::Index(9),
            Target::Index(10),
            Target::Index(1234),
            Target::Index(u32::MAX),
            Target::Name("orders-dlq"),
        ] {
            target.write_value(&mut buf);
            assert_eq!(Target::parse(&buf), Ok(target), "{target}");
        }
        Target::Index(42).write_value(&mut buf);
        assert_eq!(buf, b"42");
    }

    /// The generated struct's shape, as both bindings generate it.
    #[derive(Debug, Default)]
    struct Batch {
        offsets: Vec<i64>,
        timestamps: Vec<i64>,
        key_bytes: Vec<u8>,
        key_ends: Vec<u32>,
        key_nulls: Vec<u8>,
        value_bytes: Vec<u8>,
        value_ends: Vec<u32>,
        value_nulls: Vec<u8>,
        header_counts: Vec<u32>,
        header_bytes: Vec<u8>,
        header_ends: Vec<u32>,
    }

    #[test]
    fn a_record_without_the_header_goes_to_the_first_output() {
        let mut b = Batch::default();
        let mut c = crate::columns!(mut b);
        let mut push = |headers: &[(&[u8], &[u8])]| c.push(0, 0, None, Some(b"v"), headers);
        push(&[(b"trace", b"1")]);
        push(&[(b"trace", b"1"), (b"sluice.output", b"2")]);
        push(&[(b"sluice.output", b"orders-us"), (b"x", b"")]);
        push(&[(b"sluice.output", b"1"), (b"sluice.output", b"1")]);
        push(&[(b"sluice.output", b"")]);
        let columns = crate::columns!(b);
        columns.check().unwrap();
        let got: Vec<_> = columns
            .records()
            .map(|r| Target::of_headers(r.headers()))
            .collect();
        assert_eq!(got[0], Ok(Target::FIRST));
        assert_eq!(got[1], Ok(Target::Index(2)));
        assert_eq!(got[2], Ok(Target::Name("orders-us")));
        assert!(got[3].as_ref().unwrap_err().0.contains("more than once"));
        assert!(got[4].as_ref().unwrap_err().0.contains("is empty"));
    }
}
