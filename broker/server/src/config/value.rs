//! How a key's text becomes its typed value and back: each entry of the key table
//! (`keys.rs`) names one of these codecs. Numbers take Kafka's plain spelling or human units
//! (`crate::units`) and are checked against the key's range, never clamped; structured values
//! (listeners, principals, enums) bring their own parse and print functions (`text`).
//!
//! What `print` writes, `parse` reads back to the same value: `get` then `set` is the
//! identity for every key (config/tests.rs).

use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::units::{parse_bytes, parse_ms};

/// `i32::MAX` widened: the upper bound of Kafka's INT keys.
pub const I32_MAX: i64 = i32::MAX as i64;

/// Reads a key's text form into `T` and writes `T` back in it.
pub trait Codec<T> {
    /// The value `text` spells; the error says why not (the caller names the key).
    fn parse(&self, text: &str) -> Result<T, String>;
    /// The value's text form (what DescribeConfigs shows and `parse` accepts).
    fn print(&self, value: &T) -> String;
}

/// How a number is written.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// A plain integer.
    Count,
    /// Milliseconds, or a duration with a unit (`"7d"`).
    Ms,
    /// Bytes, or a size with a unit (`"100 MiB"`).
    Bytes,
}

impl Unit {
    fn parse(self, text: &str) -> Result<i64, String> {
        match self {
            Self::Count => parse_i64(text),
            Self::Ms => parse_ms(text),
            Self::Bytes => parse_bytes(text),
        }
    }
}

/// An integer in `min..=max`, stored in any integer type that holds the range.
#[derive(Debug, Clone, Copy)]
pub struct Int {
    unit: Unit,
    min: i64,
    max: i64,
}

/// A plain integer in `range`.
pub const fn count(range: RangeInclusive<i64>) -> Int {
    int(Unit::Count, range)
}

/// Milliseconds in `range` (units accepted).
pub const fn ms(range: RangeInclusive<i64>) -> Int {
    int(Unit::Ms, range)
}

/// Bytes in `range` (units accepted).
pub const fn bytes(range: RangeInclusive<i64>) -> Int {
    int(Unit::Bytes, range)
}

const fn int(unit: Unit, range: RangeInclusive<i64>) -> Int {
    Int {
        unit,
        min: *range.start(),
        max: *range.end(),
    }
}

impl<T: TryFrom<i64> + ToString> Codec<T> for Int {
    fn parse(&self, text: &str) -> Result<T, String> {
        let value = self.unit.parse(text)?;
        if value < self.min || value > self.max {
            return Err(format!("{value} is outside {}..={}", self.min, self.max));
        }
        // A range wider than the field's type is our bug; it is refused, never wrapped.
        T::try_from(value).map_err(|_| {
            format!(
                "{value} does not fit the key's type {}",
                std::any::type_name::<T>()
            )
        })
    }

    fn print(&self, value: &T) -> String {
        value.to_string()
    }
}

/// A positive number or Kafka's "never" (`Long.MAX_VALUE`, or `-1`), stored as `u64::MAX`.
#[derive(Debug, Clone, Copy)]
pub struct Never(Unit);

/// A record count or "never".
pub const fn never_count() -> Never {
    Never(Unit::Count)
}

/// Milliseconds or "never".
pub const fn never_ms() -> Never {
    Never(Unit::Ms)
}

impl Codec<u64> for Never {
    fn parse(&self, text: &str) -> Result<u64, String> {
        match self.0.parse(text)? {
            -1 | i64::MAX => Ok(u64::MAX),
            v if v >= 1 => Ok(v as u64),
            v => Err(format!("{v} must be positive (or -1 for never)")),
        }
    }

    fn print(&self, value: &u64) -> String {
        if *value == u64::MAX {
            i64::MAX.to_string()
        } else {
            value.to_string()
        }
    }
}

/// `true` or `false`.
#[derive(Debug, Clone, Copy)]
pub struct Bool;

/// `true` or `false`.
pub const fn boolean() -> Bool {
    Bool
}

impl Codec<bool> for Bool {
    fn parse(&self, text: &str) -> Result<bool, String> {
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("{text:?} is not true or false")),
        }
    }

    fn print(&self, value: &bool) -> String {
        value.to_string()
    }
}

/// A path, as written (not trimmed).
#[derive(Debug, Clone, Copy)]
pub struct Path;

/// A path, as written.
pub const fn path() -> Path {
    Path
}

impl Codec<PathBuf> for Path {
    fn parse(&self, text: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(text))
    }

    fn print(&self, value: &PathBuf) -> String {
        value.display().to_string()
    }
}

/// Any text, as written.
#[derive(Debug, Clone, Copy)]
pub struct Str;

/// Any text, as written.
pub const fn string() -> Str {
    Str
}

impl Codec<String> for Str {
    fn parse(&self, text: &str) -> Result<String, String> {
        Ok(text.to_owned())
    }

    fn print(&self, value: &String) -> String {
        value.clone()
    }
}

/// Unset (`None`) when the text is empty or blank, else the inner codec's value of the
/// trimmed text; unset prints as `""`.
#[derive(Debug, Clone, Copy)]
pub struct Optional<C>(C);

/// `inner`, or unset when empty.
pub const fn optional<C>(inner: C) -> Optional<C> {
    Optional(inner)
}

impl<T, C: Codec<T>> Codec<Option<T>> for Optional<C> {
    fn parse(&self, text: &str) -> Result<Option<T>, String> {
        match text.trim() {
            "" => Ok(None),
            text => self.0.parse(text).map(Some),
        }
    }

    fn print(&self, value: &Option<T>) -> String {
        value.as_ref().map_or_else(String::new, |v| self.0.print(v))
    }
}

/// A structured value with its own parse and print functions.
#[derive(Debug, Clone, Copy)]
pub struct Text<P, Q> {
    parse: P,
    print: Q,
}

/// The value `parse` reads and `print` writes.
pub const fn text<T, P, Q>(parse: P, print: Q) -> Text<P, Q>
where
    P: Fn(&str) -> Result<T, String>,
    Q: Fn(&T) -> String,
{
    Text { parse, print }
}

impl<T, P, Q> Codec<T> for Text<P, Q>
where
    P: Fn(&str) -> Result<T, String>,
    Q: Fn(&T) -> String,
{
    fn parse(&self, text: &str) -> Result<T, String> {
        (self.parse)(text)
    }

    fn print(&self, value: &T) -> String {
        (self.print)(value)
    }
}

fn parse_i64(text: &str) -> Result<i64, String> {
    text.trim()
        .parse::<i64>()
        .map_err(|_| format!("{text:?} is not an integer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked_against_the_range_and_never_clamped() {
        assert_eq!(Codec::<u32>::parse(&ms(1..=I32_MAX), "2s"), Ok(2000));
        assert_eq!(
            Codec::<u32>::parse(&bytes(0..=I32_MAX), "3 GiB"),
            Err("3221225472 is outside 0..=2147483647".to_owned())
        );
        assert_eq!(
            Codec::<u8>::parse(&count(0..=1000), "300"),
            Err("300 does not fit the key's type u8".to_owned())
        );
        assert!(Codec::<i64>::parse(&count(0..=9), "1s").is_err());
    }

    #[test]
    fn never_and_optional_print_what_they_parse() {
        let never = never_ms();
        assert_eq!(never.parse("-1"), Ok(u64::MAX));
        assert_eq!(never.print(&u64::MAX), i64::MAX.to_string());
        assert!(never.parse("0").is_err());
        let listen = optional(string());
        assert_eq!(listen.parse("  "), Ok(None));
        assert_eq!(listen.parse(" t "), Ok(Some("t".to_owned())));
        assert_eq!(listen.print(&None), "");
    }
}
