//! Drop or mask fields of JSON values, e.g. `card_number`, before a
//! consumer sees them.
//!
//! Parameters:
//! - `fields` (required): a comma-separated list of paths, `card_number`
//!   or `$.payment.card_number` (object members only);
//! - `mode` (optional, default `mask`): `mask` replaces the field's value
//!   with the string `"****"`; `drop` removes the member.
//!
//! Only the objects along the paths are rewritten (whitespace between
//! their members is dropped); everything else is copied as written. A
//! value that is not a JSON object, or is malformed, is **dropped**: a
//! redaction view fails closed rather than pass through what it could not
//! read. Tombstones pass unchanged. Key, headers, offset and timestamp are
//! kept.

use sluice_sdk::json::Scanner;
use sluice_sdk::{Error, Init, Output, Params, Record, transform};

/// What replaces a masked value.
pub const MASK: &[u8] = br#""****""#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Mask,
    Drop,
}

#[derive(Debug)]
pub struct Redaction {
    /// Each path split into its member names.
    paths: Vec<Vec<Vec<u8>>>,
    mode: Mode,
}

impl Init for Redaction {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&["fields", "mode"])?;
        let mode = match params.get("mode").unwrap_or("mask") {
            "mask" => Mode::Mask,
            "drop" => Mode::Drop,
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `mode` = `{other}` is not `mask` or `drop`"
                )));
            }
        };
        let mut paths = Vec::new();
        for field in params.require("fields")?.split(',').map(str::trim) {
            let rest = field.strip_prefix("$.").unwrap_or(field);
            let path: Vec<Vec<u8>> = rest.split('.').map(|s| s.as_bytes().to_vec()).collect();
            if path.iter().any(Vec::is_empty) {
                return Err(Error::invalid_params(format!(
                    "parameter `fields`: `{field}` is not a field path such as `card_number` or `$.payment.card_number`"
                )));
            }
            paths.push(path);
        }
        Ok(Self { paths, mode })
    }
}

#[transform]
pub fn redact(redaction: &mut Redaction, record: &Record<'_>, out: &mut Output) {
    let Some(value) = record.value() else {
        out.keep(record);
        return;
    };
    let paths: Vec<&[Vec<u8>]> = redaction.paths.iter().map(Vec::as_slice).collect();
    let mut rewritten = Vec::with_capacity(value.len());
    let mut scanner = Scanner::new(value);
    if rewrite_object(&mut scanner, &paths, redaction.mode, &mut rewritten).is_some() {
        let headers: Vec<_> = record.headers().iter().collect();
        out.push_at(record.timestamp, record.key(), Some(&rewritten), &headers);
    }
}

/// Copy the object that starts at `scanner` to `out`, applying `paths`.
fn rewrite_object(
    scanner: &mut Scanner<'_>,
    paths: &[&[Vec<u8>]],
    mode: Mode,
    out: &mut Vec<u8>,
) -> Option<()> {
    scanner.eat(b'{')?;
    out.push(b'{');
    if scanner.eat(b'}').is_some() {
        out.push(b'}');
        return Some(());
    }
    let mut first = true;
    loop {
        let name = scanner.string()?;
        scanner.eat(b':')?;
        let here = paths.iter().any(|p| p.len() == 1 && p[0] == name);
        let below: Vec<&[Vec<u8>]> = paths
            .iter()
            .filter(|p| p.len() > 1 && p[0] == name)
            .map(|p| &p[1..])
            .collect();
        if !(here && mode == Mode::Drop) {
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(name);
            out.extend_from_slice(b"\":");
        }
        if here {
            scanner.value()?;
            if mode == Mode::Mask {
                out.extend_from_slice(MASK);
            }
        } else if !below.is_empty() && scanner.peek()? == b'{' {
            rewrite_object(scanner, &below, mode, out)?;
        } else {
            out.extend_from_slice(scanner.raw_value()?);
        }
        match scanner.peek()? {
            b',' => scanner.eat(b',')?,
            b'}' => {
                scanner.eat(b'}')?;
                out.push(b'}');
                return Some(());
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sdk::BatchBuilder;

    fn run(params: &[(&str, &str)], values: &[Option<&str>]) -> Vec<(i64, Option<String>)> {
        let mut state = Redaction::init(&Params::new(params.iter().copied())).unwrap();
        let mut b = BatchBuilder::new();
        for (i, v) in values.iter().enumerate() {
            b.push(
                i as i64,
                100 + i as i64,
                Some(b"k"),
                v.map(str::as_bytes),
                &[(b"h", b"1")],
            );
        }
        let mut out = Output::new();
        for (i, r) in b.batch().iter().enumerate() {
            out.begin(i);
            redact(&mut state, &r, &mut out);
        }
        out.builder()
            .batch()
            .iter()
            .map(|r| {
                assert_eq!((r.key(), r.header("h")), (Some(&b"k"[..]), Some(&b"1"[..])));
                assert_eq!(r.timestamp, 100 + r.offset);
                (
                    r.offset,
                    r.value().map(|v| String::from_utf8(v.to_vec()).unwrap()),
                )
            })
            .collect()
    }

    const DOC: &str = r#"{ "id": 7, "card_number": "4111 1111", "payment": {"card_number": "5500", "cvv": 123}, "tags": ["a", {"card_number": 1}] }"#;

    #[test]
    fn masks_top_level_and_nested_fields() {
        let got = run(&[("fields", "card_number, $.payment.cvv")], &[Some(DOC)]);
        let expected = r#"{"id":7,"card_number":"****","payment":{"card_number":"5500","cvv":"****"},"tags":["a", {"card_number": 1}]}"#;
        assert_eq!(got, [(0, Some(expected.to_owned()))]);
    }

    #[test]
    fn drops_fields() {
        let params = [
            ("fields", "card_number,payment.card_number"),
            ("mode", "drop"),
        ];
        let got = run(
            &params,
            &[Some(DOC), Some(r#"{"card_number":1}"#), Some("{}")],
        );
        let expected = r#"{"id":7,"payment":{"cvv":123},"tags":["a", {"card_number": 1}]}"#;
        assert_eq!(
            got,
            [
                (0, Some(expected.to_owned())),
                (1, Some("{}".to_owned())),
                (2, Some("{}".to_owned()))
            ]
        );
    }

    #[test]
    fn unreadable_values_are_dropped_and_tombstones_kept() {
        let values = [
            Some("not json"),
            Some(r#"{"a":1"#),
            Some("[1]"),
            None,
            Some(r#"{"a":"x"}"#),
        ];
        let got = run(&[("fields", "card_number")], &values);
        assert_eq!(got, [(3, None), (4, Some(r#"{"a":"x"}"#.to_owned()))]);
    }

    #[test]
    fn bad_parameters_are_named() {
        let err =
            |p: &[(&str, &str)]| Redaction::init(&Params::new(p.iter().copied())).unwrap_err();
        assert!(err(&[]).message.contains("`fields`"));
        let e = err(&[("fields", "a,,b")]);
        assert!(e.message.contains("parameter `fields`"), "{e}");
        let e = err(&[("fields", "a"), ("mode", "hash")]);
        assert!(e.message.contains("`mode` = `hash`"), "{e}");
    }
}
